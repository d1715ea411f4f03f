"""browser.py: each metric on getter-shaped results written here (tab dicts, Bookmarks roots,
cookie/history rows and SQLite files, shortcuts), with OSWorld task files' rules."""
import sqlite3

from metric_testlib import MetricCase

TAB = {"title": "Manchester", "url": "https://www.example.com/manchester/?page=2#top", "content": "<html>"}


def bookmarks(children):
    return {"bookmark_bar": {"children": children, "type": "folder", "name": "Bookmarks bar"},
            "other": {"children": [], "type": "folder"}}


class BrowserTest(MetricCase):
    def test_is_expected_url_pattern_match(self):
        name = "is_expected_url_pattern_match"
        rules = {"expected": ["AgeAppropriate:Kids", "search=spider[-%20]?man%20toys", "S=4"]}
        url = "https://www.target.com/s?searchTerm=x&search=spider-man%20toys&facets=AgeAppropriate:Kids&S=4"
        self.assertScore(1.0, name, url, rules)
        self.assertScore(1.0, name, {"url": "https://www.example.com/manchester/"}, {"expected": ["/manchester/"]})
        self.assertScore(0.0, name, url.replace("S=4", "S=3"), rules)
        self.assertScore(0.0, name, None, rules)
        self.assertError(name, url, {"expected": "S=4"})
        self.assertError(name, url, {"expected": ["(unclosed"]})
        self.assertError(name, {"title": "no url"}, rules)

    def test_is_expected_active_tab(self):
        name = "is_expected_active_tab"
        rule = {"type": "url", "url": "https://www.drugs.com/npc/"}
        self.assertScore(1.0, name, "https://drugs.com/npc/", rule)
        self.assertScore(1.0, name, {"url": "HTTPS://WWW.Drugs.com/npc/"}, rule)
        self.assertScore(0.0, name, "https://www.drugs.com/npp/", rule)
        self.assertScore(0.0, name, None, rule)
        self.assertError(name, "https://drugs.com/npc/", {"type": "title", "title": "x"})
        self.assertError(name, 42, rule)

    def test_is_expected_active_tab_approximate(self):
        name = "is_expected_active_tab_approximate"
        rule = {"type": "url", "url": "https://www.expedia.com/Hotel-Search?destination=Paris"}
        self.assertScore(1.0, name, {"url": "https://www.expedia.com/Hotel-Search?destination=Rome&d=2"}, rule)
        self.assertScore(0.0, name, {"url": "https://www.expedia.com/Flights-Search?destination=Paris"}, rule)
        self.assertScore(0.0, name, {}, rule)
        self.assertError(name, ["https://www.expedia.com/"], rule)

    def test_is_expected_tabs(self):
        name = "is_expected_tabs"
        rule = {"type": "url", "urls": ["https://www.lonelyplanet.com", "https://www.airbnb.com",
                                        "https://www.tripadvisor.com"]}
        tabs = [{"title": t, "url": f"https://www.{t}.com/"} for t in ("airbnb", "tripadvisor", "lonelyplanet")]
        self.assertScore(1.0, name, tabs, rule)
        self.assertScore(0.0, name, tabs[:2], rule)
        self.assertScore(0.0, name, tabs[:2] + [{"title": "x", "url": "https://www.booking.com/"}], rule)
        self.assertError(name, [{"title": "no url"}] * 3, rule)
        self.assertError(name, tabs, {"type": "title", "titles": []})

    def test_is_expected_bookmarks(self):
        name = "is_expected_bookmarks"
        bar = bookmarks([{"type": "folder", "name": "Favorites", "children": []},
                         {"type": "url", "name": "T", "url": "https://jalammar.github.io/illustrated-transformer/"}])
        self.assertScore(1.0, name, bar, {"type": "bookmark_bar_folders_names", "names": ["Favorites"]})
        self.assertScore(0.0, name, bar, {"type": "bookmark_bar_folders_names", "names": ["Work"]})
        self.assertScore(1.0, name, bar, {"type": "bookmark_bar_websites_urls",
                                          "urls": ["https://jalammar.github.io/illustrated-transformer/"]})
        rule = {"type": "liked_authors_websites_urls", "names": ["Liked Authors"],
                "urls": [["https://jimfan.me/", "https://research.nvidia.com/person/linxi-jim-fan"],
                         "https://yukezhu.me/"]}
        liked = bookmarks([{"type": "folder", "name": "Liked Authors", "children": [
            {"type": "url", "name": "a", "url": "https://research.nvidia.com/person/linxi-jim-fan"},
            {"type": "url", "name": "b", "url": "https://yukezhu.me/"}]}])
        self.assertScore(1.0, name, liked, rule)
        liked["bookmark_bar"]["children"][0]["children"].pop()
        self.assertScore(0.0, name, liked, rule)
        self.assertScore(0.0, name, [], rule)
        self.assertError(name, {"other": {}}, rule)
        self.assertError(name, bar, {"type": "bookmark_count", "count": 2})

    def sqlite(self, name, schema, rows):
        p = self.path(name)
        with sqlite3.connect(p) as db:
            db.execute(schema)
            cols = schema.count(",") + 1
            db.executemany(f"INSERT INTO {schema.split()[2]} VALUES ({','.join('?' * cols)})", rows)
        return p

    def test_is_cookie_deleted(self):
        name = "is_cookie_deleted"
        rule = {"type": "domains", "domains": [".amazon.com"]}
        rows = [[13350000000000000, ".google.com", "NID", "v"], [13350000000000001, ".github.com", "_gh", "v"]]
        self.assertScore(1.0, name, rows, rule)
        self.assertScore(0.0, name, rows + [[1, ".amazon.com", "session-id", "v"]], rule)
        db = self.sqlite("Cookies", "CREATE TABLE cookies (creation_utc, host_key, name, value)",
                         rows + [[1, ".amazon.com", "session-id", "v"]])
        self.assertScore(0.0, name, db, rule)
        clean = self.sqlite("Cookies2", "CREATE TABLE cookies (creation_utc, host_key, name, value)", rows)
        self.assertScore(1.0, name, clean, rule)
        self.assertError(name, [[".amazon.com"]], rule)
        self.assertError(name, self.write("bad", "not sqlite at all, just some text" * 50), rule)

    def test_check_history_deleted(self):
        name = "check_history_deleted"
        rule = {"type": "keywords", "keywords": ["youtube"]}
        rows = [["https://www.wikipedia.org/", "Wikipedia", 1], ["https://github.com/", "GitHub", 2]]
        self.assertScore(1.0, name, rows, rule)
        hist = self.sqlite("History", "CREATE TABLE urls (url, title, last_visit_time)",
                           rows + [["https://www.youtube.com/watch?v=1", "YT", 3]])
        self.assertScore(0.0, name, hist, rule)
        self.assertError(name, {"urls": rows}, rule)

    def test_is_shortcut_on_desktop(self):
        name = "is_shortcut_on_desktop"
        rule = {"type": "name", "name": "Play Puzzle Game 2048"}
        desk = "[Desktop Entry]\nVersion=1.0\nName=Play Puzzle Game 2048\nExec=chrome --app-id=x\n"
        self.assertScore(1.0, name, {"chrome-x.desktop": desk}, rule)
        self.assertScore(0.0, name, {"chrome-x.desktop": desk.replace("2048", "1024")}, rule)
        self.assertScore(0.0, name, {}, rule)
        self.assertError(name, ["chrome-x.desktop"], rule)
        self.assertError(name, {"a.desktop": desk}, {"type": "url", "url": "https://play2048.co/"})

    def test_check_enabled_experiments(self):
        name = "check_enabled_experiments"
        rule = {"type": "names", "names": ["chrome-refresh-2023", "chrome-webui-refresh-2023"]}
        self.assertScore(1.0, name, ["chrome-refresh-2023@1", "chrome-webui-refresh-2023@1"], rule)
        self.assertScore(0.0, name, ["chrome-webui-refresh-2023@1", "chrome-refresh-2023@1"], rule)
        self.assertScore(0.0, name, [], rule)
        self.assertError(name, [1, 2], rule)

    def test_check_font_size(self):
        name = "check_font_size"
        rule = {"type": "range", "min": 16, "max": 99999}
        self.assertScore(1.0, name, {"default_font_size": 20, "default_fixed_font_size": 13}, rule)
        self.assertScore(0.0, name, {"default_font_size": 16}, rule)
        self.assertScore(1.0, name, {"default_font_size": 16}, {"type": "value", "value": 16})
        self.assertError(name, {"minimum_font_size": 13}, rule)
        self.assertError(name, {"default_font_size": 20}, {"type": "range", "min": 16})

    def test_is_added_to_steam_cart(self):
        name = "is_added_to_steam_cart"
        rule = {"items": ["The Dota 2 Official Soundtrack"]}
        page = {"title": "Cart", "url": "https://store.steampowered.com/cart/",
                "content": "<div class='cart_item'>The Dota 2 Official Soundtrack</div>"}
        self.assertScore(1.0, name, page, rule)
        self.assertScore(0.0, name, dict(page, content="<div>Your cart is empty</div>"), rule)
        self.assertError(name, {"title": "Cart"}, rule)

    def test_is_expected_search_query(self):
        name = "is_expected_search_query"
        rule = {"expect": {"pattern": "www\\.google\\.com.*?/search\\?q=Nereida&"}}
        self.assertScore(1.0, name, {"url": "https://www.google.com/search?q=Nereida&oq=Ner"}, rule)
        self.assertScore(0.0, name, {"url": "https://www.bing.com/search?q=Nereida&"}, rule)
        self.assertError(name, {"url": "https://www.google.com/"}, {"expect": "Nereida"})

    def test_is_expected_installed_extensions(self):
        name = "is_expected_installed_extensions"
        rule = {"expected": ["Zoom Chrome Extension", "Momentum", "Google Translate"]}
        self.assertScore(1.0, name, ["Momentum", "Google Translate", "Zoom Chrome Extension", "uBlock"], rule)
        self.assertScore(0.0, name, ["Momentum", "Google Translate"], rule)
        self.assertScore(0.0, name, "Google", rule)
        self.assertError(name, {"Momentum": 1}, rule)

    def test_compare_htmls(self):
        name = "compare_htmls"
        gold = ("<html><head><title>Survey</title></head><body><table class='t'><tr><th>Year</th></tr>"
                "<tr><td>2021</td></tr></table></body></html>")
        g = self.write("gold.html", gold)
        self.assertScore(1.0, name, self.write("same.html", gold), g)
        self.assertScore(0.0, name, self.write("diff.html", gold.replace("2021", "2020")), g)
        self.assertScore(0.0, name, self.write("attr.html", gold.replace("class='t'", "class='u'")), g)
        self.assertScore(0.0, name, None, g)
        self.assertError(name, self.write("latin1.html", b"<html>\xe9\xff</html>"), g)
        self.assertError(name, self.path("absent.html"), g)

    def test_is_extension_installed(self):
        name = "is_extension_installed"
        out = "ms-python.python\nmattn.lisp\n"
        self.assertScore(1.0, name, out, {"type": "contain", "expected": "mattn.lisp"})
        self.assertScore(0.0, name, "ms-python.python\n", {"type": "contain", "expected": "mattn.lisp"})
        self.assertScore(0.0, name, out, {"type": "not_contain", "expected": "mattn.lisp"})
        self.assertError(name, out, {"type": "regex", "expected": "mattn"})
        self.assertError(name, ["mattn.lisp"], {"type": "contain", "expected": "mattn.lisp"})

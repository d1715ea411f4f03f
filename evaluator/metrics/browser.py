"""Browser metrics: OSWorld's chrome.py checks on what its Chrome getters return (the active tab's
URL or {"title", "url", "content"}, the open tabs [{"title", "url"}], the Bookmarks file's "roots",
cookie and history rows, desktop shortcuts {file: text}, the font prefs), and vscode.py's
is_extension_installed on `code --list-extensions` output.

A missing result (None, an empty tab) scores 0 as in OSWorld. A rule of a type OSWorld does not
know (it logs and returns 0, or raises) is a task error here: evaluator_error.
"""
import itertools
import sqlite3
from urllib.parse import urlparse, urlunparse

from _common import MetricInputError, metric
from _util import MAX_ITEMS, key, need, open_sqlite, read_text, regex, rule_type

HTML_MAX_BYTES = 32 << 20


def normalize_url(url):
    """OSWorld's compare_urls normalisation: scheme defaults to http and is lowercased, the host is
    lowercased with every "www." removed, a lone "/" path is dropped."""
    p = urlparse(need(url, str, "url"))
    return urlunparse(p._replace(scheme=(p.scheme or "http").lower(),
                                 netloc=p.netloc.lower().replace("www.", ""),
                                 path="" if p.path == "/" else p.path))


def same_url(a, b):
    if a is None or b is None:
        return a == b
    return normalize_url(a) == normalize_url(b)


def tab_url(info, what="result"):
    """The URL of an active-tab result: the dict's "url" or the string itself."""
    if isinstance(info, dict):
        return info.get("url")
    return need(info, str, what)


@metric("is_expected_url_pattern_match", "browser",
        summary="1 when every regex of rules.expected is found in the active tab's URL",
        osworld="chrome.py is_expected_url_pattern_match: result is a URL string or a dict with \"url\"; "
                "each pattern of rules[\"expected\"] must re.search the URL. An empty result scores 0. "
                "Differs: rules.expected as a single string (OSWorld would try each character as a "
                "pattern) is an error.")
def is_expected_url_pattern_match(result, expected):
    patterns = [regex(p) for p in need(key(expected, "expected"), list, "expected.expected")]
    if not result:
        return 0.0
    if isinstance(result, dict):
        url = need(key(result, "url", "result"), str, "result.url")
    else:
        url = need(result, str, "result")
    return 1.0 if all(p.search(url) for p in patterns) else 0.0


@metric("is_expected_active_tab", "browser",
        summary="1 when the active tab's URL equals rules.url after OSWorld's URL normalisation",
        osworld="chrome.py is_expected_active_tab with utils.compare_urls: {type: url, url}; scheme "
                "defaults to http, host lowercased without \"www.\", a lone \"/\" path ignored; query and "
                "fragment must match. An empty result scores 0. Differs: an unknown rule type is an "
                "error (OSWorld logs it and scores 0).")
def is_expected_active_tab(result, expected):
    rule_type(expected, "url")
    want = need(key(expected, "url"), str, "expected.url")
    if not result:
        return 0.0
    return 1.0 if same_url(want, tab_url(result)) else 0.0


@metric("is_expected_active_tab_approximate", "browser",
        summary="1 when the active tab's URL equals rules.url once both lose their query string",
        osworld="chrome.py is_expected_active_tab_approximate (newer OSWorld): both URLs with the query "
                "removed must be equal as strings (no other normalisation). An empty result or one "
                "without a URL scores 0.")
def is_expected_active_tab_approximate(result, expected):
    rule_type(expected, "url")
    want = need(key(expected, "url"), str, "expected.url")
    if not result:
        return 0.0
    url = tab_url(result)
    if not url:
        return 0.0

    def strip_query(u):
        return urlunparse(urlparse(need(u, str, "url"))._replace(query=""))
    return 1.0 if strip_query(want) == strip_query(url) else 0.0


@metric("is_expected_tabs", "browser",
        summary="1 when the open tabs are exactly rules.urls (any order, URLs compared normalised)",
        osworld="chrome.py is_expected_tabs with utils.are_lists_equal: same count, and every expected URL "
                "matches some open tab (compare_urls). Missing tab info scores 0. Differs: an unknown rule "
                "type is an error (OSWorld scores 0).")
def is_expected_tabs(result, expected):
    rule_type(expected, "url")
    want = need(key(expected, "urls"), list, "expected.urls")
    if result is None:
        return 0.0
    tabs = need(result, list, "result")
    urls = [key(need(t, dict, "result tab"), "url", "result tab") for t in tabs]
    if len(urls) != len(want):
        return 0.0
    return 1.0 if all(any(same_url(w, u) for u in urls) for w in want) else 0.0


def bar_children(bookmarks):
    bar = key(need(bookmarks, dict, "result"), "bookmark_bar", "result")
    return [need(c, dict, "bookmark") for c in need(key(bar, "children", "result.bookmark_bar"), list, "children")]


def of_type(children, kind, field):
    return [key(c, field, "bookmark") for c in children if c.get("type") == kind]


@metric("is_expected_bookmarks", "browser",
        summary="Chrome's bookmark bar holds the expected folders / URLs (rules.type: bookmark_bar_folders_names, "
                "bookmark_bar_websites_urls, liked_authors_websites_urls)",
        osworld="chrome.py is_expected_bookmarks on the Bookmarks file's \"roots\": folder names or URL set of "
                "the bar's direct children must equal the rule's as sets; for liked_authors_websites_urls the "
                "bar's folder named \"Liked Authors\" must hold exactly one URL from each group of rules.urls "
                "(a string is a group of one). Empty bookmarks score 0.")
def is_expected_bookmarks(result, expected):
    kind = rule_type(expected, "bookmark_bar_folders_names", "bookmark_bar_websites_urls",
                     "liked_authors_websites_urls")
    if not result:
        return 0.0
    children = bar_children(result)
    if kind == "bookmark_bar_folders_names":
        return 1.0 if set(of_type(children, "folder", "name")) == set(need(key(expected, "names"), list, "names")) else 0.0
    if kind == "bookmark_bar_websites_urls":
        return 1.0 if set(of_type(children, "url", "url")) == set(need(key(expected, "urls"), list, "urls")) else 0.0
    folder = next((c for c in children if c.get("type") == "folder" and c.get("name") == "Liked Authors"), None)
    if folder is None:
        return 0.0
    liked = set(of_type(need(key(folder, "children", "Liked Authors"), list, "children"), "url", "url"))
    groups = [[g] if isinstance(g, str) else need(g, list, "expected.urls group")
              for g in need(key(expected, "urls"), list, "expected.urls")]
    combos = 1
    for g in groups:
        combos *= max(len(g), 1)
    if combos > MAX_ITEMS * 10:
        raise MetricInputError(f"expected.urls: {combos} combinations, too many")
    return 1.0 if any(set(c) == liked for c in itertools.product(*groups)) else 0.0


def sqlite_rows(result, query, what):
    """Rows as OSWorld's getter returns them, or read here from the browser's SQLite file (read-only)."""
    if isinstance(result, str):
        db = open_sqlite(result)
        try:
            return db.execute(query).fetchmany(MAX_ITEMS + 1)
        except sqlite3.Error as e:
            raise MetricInputError(f"result: not a Chrome {what} database: {e}") from None
        finally:
            db.close()
    return need(result, list, "result")


def column(rows, index, what):
    out = []
    for r in rows:
        if not isinstance(r, (list, tuple)) or len(r) <= index:
            raise MetricInputError(f"result: a {what} row must be a list with at least {index + 1} columns")
        out.append(r[index])
    return out


@metric("is_cookie_deleted", "browser",
        summary="1 when no cookie's host matches a domain of rules.domains",
        osworld="chrome.py is_cookie_deleted: {type: domains, domains}; the host is column 1 of the cookie "
                "rows (SELECT * FROM cookies), compared with compare_urls. Also accepts the Cookies SQLite "
                "file itself (read read-only here). Missing cookie data scores 0. Differs: unknown rule "
                "types are errors as in OSWorld (TypeError).")
def is_cookie_deleted(result, expected):
    rule_type(expected, "domains")
    domains = need(key(expected, "domains"), list, "expected.domains")
    if result is None:
        return 0.0
    hosts = column(sqlite_rows(result, "SELECT * FROM cookies", "cookies"), 1, "cookie")
    return 0.0 if any(same_url(d, h) for d in domains for h in hosts) else 1.0


@metric("check_history_deleted", "browser",
        summary="1 when no history URL contains a keyword of rules.keywords",
        osworld="chrome.py check_history_deleted: {type: keywords, keywords}; substring test on column 0 "
                "(url) of SELECT url, title, last_visit_time FROM urls. Also accepts the History SQLite file "
                "(read read-only here). Missing history scores 0.")
def check_history_deleted(result, expected):
    rule_type(expected, "keywords")
    words = need(key(expected, "keywords"), list, "expected.keywords")
    if result is None:
        return 0.0
    urls = column(sqlite_rows(result, "SELECT url, title, last_visit_time FROM urls", "history"), 0, "history")
    return 0.0 if any(w in u for w in words for u in urls) else 1.0


@metric("is_shortcut_on_desktop", "browser",
        summary="1 when a desktop shortcut's text has the line Name=<rules.name>",
        osworld="chrome.py is_shortcut_on_desktop: result {file name: .desktop text}; {type: name, name} "
                "matches when \"Name=<name>\\n\" is in a shortcut's text; other types raise in OSWorld and "
                "are errors here. Missing shortcuts score 0.")
def is_shortcut_on_desktop(result, expected):
    rule_type(expected, "name")
    line = "Name=" + need(key(expected, "name"), str, "expected.name") + "\n"
    if result is None:
        return 0.0
    texts = need(result, dict, "result").values()
    return 1.0 if any(line in need(t, str, "shortcut text") for t in texts) else 0.0


@metric("check_enabled_experiments", "browser",
        summary="1 when the enabled chrome://flags experiments are exactly rules.names, in order",
        osworld="chrome.py check_enabled_experiments: result is Local State's browser.enabled_labs_experiments "
                "(\"name@N\" strings); the names before \"@\" must equal rules.names as a list (order counts). "
                "Missing data scores 0.")
def check_enabled_experiments(result, expected):
    rule_type(expected, "names")
    names = need(key(expected, "names"), list, "expected.names")
    if result is None:
        return 0.0
    got = [need(e, str, "experiment").split("@")[0] for e in need(result, list, "result")]
    return 1.0 if got == names else 0.0


@metric("check_font_size", "browser",
        summary="Chrome's default font size equals rules.value, or lies strictly between rules.min and rules.max",
        osworld="chrome.py check_font_size: result is Preferences' webkit.webprefs; {type: value, value} "
                "tests equality, {type: range, min, max} tests min < size < max. Missing data scores 0.")
def check_font_size(result, expected):
    kind = rule_type(expected, "value", "range")
    if result is None:
        return 0.0
    size = key(need(result, dict, "result"), "default_font_size", "result")
    if kind == "value":
        return 1.0 if size == key(expected, "value") else 0.0
    lo, hi = (need(key(expected, k), (int, float), f"expected.{k}") for k in ("min", "max"))
    return 1.0 if lo < need(size, (int, float), "result.default_font_size") < hi else 0.0


@metric("is_added_to_steam_cart", "browser",
        summary="1 when every item name of rules.items appears in the cart page's HTML",
        osworld="chrome.py is_added_to_steam_cart: substring test of each item on the page info's \"content\". "
                "Missing page info scores 0.")
def is_added_to_steam_cart(result, expected):
    items = need(key(expected, "items"), list, "expected.items")
    if not result:
        return 0.0
    content = need(key(need(result, dict, "result"), "content", "result"), str, "result.content")
    return 1.0 if all(need(i, str, "item") in content for i in items) else 0.0


@metric("is_expected_search_query", "browser",
        summary="1 when rules.expect.pattern is found in the active tab's URL",
        osworld="chrome.py is_expected_search_query: re.search(rules[\"expect\"][\"pattern\"], tab[\"url\"]). "
                "Differs: a missing tab scores 0 (OSWorld raises).")
def is_expected_search_query(result, expected):
    pattern = regex(key(key(expected, "expect"), "pattern", "expected.expect"))
    if not result:
        return 0.0
    url = need(key(need(result, dict, "result"), "url", "result"), str, "result.url")
    return 1.0 if pattern.search(url) else 0.0


@metric("is_expected_installed_extensions", "browser",
        summary="1 when every extension name of rules.expected is installed",
        osworld="chrome.py is_expected_installed_extensions: set(rules[\"expected\"]) must be a subset of the "
                "installed names. The getter's failure value, the string \"Google\", is a set of letters here "
                "as in OSWorld (so it scores 0). Missing data scores 0.")
def is_expected_installed_extensions(result, expected):
    want = need(key(expected, "expected"), list, "expected.expected")
    if result is None:
        return 0.0
    if not isinstance(result, str):
        need(result, list, "result")
    return 1.0 if set(want) <= set(result) else 0.0


@metric("compare_htmls", "browser",
        summary="1 when the two HTML files' parse trees agree node by node (tag, attributes, stripped text)",
        osworld="chrome.py compare_htmls: both parsed by BeautifulSoup with lxml, nodes walked in document "
                "order and zipped (so a document that is a prefix of the other still matches, as in OSWorld); "
                "tags must agree in name, attributes and stripped text, strings must be equal. A missing "
                "result scores 0 (OSWorld raises).")
def compare_htmls(result, expected):
    from bs4 import BeautifulSoup, Tag
    if result is None:
        return 0.0
    soups = []
    for path, what in ((result, "result"), (expected, "expected")):
        text = read_text(path, what)
        if len(text) > HTML_MAX_BYTES:
            raise MetricInputError(f"{what}: HTML over {HTML_MAX_BYTES} bytes")
        soups.append(BeautifulSoup(text, "lxml"))

    def same(a, b):
        if not (isinstance(a, Tag) and isinstance(b, Tag)):
            return a == b
        return a.name == b.name and a.text.strip() == b.text.strip() and a.attrs == b.attrs
    return 1.0 if all(same(a, b) for a, b in zip(soups[0].descendants, soups[1].descendants)) else 0.0


@metric("is_extension_installed", "browser",
        summary="1 when the command output contains (type contain) or lacks (type not_contain) rules.expected",
        osworld="vscode.py is_extension_installed: substring test of rules[\"expected\"] on the output of "
                "`code --list-extensions`. Missing output scores 0. Differs: an unknown type is an error "
                "(OSWorld raises NotImplementedError).")
def is_extension_installed(result, expected):
    kind = rule_type(expected, "contain", "not_contain")
    want = need(key(expected, "expected"), str, "expected.expected")
    if result is None:
        return 0.0
    found = want in need(result, str, "result")
    return 1.0 if found == (kind == "contain") else 0.0

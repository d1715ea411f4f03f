#!/usr/bin/python3
"""Checks of the toolbelt's page getters (envmgr_guest/chrome_page.py, the envmgr-guest chrome-*
subcommands) against a real Chromium whose DevTools listen on 127.0.0.1:PORT, with pages served
here on loopback. Prints one line per check, "ok NAME" or "FAIL NAME: why"; test_toolbelt.sh
counts them.

Usage: chrome_page_check.py TOOLBELT_DIR PORT HOME"""
import http.server
import json
import os
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request

from checklib import check

TOOLBELT, PORT, HOME = sys.argv[1], int(sys.argv[2]), sys.argv[3]

PAGES = {
    "/shop": """<!doctype html><html><head><title>Shop</title></head><body>
<div class="crumb"> Spider-Man </div><div class="crumb">Toys</div>
<div class="info"> SEA <div class="sep"></div>NYC </div>
<ul class="bread"><li class="catAllProducts"><span> Kids </span></li><li class="other"><span>x</span></li></ul>
<div class="card"><h3> Title A </h3></div><div class="card"><p>no heading</p></div><div class="card"><h3>Title B</h3></div>
<p id="total"> Total:  <b>42</b></p>
<form><input id="name" value="initial"><input id="mail"></form>
<div id="host"></div>
<script>
  document.getElementById('host').attachShadow({mode: 'open'}).innerHTML = '<span class="crumb">Shadow</span>';
  document.getElementById('name').value = 'typed by the user';
  document.title = 'Shop';
</script></body></html>""",
    "/late": """<!doctype html><html><head><title>Late</title></head><body><p id="a">first</p>
<a id="go" href="/second">next</a><button id="more" onclick="setTimeout(() => {
 const d = document.createElement('div'); d.id = 'added'; d.textContent = ' added later '; document.body.appendChild(d);
}, 300)">more</button></body></html>""",
    "/second": """<!doctype html><html><head><title>Second</title></head><body><a id="ref" href="/doc.pdf">doc</a>
<p class="x">second page</p></body></html>""",
}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = PAGES.get(self.path.split("?")[0])
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
BASE = "http://127.0.0.1:%d" % srv.server_address[1]


def guest(*args):
    """envmgr-guest from the checkout: (exit status, answer)."""
    env = dict(os.environ, ENVMGR_GUEST_HOME=HOME)
    p = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                        "from envmgr_guest.cli import main; sys.exit(main(sys.argv[2:]))", TOOLBELT] + list(args),
                       capture_output=True, text=True, timeout=180, env=env)
    try:
        return p.returncode, json.loads(p.stdout)
    except ValueError:
        return p.returncode, {"stdout": p.stdout[-500:], "stderr": p.stderr[-1500:]}


def devtools(path, method="GET"):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (PORT, path), method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def pages():
    return [t for t in devtools("/json/list") if t["type"] == "page"]


def tabs_back(n, wait=5.0):
    """True once the browser has n tabs again (closing a target takes a moment)."""
    end = time.monotonic() + wait
    while len(pages()) != n and time.monotonic() < end:
        time.sleep(0.2)
    return len(pages()) == n


# A tab showing the shop, as an agent would leave it.
devtools("/json/new?" + BASE + "/shop", "PUT")
time.sleep(2)
before = len(pages())


def html_parse(spec, url=BASE + "/shop"):
    code, a = guest("chrome-html-parse", "--port", str(PORT), "--url", url, "--spec", json.dumps(spec))
    return a.get("value"), a


def t_class():
    v, a = html_parse({"category": "class", "class_multiObject": {"crumb": {"0": "first", "2": "shadow", "5": "none"}},
                       "class_multiObject_child": {"info": {"0": "start", "1": "end"}},
                       "class_multiObject_only_child": {"card": {"0": "c0", "1": "c1"}},
                       "class_singleObject": {"crumb": "single", "absent": "gone"}})
    want = {"first": "Spider-Man", "shadow": "Shadow", "none": "", "start": "SEA", "end": "NYC",
            "c0": "Title A", "c1": "Title B", "single": "Spider-Man", "gone": ""}
    return v == want, a


def t_search_exist():
    v, a = html_parse({"category": "class", "class_multiObject_search_exist": {
        "crumb": ["Spider-Man", "Toys", "Batman", "is_other_exist"]}})
    return v == {"Spider-Man": True, "Toys": True, "Batman": False, "is_other_exist": True}, a


def t_xpath_input():
    v, a = html_parse({"category": "xpath", "xpathObject": {"//p[@id='total']": "total", "//nothing": "none",
                                                           "#total b": "css"}})
    ok = v == {"total": "Total:  42", "none": "", "css": "42"}
    v2, a2 = html_parse({"category": "input", "inputObject": {"//input[@id='name']": "name",
                                                             "//input[@id='mail']": "mail", "//p": "notinput"}})
    return ok and v2 == {"name": "typed by the user", "mail": "", "notinput": ""}, (a, a2)


def t_class_url():
    v, a = html_parse({"category": "class&url", "class_multiObject": {"crumb": ["spider-man", "toys", "shadow"]},
                       "class_multiObject_li": {"bread": ["Kids"]},
                       "url_include_expected": ["shop", "cart"],
                       "url_include_expected_multichoice": {"127.0.0.1": "Local", "S=4": "Price"}})
    want = {"spider-man": True, "toys": True, "shadow": True, "is_other_exist": False, "kids": True,
            "shop": True, "cart": False, "local": True, "price": False}
    return v == want, a


def t_label():
    v, a = html_parse({"category": "label", "labelObject": {"title b": "t", "no such text": "n"}})
    return v == {"t": "Title B", "n": ""}, a


def t_no_tab():
    v, a = html_parse({"category": "class", "class_singleObject": {"crumb": "x"}}, url=BASE + "/elsewhere")
    return v == {} and a.get("matched") is False, a


def t_page_info():
    code, a = guest("chrome-page-info", "--port", str(PORT), "--url", BASE + "/shop", "--timeout", "30")
    ok = code == 0 and a.get("title") == "Shop" and a.get("content", "").startswith("<!DOCTYPE html><html>") \
        and 'class="catAllProducts"' in a.get("content", "") and a.get("url") == BASE + "/shop"
    return ok and tabs_back(before), {k: str(v)[:200] for k, v in a.items()}


def t_page_info_refused():
    code, a = guest("chrome-page-info", "--port", str(PORT), "--url", "http://127.0.0.1:9/", "--timeout", "20")
    return code == 1 and "did not load in the guest's browser: net::ERR_" in a.get("error", ""), a


def t_pdf():
    import base64
    code, a = guest("chrome-pdf", "--port", str(PORT), "--url", BASE + "/second", "--timeout", "30")
    data = base64.b64decode(a.get("pdf_base64", ""))
    return code == 0 and data.startswith(b"%PDF-") and tabs_back(before), \
        {k: str(v)[:100] for k, v in a.items()}


def t_website_info():
    infos = [{"action": "inner_text", "selector": "#a"},
             {"action": "attribute", "selector": "#go", "attribute": "href"},
             {"action": "click_and_inner_text", "selector": ["#go", "p.x"]},
             {"action": "click_and_attribute", "selector": ["#go", "#ref"], "attribute": "href"},
             {"action": "click_and_inner_text", "selector": ["#more", "#added"]}]
    code, a = guest("chrome-website-info", "--port", str(PORT), "--url", BASE + "/late", "--infos", json.dumps(infos))
    want = ["first", "/second", "second page", "/doc.pdf", "added later"]
    got = a.get("infos")
    return code == 0 and got is not None and [g.strip() if isinstance(g, str) else g for g in got] == want \
        and tabs_back(before), a


def t_website_info_fails():
    code, a = guest("chrome-website-info", "--port", str(PORT), "--url", BASE + "/late", "--infos",
                    json.dumps([{"action": "inner_text", "selector": "#never"}]), "--timeout", "20")
    return code == 1 and "no element #never" in a.get("error", ""), a


def t_appearance():
    code, a = guest("chrome-appearance", "--port", str(PORT))
    return code == 0 and a.get("mode") in ("light", "dark", "system") and tabs_back(before), a


def t_appearance_no_browser():
    prefs = os.path.join(HOME, ".config/google-chrome/Default/Preferences")
    with open(prefs, encoding="utf-8") as f:
        saved = f.read()
    try:
        d = json.loads(saved)
        d.setdefault("browser", {}).setdefault("theme", {})["color_scheme2"] = 2
        with open(prefs, "w", encoding="utf-8") as f:
            json.dump(d, f)
        code, a = guest("chrome-appearance", "--port", "9")
    finally:
        with open(prefs, "w", encoding="utf-8") as f:
            f.write(saved)
    return code == 0 and a.get("mode") == "dark" and a.get("from") == "Preferences", a


def t_starts_browser():
    """No browser on the port: the getter starts google-chrome (here a stand-in that runs headless
    Chromium with its own profile) and reads the page in it, as OSWorld's getters relaunch one."""
    import signal
    import socket
    import tempfile
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        free = so.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="envmgr-chrome-start-") as tmp:
        os.mkdir(tmp + "/bin")
        with open(tmp + "/bin/google-chrome", "w") as f:
            f.write("#!/bin/sh\necho $$ > %s/pid\nexec chromium --headless --no-sandbox --disable-gpu --no-first-run "
                    "--user-data-dir=%s/profile \"$@\" >/dev/null 2>&1\n" % (tmp, tmp))
        os.chmod(tmp + "/bin/google-chrome", 0o755)
        path = os.environ["PATH"]
        os.environ["PATH"] = tmp + "/bin:" + path
        try:
            code, a = guest("chrome-page-info", "--port", str(free), "--url", BASE + "/second", "--timeout", "60")
        finally:
            os.environ["PATH"] = path
            try:
                with open(tmp + "/pid") as f:
                    os.killpg(int(f.read()), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        return code == 0 and a.get("title") == "Second", {k: str(v)[:200] for k, v in a.items()}


for name, fn in (("html-parse class: indexes, direct text, h3 children, single, shadow DOM", t_class),
                 ("html-parse class_multiObject_search_exist with is_other_exist", t_search_exist),
                 ("html-parse xpath (CSS fallback) and input values the page set", t_xpath_input),
                 ("html-parse class&url: names, li spans, URL keys", t_class_url),
                 ("html-parse label: the smallest element with the text", t_label),
                 ("html-parse with no tab at the URL answers {}", t_no_tab),
                 ("page-info: title, final URL, HTML with its doctype; its tab closed", t_page_info),
                 ("page-info of an unreachable URL: an error naming net::ERR_", t_page_info_refused),
                 ("pdf: a PDF of the page; its tab and context closed", t_pdf),
                 ("website-info: inner_text, attribute, clicks that navigate and that do not", t_website_info),
                 ("website-info with a selector that never appears: an error", t_website_info_fails),
                 ("appearance from chrome://settings/appearance; its tab closed", t_appearance),
                 ("appearance without DevTools: Preferences' color_scheme2", t_appearance_no_browser),
                 ("page-info with no browser answering: google-chrome started first", t_starts_browser)):
    check(name, fn)
srv.shutdown()

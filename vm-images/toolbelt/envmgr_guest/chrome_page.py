"""Getters that read a web page in the guest's own browser, over its DevTools endpoint on
127.0.0.1 (what OSWorld's host does with playwright's connect_over_cdp to the same browser):

  html_parse    OSWorld's active_tab_html_parse: DOM queries in the tab showing a URL
  appearance    OSWorld's chrome_appearance_mode_ui: chrome://settings/appearance, else Preferences
  page_info     OSWorld's page_info: a URL's title, final URL and HTML, in a new tab
  pdf           OSWorld's pdf_from_url: a URL printed to PDF, in a new tab of a fresh context
  website_info  OSWorld's info_from_website: texts and attributes, following clicks

Pages load through the guest's network, so a task's allowlist decides what they reach. Every
tab opened here is closed again, so later getters see the browser as the agent left it. With no
browser answering, the getters but appearance start one first, as OSWorld's do."""
import base64
import json
import os
import select
import shutil
import subprocess
import time
import urllib.parse

from .chrome import ChromeError, _http_json, _WebSocket, color_scheme, targets

EVENTS_MAX = 10000
LOAD, DOM_READY = "Page.loadEventFired", "Page.domContentEventFired"
IDLE_QUIET_S = 0.5      # playwright's networkidle: no request in flight for 500 ms


class Session:
    """One DevTools websocket (a page's or the browser's): calls by id; events are kept (capped)
    for the waits that need them."""

    def __init__(self, ws_url, timeout):
        self.ws = _WebSocket(ws_url, timeout)
        self.timeout = timeout
        self.last_id = 0
        self.events = []

    def _take(self, msg):
        if "method" in msg and len(self.events) < EVENTS_MAX:
            self.events.append(msg)

    def call(self, method, params=None, timeout=None):
        self.last_id += 1
        want = self.last_id
        self.ws.send(json.dumps({"id": want, "method": method, "params": params or {}}))
        end = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == want:
                if "error" in msg:
                    raise ChromeError("%s: %s" % (method, msg["error"].get("message")))
                return msg.get("result", {})
            self._take(msg)
        raise ChromeError("%s: no answer in %g s" % (method, timeout or self.timeout))

    def pump(self, seconds):
        """Collect the events that arrive within seconds."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if not self.ws.buf and not select.select([self.ws.sock], [], [], left)[0]:
                return
            self._take(json.loads(self.ws.recv()))

    def evaluate(self, expression, timeout=None):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout)
        if "exceptionDetails" in res:
            d = res["exceptionDetails"]
            raise ChromeError("page exception: %s" % ((d.get("exception") or {}).get("description") or d.get("text")))
        return res.get("result", {}).get("value")

    def close(self):
        self.ws.close()


START_WAIT_S = 120.0    # a browser starting under TCG on a busy host: measured 40 to over 100 s


def ensure_browser(port, timeout, wait=START_WAIT_S):
    """(port, targets) of the browser's DevTools; when none answers, start the browser as OSWorld's
    page getters do (google-chrome --remote-debugging-port=1337: a browser the agent closed, or one
    still starting) and wait up to wait seconds for it."""
    try:
        return targets(port, 5.0)
    except ChromeError as e:
        first = e
    exe = shutil.which("google-chrome") or shutil.which("chromium")
    if not exe:
        raise ChromeError("%s; and no google-chrome or chromium to start" % first)
    subprocess.Popen([exe, "--remote-debugging-port=%d" % (port or 1337)], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                     cwd=os.path.expanduser("~"))
    end = time.monotonic() + wait
    while True:
        try:
            return targets(port, 5.0)
        except ChromeError:
            if time.monotonic() > end:
                raise ChromeError("%s; started %s, which did not answer within %g s" % (first, exe, wait))
            time.sleep(1.0)


def _browser_ws(port, timeout, launch):
    p, _ = ensure_browser(port, timeout) if launch else targets(port, timeout)
    ver = _http_json(p, "/json/version", timeout)
    if not ver.get("webSocketDebuggerUrl"):
        raise ChromeError("DevTools on 127.0.0.1:%d gave no browser endpoint" % p)
    return p, ver["webSocketDebuggerUrl"]


class Tab:
    """A tab opened for a getter (in the background; in a fresh browser context when asked, as
    playwright's browser.new_page()) and closed when the getter is done; launch: start the browser
    when none answers."""

    def __init__(self, port, timeout, fresh_context=False, launch=True):
        self.port, ws = _browser_ws(port, timeout, launch)
        self.browser = Session(ws, timeout)
        self.context = None
        self.page = None
        try:
            if fresh_context:
                self.context = self.browser.call("Target.createBrowserContext")["browserContextId"]
            params = {"url": "about:blank", "background": True}
            if self.context:
                params["browserContextId"] = self.context
            self.target = self.browser.call("Target.createTarget", params)["targetId"]
            self.page = Session("ws://127.0.0.1:%d/devtools/page/%s" % (self.port, self.target), timeout)
            self.page.call("Page.enable")
            self.page.call("Network.enable")
        except BaseException:
            self.close()
            raise

    def goto(self, url, timeout, idle=True, until=LOAD):
        """Navigate and wait for the load event (or until=DOM_READY: DOMContentLoaded), then
        (idle) for the network to be quiet; a navigation Chrome refuses (net::ERR_...) is an error."""
        self.page.events.clear()
        res = self.page.call("Page.navigate", {"url": url}, timeout)
        if res.get("errorText"):
            raise ChromeError("%s did not load in the guest's browser: %s" % (url, res["errorText"]))
        # the old document may still be complete: only the new one's event counts
        wait_loaded(self.page, timeout, idle, poll_state=False, until=until)

    def close(self):
        for call, key, val in (("Target.closeTarget", "targetId", getattr(self, "target", None)),
                               ("Target.disposeBrowserContext", "browserContextId", self.context)):
            if val:
                try:
                    self.browser.call(call, {key: val}, 10)
                except (ChromeError, OSError, ValueError):
                    pass
        if self.page:
            self.page.close()
        self.browser.close()


NAVIGATING = ("Page.frameStartedLoading", "Page.frameRequestedNavigation", "Page.frameNavigated")


def wait_loaded(page, timeout, idle=True, poll_state=True, until=None):
    """The load event (until=DOM_READY: DOMContentLoaded; with poll_state, a document already
    complete will do: a page loaded before we came), then, with idle, no request in flight for
    IDLE_QUIET_S, within timeout: a page that keeps fetching is read as it is then."""
    until = until or LOAD
    end = time.monotonic() + timeout
    loaded = False
    inflight = set()
    seen = 0
    quiet_since = time.monotonic()
    while time.monotonic() < end:
        for ev in page.events[seen:]:
            m, p = ev.get("method"), ev.get("params") or {}
            if m == until:
                loaded = True
            elif m == "Network.requestWillBeSent":
                inflight.add(p.get("requestId"))
            elif m in ("Network.loadingFinished", "Network.loadingFailed"):
                inflight.discard(p.get("requestId"))
        seen = len(page.events)
        if inflight:
            quiet_since = time.monotonic()
        if not loaded and poll_state:
            try:
                loaded = page.evaluate("document.readyState", 5) == "complete"
            except ChromeError:
                pass            # a context between two documents
        if loaded and (not idle or (not inflight and time.monotonic() - quiet_since >= IDLE_QUIET_S)):
            return True
        page.pump(0.1)
    if not loaded:
        raise ChromeError("the page did not finish loading in %g s" % timeout)
    return False


# ---------------------------------------------------------------- DOM queries
# One script runs every query of a getter: Q is a list of [kind, selector]; the answer is a list of
# raw strings (lists of them), stripped in Python. CSS queries reach into open shadow roots, as
# playwright's CSS engine does.
QUERY_JS = r"""
(Q) => {
  const roots = [document];
  for (let i = 0; i < roots.length; i++)
    for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
  const css = (sel) => { const out = []; for (const r of roots) out.push(...r.querySelectorAll(sel)); return out; };
  const xfirst = (xp) => document.evaluate(xp, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
  const norm = (s) => (s || '').replace(/\s+/g, ' ').trim().toLowerCase();
  const textMatch = (needle) => {
    const want = norm(needle);
    const hit = (el) => !['SCRIPT', 'STYLE', 'HEAD', 'NOSCRIPT', 'TEMPLATE'].includes(el.tagName) &&
                        norm(el.textContent).includes(want);
    for (const el of document.body ? document.body.querySelectorAll('*') : [])
      if (hit(el) && ![...el.children].some(hit)) return el;
    return null;
  };
  const one = ([kind, sel]) => {
    try {
      if (kind === 'text') return css(sel).map(e => e.textContent);
      if (kind === 'direct') {
        const e = css(sel)[0];
        return e ? [...e.childNodes].filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent.trim()).filter(Boolean) : [];
      }
      if (kind === 'li') return css(sel + ' li.catAllProducts').map(e => e.querySelector('span')).filter(Boolean).map(s => s.innerText);
      if (kind === 'h3') return css(sel).map(e => e.querySelector('h3')).filter(Boolean).map(h => h.textContent);
      if (kind === 'label') { const e = textMatch(sel); return e ? e.textContent : null; }
      if (kind === 'xpath') {
        let e = null;
        try { e = xfirst(sel); } catch (x) {}
        if (!e && !sel.startsWith('//') && !sel.startsWith('..')) e = css(sel)[0] || null;
        return e ? e.textContent : null;
      }
      if (kind === 'input') { const e = xfirst(sel); return e && 'value' in e ? String(e.value) : null; }
      if (kind === 'url') return location.href;
    } catch (x) {}
    return kind === 'text' || kind === 'direct' || kind === 'li' || kind === 'h3' ? [] : null;
  };
  return Q.map(one);
}
"""


def run_queries(page, queries, timeout):
    return page.evaluate("(%s)(%s)" % (QUERY_JS, json.dumps(queries)), timeout)


def _strip(v):
    return v.strip() if isinstance(v, str) else v


def html_parse(url, spec, port=None, timeout=30.0):
    """OSWorld's active_tab_html_parse on the tab whose URL is url (compared percent-decoded and
    without trailing slashes): {} when no tab shows it."""
    def norm(u):
        return urllib.parse.unquote(u).rstrip("/")
    p, ts = ensure_browser(port, timeout, wait=timeout)   # a new browser shows no tab of the agent's anyway
    tab = next((t for t in ts if t.get("type") == "page" and norm(t.get("url", "")) == norm(url)), None)
    if tab is None:
        return {"value": {}, "matched": False, "tabs": [t.get("url") for t in ts if t.get("type") == "page"]}
    page = Session(tab["webSocketDebuggerUrl"], timeout)
    try:
        page.call("Page.enable")
        try:
            wait_loaded(page, min(timeout, 20.0), idle=False)
        except ChromeError:
            pass        # still loading: its DOM is read as it is (OSWorld skips the wait's failure too)
        return {"value": assemble(page, spec, timeout), "matched": True, "url": tab.get("url")}
    finally:
        page.close()


def assemble(page, spec, timeout):
    """OSWorld's return_json for the spec's category, from one round of queries."""
    cat = spec.get("category")
    plan = []           # (query, how to store its answer)
    out = {}

    def q(kind, sel):
        plan.append([kind, sel])
        return len(plan) - 1

    def ordered(objs, kind):
        return [(q(kind, "." + cls), keys) for cls, keys in (objs or {}).items()]

    if cat == "class":
        multi = ordered(spec.get("class_multiObject"), "text")
        child = ordered(spec.get("class_multiObject_child"), "direct")
        only = ordered(spec.get("class_multiObject_only_child"), "h3")
        exist = ordered(spec.get("class_multiObject_search_exist"), "text")
        single = ordered({c: k for c, k in (spec.get("class_singleObject") or {}).items()}, "text")
    elif cat == "label":
        labels = [(q("label", s), k) for s, k in (spec.get("labelObject") or {}).items()]
    elif cat == "xpath":
        xpaths = [(q("xpath", s), k) for s, k in (spec.get("xpathObject") or {}).items()]
    elif cat == "input":
        inputs = [(q("input", s), k) for s, k in (spec.get("inputObject") or {}).items()]
    elif cat == "class&url":
        multi = ordered(spec.get("class_multiObject"), "text")
        lis = ordered(spec.get("class_multiObject_li"), "li")
        url_q = q("url", "")
    else:
        return out
    got = run_queries(page, plan, timeout) if plan else []

    def texts(i):
        v = got[i] if i < len(got) and isinstance(got[i], list) else []
        return [_strip(t) for t in v if isinstance(t, str)]

    def at_index(pairs):
        for i, keys in pairs:
            found = texts(i)
            for order, key in keys.items():
                n = int(order)
                out[key] = found[n] if -len(found) <= n < len(found) else ""

    def present(pairs):
        for i, names in pairs:
            found = texts(i)
            for name in names:
                if any(name.lower() == t.lower() for t in found):
                    out[name.lower()] = True
            for t in found:
                if all(t.lower() not in item.lower() for item in names):
                    out["is_other_exist"] = True
                    break
            out.setdefault("is_other_exist", False)

    def first(pairs):
        for i, key in pairs:
            v = got[i] if i < len(got) else None
            out[key] = _strip(v) if isinstance(v, str) and v.strip() else ""

    if cat == "class":
        at_index(multi)
        at_index(child)
        at_index(only)
        for i, objects in exist:
            found = texts(i)
            for o in objects:
                if o != "is_other_exist":
                    out[o] = o in found
            if "is_other_exist" in objects:
                if any(t not in objects for t in found):
                    out["is_other_exist"] = True
                out.setdefault("is_other_exist", False)
        for i, key in single:
            found = texts(i)
            out[key] = found[0] if found else ""
    elif cat == "label":
        first(labels)
    elif cat == "xpath":
        first(xpaths)
    elif cat == "input":
        first(inputs)
    else:
        present(multi)
        present(lis)
        page_url = (got[url_q] or "").lower() if url_q < len(got) else ""
        for key in spec.get("url_include_expected") or []:
            out.setdefault(key.lower(), key.lower() in page_url)
        for key, value in (spec.get("url_include_expected_multichoice") or {}).items():
            out.setdefault(value.lower(), key.lower() in page_url)
    return out


# ---------------------------------------------------------------- chrome://settings/appearance
# The mode the settings page shows: its settings-ui element's prefs (browser.theme.color_scheme,
# color_scheme2, extensions.theme.system_theme), then the text of its selected or checked controls;
# light before dark before system; null when the page says nothing.
APPEARANCE_JS = r"""
(() => {
  const modes = new Set();
  const low = (v) => String(v === undefined || v === null ? '' : v).toLowerCase();
  const scheme = {'1': 'light', 'light': 'light', '2': 'dark', 'dark': 'dark',
                  '0': 'system', 'system': 'system', 'default': 'system', 'device': 'system'};
  const ui = document.querySelector('settings-ui');
  const prefs = ui && ui.prefs;
  const seen = new Set();
  const visit = (node, path) => {
    if (!node || typeof node !== 'object' || seen.has(node)) return;
    seen.add(node);
    if (Object.prototype.hasOwnProperty.call(node, 'value')) {
      const v = node.value;
      if (path === 'prefs.extensions.theme.system_theme') {
        if (v === 0 || v === '0' || v === false) modes.add('light');
        if (v === 1 || v === '1' || v === true) modes.add('dark');
      } else if (path === 'prefs.browser.theme.color_scheme' || path === 'prefs.browser.theme.color_scheme2') {
        if (scheme[low(v)]) modes.add(scheme[low(v)]);
      }
    }
    for (const k of Object.keys(node)) visit(node[k], path + '.' + k.toLowerCase());
  };
  try { visit(prefs, 'prefs'); } catch (e) {}
  try {
    const roots = [document];
    for (let i = 0; i < roots.length; i++)
      for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
    for (const r of roots)
      for (const el of r.querySelectorAll('[selected],[checked],[aria-checked="true"],option:checked')) {
        const t = low((el.innerText || el.textContent || '').trim());
        if (t.includes('light')) modes.add('light');
        else if (t.includes('dark')) modes.add('dark');
        else if (t.includes('device') || t.includes('system') || t.includes('default')) modes.add('system');
      }
  } catch (e) {}
  for (const m of ['light', 'dark', 'system']) if (modes.has(m)) return m;
  return null;
})()
"""


def appearance(home, port=None, timeout=150.0, settle=2.5, probe_for=30.0):
    """OSWorld's chrome_appearance_mode_ui: the settings page's mode, read settle seconds after its
    DOM is ready (and again for up to probe_for seconds while it says nothing or the page is too
    busy to answer: under TCG the settings UI takes a minute to come up), else the Preferences
    files' (color_scheme)."""
    why = None
    mode = None
    try:
        tab = Tab(port, timeout, launch=False)     # OSWorld reads the files when no browser answers
        try:
            tab.goto("chrome://settings/appearance", timeout, idle=False, until=DOM_READY)
            time.sleep(settle)
            end = time.monotonic() + probe_for
            while mode not in ("light", "dark", "system") and time.monotonic() < end:
                try:
                    mode = tab.page.evaluate(APPEARANCE_JS, 10)
                except ChromeError as e:
                    why = str(e)
                if mode not in ("light", "dark", "system"):
                    time.sleep(0.5)
        finally:
            tab.close()
        if mode in ("light", "dark", "system"):
            return {"mode": mode, "from": "chrome://settings/appearance"}
        why = why or "the settings page showed no mode"
    except (ChromeError, OSError, ValueError) as e:
        why = str(e)
    return {"mode": color_scheme(home), "from": "Preferences", "why": why}


# ---------------------------------------------------------------- pages by URL
CONTENT_JS = ("(document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '') + "
              "(document.documentElement ? document.documentElement.outerHTML : '')")


def page_info(url, port=None, timeout=60.0, max_chars=8 << 20):
    """OSWorld's page_info: the page in a new tab once the network is quiet; its title, final URL
    and HTML (with the doctype, as playwright's page.content())."""
    tab = Tab(port, timeout)
    try:
        tab.goto(url, timeout)
        info = tab.page.evaluate("({title: document.title, url: location.href, content: %s})" % CONTENT_JS, timeout)
    finally:
        tab.close()
    content = info.get("content") or ""
    return {"title": info.get("title", ""), "url": info.get("url", url), "content": content[:max_chars],
            "content_truncated": len(content) > max_chars}


def pdf(url, port=None, timeout=60.0, settle=3.0):
    """OSWorld's pdf_from_url: the page in a new tab of a fresh browser context (as playwright's
    browser.new_page()), the network quiet, settle seconds more, printed as playwright's page.pdf()
    prints by default (Letter, no margins, no backgrounds)."""
    tab = Tab(port, timeout, fresh_context=True)
    try:
        tab.goto(url, timeout)
        time.sleep(settle)
        res = tab.page.call("Page.printToPDF", {
            "landscape": False, "displayHeaderFooter": False, "printBackground": False, "scale": 1,
            "paperWidth": 8.5, "paperHeight": 11, "marginTop": 0, "marginBottom": 0, "marginLeft": 0,
            "marginRight": 0, "pageRanges": "", "preferCSSPageSize": False, "transferMode": "ReturnAsBase64"},
            timeout)
    finally:
        tab.close()
    data = res.get("data")
    if not data:
        raise ChromeError("Page.printToPDF gave no data")
    return {"url": url, "pdf_base64": data, "size": len(base64.b64decode(data))}


# The element a selector names, waited for (attached) up to ms; its innerText, an attribute, or a
# click. CSS through open shadow roots, as playwright.
ELEMENT_JS = r"""
(async (sel, ms, what, attr) => {
  const find = () => {
    const roots = [document];
    for (let i = 0; i < roots.length; i++) {
      const e = roots[i].querySelector(sel);
      if (e) return e;
      for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
    }
    return null;
  };
  const end = Date.now() + ms;
  let e = find();
  while (!e && Date.now() < end) { await new Promise(r => setTimeout(r, 100)); e = find(); }
  if (!e) return {missing: true};
  if (what === 'click') { e.scrollIntoView({block: 'center'}); e.click(); return {clicked: true}; }
  if (what === 'attribute') return {value: e.getAttribute(attr)};
  return {value: e.innerText};
})
"""


def _element(page, sel, what, attr, wait_s, timeout):
    res = page.evaluate("%s(%s, %d, %s, %s)" % (ELEMENT_JS, json.dumps(sel), int(wait_s * 1000), json.dumps(what),
                                                  json.dumps(attr)), wait_s + timeout)
    if not isinstance(res, dict) or res.get("missing"):
        raise ChromeError("no element %s within %g s" % (sel[:200], wait_s))
    return res.get("value")


def website_info(url, infos, port=None, timeout=60.0, budget=180.0):
    """OSWorld's info_from_website: the page in a new tab; for each info, back to url if a click
    left it, then inner_text / attribute of a selector (waited for 10 s), or the click_and_ forms:
    click each selector but the last (a DOM click, then the load), then read the last. Any failure,
    or more than budget seconds in all, is an error: the getter falls back to the task's backups,
    as OSWorld."""
    give_up = time.monotonic() + budget
    tab = Tab(port, timeout)
    try:
        tab.goto(url, timeout, idle=False)
        values = []
        for n, info in enumerate(infos):
            if time.monotonic() > give_up:
                raise ChromeError("reading %d values took more than %g s" % (len(infos), budget))
            if tab.page.evaluate("location.href", timeout) != url:
                tab.goto(url, timeout, idle=False)
            action = info.get("action", "inner_text")
            sel = info.get("selector")
            what = "attribute" if action in ("attribute", "click_and_attribute") else "inner_text"
            if action in ("inner_text", "attribute"):
                values.append(_element(tab.page, sel, what, info.get("attribute"), 10, timeout))
            elif action in ("click_and_inner_text", "click_and_attribute"):
                for k, s in enumerate(sel):
                    if k < len(sel) - 1:
                        tab.page.events.clear()
                        _element(tab.page, s, "click", None, 10, timeout)
                        tab.page.pump(1.0)
                        navigated = any(e.get("method") in NAVIGATING for e in tab.page.events)
                        wait_loaded(tab.page, timeout, idle=False, poll_state=not navigated)
                    else:
                        wait_s = 10 if action == "click_and_inner_text" else 30
                        values.append(_element(tab.page, s, what, info.get("attribute"), wait_s, timeout))
            else:
                raise ChromeError("infos[%d]: action %r is not supported (as in OSWorld)" % (n, action))
    finally:
        tab.close()
    return {"infos": values}

"""Chrome/Chromium state for getters: the DevTools endpoint inside the guest
(127.0.0.1 only) and the profile's files (~/.config/google-chrome)."""
import base64
import glob
import json
import os
import socket
import struct
import urllib.parse

DEVTOOLS_PORTS = (1337, 9222)   # OSWorld's --remote-debugging-port, then its socat port


class ChromeError(Exception):
    pass


# ---------------------------------------------------------------- DevTools
def http_get(port, path, timeout, headers=(), limit=16 << 20):
    """(status, body) of GET http://127.0.0.1:PORT/PATH.  A plain socket:
    urllib/http.client cost seconds of imports under TCG.  Reads what
    Content-Length says, or chunks, or up to the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        req = "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s\r\n" % (
            path, port, "".join("%s: %s\r\n" % h for h in headers))
        s.sendall(req.encode())
        data = b""

        def more():
            chunk = s.recv(65536)
            if not chunk:
                return False
            if len(data) + len(chunk) > limit + 65536:
                raise OSError("answer from 127.0.0.1:%d larger than %d bytes" % (port, limit))
            return chunk
        while b"\r\n\r\n" not in data:
            c = more()
            if not c:
                break
            data += c
        head, _, body = data.partition(b"\r\n\r\n")
        try:
            status = int(head.split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise OSError("not an HTTP answer from 127.0.0.1:%d" % port)
        fields = {}
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            fields[k.strip().lower()] = v.strip()
        if b"content-length" in fields:
            n = int(fields[b"content-length"])
            while len(body) < n:
                c = more()
                if not c:
                    break
                body += c
            body = body[:n]
        elif fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            while not body.endswith(b"0\r\n\r\n"):
                c = more()
                if not c:
                    break
                body += c
            out, rest = b"", body
            while rest:
                size, _, rest = rest.partition(b"\r\n")
                n = int(size.split(b";")[0] or b"0", 16)
                if n == 0:
                    break
                out, rest = out + rest[:n], rest[n + 2:]
            body = out
        else:
            while True:
                c = more()
                if not c:
                    break
                body += c
    return status, body[:limit]


def _http_json(port, path, timeout):
    status, body = http_get(port, path, timeout)
    if status != 200:
        raise OSError("HTTP %d" % status)
    return json.loads(body.decode("utf-8"))


def targets(port=None, timeout=5.0):
    """(port, the DevTools target list); the first port that answers."""
    errors = []
    for p in ([port] if port else DEVTOOLS_PORTS):
        try:
            return p, _http_json(p, "/json/list", timeout)
        except (OSError, ValueError) as e:
            errors.append("%d: %s" % (p, e))
    raise ChromeError("no DevTools endpoint on 127.0.0.1 (%s); start the browser with "
                      "google-chrome --remote-debugging-port=1337" % "; ".join(errors))


class _WebSocket:
    """Just enough of RFC 6455 for DevTools: one client, text frames."""

    def __init__(self, url, timeout):
        u = urllib.parse.urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost"):
            raise ChromeError("refusing a DevTools socket outside the guest: %s" % url)
        self.sock = socket.create_connection((u.hostname, u.port or 80), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
               % (u.path or "/", u.hostname, u.port or 80, key))
        self.sock.sendall(req.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ChromeError("DevTools closed the connection during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ChromeError("DevTools refused the websocket: %r" % head.split(b"\r\n", 1)[0])
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ChromeError("DevTools closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + masked)

    def recv(self, limit=64 << 20):
        parts = []
        total = 0
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            if b1 & 0x80:
                self._read(4)          # servers do not mask; skip if they do
            total += n
            if total > limit:
                raise ChromeError("DevTools message larger than %d bytes" % limit)
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 0x8:
                raise ChromeError("DevTools closed the websocket")
            if op in (0x9, 0xA):       # ping/pong: ignore
                continue
            parts.append(payload)
            if b0 & 0x80:
                return b"".join(parts).decode("utf-8", "replace")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def evaluate(ws_url, expression, timeout=10.0):
    """Runtime.evaluate in one page; returns the value (returnByValue)."""
    ws = _WebSocket(ws_url, timeout)
    try:
        ws.send(json.dumps({"id": 1, "method": "Runtime.evaluate",
                            "params": {"expression": expression, "returnByValue": True}}))
        while True:
            msg = json.loads(ws.recv())
            if msg.get("id") == 1:
                if "error" in msg:
                    raise ChromeError("Runtime.evaluate: %s" % msg["error"].get("message"))
                res = msg.get("result", {})
                if "exceptionDetails" in res:
                    raise ChromeError("page exception: %s" % res["exceptionDetails"].get("text"))
                return res.get("result", {}).get("value")
    finally:
        ws.close()


def tabs(port=None, timeout=5.0):
    """Open tabs (type "page"), in DevTools order, with the active one marked:
    the page whose document is visible (background tabs are hidden)."""
    p, ts = targets(port, timeout)
    pages = [t for t in ts if t.get("type") == "page"]
    out = []
    active = None
    for t in pages:
        entry = {"id": t.get("id"), "title": t.get("title", ""), "url": t.get("url", "")}
        ws = t.get("webSocketDebuggerUrl")
        if ws:
            try:
                entry["visible"] = evaluate(ws, "document.visibilityState", timeout) == "visible"
            except (ChromeError, OSError, ValueError):
                entry["visible"] = None
        out.append(entry)
        if active is None and entry.get("visible"):
            active = entry
    return {"port": p, "tabs": out, "active": active}


def active_tab(port=None, content=False, timeout=10.0, max_chars=4 << 20):
    info = tabs(port, timeout)
    a = info["active"]
    if a is None:
        return {"active": None}
    out = dict(a)
    if content:
        t = next(t for t in targets(info["port"], timeout)[1] if t.get("id") == a["id"])
        html = evaluate(t["webSocketDebuggerUrl"], "document.documentElement.outerHTML", timeout) or ""
        out["content_truncated"] = len(html) > max_chars
        out["content"] = html[:max_chars]
    return {"active": out}


# ---------------------------------------------------------------- profile files
def profile_dir(home):
    for d in (".config/google-chrome", ".config/chromium"):
        p = os.path.join(home, d)
        if os.path.isdir(p):
            return os.path.realpath(p)
    raise ChromeError("no Chrome profile under %s/.config (google-chrome, chromium)" % home)


def _json_file(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ChromeError("%s does not exist" % path)
    except ValueError as e:
        raise ChromeError("%s: not JSON (%s)" % (path, e))


def prefs(home):
    """The settings OSWorld's Chrome getters read, from Default/Preferences and
    Local State, with the defaults those getters use when a key is absent."""
    base = profile_dir(home)
    p = _json_file(os.path.join(base, "Default", "Preferences"))
    try:
        ls = _json_file(os.path.join(base, "Local State"))
    except ChromeError:
        ls = {}
    ext = p.get("extensions", {}).get("settings", {}) or {}
    return {
        "profile_dir": base,
        "default_search_engine": p.get("default_search_provider_data", {})
                                  .get("template_url_data", {}).get("short_name", "Google"),
        "enable_do_not_track": bool(p.get("enable_do_not_track", False)),
        "profile_name": p.get("profile", {}).get("name"),
        "language": ls.get("intl", {}).get("app_locale", "en-US"),
        "font_size": p.get("webkit", {}).get("webprefs", {"default_fixed_font_size": 13,
                                                          "default_font_size": 16,
                                                          "minimum_font_size": 13}),
        "enabled_experiments": ls.get("browser", {}).get("enabled_labs_experiments", []),
        "enhanced_safe_browsing": bool(p.get("safebrowsing", {}).get("enhanced", False)),
        # OSWorld's enable_safe_browsing: either key set (a missing "enabled" counts as off, as there)
        "safe_browsing": bool(p.get("safebrowsing", {}).get("enhanced", False))
                         or bool(p.get("safebrowsing", {}).get("enabled", False)),
        "restore_on_startup": p.get("session", {}).get("restore_on_startup"),
        "new_startup_page": ("session" not in p) or p.get("session", {}).get("restore_on_startup") == 5,
        "default_content_setting_values": p.get("profile", {}).get("default_content_setting_values"),
        "extensions": [{"id": k, "path": v.get("path"), "name": (v.get("manifest") or {}).get("name")}
                       for k, v in ext.items()],
    }


def _scheme_of(value):
    """Chrome's color_scheme value as a mode: 0 system, 1 light, 2 dark (numbers or words)."""
    if isinstance(value, str):
        return {"system": "system", "default": "system", "0": "system", "light": "light", "1": "light",
                "dark": "dark", "2": "dark"}.get(value.strip().lower())
    if isinstance(value, (int, float)):
        return {0: "system", 1: "light", 2: "dark"}.get(int(value))
    return None


def _mode_of(prefs_data):
    """The appearance mode a Preferences file records: browser.theme.color_scheme2 (newer
    Chrome) or color_scheme; extensions.theme.system_theme 0/false means light whatever those
    say (Linux builds update it where color_scheme stays stale); "system" when nothing says."""
    theme = (prefs_data.get("browser") or {}).get("theme") or {}
    mode = _scheme_of(theme.get("color_scheme2", theme.get("color_scheme")))
    flag = ((prefs_data.get("extensions") or {}).get("theme") or {}).get("system_theme")
    if flag in (0, "0", False):
        return "light"
    return mode or "system"


def color_scheme(home, polls=5, pause=1.0):
    """OSWorld's file-based appearance mode: every profile's Preferences, newest first; an explicit
    light or dark wins over system; read again each second for polls seconds (Chrome writes the
    file a moment after the setting changes), ending early on light. "system" when none reads."""
    import time
    try:
        base = profile_dir(home)
    except ChromeError:
        return "system"
    files = []
    for pattern in ("Default", "Guest Profile", "Profile *"):
        files += [p for p in glob.glob(os.path.join(base, pattern, "Preferences")) if os.path.isfile(p)]
    files.sort(key=lambda p: os.path.getmtime(p) if os.path.exists(p) else 0, reverse=True)
    final = "system"
    for i in range(polls):
        best = None
        for path in files:
            try:
                mode = _mode_of(_json_file(path))
            except (ChromeError, AttributeError):
                continue
            if mode in ("light", "dark"):
                best = mode
                break
            best = best or mode
        if best:
            final = best
            if best == "light":
                return "light"
        if i + 1 < polls:
            time.sleep(pause)
    return final


def bookmarks(home):
    path = os.path.join(profile_dir(home), "Default", "Bookmarks")
    if not os.path.exists(path):
        return {}
    return _json_file(path).get("roots", {})


def _query_copy(db, sql, limit):
    """Run sql on a copy of a database the browser may hold locked."""
    import shutil
    import sqlite3
    import tempfile
    if not os.path.exists(db):
        raise ChromeError("%s does not exist" % db)
    with tempfile.TemporaryDirectory(prefix="envmgr-chrome-") as tmp:
        copy = os.path.join(tmp, os.path.basename(db))
        for suffix in ("", "-wal", "-journal"):
            if os.path.exists(db + suffix):
                shutil.copyfile(db + suffix, copy + suffix)
        con = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(copy), uri=True)
        try:
            cur = con.execute(sql)
            cols = [c[0] for c in cur.description]
            rows = cur.fetchmany(limit + 1)
        finally:
            con.close()
    truncated = len(rows) > limit
    rows = rows[:limit]

    def cell(v):
        if isinstance(v, bytes):
            return {"hex": v.hex()}
        return v
    return {"columns": cols, "rows": [[cell(v) for v in r] for r in rows], "truncated": truncated}


def history(home, limit=100000):
    return _query_copy(os.path.join(profile_dir(home), "Default", "History"),
                       "SELECT url, title, last_visit_time FROM urls", limit)


def cookies(home, limit=100000):
    base = profile_dir(home)
    db = os.path.join(base, "Default", "Cookies")
    if not os.path.exists(db):
        alt = glob.glob(os.path.join(base, "Default", "Network", "Cookies"))
        db = alt[0] if alt else db
    return _query_copy(db, "SELECT * FROM cookies", limit)

"""envmgr-guest: getters inside the guest, one JSON document on stdout.

The host runs these through the QEMU guest agent (as root); nothing here
listens on a port.  Exit status 0 with the answer, 1 with {"error": "..."}
(still JSON), 2 for a usage error.  Every answer is capped (--max-bytes):
past the cap the answer is replaced by an error that says so.

Subcommands that need the desktop session (a11y-tree, terminal-output) become
the session's user, with its D-Bus address, when started as root.
"""
import argparse
import json
import os
import pwd
import sys
import time

MARKER = "/tmp/.envmgr-desktop-ready"
DEFAULT_MAX_BYTES = 16 << 20

# OSWorld's tasks and getters name the browser "Google Chrome"; this image's
# google-chrome is Debian's Chromium, whose AT-SPI application is "Chromium".
APP_ALIASES = {"Chromium": "Google Chrome"}


class Fail(Exception):
    pass


# ---------------------------------------------------------------- session
def session_user():
    """The desktop session's user (the ready marker's user=, else uid 1000)."""
    try:
        with open(MARKER, encoding="utf-8") as f:
            for line in f:
                if line.startswith("user="):
                    return pwd.getpwnam(line.strip().split("=", 1)[1])
    except (OSError, KeyError):
        pass
    try:
        return pwd.getpwuid(1000)
    except KeyError:
        raise Fail("no desktop user (no %s and no uid 1000)" % MARKER)


def session_env(pw):
    """DISPLAY, HOME, the session bus of pw's running desktop session."""
    env = {"DISPLAY": os.environ.get("DISPLAY") or ":0", "HOME": pw.pw_dir, "USER": pw.pw_name,
           "LOGNAME": pw.pw_name, "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    run = "/run/user/%d" % pw.pw_uid
    if os.path.isdir(run):
        env["XDG_RUNTIME_DIR"] = run
    addr = None
    for proc in sorted(os.listdir("/proc"), key=lambda s: (len(s), s)):
        if not proc.isdigit():
            continue
        try:
            if os.stat("/proc/" + proc).st_uid != pw.pw_uid:
                continue
            with open("/proc/%s/comm" % proc) as f:
                if f.read().strip() != "xfce4-session":
                    continue
            with open("/proc/%s/environ" % proc, "rb") as f:
                for kv in f.read().split(b"\0"):
                    if kv.startswith(b"DBUS_SESSION_BUS_ADDRESS="):
                        addr = kv.split(b"=", 1)[1].decode()
            break
        except OSError:
            continue
    if not addr and os.getuid() == pw.pw_uid:
        addr = os.environ.get("DBUS_SESSION_BUS_ADDRESS")    # the session's own server (serve.py)
    if not addr and os.path.exists(run + "/bus"):
        addr = "unix:path=%s/bus" % run
    if addr:
        env["DBUS_SESSION_BUS_ADDRESS"] = addr
    return env


def become_session_user():
    """Become the session user, in this process (when root in a guest whose
    session is up: the ready marker exists), with the session's environment.
    In-process rather than a re-run under runuser: a second Python start
    costs most of a second under TCG, on every observation."""
    if os.geteuid() != 0 or not os.path.exists(MARKER):
        return
    pw = session_user()
    if pw.pw_uid == 0:
        return
    env = session_env(pw)
    try:
        os.setgroups(os.getgrouplist(pw.pw_name, pw.pw_gid))
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
    except OSError as e:
        raise Fail("cannot become the session user %s: %s" % (pw.pw_name, e))
    if os.getuid() != pw.pw_uid or os.geteuid() != pw.pw_uid:
        raise Fail("cannot become the session user %s" % pw.pw_name)
    enter_session(pw, env)


def enter_session(pw, env=None):
    """The session's environment and pw's home, in this process."""
    env = env or session_env(pw)
    os.environ.clear()
    os.environ.update(env)
    try:
        os.chdir(pw.pw_dir)
    except OSError:
        os.chdir("/")


def home_of_session():
    if os.environ.get("ENVMGR_GUEST_HOME"):       # tests on the host
        return os.environ["ENVMGR_GUEST_HOME"]
    if os.geteuid() == 0:
        return session_user().pw_dir
    return os.path.expanduser("~")


# ---------------------------------------------------------------- X11
def _display():
    from Xlib import display
    try:
        return display.Display(os.environ.get("DISPLAY") or ":0")
    except Exception as e:   # Xlib raises several unrelated types
        raise Fail("cannot open the X display: %s" % e)


def _x11raw(read):
    """read(x11raw) -> its answer, an X11Error the caller's Fail."""
    from . import x11raw
    try:
        return read(x11raw)
    except x11raw.X11Error as e:
        raise Fail("cannot open the X display: %s" % e)


def screen_size(_a):
    w, h = _x11raw(lambda x: x.screen_size())
    return {"width": w, "height": h}


def cursor_position(_a):
    x, y = _x11raw(lambda x: x.pointer_position())
    return {"x": x, "y": y}


def _client_windows(d):
    from Xlib import X
    root = d.screen().root
    prop = root.get_full_property(d.intern_atom("_NET_CLIENT_LIST"), X.AnyPropertyType)
    return [d.create_resource_object("window", w) for w in (prop.value if prop else [])]


def _window_info(d, w):
    import Xlib.error
    try:
        cls = w.get_wm_class()
        name = w.get_full_property(d.intern_atom("_NET_WM_NAME"), d.intern_atom("UTF8_STRING"))
        title = name.value.decode("utf-8", "replace") if name else (w.get_wm_name() or "")
        g = w.get_geometry()
        pos = w.translate_coords(d.screen().root, 0, 0)
        return {"id": w.id, "class": list(cls) if cls else [], "title": title,
                "x": -pos.x, "y": -pos.y, "width": g.width, "height": g.height}
    except Xlib.error.XError:
        return None


def window_size(a):
    """Like OSWorld's: the first client window whose WM_CLASS (either part)
    matches app_class_name, case-insensitively; null if none."""
    d = _display()
    want = a.app_class_name.lower()
    for w in _client_windows(d):
        info = _window_info(d, w)
        if info and want in [c.lower() for c in info["class"]]:
            return {"width": info["width"], "height": info["height"]}
    return None


def windows(_a):
    from Xlib import X
    d = _display()
    root = d.screen().root
    act = root.get_full_property(d.intern_atom("_NET_ACTIVE_WINDOW"), X.AnyPropertyType)
    active = act.value[0] if act and len(act.value) else None
    out = []
    for w in _client_windows(d):
        info = _window_info(d, w)
        if info:
            info["active"] = info["id"] == active
            out.append(info)
    return {"windows": out}


# ---------------------------------------------------------------- desktop
def _xfconf(channel, prop, env=None):
    import subprocess
    try:
        p = subprocess.run(["xfconf-query", "-c", channel, "-p", prop], capture_output=True,
                           text=True, timeout=10, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def wallpaper(_a):
    """The desktop background: the image file (OSWorld returns its bytes; read
    it with guest-file-read) or, with no image, the solid colour."""
    import subprocess
    pw = session_user()
    env = session_env(pw)
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", pw.pw_name, "--", "env"] + ["%s=%s" % kv for kv in env.items()]
    else:
        cmd = []

    def xfconf(*args):
        try:
            r = subprocess.run(cmd + ["xfconf-query", "-c", "xfce4-desktop"] + list(args),
                               capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    # xfdesktop keys the backdrop by its monitor's RandR output name (monitorVirtual-1 on
    # QEMU's VGA): the connected output's, else the first monitor with a backdrop.
    props = (xfconf("-l") or "").split()
    mons = sorted({p.rsplit("/", 2)[0] for p in props
                   if p.startswith("/backdrop/screen0/monitor") and "/workspace0/" in p})
    try:
        xr = subprocess.run(cmd + ["xrandr", "--query"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        xr = ""
    outputs = ["/backdrop/screen0/monitor" + ln.split()[0] for ln in xr.splitlines() if " connected" in ln]
    mon = next((m for m in outputs if m in mons), mons[0] if mons else "/backdrop/screen0/monitor0")
    base = mon + "/workspace0/"

    def q(p):
        return xfconf("-p", base + p)

    path = q("last-image")
    style = q("image-style")
    return {"path": path, "exists": bool(path) and os.path.isfile(path),
            "image_style": int(style) if style and style.lstrip("-").isdigit() else None,
            "color_style": q("color-style")}


def desktop_path(_a):
    p = os.path.join(home_of_session(), "Desktop")
    return {"desktop_path": p, "exists": os.path.isdir(p)}


# ---------------------------------------------------------------- a11y
def a11y_tree(a):
    from . import a11y
    aliases = {} if a.raw_app_names else APP_ALIASES
    try:
        return a11y.dump(scope=a.scope, max_nodes=a.max_nodes, max_bytes=a.max_tree_bytes,
                         timeout=a.timeout, app_aliases=aliases, p2p=not a.bus_only,
                         showing_only=a.showing, calc_probe=not a.read_every_cell)
    except a11y.A11yError as e:
        raise Fail(str(e))


def serve(a):
    from . import serve as server
    server.serve(a.socket)


def terminal_output(a):
    """The text of the focused terminal widget of the active window (VTE:
    gnome-terminal), right-stripped; null when no terminal is focused."""
    import xml.etree.ElementTree as ET  # noqa: N817
    from . import a11y
    try:
        # A focused terminal is showing: the rest of the tree is not needed.
        r = a11y.dump(scope="focused", max_nodes=a.max_nodes, max_bytes=a.max_tree_bytes,
                      timeout=a.timeout, p2p=not a.bus_only, showing_only=True)
    except a11y.A11yError as e:
        raise Fail(str(e))
    st = "{%s}" % a11y.NS["st"]
    root = ET.fromstring(r["AT"])
    terms = [e for e in root.iter("terminal") if e.get(st + "focused") == "true"]
    apps = [e.get("name") for e in root]
    return {"output": terms[0].text.rstrip() if len(terms) == 1 and terms[0].text else
            ("" if len(terms) == 1 else None), "application": apps[0] if apps else None}


# ---------------------------------------------------------------- chrome
def _chrome(fn, *args, **kw):
    from . import chrome
    try:
        return fn(*args, **kw)
    except chrome.ChromeError as e:
        raise Fail(str(e))


def chrome_tabs(a):
    from . import chrome
    return _chrome(chrome.tabs, a.port, a.timeout)


def chrome_active_tab(a):
    from . import chrome
    return _chrome(chrome.active_tab, a.port, a.content, a.timeout)


def _json_arg(text, what, kind):
    try:
        v = json.loads(text)
    except ValueError as e:
        raise Fail("%s: not JSON: %s" % (what, e))
    if not isinstance(v, kind):
        raise Fail("%s: expected a JSON %s" % (what, "object" if kind is dict else "array"))
    return v


def chrome_html_parse(a):
    from . import chrome_page
    return _chrome(chrome_page.html_parse, a.url, _json_arg(a.spec, "--spec", dict), a.port, a.timeout)


def chrome_appearance(a):
    from . import chrome_page
    return chrome_page.appearance(home_of_session(), a.port, a.timeout)


def chrome_color_scheme(_a):
    from . import chrome
    return {"mode": chrome.color_scheme(home_of_session())}


def chrome_page_info(a):
    from . import chrome_page
    return _chrome(chrome_page.page_info, a.url, a.port, a.timeout)


def chrome_pdf(a):
    from . import chrome_page
    return _chrome(chrome_page.pdf, a.url, a.port, a.timeout)


def chrome_website_info(a):
    from . import chrome_page
    return _chrome(chrome_page.website_info, a.url, _json_arg(a.infos, "--infos", list), a.port, a.timeout)


def chrome_prefs(a):
    from . import chrome
    return _chrome(chrome.prefs, home_of_session())


def chrome_bookmarks(a):
    from . import chrome
    return {"roots": _chrome(chrome.bookmarks, home_of_session())}


def chrome_history(a):
    from . import chrome
    return _chrome(chrome.history, home_of_session(), a.limit)


def chrome_cookies(a):
    from . import chrome
    return _chrome(chrome.cookies, home_of_session(), a.limit)


# ---------------------------------------------------------------- vlc, gimp, files
def vlc_status(a):
    """VLC's HTTP interface inside the guest (vlcrc: extraintf=http on
    127.0.0.1:8080, password "password"): status.xml as text."""
    import base64
    from .chrome import http_get
    path = "/requests/status.xml"
    auth = ("Authorization", "Basic " + base64.b64encode((":" + a.password).encode()).decode())
    try:
        status, body = http_get(a.port, path, a.timeout, headers=[auth], limit=4 << 20)
    except OSError as e:
        raise Fail("VLC's HTTP interface is not answering on 127.0.0.1:%d (%s)" % (a.port, e))
    if status != 200:
        raise Fail("VLC's HTTP interface answered %d" % status)
    return {"url": "http://127.0.0.1:%d%s" % (a.port, path), "status_code": status,
            "status_xml": body.decode("utf-8", "replace")}


def _read_text(path, limit=4 << 20):
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise Fail("%s does not exist" % path)
    except OSError as e:
        raise Fail("%s: %s" % (path, e.strerror))
    return {"path": path, "truncated": len(data) > limit,
            "content": data[:limit].decode("utf-8", "replace")}


def vlc_config(_a):
    return _read_text(os.path.join(home_of_session(), ".config/vlc/vlcrc"))


def gimp_config(a):
    if "/" in a.file or a.file in ("", ".", ".."):
        raise Fail("--file: a file name inside ~/.config/GIMP/2.10")
    return _read_text(os.path.join(home_of_session(), ".config/GIMP/2.10", a.file))


VIDEO_TYPES = ("3gp 3gpp 3gpp2 avi divx dv fli flv mp2t mp4 mp4v-es mpeg mpeg-system msvideo ogg "
               "quicktime vnd.divx vnd.mpegurl vnd.rn-realvideo webm x-anim x-avi x-flc x-fli "
               "x-flv x-m4v x-matroska x-mpeg x-mpeg-system x-mpeg2 x-ms-asf x-ms-asf-plugin "
               "x-ms-asx x-ms-wm x-ms-wmv x-ms-wmx x-ms-wvx x-msvideo x-nsv x-ogm x-ogm+ogg "
               "x-theora x-theora+ogg").split()


def default_video_player(_a):
    """The .desktop file xdg-mime names most often for the video types."""
    import collections
    import subprocess
    pw = session_user()
    env = session_env(pw)
    pre = ["runuser", "-u", pw.pw_name, "--", "env"] + ["%s=%s" % kv for kv in env.items()] \
        if os.geteuid() == 0 else []
    # one shell for all types: xdg-mime is a shell script, slow under TCG
    script = 'for t; do xdg-mime query default "video/$t"; echo; done'
    try:
        p = subprocess.run(pre + ["sh", "-c", script, "sh"] + VIDEO_TYPES, capture_output=True,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise Fail("xdg-mime took too long")
    apps = [l.strip() for l in p.stdout.splitlines() if l.strip()]
    if not apps:
        return {"default": "unknown", "counts": {}}
    c = collections.Counter(apps)
    return {"default": c.most_common(1)[0][0], "counts": dict(c)}


def platform(_a):
    import platform as pf
    return {"system": pf.system(), "machine": pf.machine(), "release": pf.release()}


# ---------------------------------------------------------------- main
def build_parser():
    ap = argparse.ArgumentParser(prog="envmgr-guest", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                    help="cap on the JSON answer (default %(default)s)")
    sub = ap.add_subparsers(dest="cmd", metavar="SUBCOMMAND")

    def cmd(name, fn, help_, session=False):
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(fn=fn, session=session)
        return p

    for name, fn, h in (("a11y-tree", a11y_tree, "the accessibility tree as OSWorld XML: {\"AT\": xml, ...}"),
                        ("terminal-output", terminal_output, "text of the focused terminal (gnome-terminal)")):
        p = cmd(name, fn, h, session=True)
        p.add_argument("--scope", choices=("all", "focused"), default="all" if name == "a11y-tree" else "focused",
                       help="every application, or only the active window")
        p.add_argument("--max-nodes", type=int, default=10000)
        p.add_argument("--max-tree-bytes", type=int, default=8 << 20)
        p.add_argument("--timeout", type=float, default=20.0, help="seconds; a partial tree after it")
        p.add_argument("--raw-app-names", action="store_true",
                       help="application names as the applications report them "
                            "(default: Chromium is shown as \"Google Chrome\")")
        p.add_argument("--bus-only", action="store_true",
                       help="every call through the accessibility bus, none over the "
                            "applications' peer-to-peer connections")
        p.add_argument("--showing", action="store_true",
                       help="only nodes that are showing: one that is not is left out with its "
                            "subtree (what OSWorld's agents keep; far fewer calls)")
        p.add_argument("--read-every-cell", action="store_true",
                       help="read each shown cell of a Calc sheet through AT-SPI instead of "
                            "deriving blank ones from the sheet's facts over UNO (slow; the "
                            "reference the derived cells are tested against)")
    p = cmd("serve", serve, "serve the session commands (a11y-tree, terminal-output) from this "
            "process's loaded modules, a child forked for each request (started with the apps "
            "image's desktop session; the envmgr-guest launcher asks it; runs until killed)")
    p.add_argument("--socket", help="its Unix socket (default: /run/user/UID/envmgr-guest.sock)")
    cmd("screen-size", screen_size, "{width, height} of the X screen")
    cmd("cursor-position", cursor_position, "{x, y} of the pointer")
    p = cmd("window-size", window_size, "{width, height} of the first window of a WM_CLASS, or null")
    p.add_argument("--class", dest="app_class_name", required=True)
    cmd("windows", windows, "client windows: id, class, title, geometry, active")
    cmd("wallpaper", wallpaper, "the desktop background image path (or colour style)")
    cmd("desktop-path", desktop_path, "the user's Desktop directory")
    cmd("platform", platform, "system, machine, kernel release")
    for name, fn, h in (("chrome-tabs", chrome_tabs, "open tabs over DevTools (127.0.0.1), active one marked"),
                        ("chrome-active-tab", chrome_active_tab, "the active tab: title, url [, content]")):
        p = cmd(name, fn, h)
        p.add_argument("--port", type=int, help="DevTools port (default: 1337, then 9222)")
        p.add_argument("--timeout", type=float, default=10.0)
        if name == "chrome-active-tab":
            p.add_argument("--content", action="store_true", help="include the page's HTML")
    for name, fn, h, args in (
            ("chrome-html-parse", chrome_html_parse, "OSWorld's active_tab_html_parse: DOM queries (--spec, the "
             "getter's spec) in the tab showing --url", ("url", "spec")),
            ("chrome-appearance", chrome_appearance, "the appearance mode chrome://settings/appearance shows "
             "(else Default/Preferences'): light, dark or system", ()),
            ("chrome-page-info", chrome_page_info, "title, final url and HTML of --url, loaded in a new tab",
             ("url",)),
            ("chrome-pdf", chrome_pdf, "--url loaded in a new tab of a fresh context, printed to PDF (base64)",
             ("url",)),
            ("chrome-website-info", chrome_website_info, "OSWorld's info_from_website: --infos (a JSON array of "
             "{action, selector, attribute}) read from --url in a new tab", ("url", "infos"))):
        p = cmd(name, fn, h)
        for arg in args:
            p.add_argument("--" + arg, required=True)
        p.add_argument("--port", type=int, help="DevTools port (default: 1337, then 9222)")
        p.add_argument("--timeout", type=float, default=30.0 if name == "chrome-html-parse" else
                       150.0 if name == "chrome-appearance" else 60.0,
                       help="seconds for each load or DevTools answer")
    cmd("chrome-prefs", chrome_prefs, "settings from Default/Preferences and Local State")
    cmd("chrome-color-scheme", chrome_color_scheme, "the appearance mode the profiles' Preferences record (newest "
        "first, read again for 5 s): light, dark or system")
    cmd("chrome-bookmarks", chrome_bookmarks, "Default/Bookmarks roots")
    for name, fn, h in (("chrome-history", chrome_history, "url, title, last_visit_time of Default/History"),
                        ("chrome-cookies", chrome_cookies, "every row of the cookies table")):
        p = cmd(name, fn, h)
        p.add_argument("--limit", type=int, default=100000)
    p = cmd("vlc-status", vlc_status, "status.xml of VLC's HTTP interface inside the guest")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--password", default="password")
    p.add_argument("--timeout", type=float, default=5.0)
    cmd("vlc-config", vlc_config, "the user's vlcrc")
    p = cmd("gimp-config", gimp_config, "a file of ~/.config/GIMP/2.10")
    p.add_argument("--file", required=True)
    cmd("default-video-player", default_video_player, "the .desktop xdg-mime names most for video/*")
    return ap


def emit(obj, max_bytes, code=0):
    text = json.dumps(obj, ensure_ascii=False)
    data = text.encode("utf-8")
    if len(data) > max_bytes:
        data = json.dumps({"error": "answer of %d bytes exceeds --max-bytes %d" % (len(data), max_bytes),
                           "truncated": True}).encode()
        code = 1
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()
    return code


def main(argv=None, served=False, parser=None):
    """served: a request to the session's server (serve.py), which runs as
    the session user and answers only the session commands, with the parser
    it built once (building one costs ~85 ms under TCG)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = parser or build_parser()
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        if not served or e.code == 0:
            raise
        return emit({"error": "envmgr-guest: bad arguments %s (see envmgr-guest --help)" % argv[:8]},
                    DEFAULT_MAX_BYTES, 2)
    if not getattr(a, "fn", None):
        ap.print_help(sys.stderr)
        return 2
    if served and not a.session:
        return emit({"error": "envmgr-guest server: %s is not a session command" % argv[:8]}, a.max_bytes, 2)
    if a.session:
        try:
            if served:
                enter_session(pwd.getpwuid(os.getuid()))
            else:
                become_session_user()
        except (Fail, KeyError) as e:
            return emit({"error": str(e)}, a.max_bytes, 1)
    t0 = time.monotonic()
    try:
        out = a.fn(a)
    except Fail as e:
        return emit({"error": str(e)}, a.max_bytes, 1)
    if isinstance(out, dict) and "elapsed_s" not in out:
        out["elapsed_s"] = round(time.monotonic() - t0, 3)
    if served and isinstance(out, dict):
        out["served"] = True
    return emit(out, a.max_bytes)

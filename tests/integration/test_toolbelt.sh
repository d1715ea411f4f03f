#!/bin/bash
# The guest toolbelt (vm-images/toolbelt) on the host, under Xvfb, cheap
# enough for CI (no guest):
#   * pyautogui against a real X client that records the events it gets
#     (tests/tools/xrecorder.py): clicks, buttons, wheel, drags, typing with
#     shift, characters the keymap lacks, hotkeys, FAILSAFE, PAUSE, and a
#     `python3 -c "import pyautogui; ..."` setup command;
#   * the accessibility dumper on a GTK 3 window over a private session bus
#     and AT-SPI bus: the same nodes, attributes and text as a one-call-per-
#     property pyatspi walk (tests/tools/a11y_reference.py), the caps, the
#     envmgr-guest CLI's JSON;
#   * the dumper's D-Bus client against a hostile peer (tests/tools/
#     dbusraw_check.py) and its X11 client (x11raw) on the root window;
#   * envmgr-guest's X getters (screen-size, window-size, windows);
#   * the Chrome getters against a headless Chromium (if installed): tabs over
#     DevTools, prefs, bookmarks, history from the profile files, and the page
#     getters (html-parse, page-info, pdf, website-info, appearance) on pages
#     served on loopback (tests/tools/chrome_page_check.py).
# Needs Debian's xvfb, python3-xlib, python3-pyatspi, gir1.2-gtk-3.0,
# at-spi2-core, dbus (scripts/apt-packages.txt).  Prints
# `toolbelt: N passed, N failed`.
. "$(dirname "$0")/lib.sh"
SUITE=toolbelt
PY=/usr/bin/python3            # Debian's python: python3-xlib, gi, pyatspi
TB=$ROOT/vm-images/toolbelt
TOOLS=$ROOT/tests/tools

for dep in Xvfb dbus-run-session gdbus; do
    command -v "$dep" >/dev/null || { bad "missing $dep (apt-get install xvfb dbus libglib2.0-bin)"; finish; exit; }
done
"$PY" -c 'import Xlib, pyatspi, gi; gi.require_version("Gtk", "3.0")' 2>/dev/null ||
    { bad "missing python3-xlib, python3-pyatspi or gir1.2-gtk-3.0"; finish; exit; }

# envmgr-guest from the checkout (the installed one runs python3 -I)
guest() { "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); from envmgr_guest.cli import main; sys.exit(main(sys.argv[2:]))' "$TB" "$@"; }
jq_py() { "$PY" -c "import json, sys; d = json.load(sys.stdin); $1"; }

# ---------------------------------------------------------------- X server
exec 8>"$T/xvfb.display"
Xvfb -displayfd 8 -screen 0 1280x800x24 -nolisten tcp -noreset >"$T/xvfb.log" 2>&1 &
XVFB=$!
wait_until 10 test -s "$T/xvfb.display" || { bad "Xvfb did not start: $(tail -3 "$T/xvfb.log")"; finish; exit; }
export DISPLAY=:$(head -n 1 "$T/xvfb.display")
stop_all() { kill "$XVFB" ${REC:-} 2>/dev/null; wait 2>/dev/null; }
trap 'stop_all; cleanup' EXIT

# ---------------------------------------------------------------- pyautogui
"$PY" "$TOOLS/xrecorder.py" 100 100 400 300 >"$T/rec.log" 2>"$T/rec.err" &
REC=$!
if wait_until 10 grep -q '"ready"' "$T/rec.log"; then
    LOOSE=1 tally pyautogui < <("$PY" "$TOOLS/toolbelt_check.py" "$TB" "$T/rec.log" 2>&1)
else
    bad "the recorder window did not map: $(cat "$T/rec.err")"
fi

# ---------------------------------------------------------------- X getters
out=$(guest screen-size)
check "screen-size is 1280x800" [ "$(jq_py 'print(d["width"], d["height"])' <<<"$out")" = "1280 800" ]
"$PY" -c 'from Xlib import display; d = display.Display(); d.screen().root.warp_pointer(123, 45); d.sync()'
out=$(guest cursor-position)
check "cursor-position is where the pointer was warped (123, 45): $out" \
    [ "$(jq_py 'print(d["x"], d["y"])' <<<"$out")" = "123 45" ]
out=$(DISPLAY=:4321 guest screen-size; echo "rc=$?")
check "screen-size with no display: a JSON error naming the display, exit 1" \
    grep -q '"error": "cannot open the X display.*rc=1' <<<"$(tr -d '\n' <<<"$out")"
# Without a window manager there is no _NET_CLIENT_LIST: window-size and windows answer null / []
out=$(guest window-size --class xrecorder)
check "window-size with no window manager: null" [ "$(jq_py 'print(d)' <<<"$out")" = None ]
check "windows answers a list" jq_py 'assert isinstance(d["windows"], list)' <<<"$(guest windows)"
out=$(guest gimp-config --file ../../etc/passwd; echo "rc=$?")
check "gimp-config refuses a path outside GIMP's directory" grep -q '"error".*rc=1' <<<"$(tr -d '\n' <<<"$out")"
kill "$REC" 2>/dev/null; REC=

# x11raw (the dumper's way to the active window's process, without python3-xlib): the root's
# _NET_ACTIVE_WINDOW set by hand to a window with a _NET_WM_PID, then cleared; a missing display.
out=$("$PY" - "$TB" <<'PYEOF' 2>&1
import sys
sys.path.insert(0, sys.argv[1])
from Xlib import X, Xatom, display
from envmgr_guest import x11raw
d = display.Display()
root = d.screen().root
w = root.create_window(0, 0, 10, 10, 0, X.CopyFromParent)
w.change_property(d.intern_atom("_NET_WM_PID"), Xatom.CARDINAL, 32, [424242])
root.change_property(d.intern_atom("_NET_ACTIVE_WINDOW"), Xatom.WINDOW, 32, [w.id])
d.sync()
got = x11raw.active_window_pid()
root.delete_property(d.intern_atom("_NET_ACTIVE_WINDOW"))
d.sync()
none = x11raw.active_window_pid()
missing = x11raw.active_window_pid(":4321")
print(got, none, missing)
PYEOF
)
check "x11raw: the active window's _NET_WM_PID; None without one or without a display ($out)" \
    [ "$out" = "424242 None None" ]
# desktop_icons: xfdesktop's grid rule on the apps image's work area (1920x1080 less the 27 px panel:
# cells at x 22, y 45, 159, 273, as measured on its screen), and the icons of a positions file in a
# fake home under a _NET_WORKAREA set by hand; a file laid out for another work area gives none.
out=$("$PY" - "$TB" "$T/iconhome" <<'PYEOF' 2>&1
import os, sys
sys.path.insert(0, sys.argv[1])
from Xlib import Xatom, display
from envmgr_guest import desktop_icons
g = desktop_icons.grid((0, 27, 1920, 1053), 48)
home = sys.argv[2]
os.makedirs(home + "/.config/xfce4/desktop")
os.makedirs(home + "/Desktop/My Projects")
rc = home + "/.config/xfce4/desktop/icons.screen0-1904x1037.rc"
with open(rc, "w") as f:
    f.write("[Trash]\nrow=0\ncol=0\n\n[/]\nrow=1\ncol=0\n\n[%s]\nrow=2\ncol=0\n\n[%s/Desktop/My Projects]\nrow=0\ncol=1\n\n"
            "[%s/Desktop/gone.txt]\nrow=1\ncol=1\n" % (home, home, home))
os.symlink(rc, home + "/.config/xfce4/desktop/icons.screen.latest.rc")
d = display.Display()
root = d.screen().root
root.change_property(d.intern_atom("_NET_WORKAREA"), Xatom.CARDINAL, 32, [0, 27, 1920, 1053])
d.sync()
got = desktop_icons.icons(home)
root.change_property(d.intern_atom("_NET_WORKAREA"), Xatom.CARDINAL, 32, [0, 0, 1280, 800])
d.sync()
other = desktop_icons.icons(home)
print(g[:2], [int(g[1] + r * g[4]) for r in range(3)], got, other)
PYEOF
)
check "desktop_icons: xfdesktop's cells, the icons of its positions file, none for another work area ($out)" \
    [ "$out" = "(22, 45) [45, 159, 273] [('Trash', 22, 45, 103, 103), ('My Projects', 126, 45, 103, 103), ('File System', 22, 159, 103, 103), ('Home', 22, 273, 103, 103)] []" ]
tally "dbusraw" < <(timeout 120 "$PY" "$TOOLS/dbusraw_check.py" "$TB" 2>&1)
tally "a11y extents" < <(timeout 60 "$PY" "$TOOLS/a11y_extents_check.py" "$TB" 2>&1)
tally "calc cells" < <(timeout 60 "$PY" "$TOOLS/calc_cells_check.py" "$TB" 2>&1)

# ---------------------------------------------------------------- accessibility
cat >"$T/a11y.sh" <<EOF
set -u
unset NO_AT_BRIDGE
gdbus call --session --dest org.a11y.Bus --object-path /org/a11y/bus \
    --method org.freedesktop.DBus.Properties.Set org.a11y.Status IsEnabled '<true>' >/dev/null || exit 3
"$PY" "$TOOLS/a11y_window.py" --seconds 60 >"$T/win.log" 2>&1 &
for i in \$(seq 50); do grep -q ready "$T/win.log" && break; sleep 0.2; done
sleep 1
"$PY" "$TOOLS/a11y_reference.py" a11y_window.py >"$T/ref.json"
t0=\$(date +%s.%N)
"$PY" "$TOOLS/a11y_reference.py" a11y_window.py >/dev/null
t1=\$(date +%s.%N)
echo "\$t0 \$t1" >"$T/ref.time"
# envmgr-guest from the checkout, as guest() above (functions do not reach this script)
guest() { "$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); from envmgr_guest.cli import main; sys.exit(main(sys.argv[2:]))' "$TB" "\$@"; }
guest a11y-tree >"$T/tree.json"
guest a11y-tree --max-nodes 4 >"$T/tree4.json"
guest a11y-tree --bus-only >"$T/tree-bus.json"
# the session's resident server (serve.py), through the envmgr-guest launcher, and attacked
guest serve --socket "$T/guest.sock" 2>"$T/serve.err" &
for i in \$(seq 50); do [ -S "$T/guest.sock" ] && break; sleep 0.2; done
export ENVMGR_GUEST_SOCKET="$T/guest.sock"
# a client that connects and sends nothing holds only its own child
sleep 8 | socat -t 10 - UNIX-CONNECT:"$T/guest.sock" >"$T/served-silent.json" &
sleep 0.5
t0=\$(date +%s.%N)
sh "$TB/bin/envmgr-guest" a11y-tree >"$T/tree-served.json"
echo "\$t0 \$(date +%s.%N)" >"$T/served.time"
sh "$TB/bin/envmgr-guest" --max-bytes 100 a11y-tree >"$T/served-cap.json"
sh "$TB/bin/envmgr-guest" a11y-tree --no-such-flag >"$T/served-badarg.json"
printf 'screen-size\0' | socat -t 10 - UNIX-CONNECT:"$T/guest.sock" >"$T/served-notsession.json"
printf 'a11y-tree' | socat -t 10 - UNIX-CONNECT:"$T/guest.sock" >"$T/served-unterminated.json"
printf 'a11y-tree\0\377\0' | socat -t 10 - UNIX-CONNECT:"$T/guest.sock" >"$T/served-notutf8.json"
head -c 70000 /dev/zero | tr '\0' x | socat -t 10 - UNIX-CONNECT:"$T/guest.sock" >"$T/served-big.json"
wait %3
pkill -f "serve --socket $T/guest.sock"   # the server, not only the job's subshell
kill %1
EOF
if dbus-run-session -- bash "$T/a11y.sh" >"$T/a11y.log" 2>&1; then
    ok "a11y: session bus, AT-SPI bus and a GTK window"
else
    bad "a11y session: $(grep -v dbus-daemon "$T/a11y.log" | tail -5)"
fi
cmp_out=$("$PY" - "$T/tree.json" "$T/ref.json" <<'EOF'
import json, sys
import xml.etree.ElementTree as ET
tree = json.load(open(sys.argv[1]))
ref = [[p, [tuple(x) for x in a], t] for p, a, t in json.load(open(sys.argv[2]))]
root = ET.fromstring(tree["AT"])
assert root.tag == "desktop-frame", root.tag
ours = []
def walk(e, path):
    p = path + [e.tag]
    ours.append([ "/".join(p), sorted(e.attrib.items()), e.text or ""])
    for c in e:
        walk(c, p)
for app in root:
    if app.get("name") == "a11y_window.py":
        walk(app, ["desktop-frame"])
if ours != ref:
    for a, b in zip(ours, ref):
        if a != b:
            print("first difference:\n ours %r\n ref  %r" % (a, b)); break
    else:
        print("node count: ours %d, reference %d" % (len(ours), len(ref)))
    sys.exit(1)
print("%d nodes identical; dump %.3f s" % (len(ours), tree["elapsed_s"]))
EOF
)
check "a11y-tree equals the pyatspi reference walk ($cmp_out)" [ $? -eq 0 ]
check "served a11y-tree (launcher -> resident server): the same tree as run directly, in $(awk '{printf "%.2f", $2 - $1}' "$T/served.time") s" \
    "$PY" -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:]); assert a.get("served") is True and "served" not in b, a.keys(); assert a["AT"] == b["AT"], "trees differ"' \
    "$T/tree-served.json" "$T/tree.json"
served_err() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert sys.argv[2] in d["error"], d' "$@"; }
check "served: --max-bytes caps the answer" served_err "$T/served-cap.json" "exceeds --max-bytes 100"
check "served: bad arguments are a JSON error" served_err "$T/served-badarg.json" "bad arguments"
check "served: only the session commands" served_err "$T/served-notsession.json" "is not a session command"
check "served: arguments must be NUL-terminated" served_err "$T/served-unterminated.json" "not NUL-terminated"
check "served: arguments must be UTF-8" served_err "$T/served-notutf8.json" "not UTF-8"
check "served: arguments over 64 KiB" served_err "$T/served-big.json" "over 65536 bytes"
check "served: a silent client times out in its own child (others were served meanwhile)" \
    served_err "$T/served-silent.json" "reading the arguments"
check "a11y-tree: Entry text escaped and read back" \
    jq_py 'import xml.etree.ElementTree as E; r = E.fromstring(d["AT"]); assert any(e.text == "hello <a11y> & \"world\"" for e in r.iter("text")), "no entry text"' <"$T/tree.json"
check "a11y-tree: namespaces as OSWorld's (st, attr, cp, doc, docattr, txt, val, act)" \
    jq_py 'x = d["AT"][:2000]; assert all("xmlns:%s=\"https://accessibility.ubuntu.example.org/ns/%s\"" % (p, u) in x for p, u in (("st","state"),("attr","attributes"),("cp","component"),("doc","document"),("docattr","document/attributes"),("txt","text"),("val","value"),("act","action"))), x[:300]' <"$T/tree.json"
check "a11y-tree: cell names of the GTK list" \
    jq_py 'import xml.etree.ElementTree as E; r = E.fromstring(d["AT"]); assert [e.get("name") for e in r.iter("table-cell")] == ["a1","b1","a2","b2","a3","b3"]' <"$T/tree.json"
check "a11y-tree: GTK's application read over its own peer-to-peer connection" \
    jq_py 'assert d["direct_connections"] >= 1, d["direct_connections"]' <"$T/tree.json"
check "a11y-tree --bus-only: every call through the bus, the same XML" \
    "$PY" -c 'import json, sys; a, b = (json.load(open(f)) for f in sys.argv[1:]); assert b["direct_connections"] == 0 and a["AT"] == b["AT"]' "$T/tree.json" "$T/tree-bus.json"
check "a11y-tree --max-nodes 4: 4 nodes, truncated, well-formed" \
    jq_py 'import xml.etree.ElementTree as E; r = E.fromstring(d["AT"]); assert d["nodes"] == 4 and "nodes" in d["truncated"] and len(list(r.iter())) == 5, (d["nodes"], d["truncated"])' <"$T/tree4.json"
if [ -s "$T/ref.time" ]; then
    read -r t0 t1 <"$T/ref.time"
    echo "     (pyatspi walk $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}') s, dumper $(jq_py 'print(d["elapsed_s"])' <"$T/tree.json") s, $(jq_py 'print(d["nodes"], "nodes,", d["calls"], "calls")' <"$T/tree.json"))"
fi
out=$(DBUS_SESSION_BUS_ADDRESS=unix:path=$T/nobus guest a11y-tree; echo "rc=$?")
check "a11y-tree without an accessibility bus: a JSON error, exit 1" grep -q '"error".*rc=1' <<<"$(tr -d '\n' <<<"$out")"

# ---------------------------------------------------------------- chrome
CHROME=$(command -v chromium || true)
if [ -z "$CHROME" ]; then
    ok "chrome getters skipped: no chromium on this host"
else
    PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    HOMEDIR=$T/home
    mkdir -p "$HOMEDIR/.config"
    "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --password-store=basic \
        --user-data-dir="$HOMEDIR/.config/google-chrome" --remote-debugging-port="$PORT" \
        'data:text/html,<title>Tab One</title>one' >"$T/chrome.log" 2>&1 &
    CHR=$!
    if wait_until 60 curl -sf "http://127.0.0.1:$PORT/json/version"; then
        curl -sf -X PUT "http://127.0.0.1:$PORT/json/new?data:text/html,<title>Tab%20Two</title>two" >/dev/null
        sleep 2
        out=$(guest chrome-tabs --port "$PORT")
        check "chrome-tabs: both tabs with titles over DevTools" \
            jq_py 'assert sorted(t["title"] for t in d["tabs"]) == ["Tab One", "Tab Two"], d' <<<"$out"
        out=$(guest chrome-active-tab --port "$PORT" --content)
        check "chrome-active-tab --content: a page with its HTML" \
            jq_py 'a = d["active"]; assert a and "<title>Tab" in a["content"], d' <<<"$out"
        out=$(guest chrome-tabs --port 9; echo "rc=$?")
        check "chrome-tabs with nothing listening: JSON error, exit 1" grep -q '"error".*rc=1' <<<"$(tr -d '\n' <<<"$out")"
        # the page getters (chrome_page.py) on pages served on loopback
        tally chrome-pages < <("$PY" "$TOOLS/chrome_page_check.py" "$TB" "$PORT" "$HOMEDIR" 2>&1)
    else
        bad "headless chromium did not open DevTools: $(tail -3 "$T/chrome.log")"
    fi
    kill "$CHR" 2>/dev/null
    wait "$CHR" 2>/dev/null
    export ENVMGR_GUEST_HOME=$HOMEDIR
    check "chrome-prefs from the profile files" \
        jq_py 'assert d["default_search_engine"] and d["enable_do_not_track"] is False and d["safe_browsing"] is False, d' <<<"$(guest chrome-prefs)"
    check "chrome-history: the visited pages" \
        jq_py 'assert d["columns"] == ["url", "title", "last_visit_time"] and isinstance(d["rows"], list), d' <<<"$(guest chrome-history)"
    check "chrome-color-scheme from the profile's Preferences" \
        jq_py 'assert d["mode"] in ("light", "dark", "system"), d' <<<"$(guest chrome-color-scheme)"
    check "chrome-bookmarks answers the roots" jq_py 'assert isinstance(d["roots"], dict), d' <<<"$(guest chrome-bookmarks)"
    unset ENVMGR_GUEST_HOME
fi

finish

#!/usr/bin/env bash
# Watching envs: the live page of `envmgr serve` (noVNC over the server's
# websocket, view-only by default) in a real headless Chromium, its auth, and
# `envmgr view` (a view-only VNC endpoint any viewer opens), spoken to by a
# minimal RFB client. Prints `live_view: N passed, N failed`.
SUITE=live_view
source "$(dirname "$0")/lib.sh"
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ left in the source tree

SERVE_PID= VIEW_PID=
stop_pid() { # stop_pid PID SIGNAL: 0 when it exited 0 within 30 s
    local pid=$1 sig=${2:-TERM} rc=0
    [ -n "$pid" ] || return 0
    kill -"$sig" "$pid" 2>/dev/null
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; rc=1; fi
    wait "$pid" 2>/dev/null || rc=1
    return $rc
}
trap 'stop_pid "$VIEW_PID" KILL; stop_pid "$SERVE_PID" KILL; cleanup' EXIT

"$ENVMGR" serve --listen 127.0.0.1:0 --out "$T/out" --token-file "$T/token" --accel tcg >"$T/serve.out" 2>"$T/serve.err" &
SERVE_PID=$!
wait_until 20 grep -q 'token file' "$T/serve.out"
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
TOKEN=$(cat "$T/token" 2>/dev/null)
[ -n "$URL" ] && ok "serve started ($URL)" || { bad "serve did not start: $(cat "$T/serve.err")"; finish; exit 1; }
H="Authorization: Bearer $TOKEN"
code() { curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' "$@"; }

ID=$(curl -s -X POST -H "$H" -d '{}' "$URL/v1/envs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "an env to watch ($ID)" test -n "$ID"
# the guest keeps running between steps here, so "input reached nothing" below means the relay dropped it
check "reset with a task that lets the guest run between steps" test "$(code -X POST -H "$H" \
    -d '{"task": {"id": "live", "instruction": "watch", "evaluator": {"func": "infeasible"}, "pause_while_thinking": false}}' \
    "$URL/v1/envs/$ID/reset?screenshot=none")" = 200

# --- the page and its auth --------------------------------------------------------
check "live page without a token: 401" test "$(code "$URL/v1/envs/$ID/live")" = 401
check "live page with a wrong token: 401" test "$(code "$URL/v1/envs/$ID/live?token=0123456789abcdef0123")" = 401
check "live page for an unknown env: 404" test "$(code -H "$H" "$URL/v1/envs/nosuch/live")" = 404
check "live page with ?token=: 200 HTML" bash -c "[ \$(curl -s -o '$T/body' -D '$T/hdr' -w '%{http_code}' '$URL/v1/envs/$ID/live?token=$TOKEN') = 200 ] && grep -qi 'content-type: text/html' '$T/hdr'"
check "the page says view only and loads noVNC" bash -c "grep -q 'view only' '$T/body' && grep -q '/v1/novnc/core/rfb.js' '$T/body'"
check "it sets an HttpOnly SameSite=Strict cookie for this env" \
    grep -qi "^Set-Cookie: envmgr_live_$ID=.*Max-Age=3600; HttpOnly; SameSite=Strict" "$T/hdr"
LIVE=$(sed -n "s/^Set-Cookie: envmgr_live_$ID=\([^;]*\);.*/\1/Ip" "$T/hdr" | tr -d '\r')
check "the cookie holds a live-view token, not the API token" bash -c "[ -n '$LIVE' ] && [ '$LIVE' != '$TOKEN' ]"
check "noVNC's files need the token: 401" test "$(code "$URL/v1/novnc/core/rfb.js")" = 401
check "noVNC's files with the cookie: 200 JavaScript" bash -c "[ \$(curl -s -o /dev/null -D '$T/hdr2' -w '%{http_code}' -b 'envmgr_live_$ID=$LIVE' '$URL/v1/novnc/core/rfb.js') = 200 ] && grep -qi 'content-type: text/javascript' '$T/hdr2'"
check "the cookie opens no API endpoint (401)" test "$(code -b "envmgr_live_$ID=$LIVE" "$URL/v1/envs")" = 401
check "the live token is no bearer token (401)" test "$(code -H "Authorization: Bearer $LIVE" "$URL/v1/envs")" = 401
check "the old master-token cookie opens nothing (401)" test "$(code -b "envmgr_token=$TOKEN" "$URL/v1/novnc/core/rfb.js")" = 401
check "a view token does not open control mode (401)" \
    test "$(code -b "envmgr_live_$ID=$LIVE" "$URL/v1/envs/$ID/live?control=1")" = 401
mint() { curl -s -H "$H" -d "$1" "$URL/v1/envs/$ID/live-token"; }
SHORT=$(mint '{"ttl_s": 1}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
check "a minted live token opens the page" test "$(code "$URL/v1/envs/$ID/live?token=$SHORT")" = 200
sleep 2.2
check "and is refused once expired (401)" test "$(code "$URL/v1/envs/$ID/live?token=$SHORT")" = 401
check "minting needs the API token (401)" test "$(code -d '{}' "$URL/v1/envs/$ID/live-token")" = 401
check "a bad ttl_s is a 400 naming it" bash -c "curl -s -H '$H' -d '{\"ttl_s\": 0}' '$URL/v1/envs/$ID/live-token' | grep -q ttl_s"
check "no path out of noVNC's folder (404)" test "$(code -H "$H" --path-as-is "$URL/v1/novnc/../../../etc/passwd")" = 404
WSH=(-H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
check "websocket without a token: 401" test "$(code --max-time 5 "${WSH[@]}" "$URL/v1/envs/$ID/live/ws")" = 401
check "websocket endpoint without an upgrade: 426" test "$(code --max-time 5 -H "$H" "$URL/v1/envs/$ID/live/ws")" = 426
check "websocket from another origin: 403" test "$(code --max-time 5 -H "$H" -H 'Origin: http://evil.example' "${WSH[@]}" "$URL/v1/envs/$ID/live/ws")" = 403

# --- a real browser ------------------------------------------------------------------------
CHECK="$ROOT/clients/python/tests/live_view_check.py"
out=$(TMPDIR=$T timeout 120 python3 "$CHECK" "$URL/v1/envs/$ID/live?token=$TOKEN" --timeout 60 --screenshot "$T/page.png"); rc=$?
echo "     chromium: $out"
check "Chromium: noVNC connects and draws a non-blank 1280x800 canvas" \
    bash -c "[ $rc = 0 ] && echo '$out' | grep -q '\"width\": 1280'"
read -r _ _ colours < <("$PNGTOOL" info "$T/page.png" 2>/dev/null)
check "the page's screenshot shows the desktop ($colours colours)" test "${colours:-0}" -gt 20
check "no script errors on the page" bash -c "echo '$out' | grep -q '\"console\": \[\]'"

# view-only is enforced by the server, not the page: a page that turns noVNC's
# viewOnly off, right-clicks the desktop and presses ctrl+alt+t changes nothing ...
curl -s -H "$H" "$URL/v1/envs/$ID/screenshot" -o "$T/before.png"
out=$(TMPDIR=$T timeout 120 python3 "$CHECK" "$URL/v1/envs/$ID/live?token=$TOKEN" --timeout 60 --input)
sleep 6 # a terminal takes a few seconds to appear under TCG
curl -s -H "$H" "$URL/v1/envs/$ID/screenshot" -o "$T/after.png"
d_view=$("$PNGTOOL" diff "$T/before.png" "$T/after.png")
check "view-only: forced pointer and key input reached nothing (diff $d_view)" \
    bash -c "echo '$out' | grep -q '\"input_sent\": true' && awk 'BEGIN {exit !($d_view < 0.002)}'"
# ... while control mode (?control=1) passes the same input on: a terminal opens
out=$(TMPDIR=$T timeout 120 python3 "$CHECK" "$URL/v1/envs/$ID/live?token=$TOKEN&control=1" --timeout 60 --input)
terminal_opened() {
    curl -s -H "$H" "$URL/v1/envs/$ID/screenshot" -o "$T/after-control.png"
    d_ctl=$("$PNGTOOL" diff "$T/after.png" "$T/after-control.png")
    awk "BEGIN {exit !($d_ctl > 0.02)}"
}
check "control mode: the same input reaches the guest (a terminal opens)" wait_until 90 terminal_opened
check "the env still steps after being watched: 200" \
    test "$(code -X POST -H "$H" -d '{"action":{"action_type":"PRESS","key":"escape"}}' "$URL/v1/envs/$ID/step?screenshot=none")" = 200
check "metrics count the live views" bash -c "curl -s -H '$H' '$URL/v1/metrics' | awk '\$1 == \"envmgr_live_views_total\" && \$2 >= 3 {f=1} END {exit !f}'"

# --- envmgr view: a view-only VNC endpoint for any viewer --------------------------------------
"$ENVMGR" view "$ID" --socket "$T/view.sock" >"$T/view.out" 2>"$T/view.err" &
VIEW_PID=$!
check "envmgr view prints how to watch" wait_until 20 grep -q 'view-only VNC at' "$T/view.out"
sed 's/^/     /' "$T/view.out"
check "the view socket is 0600" test "$(stat -c %a "$T/view.sock" 2>/dev/null)" = 600
rfb_client() { # rfb_client unix:PATH|tcp:HOST:PORT [PASSWORD [VERSION]]: handshake asking for EXCLUSIVE access, send input, get frames
    /usr/bin/python3 - "$@" <<'PY'
import socket, struct, sys
kind, addr = sys.argv[1].split(":", 1)
password = sys.argv[2].encode() if len(sys.argv) > 2 and sys.argv[2] else None
version = sys.argv[3].encode().decode("unicode_escape").encode() if len(sys.argv) > 3 else b"RFB 003.008\n"
if kind == "unix":
    s = socket.socket(socket.AF_UNIX); s.connect(addr)
else:
    h, p = addr.rsplit(":", 1); s = socket.create_connection((h, int(p)))
s.settimeout(20)
def rd(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c: raise SystemExit("closed after %d of %d bytes" % (len(b), n))
        b += c
    return b
assert rd(12).startswith(b"RFB 003.")
s.sendall(version)
n = rd(1)[0]; types = rd(n)
if 2 in types:  # VNC authentication, computed here independently (DES via python3-cryptography)
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    s.sendall(b"\x02"); challenge = rd(16)
    key = bytes(int("{:08b}".format(c)[::-1], 2) for c in (password or b"").ljust(8, b"\0")[:8])
    enc = Cipher(algorithms.TripleDES(key), modes.ECB()).encryptor()
    s.sendall(enc.update(challenge) + enc.finalize())
    result = rd(4)
    if result != b"\0\0\0\0":
        raise SystemExit("refused: " + rd(struct.unpack(">I", rd(4))[0]).decode())
else:
    assert 1 in types, types
    s.sendall(b"\x01"); assert rd(4) == b"\0\0\0\0"
s.sendall(b"\x00")                                    # exclusive: would disconnect every other client
w, h = struct.unpack(">HH", rd(4)); rd(16); rd(struct.unpack(">I", rd(4))[0])
s.sendall(b"\x02\x00\x00\x01\x00\x00\x00\x00")         # SetEncodings: Raw
s.sendall(b"\x05\x04" + struct.pack(">HH", 700, 500))  # right button down: dropped
s.sendall(b"\x04\x01\x00\x00\x00\x00\x00\x61")          # key 'a' down: dropped
s.sendall(b"\x03\x00" + struct.pack(">HHHH", 0, 0, w, h))
t = rd(1)[0]
print("%dx%d first-message=%d" % (w, h, t))
PY
}
out=$(timeout 60 bash -c "$(declare -f rfb_client); rfb_client unix:$T/view.sock" 2>&1)
check "a VNC client gets the 1280x800 screen through the view socket ($out)" test "$out" = "1280x800 first-message=0"
out=$(timeout 60 bash -c "$(declare -f rfb_client); rfb_client unix:$T/view.sock '' 'RFB 003.  7\\n'" 2>&1)
check "a version string a server could read as 3.7 while a filter reads 3.3 is refused ($out)" \
    bash -c "echo '$out' | grep -q 'closed after'"
check "its exclusive request did not cut off the env's own session (a step: 200)" \
    test "$(code -X POST -H "$H" -d '{"action":{"action_type":"MOVE_TO","x":20,"y":20}}' "$URL/v1/envs/$ID/step?screenshot=none")" = 200
check "SIGINT stops envmgr view (exit 0)" stop_pid "$VIEW_PID" INT
VIEW_PID=
check "the view socket is removed" test ! -e "$T/view.sock"
"$ENVMGR" view "$ID" >"$T/view.out" 2>"$T/view.err" &
VIEW_PID=$!
wait_until 20 grep -q 'view-only VNC at' "$T/view.out"
ADDR=$(sed -n 's/.*view-only VNC at //p' "$T/view.out")
check "by default envmgr view listens on a loopback port ($ADDR)" bash -c "[[ '$ADDR' == 127.0.0.1:* ]]"
VIEWPW=$(sed -n 's/^ *password: \([^ ]*\).*/\1/p' "$T/view.out")
check "envmgr view over TCP prints a password" test ${#VIEWPW} = 8
out=$(timeout 60 bash -c "$(declare -f rfb_client); rfb_client tcp:$ADDR '$VIEWPW'" 2>&1)
check "a VNC client with the password gets the screen over TCP" test "$out" = "1280x800 first-message=0"
out=$(timeout 60 bash -c "$(declare -f rfb_client); rfb_client tcp:$ADDR wrongpw1" 2>&1)
check "a wrong password is refused ($out)" bash -c "echo '$out' | grep -q 'refused: authentication failed'"
out=$(timeout 60 bash -c "$(declare -f rfb_client); rfb_client tcp:$ADDR ''" 2>&1)
check "no password is refused" bash -c "echo '$out' | grep -q 'refused'"
stop_pid "$VIEW_PID" TERM; VIEW_PID=
"$ENVMGR" view "$ID" --listen 0.0.0.0:0 >/dev/null 2>&1
check "envmgr view refuses a non-loopback address (exit 2)" test $? = 2
"$ENVMGR" view nosuch >/dev/null 2>&1
check "envmgr view of an unknown env: exit 2" test $? = 2

check "SIGTERM: the server exits 0" stop_pid "$SERVE_PID" TERM
SERVE_PID=
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
check "no env directory left" test -z "$(ls "$ENVMGR_RUN_DIR" 2>/dev/null)"
finish

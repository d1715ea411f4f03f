#!/usr/bin/env bash
# `envmgr image import --guest osworld` (issue 41): a disk with its own bootloader whose guest runs a
# stand-in of OSWorld's server on port 5000 (tests/tools/boot-disk.sh --osworld) is imported; its golden
# state is made once GET /screenshot answers 200 and the screen settles; QEMU runs in a network namespace
# of its own and the server is reached only through it (no port on the host: the host's and another
# namespace's 127.0.0.1:5000 refuse, the guest reaches nothing outside); `envmgr exec` runs commands as the
# server runs them; a real OSWorld-Verified task (tests/data/osworld-image) scores 1.0 with its solution
# typed on the console and 0 with the null agent, its setup's and postconfig's trace lines showing the
# server's answers; a hostile server's oversize and slow replies are capped and time out with one line; a
# disk whose guest never answers /screenshot is refused with one line and nothing kept.
# The whole test runs in a network namespace of its own with only loopback (it re-executes itself under
# `unshare --net`), envmgr included: its probes and the relays' HTTP server touch nothing of the host's
# network, and "envmgr's namespace" below is that one (QEMU's is yet another, its own).
if [ -z "${ENVMGR_OSW_NS:-}" ] && [ "$(id -u)" = 0 ]; then
    unshare --net true 2>/dev/null || { echo "FAIL this test needs network namespaces (unshare --net)"; echo "test_import_osworld: 0 passed, 1 failed"; exit 1; }
    exec unshare --net -- env ENVMGR_OSW_NS=1 bash "$0" "$@"
fi
[ -z "${ENVMGR_OSW_NS:-}" ] || ip link set lo up || { echo "FAIL ip link set lo up"; exit 1; }
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || { echo "test_import_osworld: skipped: guest osworld needs root (a network namespace for QEMU)"; finish; exit; }
BOOT=$("$ROOT/tests/tools/boot-disk.sh") && OSW=$("$ROOT/tests/tools/boot-disk.sh" --osworld) ||
    { bad "the boot disks (tests/tools/boot-disk.sh --osworld: the desktop image, Debian's python3.11)"; finish; exit; }
import_scratch
D=$ROOT/tests/data/osworld-image
TASK=$D/5ced85fc-fa1a-4217-95fd-0fb530545ce2.json
MIRROR="https://huggingface.co/datasets/xlangai/ubuntu_osworld_file_cache/resolve/main/=$D/assets"
# http_code URL: what curl gets from this network namespace (000: nothing answered)
http_code() { curl -s -m 3 -o /dev/null -w '%{http_code}' "$1"; }

# A disk whose guest never answers /screenshot, imported as osworld: one line, exit 2, nothing kept.
import_not_kept "a disk without OSWorld's server imported as osworld: /screenshot not answered within 30 s" \
    "noserver: not kept: .*OSWorld's server did not answer GET /screenshot with 200 within 30 s" \
    noserver "$BOOT" --guest osworld --screen 720x400 --memory 256 --ready-timeout 30 --accel tcg

# The import.
import_ok "import the stand-in's disk (--guest osworld)" osw osworld "$OSW" --screen 720x400 --memory 256 \
    --ready-timeout 240 --accel tcg

E=osw-$$
check "up --image osw" "$ENVMGR" up --name $E --image osw --accel tcg
QPID=$(cat "$ENVMGR_RUN_DIR/$E/qemu.pid" 2>/dev/null)
exec_basics $E "POST /execute"
check "exec runs where the server runs (its working directory, /home/user)" test "$("$ENVMGR" exec $E -- sh -c pwd)" = /home/user
out=$("$ENVMGR" exec $E --timeout 2 -- sh -c 'sleep 30' 2>&1); rc=$?
check "exec --timeout 2 of a 30 s command: ends with one line, exit non-zero" bash -c \
    "[ $rc != 0 ] && printf '%s' \"\$1\" | grep -q 'timed out after 2 s'" _ "$out"
out=$(printf 'x' | "$ENVMGR" exec $E --stdin -- cat 2>&1); rc=$?
check "exec --stdin: refused with one line (the server gives a command no stdin)" bash -c \
    "[ $rc != 0 ] && printf '%s' \"\$1\" | grep -q 'no stdin'" _ "$out"
lat=()
for i in 1 2 3 4 5 6 7 8 9; do t0=$(date +%s.%N); "$ENVMGR" exec $E -- true; lat+=("$(ms_since $t0)"); done
echo "   exec true: p50 $(printf '%s\n' "${lat[@]}" | sort -n | sed -n 5p) ms over 9 (wall, CLI included)"

# No port another process can reach: QEMU is in a namespace of its own, listening only there.
check "QEMU runs in a network namespace of its own" bash -c \
    "[ -n '$QPID' ] && [ \"\$(readlink /proc/$QPID/ns/net)\" != \"\$(readlink /proc/self/ns/net)\" ]"
check "... where 127.0.0.1:5000, 9222 and 8080 listen (slirp's forwards)" bash -c \
    "s=\$(nsenter -t $QPID -n ss -Htln); for p in 5000 9222 8080; do printf '%s' \"\$s\" | grep -q \"127.0.0.1:\$p \" || exit 1; done"
check "... and QEMU listens on no TCP port of envmgr's namespace" bash -c "! ss -Htlnp | grep -q 'pid=$QPID,'"
check "envmgr's namespace's 127.0.0.1:5000, 9222, 8080 refuse (nothing listens there)" bash -c \
    "for p in 5000 9222 8080; do [ \"\$(curl -s -m 3 -o /dev/null -w %{http_code} http://127.0.0.1:\$p/)\" = 000 ] || exit 1; done"
check "another namespace's 127.0.0.1:5000 refuses (unshare -n)" bash -c \
    "[ \"\$(unshare -n sh -c 'ip link set lo up; curl -s -m 3 -o /dev/null -w %{http_code} http://127.0.0.1:5000/screenshot')\" = 000 ]"
check "inside QEMU's namespace the server answers (what envmgr reaches)" bash -c \
    "[ \"\$(nsenter -t $QPID -n curl -s -m 5 -o /dev/null -w %{http_code} http://127.0.0.1:5000/screenshot)\" = 200 ]"
out=$("$ENVMGR" exec $E -- python3 -c "
import socket, sys
for host, port in (('10.0.2.2', 5000), ('10.0.2.2', 22), ('10.0.2.3', 53), ('1.1.1.1', 80)):
    try:
        socket.create_connection((host, port), 3).close(); print('reached', host, port); sys.exit(1)
    except OSError:
        pass
print('none')" 2>&1)
check "the guest reaches nothing outside (the host's 10.0.2.2, slirp's DNS, the internet)" test "$out" = none

reset_clock $E "date through /execute"

# A saved state of it: saved, reset away, restored (a new QEMU in a new namespace, the server reached again).
"$ENVMGR" exec $E -- sh -c 'echo saved-marker >/home/user/m.txt' >/dev/null
check "state save" bash -c "'$ENVMGR' state save $E osw-s1 >/dev/null"
"$ENVMGR" reset $E >/dev/null
check "... after a reset the file is gone" bash -c "! '$ENVMGR' exec $E -- cat /home/user/m.txt >/dev/null 2>&1"
check "... state restore brings it back through the new QEMU's namespace" bash -c \
    "'$ENVMGR' state restore $E osw-s1 >/dev/null && [ \"\$('$ENVMGR' exec $E -- cat /home/user/m.txt)\" = saved-marker ]"
"$ENVMGR" reset $E >/dev/null

# The real OSWorld-Verified task: setup (execute, activate_window), the solution typed on the guest's
# console, postconfig (download through the asset mirror, execute), the vm_command_line getter.
cat >"$T/solution.json" <<'J'
{"id": "5ced85fc-fa1a-4217-95fd-0fb530545ce2", "instruction": "the solution of tests/data/osworld-image's task",
 "solution": [{"action_type": "TYPING", "text": "printf '1<br/>\\n2<br/>\\n3<br/>\\n' >output.txt\n"},
              {"action_type": "WAIT", "seconds": 1}]}
J
score() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['score'])" "$1/result.json" 2>/dev/null; }
out=$("$ENVMGR" run "$TASK" --env $E --offline --asset-mirror "$MIRROR" \
    --agent "$ROOT/tasks/agents/scripted --tasks $T/solution.json" --out "$T/solved" 2>&1); rc=$?
check "OSWorld-Verified 5ced85fc with its solution (scripted, typed on the console): exit 0, score 1.0" \
    test "$rc $(score "$T/solved")" = "0 1.0"
[ "$(score "$T/solved")" = 1.0 ] || printf '%s\n' "$out" | tail -5
check "its trace verifies" bash -c "'$ENVMGR' trace verify '$T/solved/trace' >/dev/null"
tr=$T/solved/trace/trace.jsonl
check "setup's trace: execute's answer (the stand-in has no pyautogui: exit 1, tolerated)" bash -c \
    "grep '\"type\":\"setup\",\"index\":0' '$tr' | grep -q '\"exit_code\":1.*No module named'"
check "setup's trace: activate_window went to the server, its 404 tolerated as OSWorld does" bash -c \
    "grep '\"type\":\"setup\",\"index\":1' '$tr' | grep -q '\"server\":\"/setup/activate_window\",\"status\":404,\"reply\":\"Window Terminal not found'"
check "postconfig's trace: eval.sh from the mirror uploaded, chmod ran (exit 0)" bash -c \
    "grep -q '\"type\":\"postconfig\",\"index\":0.*\"path\":\"eval.sh\"' '$tr' && grep '\"type\":\"postconfig\",\"index\":1' '$tr' | grep -q '\"exit_code\":0'"
out=$("$ENVMGR" run "$TASK" --image osw --accel tcg --offline --asset-mirror "$MIRROR" --agent "$ROOT/tasks/agents/null" \
    --out "$T/null" 2>&1); rc=$?
check "the task with the null agent (a temporary env): score 0" test "$(score "$T/null")" = 0.0
[ "$(score "$T/null")" = 0.0 ] || printf '%s\n' "$out" | tail -5
check "the setup cache works on the imported image: the null run's setup was saved as a state, or came from one" \
    grep -qE '"setup_cache":\{"key":"[0-9a-f]+","state":"[^"]+","used":"(ran|restored)"' "$T/null/trace/trace.jsonl"

# What needs envmgr's toolbelt is refused at plan time, naming the step, before any VM starts.
cat >"$T/tabs.json" <<'J'
{"id": "t", "instruction": "x", "config": [{"type": "activate_window", "parameters": {"window_name": "x"}},
 {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.com"]}}], "evaluator": {"func": "infeasible"}}
J
out=$("$ENVMGR" run "$T/tabs.json" --image osw --agent "$ROOT/tasks/agents/null" --out "$T/tabs" 2>&1); rc=$?
check "a toolbelt step on an osworld image: exit 2, one line naming config[1] chrome_open_tabs" bash -c \
    "[ $rc = 2 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q \"config\[1\]: chrome_open_tabs needs envmgr's toolbelt in the guest.*image .osw. has guest osworld\"" _ "$out"
[ $rc = 2 ] || printf '%s\n' "$out"

# The egress proxy's relays (guestfwd cmd: children of QEMU, so in its namespace) reach the proxy over
# its unix socket: an allowlisted host service answers the guest.
mkdir -p "$T/www" && echo hello-from-host >"$T/www/index.html"
HTTP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" $HTTP >/dev/null 2>&1 &
http_pid=$!
N=oswnet-$$
check "up --image osw --allow-private 127.0.0.1:$HTTP (relays from QEMU's namespace)" bash -c \
    "'$ENVMGR' up --name $N --image osw --accel tcg --allow-private 127.0.0.1:$HTTP >/dev/null 2>&1"
addr=$("$ENVMGR" net show $N --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['relays'][0]['guest_address'])" 2>/dev/null)
out=$("$ENVMGR" exec $N -- python3 -c "
import socket
s = socket.create_connection(('$addr', $HTTP), 5); s.sendall(b'GET /index.html HTTP/1.0\r\n\r\n'); d = b''
while True:
    b = s.recv(4096)
    if not b: break
    d += b
print(d.strip().split(b'\n')[-1].decode())" 2>&1)
check "... the guest reaches the allowlisted host service through its relay ($addr:$HTTP)" test "$out" = hello-from-host
"$ENVMGR" down $N >/dev/null 2>&1
kill $http_pid 2>/dev/null

# Getters the server answers itself: the accessibility tree through GET /accessibility (the stand-in has no
# desktop: it answers 500, as OSWorld's server where it has no tree), named in the result's reason.
cat >"$T/a11y.json" <<'J'
{"id": "a", "instruction": "x", "evaluator": {"func": "exact_match", "result": {"type": "accessibility_tree"},
 "expected": {"type": "rule", "rules": {"expected": "x"}}}}
J
out=$("$ENVMGR" run "$T/a11y.json" --env $E --agent "$ROOT/tasks/agents/null" --out "$T/a11y" 2>&1); rc=$?
check "accessibility_tree goes to the server (not refused at plan time); its 500 is the getter's error" bash -c \
    "grep -q \"accessibility_tree: OSWorld's server /accessibility answered 500\" '$T/a11y/result.json'"
[ -f "$T/a11y/result.json" ] || printf '%s\n' "$out" | tail -3

# A hostile server (guest root replaces OSWorld's): an endless reply is cut at the cap, a reply that
# drips a byte a second times out, each with one line; a reset brings the real one back.
HOSTILE='
import os, socket, time
os.setsid()
time.sleep(1)
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and int(p) != os.getpid() and b"osworld-standin/server.py" in open("/proc/%s/cmdline" % p, "rb").read():
            os.kill(int(p), 9)
    except OSError:
        pass
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
for i in range(100):
    try:
        s.bind(("0.0.0.0", 5000)); break
    except OSError:
        time.sleep(0.1)
s.listen(16)
while True:
    c, _ = s.accept()
    if os.fork() == 0:
        req = c.recv(65536)
        try:
            if b"endless" in req:
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"status\": \"success\", \"output\": \"")
                while True:
                    c.sendall(b"a" * 65536)
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n")
            while True:
                c.sendall(b" "); time.sleep(1)
        except OSError:
            os._exit(0)
    c.close()
'
"$ENVMGR" exec $E -- sh -c 'python3 -c "$1" </dev/null >/dev/null 2>&1 & exit 0' sh "$HOSTILE" >/dev/null 2>&1
sleep 3
t0=$(date +%s.%N)
out=$("$ENVMGR" exec $E -- echo endless 2>&1); rc=$?
big_ms=$(ms_since $t0)
check "an endless /execute reply: cut at the cap, one line, exit non-zero ($big_ms ms)" bash -c \
    "[ $rc != 0 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q 'reply is over the limit of [0-9]* bytes'" _ "$out"
[ $rc != 0 ] || printf '%s\n' "$out"
t0=$(date +%s.%N)
out=$("$ENVMGR" exec $E --timeout 1 -- echo slow 2>&1); rc=$?
slow_ms=$(ms_since $t0)
check "a reply that drips a byte a second: times out (the command's 1 s + 10 s), one line ($slow_ms ms)" bash -c \
    "[ $rc != 0 ] && [ $slow_ms -lt 20000 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q 'no whole reply within 11.0 s'" _ "$out"
[ $rc != 0 ] || printf '%s\n' "$out"
check "reset after the hostile server" "$ENVMGR" reset $E
check "... and the real server answers again" test "$("$ENVMGR" exec $E -- sh -c 'echo back')" = back

check "down" "$ENVMGR" down $E
check "image rm osw" "$ENVMGR" image rm osw
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

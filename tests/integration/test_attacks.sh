#!/usr/bin/env bash
# The attack suite: each case plays a hostile guest (root included), task file, trace or HTTP client
# against one boundary, says what it tried, and checks that the boundary held (docs/security.md
# lists boundary -> enforcement -> this test). Everything runs in network and mount namespaces of
# its own with only loopback, so a broken boundary cannot send a packet off this machine.
# Prints `attacks: N passed, N failed`.
SUITE=attacks
if [ -z "${ENVMGR_ATTACK_NS:-}" ]; then
    if ! unshare --net --mount true 2>/dev/null; then
        echo "FAIL this suite needs network namespaces (unshare --net --mount; run as root or with user namespaces)"
        echo "attacks: 0 passed, 1 failed"
        exit 1
    fi
    exec unshare --net --mount -- env ENVMGR_ATTACK_NS=1 bash "$0" "$@"
fi
ip link set lo up || { echo "FAIL ip link set lo up"; echo "attacks: 0 passed, 1 failed"; exit 1; }
source "$(dirname "$0")/lib.sh"

SERVERS=()
stop_servers() { for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap 'stop_servers; cleanup' EXIT
tried() { echo "---- tried: $*"; }
check "the namespace has only loopback" test "$(ip -o link | wc -l)" = 1

# A TCP listener that logs every connection (host side; IPv4 or IPv6 loopback).
cat >"$T/listen.py" <<'EOF'
import socket, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
s = socket.socket(fam)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
log = open(sys.argv[3], "a", buffering=1)
while True:
    c, a = s.accept()
    log.write("connection from %s\n" % (a,))
    try:
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\nhost listener reached\n")
    finally:
        c.close()
EOF
listen_on() { python3 "$T/listen.py" "$1" "$2" "$3" & SERVERS+=($!); wait_until 10 test -e /proc/$!/fd; sleep 0.3; }

# --- 1. IPv6 past restrict=on (issue 11, reproduced on a real guest before the fix) ------------------
A=at-net
: >"$T/v6.log"
listen_on ::1 3128 "$T/v6.log"
"$ENVMGR" up --name $A --accel tcg --allow example.com:443 >/dev/null 2>&1 || bad "up $A (allowlist)"
tried "guest root adds fec0:0:a00:264::5 (bytes 4-7 spell the proxy's guestfwd address 10.0.2.100) and curls [fec0::2]:3128, which slirp maps to the host's [::1]:3128"
gexec $A sh -c 'ip -6 addr add fec0:0:a00:264::5/64 dev ens5 nodad; ip -6 route add fec0::2/128 dev ens5 src fec0:0:a00:264::5' >/dev/null 2>&1
out=$("$ENVMGR" exec $A --timeout 30 -- curl -6 -sS --interface fec0:0:a00:264::5 --noproxy '*' -m 6 'http://[fec0::2]:3128/' 2>&1)
check "1 held: the guest's IPv6 request got nothing" bash -c "! echo \"\$1\" | grep -q 'host listener reached'" _ "$out"
check "1 held: the host's [::1]:3128 saw no connection" test ! -s "$T/v6.log"
check "1 held: QEMU runs its netdev with ipv6=off" bash -c "tr '\\0' ' ' </proc/\$(cat '$ENVMGR_RUN_DIR/$A/qemu.pid')/cmdline | grep -q 'restrict=on,ipv6=off'"
tried "20 ICMPv6 echoes from the guest (each one used to add a line to qemu.log: a log flood)"
before=$(wc -l <"$ENVMGR_RUN_DIR/$A/qemu.log")
"$ENVMGR" exec $A --timeout 40 -- sh -c 'ping -6 -c 20 -i 0.2 -W 1 fec0::2; ping -6 -c 5 -W 1 -I ens5 ff02::1' >/dev/null 2>&1
after=$(wc -l <"$ENVMGR_RUN_DIR/$A/qemu.log")
check "1 held: IPv6 and ICMPv6 from the guest leave nothing on the host (qemu.log $before -> $after lines)" test "$before" = "$after"
"$ENVMGR" down $A >/dev/null 2>&1

# --- 8. a task or an API request opening the host to the guest -----------------------------------
cat >"$T/open-host.json" <<'EOF'
{"id": "open-host", "instruction": "x", "evaluator": {"func": "infeasible"},
 "network": {"mode": "allowlist", "allow": ["127.0.0.1:7480"]}}
EOF
tried "a task file allowing 127.0.0.1:7480 (envmgr's own API)"
out=$("$ENVMGR" up --name at-task --accel tcg --task "$T/open-host.json" 2>&1); rc=$?
check "8 held: refused at load with exit 2, naming the operator's --allow-private" \
    bash -c "[ $rc = 2 ] && echo \"\$1\" | grep -q 'loopback address: only the operator may allow it (--allow-private)'" _ "$out"
check "8 held: no env was created" test ! -e "$ENVMGR_RUN_DIR/at-task"
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" >"$T/serve.out" 2>&1 &
SERVERS+=($!)
wait_until 30 grep -q 'listening on' "$T/serve.out"
URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$T/serve.out" | head -1)
PORT=${URL##*:}
tried "an API client with the token creates an env whose inline task allows the API's own port ($PORT)"
code=$(curl -s -o "$T/api.out" -w '%{http_code}' -H "Authorization: Bearer $(cat "$T/token")" \
    -d "{\"task\": {\"id\": \"x\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"}, \"network\": {\"allow\": [\"127.0.0.1:$PORT\"]}}}" \
    "$URL/v1/envs")
check "8 held: 400, not an env that reaches the API ($code)" test "$code" = 400
check "8 held: the answer names the field" grep -q 'network.allow\[0\]' "$T/api.out"
for a in 10.0.2.2:80 169.254.169.254:80 '[::1]:80' '[fe80::1]:80'; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$T/token")" \
        -d "{\"task\": {\"id\": \"x\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"}, \"network\": {\"allow\": [\"$a\"]}}}" \
        "$URL/v1/envs")
    check "8 held: an inline task allowing $a is refused ($code)" test "$code" = 400
done
stop_servers; SERVERS=()

# --- 16. slow and idle HTTP clients against `envmgr serve`'s connections (issue 27) -----------------
# Clients that hold connections: MODE slow (one address: the request line, then a header line
# every 5 s), spread (the same from 127.0.0.2..), noauth (a whole request head without a token,
# then idle with keep-alive), auth (a whole request with the token, then idle). Prints what it saw as
# JSON: connections still open 1 s after the last was opened, closed by the server, the longest
# any stayed open before the server closed it. It stops itself after SECONDS.
cat >"$T/holders.py" <<'EOF2'
import json, select, socket, sys, time
mode, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
token = sys.argv[5] if len(sys.argv) > 5 else ""
head_body = "GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 99999\r\n\r\n{"
head = {"slow": "GET /v1/health HTTP/1.1\r\nHost: x\r\n", "spread": "GET /v1/health HTTP/1.1\r\nHost: x\r\n",
        "noauth": "GET /v1/%s HTTP/1.1\r\nHost: x\r\n\r\n",
        "auth": "GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n\r\n"}[mode]
t0 = time.time()
conns = []  # [socket, opened, closed by the server]
for i in range(n):
    s = socket.socket()
    s.settimeout(3)
    c = [s, time.time(), None]
    conns.append(c)
    try:
        if mode == "spread":
            s.bind(("127.0.0.%d" % (2 + i), 0))
        s.connect(("127.0.0.1", port))
        if mode == "noauth":  # 10 refused, 10 announcing a body that never comes, 60 answered
            s.sendall((head % "envs" if i < 10 else head_body if i < 20 else head % "health").encode())
        else:
            s.sendall(head.encode())
    except OSError:
        c[2] = time.time()
    s.setblocking(False)
opened = time.time()
open_after_1s, next_line = None, t0 + 5
while time.time() - t0 < secs:
    live = [c for c in conns if c[2] is None]
    if open_after_1s is None and time.time() - opened >= 1:
        open_after_1s = len(live)
    if not live and open_after_1s is not None:
        break
    ready = select.select([c[0] for c in live], [], [], 0.1)[0] if live else []
    for c in live:
        if c[0] in ready:
            try:
                data = c[0].recv(65536)
            except OSError:
                data = b""
            if not data:
                c[2] = time.time()
    if mode in ("slow", "spread") and time.time() >= next_line:
        next_line += 5
        for c in conns:
            try:
                c[2] is None and c[0].send(b"X-Slow: 1\r\n")
            except OSError:
                c[2] = time.time()
closed = [c[2] - c[1] for c in conns if c[2] is not None]
print(json.dumps({"open_after_1s": open_after_1s, "closed": len(closed), "longest_s": round(max(closed or [0]), 1)}))
EOF2
# holders_start MODE N SECONDS: in the background, its JSON in $T/holders.json; waits until they are open
holders_start() {
    rm -f "$T/holders.json"
    /usr/bin/python3 "$T/holders.py" "$1" "$PORT" "$2" "$3" "$(cat "$T/token")" >"$T/holders.json" &
    HOLDERS=$!
    sleep 1.5
}
holders_end() { wait "$HOLDERS"; echo "     saw: $(cat "$T/holders.json")"; }
held() { /usr/bin/python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$T/holders.json" "$1"; }
# An authenticated request's status and time (a few seconds at most)
authed() { curl -s -o /dev/null -m 8 -w '%{http_code} %{time_total}' -H "Authorization: Bearer $(cat "$T/token")" "$URL/v1/envs"; }
answered_soon() { set -- $1; [ "$1" = 200 ] && awk -v t="$2" 'BEGIN { exit !(t < 3) }'; }
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" >"$T/serve.out" 2>&1 &
SERVE=$!
SERVERS+=($SERVE)
wait_until 30 grep -q 'listening on' "$T/serve.out"
URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$T/serve.out" | head -1)
PORT=${URL##*:}
authed >/dev/null
fds=$(ls /proc/$SERVE/fd | wc -l)
tried "70 slowloris connections from one address (a header line every 5 s), then an authenticated GET /v1/envs"
holders_start slow 70 12
got=$(authed)
check "16 held: the authenticated request was answered at once while they were open ($got)" answered_soon "$got"
holders_end
check "16 held: one address keeps at most 8 incomplete connections ($(held open_after_1s) open 1 s after opening 70)" \
    test "$(held open_after_1s)" -le 8
check "16 held: the server closed all 70 within the 5 s header deadline ($(held closed) closed, longest open $(held longest_s) s)" \
    bash -c "[ $(held closed) = 70 ] && awk 'BEGIN { exit !($(held longest_s) <= 7) }'"
tried "70 slowloris connections from 70 addresses (127.0.0.2-71: no per-address cap applies), then an authenticated GET"
holders_start spread 70 12
got=$(authed)
check "16 held: the authenticated request was answered at once ($got)" answered_soon "$got"
holders_end
check "16 held: the server closed all 70 within the header deadline ($(held closed) closed, longest open $(held longest_s) s)" \
    bash -c "[ $(held closed) = 70 ] && awk 'BEGIN { exit !($(held longest_s) <= 7) }'"
tried "80 complete requests without a token (10 GET /v1/envs, 10 GET /v1/health announcing a body that never comes, 60 GET /v1/health), each connection then left idle with keep-alive"
holders_start noauth 80 8
got=$(authed)
check "16 held: the authenticated request was answered at once ($got)" answered_soon "$got"
holders_end
check "16 held: the server closed every unauthenticated connection after its answer ($(held closed) of 80, longest open $(held longest_s) s)" \
    bash -c "[ $(held closed) = 80 ] && awk 'BEGIN { exit !($(held longest_s) <= 3) }'"
tried "60 authenticated keep-alive connections left idle (near the limit of 64), then a request without a token and one with"
holders_start auth 60 8
code=$(curl -s -o "$T/busy.out" -m 8 -w '%{http_code}' "$URL/v1/health")
got=$(authed)
check "16 held: without a token: 503, the server is busy ($code)" bash -c "[ $code = 503 ] && grep -q 'server is busy' '$T/busy.out'"
check "16 held: with the token: served from the reserve ($got)" answered_soon "$got"
holders_end
check "16 held: the server holds no more descriptors than before the attacks ($fds)" \
    wait_until 10 bash -c "[ \$(ls /proc/$SERVE/fd | wc -l) -le $fds ]"
tried "SIGTERM while 70 slowloris connections are open"
holders_start slow 70 12
kill -TERM $SERVE
check "16 held: the server stopped at once" wait_until 10 bash -c "! kill -0 $SERVE && grep -q 'envmgr serve: stopped' '$T/serve.out'"
holders_end
check "16 held: stopping closed the connections it held ($(held closed) closed, longest open $(held longest_s) s)" \
    bash -c "[ $(held closed) = 70 ] && awk 'BEGIN { exit !($(held longest_s) < 4.5) }'"
stop_servers; SERVERS=()

# --- 3. a hostile trace directory name must not reach a shell ----------------------------------------
E=at-replay
"$ENVMGR" up --name $E --accel tcg >/dev/null 2>&1 || bad "up $E"
cp "$ROOT/tests/data/tasks/terminal-echo.json" "$T/task.json"
cat >"$T/nosy-agent" <<'EOF'
#!/usr/bin/env python3
# What an agent can see of envmgr: its environment, its open files, the run directory (the env's
# QMP socket), the cache, /proc of envmgr; then the scripted agent (argv[2:]) plays the solution.
import json, os, sys
run_dir, cache_dir, qmp = sys.argv[1].split(":")
fds = []
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        fds.append("%s %s" % (fd, os.readlink("/proc/self/fd/" + fd)))
    except OSError:
        pass  # the listing's own descriptor, already closed
def listing(d):
    try:
        return sorted(os.listdir(d))
    except OSError as e:
        return ["error: %s" % e.strerror]
environs = []  # what /proc shows of other processes' environments (envmgr's holds the key)
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            environs.append(open("/proc/%s/environ" % p, "rb").read().decode("utf-8", "replace"))
        except OSError:
            pass
saw = {"env": sorted(k for k in os.environ),
       "trace_key": "ENVMGR_TRACE_KEY" in os.environ, "task": os.environ.get("ENVMGR_TASK"),
       "instruction": os.environ.get("ENVMGR_INSTRUCTION"), "task_id": os.environ.get("ENVMGR_TASK_ID"),
       "operator_var": os.environ.get("NOSY_OPERATOR"), "secret_var": os.environ.get("NOSY_SECRET"),
       "run_dir": listing(run_dir), "qmp": os.path.exists(qmp), "cache": listing(cache_dir),
       "key_in_proc": any("attack-suite-key" in e for e in environs), "fds": fds}
with open(os.environ["NOSY_OUT"], "w") as f:
    json.dump(saw, f)
os.execv(sys.argv[2], sys.argv[2:])
EOF
chmod +x "$T/nosy-agent"
CACHE=${ENVMGR_CACHE_DIR:-$( [ "$(id -u)" = 0 ] && echo /var/cache/envmgr || echo "$HOME/.cache/envmgr")}
tried "an agent looking for the trace key (set for this run), the task's path, envmgr's open files, the run directory with $E's QMP socket, the image cache and envmgr's /proc"
NOSY_OUT="$T/agent-saw" NOSY_OPERATOR=passed NOSY_SECRET=kept ENVMGR_TRACE_KEY=attack-suite-key \
    "$ENVMGR" run "$T/task.json" --env $E --out "$T/rec" --agent-env NOSY_OUT --agent-env NOSY_OPERATOR \
    --agent "$T/nosy-agent $ENVMGR_RUN_DIR:$CACHE:$ENVMGR_RUN_DIR/$E/qmp.sock $ROOT/tasks/agents/scripted --tasks $T/task.json" \
    >"$T/rec.out" 2>&1
saw() { python3 -c "import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print(' '.join(map(str, v)) if isinstance(v, list) else v)" "$T/agent-saw" "$1"; }
envmgr_vars() { saw env | tr ' ' '\n' | grep '^ENVMGR_' | tr '\n' ' '; }
fd_numbers() { saw fds | tr ' ' '\n' | grep -E '^[0-9]+$' | tr '\n' ' '; }
check "3: a trace was recorded" test -s "$T/rec/trace/trace.jsonl"
check "4: the episode still works in the sandbox: the scripted solution scored 1.0" grep -q 'score 1.00' "$T/rec.out"
check "4 held: the agent did not get ENVMGR_TRACE_KEY" test "$(saw trace_key)" = False
check "4 held: the agent did not get the task file's path (ENVMGR_TASK: $(saw task))" test "$(saw task)" = None
check "4 held: no ENVMGR_ variable but the documented ones ($(envmgr_vars))" \
    test "$(envmgr_vars)" = "ENVMGR_INSTRUCTION ENVMGR_SCREEN_HEIGHT ENVMGR_SCREEN_WIDTH ENVMGR_TASK_ID "
check "4: the agent got the instruction and the task id" \
    test "$(saw task_id)/$(saw instruction)" = "$(python3 -c "import json; t = json.load(open('$T/task.json')); print(t['id'] + '/' + t['instruction'])")"
check "4: --agent-env passes the operator's variable; others stay home ($(saw operator_var), $(saw secret_var))" \
    test "$(saw operator_var)/$(saw secret_var)" = passed/None
check "4 held: the agent holds only its stdio (fds: $(fd_numbers))" test "$(fd_numbers)" = "0 1 2 "
check "4 held: the run directory is out of its reach (it saw: $(saw run_dir))" test -z "$(saw run_dir)"
check "4 held: $E's QMP socket is out of its reach" test "$(saw qmp)" = False
check "4 held: the cache is out of its reach (it saw: $(saw cache))" test -z "$(saw cache)"
check "4 held: /proc shows it no process holding the key" test "$(saw key_in_proc)" = False
check "4: the trace header records the agent's sandbox" \
    python3 -c "import json, sys; sys.exit(json.loads(open('$T/rec/trace/trace.jsonl').readline())['agent_sandbox'] != 'bwrap')"
check "4 held: the recording verifies with the key the agent never saw" \
    env ENVMGR_TRACE_KEY=attack-suite-key "$ENVMGR" trace verify "$T/rec/trace"
out=$("$ENVMGR" run "$T/task.json" --env $E --agent true --agent-env ENVMGR_TRACE_KEY 2>&1); rc=$?
check "4 held: --agent-env ENVMGR_TRACE_KEY is refused (exit $rc)" \
    bash -c "[ $rc = 2 ] && echo \"\$1\" | grep -q 'ENVMGR_ variables are envmgr' " _ "$out"
# Which boundaries held is part of the record: read from the running QEMU, not from intentions.
bounds() { python3 -c "
import json, sys
b = json.load(sys.stdin) if sys.argv[1] == 'ls' else json.loads(open(sys.argv[2]).readline())
if sys.argv[1] == 'ls':
    b = [e for e in b if e['name'] == sys.argv[2]][0]
b = b['boundaries']
ok = 'restrict=on' in b['netdev'] and 'ipv6=off' in b['netdev'] and b['qemu_sandbox'].startswith('on,') \
    and isinstance(b['uid'], int) and isinstance(b['cgroup'], dict)
print(b['netdev'], '|', b['qemu_sandbox'], '| uid', b['uid'])
sys.exit(0 if ok else 1)" "$@"; }
check "the trace header records the boundaries ($(bounds trace "$T/rec/trace/trace.jsonl" 2>&1))" \
    bounds trace "$T/rec/trace/trace.jsonl"
check "envmgr ls --json records them for the running env" bash -c "$(declare -f bounds); '$ENVMGR' ls --json | bounds ls $E"
marker=/tmp/envmgr-pwned-$$
evil="$T/x'\$(touch\${IFS}$marker)'"
mkdir -p "$evil" && cp -r "$T/rec/trace" "$evil/t"
rm -f "$T/task.json" # the replay must not need (or read) the host's task file
tried "replay of a trace in a directory named $(basename "$evil")/t"
ENVMGR_TRACE_KEY=attack-suite-key "$ENVMGR" replay "$evil/t" --env $E --out "$T/rp" --fast >"$T/rp.out" 2>&1; rc=$?
check "3 held: nothing ran the directory name as shell ($marker absent)" test ! -e "$marker"
check "3 held: the replay ran from the task the trace carries (exit $rc)" \
    grep -q 'score: recorded' "$T/rp.out"
check "3 held: the task came from the trace, checked by its hash" test -s "$T/rp/task.json"
rm -f "$marker"
"$ENVMGR" down $E >/dev/null 2>&1

# --- 9. a guest that powers itself off, and guest bytes that are not UTF-8 ---------------------------
cat >"$T/poweroff.json" <<'EOF'
{"id": "poweroff", "instruction": "x",
 "config": [{"type": "execute", "parameters": {"command": "printf 'bad \\377\\376 bytes\\n' >&2; (sleep 3; echo password | sudo -S poweroff -f) >/dev/null 2>&1 &", "shell": true}}],
 "limits": {"max_steps": 8, "step_timeout_s": 30, "episode_timeout_s": 180},
 "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "echo x"},
               "expected": {"type": "rule", "rules": {"expected": "x\n"}}}}
EOF
cat >"$T/waiter" <<'EOF'
#!/bin/sh
while read obs; do echo '{"action_type": "WAIT", "seconds": 4}'; done
EOF
chmod +x "$T/waiter"
E=at-off
"$ENVMGR" up --name $E --accel tcg >/dev/null 2>&1 || bad "up $E"
tried "setup writes invalid UTF-8 on stderr, then the guest becomes root (sudo) and powers itself off mid-episode"
"$ENVMGR" run "$T/poweroff.json" --env $E --agent "$T/waiter" --out "$T/off" >"$T/off.out" 2>&1; rc=$?
cause=$(python3 -c "import json; print(json.load(open('$T/off/result.json'))['exit_cause'])" 2>/dev/null)
check "9 held: the episode was recorded, not abandoned (exit $rc)" test -s "$T/off/result.json"
status=$(python3 -c "import json; print(json.load(open('$T/off/result.json'))['status'])" 2>/dev/null)
check "9 held: it ended as guest_shutdown, a scored outcome, not an env error ($cause, $status, exit $rc)" \
    test "$cause/$status/$rc" = guest_shutdown/scored/0
check "9 held: the trace with the non-UTF-8 setup output verifies" "$ENVMGR" trace verify "$T/off/trace"
check "9 held: the env is still there and a reset brings the guest back" \
    bash -c "'$ENVMGR' reset $E >/dev/null && '$ENVMGR' exec $E -- true"

# --- 5. the guest's console cannot fill the host ---------------------------------------------------------
tried "guest root writes 3 MB to its serial console (once a file in the run directory, without a cap)"
"$ENVMGR" exec $E --timeout 120 -- sh -c 'head -c 3000000 /dev/zero | tr "\0" x > /dev/ttyS0' >/dev/null 2>&1
size=$(du -sk "$ENVMGR_RUN_DIR/$E" | cut -f1)
check "5 held: the run directory stayed small (${size} KiB; the console is a 1 MiB ring inside QEMU)" \
    test "$size" -lt 2048

QPID=$(cat "$ENVMGR_RUN_DIR/$E/qemu.pid")
tried "QEMU made to print 6 MB (what a guest that keeps breaking a virtio device gets): written to QEMU's own stderr"
head -c 6000000 /dev/zero | tr '\0' y >"/proc/$QPID/fd/2"
wait_until 10 grep -q 'the rest is dropped' "$ENVMGR_RUN_DIR/$E/qemu.log"
lsize=$(stat -c %s "$ENVMGR_RUN_DIR/$E/qemu.log")
check "5 held: qemu.log stopped at its cap ($lsize bytes, cap 4194304 and one line saying so)" \
    bash -c "[ $lsize -le 4194400 ] && grep -q 'the rest is dropped' '$ENVMGR_RUN_DIR/$E/qemu.log'"
check "5 held: QEMU kept running" "$ENVMGR" exec $E -- true

# Each env in a cgroup of its own (these machines mount the v1 memory, pids and cpu controllers).
cg_dir() { local ctl=$1 pid=$2; echo "/sys/fs/cgroup/$ctl$(awk -F: -v c="$ctl" '$2 ~ "(^|,)"c"(,|$)" {print $3}' /proc/$pid/cgroup)"; }
memdir=$(cg_dir memory $QPID); pidsdir=$(cg_dir pids $QPID); cpudir=$(cg_dir cpu $QPID)
check "5 held: QEMU is in a cgroup of its own ($memdir)" bash -c "case '$memdir' in */envmgr/e*) ;; *) exit 1;; esac"
guest_mib=$(tr '\0' '\n' </proc/$QPID/cmdline | awk '$0 == "-m" {getline; print; exit}')
check "5 held: its limits are memory = guest RAM ($guest_mib MiB) + 1 GiB, 512 processes, 150% of a core" bash -c \
    "[ \$(cat '$memdir/memory.limit_in_bytes') = $(( (guest_mib + 1024) * 1048576 )) ] && [ \$(cat '$pidsdir/pids.max') = 512 ] && [ \$(cat '$cpudir/cpu.cfs_quota_us') = 150000 ]"
check "5 held: once restored, its CPU weight is a running guest's (cpu.shares 1024; a restore had ten times it)" \
    test "$(cat "$cpudir/cpu.shares")" = 1024
check "5 held: ls --json records the same limits" bash -c \
    "'$ENVMGR' ls --json | python3 -c \"import json,sys; c=[x for x in json.load(sys.stdin) if x['name']=='$E'][0]['boundaries']['cgroup']; sys.exit(0 if (c['pids']['limit'], c['cpu']['limit'], c['memory']['limit']) == ('512', '150000', '$(( (guest_mib + 1024) * 1048576 ))') else 1)\""
quid=$(awk '/^Uid:/ {print $3}' /proc/$QPID/status)

# --- 11. QEMU (and the egress proxy) as a user of the env's own ---------------------------------------
F=at-other
"$ENVMGR" up --name $F --accel tcg --allow example.com:443 >/dev/null 2>&1 || bad "up $F"
FPID=$(cat "$ENVMGR_RUN_DIR/$F/qemu.pid")
fuid=$(awk '/^Uid:/ {print $3}' /proc/$FPID/status)
proxy_pid=$(ps -o ppid= -p "$FPID" | tr -d ' ')
check "ls --json records the network policy in force with the boundaries" bash -c \
    "'$ENVMGR' ls --json | python3 -c \"import json,sys; n=[x for x in json.load(sys.stdin) if x['name']=='$F'][0]['boundaries']['network']; sys.exit(0 if n['mode']=='allowlist' and n['allow']==['example.com:443'] and n['limits']['max_connections_per_minute']==600 else 1)\""
check "11 held: QEMU runs as uid $quid, not root, with no capabilities and no_new_privs" bash -c \
    "[ '$quid' -gt 0 ] && grep -q '^CapEff:.0000000000000000' /proc/$QPID/status && grep -q '^NoNewPrivs:.1' /proc/$QPID/status"
check "11 held: each env has its own user ($E: $quid, $F: $fuid)" bash -c "[ '$fuid' -gt 0 ] && [ '$fuid' != '$quid' ]"
check "11 held: the allowlist env's egress proxy runs as its env's user too" \
    test "$(awk '/^Uid:/ {print $3}' /proc/$proxy_pid/status)" = "$fuid"
AS_QEMU="setpriv --reuid=$quid --regid=$quid --clear-groups"
tried "as $E's QEMU user: read its own run directory, the other env's overlay and QMP socket, write the golden RAM, signal the other QEMU"
denied() { echo "$1" | grep -qE 'Permission denied|Operation not permitted'; }
export -f denied
check "11: (control) the QEMU user runs programs at all" bash -c "cd / && $AS_QEMU cat /etc/hostname >/dev/null"
out=$(cd / && $AS_QEMU cat "$ENVMGR_RUN_DIR/$E/env.json" 2>&1)
check "11 held: its run directory is out of reach (env.json: $out)" bash -c "[ -s '$ENVMGR_RUN_DIR/$E/env.json' ] && denied \"\$1\"" _ "$out"
out=$(cd / && $AS_QEMU head -c 1 "$ENVMGR_RUN_DIR/$F/overlay.qcow2" 2>&1 >/dev/null)
check "11 held: the other env's disk is out of reach ($out)" bash -c "[ -s '$ENVMGR_RUN_DIR/$F/overlay.qcow2' ] && denied \"\$1\"" _ "$out"
out=$(cd / && $AS_QEMU /usr/bin/python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('$ENVMGR_RUN_DIR/$F/qmp.sock')" 2>&1 | tail -1)
check "11 held: the other env's QMP socket is out of reach ($out)" bash -c "[ -S '$ENVMGR_RUN_DIR/$F/qmp.sock' ] && denied \"\$1\"" _ "$out"
ramfile=$(tr '\0' '\n' </proc/$QPID/cmdline | grep -o 'mem-path=[^,]*' | cut -d= -f2)
out=$(cd / && $AS_QEMU sh -c "echo x >>'$ramfile'" 2>&1)
check "11 held: the golden RAM every env maps cannot be written ($out)" bash -c "[ -s '$ramfile' ] && denied \"\$1\"" _ "$out"
out=$(cd / && $AS_QEMU kill -0 $FPID 2>&1)
check "11 held: the other env's QEMU cannot be signalled ($out)" bash -c "kill -0 $FPID && denied \"\$1\"" _ "$out"
out=$(cd / && $AS_QEMU kill -0 $proxy_pid 2>&1)
check "11 held: nor its proxy ($out)" bash -c "kill -0 $proxy_pid && denied \"\$1\"" _ "$out"
# Last on this env: a full pids cgroup can stop QEMU itself (it aborts when it cannot start a thread),
# which is the attacker's own env; what matters is that the bomb stops and nothing outside the env is hurt.
tried "a fork bomb inside the env's cgroup, as the env's user (what a QEMU taken over could start)"
forks=$(cd / && sh -c "echo \$\$ >'$pidsdir/cgroup.procs'; exec setpriv --reuid=$quid --regid=$quid --clear-groups /usr/bin/python3 -c '
import os, time
n = 0
try:
    for i in range(2000):
        if os.fork() == 0:
            os.close(1); os.close(2); time.sleep(120); os._exit(0)
        n += 1
except OSError:
    pass
print(n)'" 2>/dev/null)
check "5 held: it stopped at the env's process limit ($forks forks of 2000; QEMU's threads count too)" \
    bash -c "[ -n '$forks' ] && [ '$forks' -lt 512 ] && [ '$forks' -gt 0 ]"
check "5 held: the other env's QEMU kept running through it" kill -0 $FPID
left=$(pgrep -c -u "$quid" python3)
"$ENVMGR" down $F >/dev/null 2>&1
"$ENVMGR" down $E >/dev/null 2>&1
# Killed processes stay zombies until their reaper (the container's pid 1 here) collects them.
live_as() { ps -u "$1" -o stat= | grep -vc '^Z'; }
export -f live_as
check "11 held: down kills what $E's user left running ($left bomb processes before, $(live_as "$quid") after)" \
    bash -c "[ '$left' -gt 100 ] && [ \$(live_as '$quid') = 0 ]"
check "11 held: down gives the users back and removes the cgroups" bash -c \
    "! ls /run/envmgr-qemu-users/ | grep -qx '$quid' && [ ! -d '$memdir' ] && [ ! -d '$pidsdir' ]"
tried "a run directory removed by hand leaves a QEMU user claim and an empty cgroup behind"
orphan_cg="$(dirname "$pidsdir")/e00000000000000aa"
mkdir -p "$orphan_cg" && printf /nonexistent/at-gone >/run/envmgr-qemu-users/2146500001
"$ENVMGR" gc >"$T/gc.out" 2>&1
check "11: gc removes both ($(tail -1 "$T/gc.out"))" bash -c \
    "[ ! -d '$orphan_cg' ] && [ ! -e /run/envmgr-qemu-users/2146500001 ]"

tried "a process still running as the QEMU user id the next env would be given (one that escaped its env)"
squat=2146435072
while [ -e /run/envmgr-qemu-users/$squat ]; do squat=$((squat + 1)); done
(cd / && exec setpriv --reuid=$squat --regid=$squat --clear-groups sleep 300) &
squat_pid=$!
tried "the guest writes 40 MB into its disk while the run directory is a tmpfs (host RAM)"
SHM=$(mktemp -d /dev/shm/envmgr-at.XXXXXX)
ENVMGR_RUN_DIR=$SHM "$ENVMGR" up --name at-shm --accel tcg --allow example.com:443 >/dev/null 2>&1 || bad "up at-shm"
shm_uid=$(cat "$SHM/at-shm/qemu-user" 2>/dev/null)
check "11 held: the next env skips the id a process still runs as ($squat; at-shm got ${shm_uid:-none})" \
    bash -c "[ -n '$shm_uid' ] && [ '$shm_uid' != '$squat' ] && kill -0 $squat_pid"
kill $squat_pid 2>/dev/null; wait $squat_pid 2>/dev/null
ENVMGR_RUN_DIR=$SHM "$ENVMGR" exec at-shm --timeout 120 -- \
    sh -c 'dd if=/dev/urandom of=/home/user/big bs=1M count=40 2>/dev/null; sync' >/dev/null 2>&1
shm=$(du -sk "$SHM" | cut -f1)
disk=$(readlink "$SHM/at-shm/overlay.qcow2")
check "5 held: the tmpfs stayed small (${shm} KiB); the overlay is on disk ($disk, $(du -sk "$disk" 2>/dev/null | cut -f1) KiB)" \
    bash -c "[ $shm -lt 4096 ] && [ -f '$disk' ] && [ \$(du -sk '$disk' | cut -f1) -gt 30000 ]"
elog="${disk%.qcow2}.jsonl"
check "5 held: the egress log is on disk too, noted with its owner ($elog)" bash -c \
    "[ ! -e '$SHM/at-shm/egress.jsonl' ] && [ -f '$elog' ] && [ \"\$(cat '$elog.owner')\" = '$SHM/at-shm' ]"
ENVMGR_RUN_DIR=$SHM "$ENVMGR" down at-shm >/dev/null 2>&1
check "5 held: down removed the overlay and the egress log on disk too" bash -c "[ ! -e '$disk' ] && [ ! -e '$elog' ] && [ ! -e '$elog.owner' ]"
check "no QEMU left under the tmpfs run directory" no_qemu_under "$SHM/"
rm -rf "$SHM"

# --- 10. a squatted run root --------------------------------------------------------------------------
tried "a run root created by someone else, and one anyone can write into"
mkdir -p "$T/squat" && chmod 777 "$T/squat"
out=$(ENVMGR_RUN_DIR="$T/squat" "$ENVMGR" up --name sq 2>&1); rc=$?
check "10 held: a world-writable run root is refused" bash -c "[ $rc != 0 ] && echo \"\$1\" | grep -q 'writable by everyone'" _ "$out"
mkdir -p "$T/squat2" && chmod 700 "$T/squat2" && chown nobody "$T/squat2"
out=$(ENVMGR_RUN_DIR="$T/squat2" "$ENVMGR" up --name sq 2>&1); rc=$?
check "10 held: a run root owned by another user is refused" bash -c "[ $rc != 0 ] && echo \"\$1\" | grep -q 'belongs to uid'" _ "$out"
check "10 held: no QEMU was started there" no_qemu_under "$T/squat"

# --- 12. a task's asset URL aimed at the host's own services (issue 27) ------------------------------
# `download` steps and `cloud_file` getters are fetched by the host (libcurl) and written into the
# guest: a task must not make the host read its loopback services (here a secret on 127.0.0.1:P2), in
# any spelling of the address or by a redirect from a server the operator allowed.
AS=$T/assets12
mkdir -p "$AS/fetch" "$AS/runs"
SECRET12="asset-secret-$RANDOM$RANDOM"
cat >"$AS/srv.py" <<'EOF'
# srv.py MODE PORTFILE LOG [ARG]: secret (answers ARG, the secret), redirect (302 to ARG) or trickle
# (2 KiB/s of a 1 GiB body, forever); every request is logged.
import http.server, os, sys, time
mode, portfile, log = sys.argv[1:4]
arg = sys.argv[4] if len(sys.argv) > 4 else ""
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_GET(self):
        open(log, "a").write("%s %s\n" % (self.client_address[0], self.path))
        if mode == "redirect":
            self.send_response(302); self.send_header("Location", arg); self.send_header("Content-Length", "0")
            self.end_headers(); return
        body = (arg + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body) if mode == "secret" else 1 << 30))
        self.end_headers()
        if mode == "secret":
            self.wfile.write(body); return
        while True:
            self.wfile.write(b"x" * 512); self.wfile.flush(); time.sleep(0.25)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
open(portfile + ".tmp", "w").write(str(srv.server_address[1])); os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
EOF
asrv() { python3 "$AS/srv.py" "$@" >/dev/null 2>&1 & SERVERS+=($!); wait_until 10 test -s "$2"; }
: >"$AS/secret.log"
asrv secret "$AS/p2" "$AS/secret.log" "$SECRET12"; P2=$(cat "$AS/p2")
asrv redirect "$AS/p1" "$AS/redirect.log" "http://127.0.0.1:$P2/secret"; P1=$(cat "$AS/p1")
asrv trickle "$AS/p3" "$AS/trickle.log"; P3=$(cat "$AS/p3")
MIRROR12="--asset-mirror http://assets.envmgr-test.invalid/=http://127.0.0.1:$P1/"
# at_task FILE ID URL [config|cloud_file] [EPISODE_TIMEOUT_S]: the URL as a download step in setup
# (the evaluator scores 1 when the guest has no such file or, with EXPECT12 set, when the file holds
# EXPECT12), or as the evaluator's expected cloud_file.
at_task() {
    python3 - "$@" <<'EOF'
import json, os, sys
f, tid, url = sys.argv[1:4]
where = sys.argv[4] if len(sys.argv) > 4 else "config"
step = {"type": "download", "parameters": {"files": [{"url": url, "path": "/tmp/at-asset"}]}}
has = {"type": "vm_command_line", "command": "cat /tmp/at-asset 2>/dev/null || echo absent"}
ev = {"func": "exact_match", "result": has,
      "expected": {"type": "rule", "rules": {"expected": os.environ.get("EXPECT12", "absent") + "\n"}}}
t = {"id": tid, "instruction": "x", "limits": {"max_steps": 2, "episode_timeout_s": float(sys.argv[5]) if len(sys.argv) > 5 else 600}}
if where == "config":
    t["config"] = [step]
else:
    ev = {"func": "exact_match", "result": has, "expected": {"type": "cloud_file", "path": url, "dest": "x"}}
t["evaluator"] = ev
json.dump(t, open(f, "w"))
EOF
}
FORMS12=("http://127.0.0.1:$P2/secret" "http://0177.0.0.1:$P2/secret" "http://2130706433:$P2/secret"
    "http://x@127.0.0.1:$P2/secret" "http://[::ffff:127.0.0.1]:$P2/secret")
for i in "${!FORMS12[@]}"; do at_task "$AS/fetch/form$i.json" "form$i" "${FORMS12[$i]}"; done
at_task "$AS/fetch/redirect.json" redirect "http://127.0.0.1:$P1/r"
at_task "$AS/fetch/mirror.json" mirror "http://assets.envmgr-test.invalid/secret"
at_task "$AS/fetch/getter.json" getter "http://127.0.0.1:$P2/secret?getter" cloud_file
at_task "$AS/fetch/metadata.json" metadata "http://169.254.169.254/latest/meta-data/"
cache_empty() { ! grep -rqs "$SECRET12" "$1" && [ -z "$(find "$1/blobs" "$1/urls" -type f 2>/dev/null)" ]; }
export -f cache_empty
export SECRET12

tried "task fetch of 9 URLs: the secret on 127.0.0.1:$P2 in five spellings, as a cloud_file, a redirect from 127.0.0.1:$P1 (allowed by --allow-private, and as an --asset-mirror) to it, and 169.254.169.254"
out=$(ENVMGR_ASSET_CACHE=$AS/cache "$ENVMGR" task fetch --allow-private 127.0.0.1:$P1 $MIRROR12 "$AS/fetch" 2>&1); rc=$?
check "12 held: task fetch exits 1 ($(tail -1 <<<"$out"))" test $rc = 1
check "12 held: task fetch: all 9 refused" grep -q '^9 assets: 0 cached before, 0 fetched .*, 9 failed' <<<"$out"
for u in "${FORMS12[@]}"; do
    check "12 held: task fetch $u: one line naming it, the address and the flag" \
        grep -qF "asset \`$u\`: connects to 127.0.0.1:$P2, a loopback address: only the operator may allow it (--allow-private 127.0.0.1:$P2)" <<<"$out"
done
check "12 held: task fetch: the redirect past the allowed first hop is refused, naming its target" \
    grep -qF "asset \`http://127.0.0.1:$P1/r\`: redirected (1 hop, to \`http://127.0.0.1:$P2/secret\`) to 127.0.0.1:$P2, a loopback address" <<<"$out"
check "12 held: task fetch: so is the redirect from the operator's mirror" \
    grep -qF "asset \`http://assets.envmgr-test.invalid/secret\`: redirected (1 hop, to \`http://127.0.0.1:$P2/secret\`) to 127.0.0.1:$P2" <<<"$out"
check "12 held: task fetch: the metadata address is refused" \
    grep -qF "connects to 169.254.169.254:80, a link-local address" <<<"$out"
check "12 held: the secret server saw no request" test ! -s "$AS/secret.log"
check "12 held: the redirector did (its hop was allowed): $(wc -l <"$AS/redirect.log") requests" test -s "$AS/redirect.log"
check "12 held: nothing in the asset cache, no lock written" \
    bash -c "cache_empty '$AS/cache' && [ ! -e '$AS/fetch/assets.lock.json' ]"
tried "the same URL with the operator's --allow-private 127.0.0.1:$P2 (the control)"
mkdir -p "$AS/ok" && cp "$AS/fetch/form0.json" "$AS/ok/"
out=$(ENVMGR_ASSET_CACHE=$AS/cache-fetch-ok "$ENVMGR" task fetch --allow-private 127.0.0.1:$P2 "$AS/ok" 2>&1); rc=$?
check "12: with --allow-private the asset is fetched (exit $rc)" \
    bash -c "[ $rc = 0 ] && grep -rqs '$SECRET12' '$AS/cache-fetch-ok/blobs'"
: >"$AS/secret.log"

E12=at-assets
"$ENVMGR" up --name $E12 --accel tcg >/dev/null 2>&1 || bad "up $E12"
cat >"$AS/done-agent" <<'EOF'
#!/bin/sh
while read obs; do echo '{"action_type": "DONE"}'; done
EOF
chmod +x "$AS/done-agent"
run12() { # run12 NAME TASK [ARGS...]: an episode on $E12, its own asset cache
    local name=$1 task=$2; shift 2
    ENVMGR_ASSET_CACHE=$AS/cache-$name "$ENVMGR" run "$task" --env $E12 --agent "$AS/done-agent" --out "$AS/runs/$name" "$@" \
        >"$AS/runs/$name.log" 2>&1
}
res12() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r.get(sys.argv[2]))" "$AS/runs/$1/result.json" "$2" 2>/dev/null; }
for i in "${!FORMS12[@]}"; do
    u=${FORMS12[$i]}
    tried "envmgr run with a download step from $u"
    run12 form$i "$AS/fetch/form$i.json"
    check "12 held: run $u: setup_error ($(res12 form$i exit_cause))" test "$(res12 form$i exit_cause)" = setup_error
    check "12 held: run $u: the reason names the step, the URL and the address" grep -qF \
        "config[0] (download): files[0]: asset \`$u\`: connects to 127.0.0.1:$P2, a loopback address: only the operator may allow it (--allow-private 127.0.0.1:$P2)" "$AS/runs/form$i/result.json"
    check "12 held: run $u: nothing uploaded, nothing cached" bash -c \
        "[ -s '$AS/runs/form$i/trace/trace.jsonl' ] && ! grep -q upload_ms '$AS/runs/form$i/trace/trace.jsonl' && cache_empty '$AS/cache-form$i'"
done
tried "envmgr run with a download from 127.0.0.1:$P1 (the operator allows it: ENVMGR_ASSET_ALLOW_PRIVATE, as run --env takes no --allow-private) redirecting to the secret; the same as an --asset-mirror"
ENVMGR_ASSET_ALLOW_PRIVATE=127.0.0.1:$P1 run12 redirect "$AS/fetch/redirect.json"
check "12 held: run, a redirect past the allowed hop: setup_error naming its target" bash -c \
    "[ '$(res12 redirect exit_cause)' = setup_error ] && grep -qF 'redirected (1 hop, to \`http://127.0.0.1:$P2/secret\`) to 127.0.0.1:$P2' '$AS/runs/redirect/result.json'"
run12 mirror "$AS/fetch/mirror.json" $MIRROR12
check "12 held: run, a redirect from the operator's mirror: setup_error naming its target" bash -c \
    "[ '$(res12 mirror exit_cause)' = setup_error ] && grep -qF 'to 127.0.0.1:$P2, a loopback address' '$AS/runs/mirror/result.json'"
check "12 held: neither cached anything" bash -c "cache_empty '$AS/cache-redirect' && cache_empty '$AS/cache-mirror'"
tried "a cloud_file getter naming the secret's URL"
run12 getter "$AS/fetch/getter.json"
check "12 held: the getter's fetch is refused: evaluator_error naming the address ($(res12 getter status))" bash -c \
    "[ '$(res12 getter status)' = evaluator_error ] && grep -qF 'connects to 127.0.0.1:$P2, a loopback address' '$AS/runs/getter/result.json' && cache_empty '$AS/cache-getter'"
check "12 held: the secret server saw no request in all these episodes: the secret never left it, for the guest or the cache" \
    test ! -s "$AS/secret.log"
tried "the control: ENVMGR_ASSET_ALLOW_PRIVATE=127.0.0.1:$P2, the operator's, lets setup fetch it"
EXPECT12=$SECRET12 at_task "$AS/runs/ok.json" ok "http://127.0.0.1:$P2/secret"
ENVMGR_ASSET_ALLOW_PRIVATE=127.0.0.1:$P2 run12 ok "$AS/runs/ok.json"
check "12: allowed, setup fetched the asset into the guest (score $(res12 ok score), $(res12 ok exit_cause))" bash -c \
    "[ '$(res12 ok score)' = 1.0 ] && grep -rqs '$SECRET12' '$AS/cache-ok/blobs'"
tried "an allowed asset server that trickles 2 KiB/s forever (above the 1 KiB/s stall limit), in a task with episode_timeout_s 40"
at_task "$AS/runs/slow.json" slow "http://127.0.0.1:$P3/slow" config 40
t0=$(date +%s)
ENVMGR_ASSET_ALLOW_PRIVATE=127.0.0.1:$P3 run12 slow "$AS/runs/slow.json"
took=$(( $(date +%s) - t0 ))
check "12 held: setup ended at the episode's deadline, not an hour later (run took $took s)" test "$took" -lt 150
check "12 held: setup_error saying the deadline came ($(res12 slow exit_cause))" bash -c \
    "[ '$(res12 slow exit_cause)' = setup_error ] && grep -q 'not fetched by its deadline' '$AS/runs/slow/result.json'"
check "12 held: the setup step lasted no longer than the episode (deadline 40 s from its start)" python3 -c "
import json,sys
s=[json.loads(l) for l in open(sys.argv[1]) if '\"setup\"' in l][0]
assert s['duration_ms'] < 41000, s['duration_ms']" "$AS/runs/slow/trace/trace.jsonl"
"$ENVMGR" down $E12 >/dev/null 2>&1
stop_servers; SERVERS=()

# --- 13. a live-view link that outlives its expiry (issue 27) ----------------------------------------
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" >"$T/serve13.out" 2>&1 &
SERVERS+=($!)
wait_until 30 grep -q 'listening on' "$T/serve13.out"
URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$T/serve13.out" | head -1)
H="Authorization: Bearer $(cat "$T/token")"
ID=$(curl -s -X POST -H "$H" -d '{}' "$URL/v1/envs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
check "13: an env to watch (${ID:-none})" test -n "$ID"
WSH=(-H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
ws_code() { curl -s -o /dev/null -w '%{http_code}' --max-time 3 "${WSH[@]}" "$@"; }
LINK=$(curl -s -H "$H" -d '{"ttl_s": 4, "control": true}' "$URL/v1/envs/$ID/live-token" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
tried "a 4 s control link opens the live page; the browser keeps the page's cookie after the link expires"
code=$(curl -s -o /dev/null -D "$T/h13" -w '%{http_code}' "$URL/v1/envs/$ID/live?token=$LINK&control=1")
COOKIE=$(sed -n "s/^Set-Cookie: envmgr_live_$ID=\([^;]*\);.*/\1/Ip" "$T/h13" | tr -d '\r')
age=$(sed -n 's/^Set-Cookie:.*Max-Age=\([0-9]*\);.*/\1/Ip' "$T/h13" | tr -d '\r')
check "13: the link opens the page ($code)" test "$code" = 200
check "13 held: the page's cookie is the link's own token, Max-Age ${age:-none} <= 4 s" \
    bash -c "[ '$COOKIE' = '$LINK' ] && [ -n '$age' ] && [ '$age' -le 4 ]"
check "13: before the link expires the cookie opens the control websocket (101)" \
    test "$(ws_code -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live/ws?control=1")" = 101
sleep 5
check "13 held: once the link expired, its cookie opens no control websocket (401)" \
    test "$(ws_code -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live/ws?control=1")" = 401
check "13 held: nor a view-only one (401)" test "$(ws_code -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live/ws")" = 401
code=$(curl -s -o /dev/null -D "$T/h13b" -w '%{http_code}' -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live?control=1")
check "13 held: reloading the page with the expired cookie is refused ($code) and mints no cookie" \
    bash -c "[ '$code' = 401 ] && ! grep -qi '^Set-Cookie' '$T/h13b'"
VIEW=$(curl -s -H "$H" -d '{"ttl_s": 60}' "$URL/v1/envs/$ID/live-token" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -s -o /dev/null -D "$T/h13c" "$URL/v1/envs/$ID/live?token=$VIEW"
COOKIE=$(sed -n "s/^Set-Cookie: envmgr_live_$ID=\([^;]*\);.*/\1/Ip" "$T/h13c" | tr -d '\r')
code=$(curl -s -o /dev/null -D "$T/h13d" -w '%{http_code}' -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live")
age=$(sed -n 's/^Set-Cookie:.*Max-Age=\([0-9]*\);.*/\1/Ip' "$T/h13d" | tr -d '\r')
check "13 held: a reload with a view link's cookie gets that token back, no longer (${age:-none} <= 60 s), never control" \
    bash -c "[ '$code' = 200 ] && [ -n '$age' ] && [ '$age' -le 60 ] && grep -qi 'Set-Cookie: envmgr_live_$ID=$COOKIE;' '$T/h13d'"
tried "?control=0&control=1: the auth check and the handler must read one value"
code=$(curl -s -o "$T/b13" -w '%{http_code}' -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live?control=0&control=1")
check "13 held: a repeated query parameter is a 400 naming it ($code)" \
    bash -c "[ '$code' = 400 ] && grep -q '\"field\": *\"control\"' '$T/b13'"
code=$(ws_code -b "envmgr_live_$ID=$COOKIE" "$URL/v1/envs/$ID/live/ws?control=0&control=1")
check "13 held: also on the websocket ($code)" test "$code" = 400
curl -s -o /dev/null -X DELETE -H "$H" "$URL/v1/envs/$ID"
stop_servers; SERVERS=()
# --- 14. a hostile trace's accessibility tree through the HTML export (issue 27) -------------------
# The export promises no scripts and no network for every file it writes, and a tree is XML the guest
# chose. A trace anyone can write (no key) whose tree is XHTML with a script and an image on a host
# listener; every file the export wrote is then opened in headless Chromium.
cat >"$T/tree-trace.py" <<'EOF'
import hashlib, json, os, struct, sys, zlib
d, port = sys.argv[1], sys.argv[2]
def chunk(t, b):
    return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 40, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"".join(b"\0" + b"\x80" * 192 for _ in range(40)))) + chunk(b"IEND", b""))
tree = ('<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>tree</title></head><body>'
        '<script>fetch("http://127.0.0.1:%s/script")</script><img src="http://127.0.0.1:%s/img"/></body></html>'
        % (port, port)).encode()
def store(sub, ext, data):
    os.makedirs(os.path.join(d, sub), exist_ok=True)
    sha = hashlib.sha256(data).hexdigest()
    open(os.path.join(d, sub, sha + ext), "wb").write(data)
    return sha
frame, a11y = store("frames", ".png", png), store("a11y", ".xml", tree)
lines = [{"type": "header", "format": 1, "envmgr_version": "0.1.0", "task_id": "hostile-tree", "task_sha256": "1" * 64,
          "image_manifest_sha256": "2" * 64, "screen": {"width": 64, "height": 40}, "accel": "tcg",
          "started": "2024-05-01T12:00:00.000Z", "unsafe_open_network": False},
         {"type": "step", "index": 0, "action": {"action_type": "WAIT"}, "source": "computer_13", "agent_ms": 1,
          "action_ms": 1, "t": 0.5, "frame_before": frame, "frame_after": frame, "a11y_tree": a11y}]
out, prev = b"", "0" * 64
for line in lines + [None]:
    if line is None:
        line = {"type": "trailer", "lines": len(lines), "sha256": hashlib.sha256(out).hexdigest(), "complete": True}
    line["prev"] = prev
    s = json.dumps(line, separators=(",", ":")).encode()
    out += s + b"\n"
    prev = hashlib.sha256(s).hexdigest()
open(os.path.join(d, "trace.jsonl"), "wb").write(out)
print(os.path.join(d, "a11y", a11y + ".xml"))
EOF
BROWSER=$(command -v chromium || true)
open_page() { # FILE: loaded as a person would, scripts on, 3 s of virtual time
    timeout 90 "$BROWSER" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --user-data-dir="$(mktemp -d "$T/chromium.XXXXXX")" \
        --virtual-time-budget=3000 --dump-dom "file://$1" >/dev/null 2>&1
}
if [ -z "$BROWSER" ]; then
    bad "14: chromium is missing (scripts/apt-packages.txt lists it: apt-get install chromium)"
else
    : >"$T/export.log"
    listen_on 127.0.0.1 7490 "$T/export.log"
    raw=$(python3 "$T/tree-trace.py" "$T/tree-trace" 7490)
    check "14: the hostile trace verifies (no key needed to write one)" bash -c "'$ENVMGR' trace verify '$T/tree-trace' >/dev/null"
    open_page "$raw"
    check "14: (control) the tree opened as the guest wrote it reaches the listener ($(wc -l <"$T/export.log") connections)" \
        test -s "$T/export.log"
    : >"$T/export.log"
    tried "export the trace to HTML and open every file it wrote in headless Chromium"
    "$ENVMGR" trace export "$T/tree-trace" --html "$T/tree-site" >/dev/null 2>&1
    written=$(cd "$T/tree-site" 2>/dev/null && find . -type f | sort)
    for f in $written; do open_page "$T/tree-site/$f"; done
    check "14: the export wrote the page, the frame and the tree ($(echo $written))" \
        bash -c "[ \$(echo '$written' | wc -l) = 3 ] && echo '$written' | grep -qx './index.html'"
    check "14 held: no file it wrote reached the listener ($(wc -l <"$T/export.log") connections)" test ! -s "$T/export.log"
    check "14 held: the tree is shown as text, under the page's policy" bash -c \
        "f=\$(ls '$T/tree-site/a11y/'*.html) && grep -q 'Content-Security-Policy' \"\$f\" && grep -q '&lt;script&gt;fetch' \"\$f\" && ! grep -qi '<script' \"\$f\""
    stop_servers; SERVERS=()
fi

# --- 15. a task-folder symlink as wait_screen's reference (issue 27) --------------------------------
tried "a task whose wait_screen reference is ref.png -> a host PNG outside its folder"
mkdir -p "$T/ref-task"
printf '\x89PNG\r\n\x1a\nhost file' >"$T/host-screen.png"
ln -sf "$T/host-screen.png" "$T/ref-task/ref.png"
cat >"$T/ref-task/task.json" <<'EOF'
{"id": "ref-link", "instruction": "x", "config": [{"type": "sleep", "parameters": {"seconds": 0}},
 {"type": "wait_screen", "parameters": {"reference": "ref.png", "timeout": 5}}], "evaluator": {"func": "infeasible"}}
EOF
out=$("$ENVMGR" task check "$T/ref-task/task.json" 2>&1); rc=$?
check "15 held: refused at load, naming config[1].parameters.reference (exit $rc)" bash -c \
    "[ $rc != 0 ] && echo \"\$1\" | grep -qx '$T/ref-task/task.json: config\[1\].parameters.reference: \`ref.png\` resolves outside the task folder'" _ "$out"
out=$("$ENVMGR" up --name at-ref --accel tcg --task "$T/ref-task/task.json" 2>&1); rc=$?
check "15 held: up --task refuses it in one line, exit 2, no env ($out)" bash -c \
    "[ $rc = 2 ] && [ ! -e '$ENVMGR_RUN_DIR/at-ref' ] && [ \$(echo \"\$1\" | wc -l) = 1 ] && echo \"\$1\" | grep -q 'config\[1\].parameters.reference: .ref.png. resolves outside the task folder'" _ "$out"
"$ENVMGR" down at-ref >/dev/null 2>&1

# --- 17. a task's broken reference files made into the agent's 0 (issue 27) --------------------------
# A task ships the expected side: when that cannot be read, the score is no score (evaluator_error), not a
# 0 that blames the agent; an office document whose XML declares an external entity (XXE) is refused like
# the billion-laughs one, on either side, never parsed into text that scores. No VM: `envmgr metric run`.
M=$T/metric17
mkdir -p "$M" && /usr/bin/python3 "$ROOT/tests/tools/metric_fixtures.py" "$M" --hostile >/dev/null 2>&1
printf 'not a png' >"$M/broken.png"
cp "$M/small.png" "$M/ok-ref.png" || bad "17: the fixtures have small.png"
metric17() { out=$("$ENVMGR" metric run "$@" 2>"$M/err"); rc=$?; err=$(cat "$M/err"); }
tried "compare_images_exact with an expected file that is not a PNG (the task's fault)"
metric17 compare_images_exact --result "$M/ok-ref.png" --expected "$M/broken.png"
check "17 held: evaluator_error, exit 1, naming the expected side ($err)" bash -c \
    "[ $rc = 1 ] && echo \"\$1\" | grep -q '\"status\":\"evaluator_error\"' && echo \"\$2\" | grep -q 'expected'" _ "$out" "$err"
metric17 compare_images_exact --result "$M/broken.png" --expected "$M/ok-ref.png"
check "17: an undecodable result is still the agent's 0 (scored, $rc)" bash -c \
    "[ $rc = 0 ] && echo \"\$1\" | grep -q '\"status\":\"scored\"' && echo \"\$1\" | grep -q '\"score\":0'" _ "$out"
for side in result expected; do
    tried "an XXE docx as the $side of compare_docx_files (an entity reading file:///etc/passwd)"
    if [ $side = result ]; then metric17 compare_docx_files --result "$M/xxe.docx" --expected "$M/ok.docx"
    else metric17 compare_docx_files --result "$M/ok.docx" --expected "$M/xxe.docx"; fi
    check "17 held: the XXE $side is an evaluator_error naming the entity, as billion laughs is ($rc)" bash -c \
        "[ $rc = 1 ] && echo \"\$1\" | grep -q \"external entity 'xxe'\"" _ "$err"
done
metric17 compare_docx_files --result "$M/laughs.docx" --expected "$M/ok.docx"
check "17: (the billion-laughs docx, for comparison: evaluator_error, $rc)" test "$rc" = 1

check "nothing of this suite is left running" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

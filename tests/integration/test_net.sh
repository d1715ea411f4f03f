#!/usr/bin/env bash
# Network isolation, proven by probes from inside a real guest (TCG).
#
# The whole suite runs in network and mount namespaces of its own (it
# re-executes itself under `unshare --net --mount`): the namespace has only
# loopback, so even a broken boundary cannot send a packet off this machine.
# QEMU, the egress proxy and the test servers (HTTP and TCP echo, on
# 127.0.0.1 only) all live in it. A bind-mounted /etc/hosts in the mount
# namespace gives test names (web.envmgr.test, ...) host-side addresses on
# 127.0.0.1; the real /etc/hosts is untouched.
#
# Env A (allowlist) and env B (mode none) are probed the same way:
# allowlisted HTTP through the proxy, a non-allowlisted URL, TCP to the
# host's loopback bypassing the proxy (10.0.2.2), DNS over UDP (10.0.2.3 and
# an outside address), ICMP, an allowlisted raw TCP endpoint, a name that
# resolves to 127.0.0.1 when only that name is listed, hostile requests.
# Prints `net: N passed, N failed`.
SUITE=net
if [ -z "${ENVMGR_NET_NS:-}" ]; then
    if ! unshare --net --mount true 2>/dev/null; then
        echo "FAIL this suite needs network namespaces (unshare --net --mount; run as root or with user namespaces)"
        echo "net: 0 passed, 1 failed"
        exit 1
    fi
    exec unshare --net --mount -- env ENVMGR_NET_NS=1 bash "$0" "$@"
fi
ip link set lo up || { echo "FAIL ip link set lo up"; echo "net: 0 passed, 1 failed"; exit 1; }
source "$(dirname "$0")/lib.sh"

A=it-net-a B=it-net-b C=it-net-c D=it-net-d
HTTP=18080 HTTP2=18081 ECHO=17777
SERVERS=()
stop_servers() { for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
trap 'stop_servers; cleanup' EXIT

# --- the namespace and the host-side servers ------------------------------------
check "the test namespace has only loopback" test "$(ip -o link | wc -l)" = 1
check "no route leaves the namespace" bash -c "! ip route get 192.0.2.1 >/dev/null 2>&1"
cat /etc/hosts >"$T/hosts"
echo "127.0.0.1 web.envmgr.test echo.envmgr.test public.envmgr-test.example" >>"$T/hosts"
mount --bind "$T/hosts" /etc/hosts
check "test names resolve to 127.0.0.1 in this namespace only" \
    bash -c "getent hosts public.envmgr-test.example | grep -q '^127.0.0.1 '"

mkdir -p "$T/www" "$T/www2"
echo hello-envmgr >"$T/www/ok.txt"
echo must-not-be-seen >"$T/www2/ok.txt"
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" $HTTP >/dev/null 2>"$T/http.log" &
SERVERS+=($!)
python3 -m http.server --bind 127.0.0.1 --directory "$T/www2" $HTTP2 >/dev/null 2>"$T/http2.log" &
SERVERS+=($!)
cat >"$T/echo.py" <<'EOF'
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
log = open(sys.argv[2], "a", buffering=1)
def serve(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    log.write("conn\n")
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
: >"$T/echo.log"
python3 "$T/echo.py" $ECHO "$T/echo.log" &
SERVERS+=($!)
check "the test servers listen on 127.0.0.1" wait_until 20 bash -c \
    "curl -sf http://127.0.0.1:$HTTP/ok.txt >/dev/null && curl -sf http://127.0.0.1:$HTTP2/ok.txt >/dev/null && (exec 3<>/dev/tcp/127.0.0.1/$ECHO)"
: >"$T/http.log"; : >"$T/http2.log"; : >"$T/echo.log"

G() { local e=$1; shift; "$ENVMGR" exec "$e" --timeout 40 -- "$@"; }
PROXY=http://10.0.2.100:3128
# http_code of a request through the proxy (000 when there was no HTTP answer)
code_via_proxy() { G "$1" curl -s -m 15 -o /dev/null -w '%{http_code}' -x $PROXY "${@:2}"; }
qemu_cmdline() { local pid; pid=$(cat "$ENVMGR_RUN_DIR/$1/qemu.pid") && tr '\0' ' ' </proc/"$pid"/cmdline; }
helper_pid() { cat "$ENVMGR_RUN_DIR/$1/egress-proxy.pid" 2>/dev/null; }
events() { "$ENVMGR" net log "$1"; }
# event_count ENV PYTHON-CONDITION-ON-e: events of ENV that satisfy it
event_count() {
    events "$1" | python3 -c "
import json, sys
n = 0
for line in sys.stdin:
    e = json.loads(line)
    if $2:
        n += 1
print(n)"
}
# the env's egress proxy's children left unreaped (the machine's other envmgr processes are not ours)
zombies() { ps -eo stat=,ppid= | awk -v p="$(helper_pid $A)" '$1 ~ /^Z/ && $2 == p' | wc -l; }

# --- env A: allowlist --------------------------------------------------------------
out=$("$ENVMGR" up --name $A --accel tcg --allow-private 127.0.0.1:$HTTP --allow web.envmgr.test:$HTTP \
    --allow-private 127.0.0.1:$ECHO --allow echo.envmgr.test:$ECHO --allow public.envmgr-test.example:$HTTP2 2>&1); rc=$?
echo "$out" | tail -2
[ $rc = 0 ] && ok "up $A --allow ... (a clone with guestfwd rules restores from the golden state)" \
    || { bad "up $A: $out"; finish; exit 1; }
check "$A: the guest runs (agent answers)" bash -c "'$ENVMGR' exec $A -- cat /etc/hostname | grep -q envmgr"
cmd=$(qemu_cmdline $A)
check "$A: QEMU keeps restrict=on and ipv6=off and gets the guestfwd relays" \
    bash -c "echo \"\$1\" | grep -q 'user,id=net0,restrict=on,ipv6=off,guestfwd=tcp:10.0.2.100:3128-cmd:'" _ "$cmd"
check "$A: only spawn and setsid are relaxed (obsolete, resourcecontrol stay denied)" \
    bash -c "echo \"\$1\" | grep -q 'on,obsolete=deny,elevateprivileges=allow,spawn=allow,resourcecontrol=deny'" _ "$cmd"
hp=$(helper_pid $A)
check "$A: the egress proxy runs as QEMU's parent" \
    test "$(ps -o ppid= -p "$(cat "$ENVMGR_RUN_DIR/$A/qemu.pid")" | tr -d ' ')" = "$hp"
check "$A: run directory 0700, egress socket and log 0600" bash -c \
    "[ \$(stat -c %a '$ENVMGR_RUN_DIR/$A') = 700 ] && [ \$(stat -L -c %a '$ENVMGR_RUN_DIR/$A/egress.sock') = 600 ] && [ \$(stat -c %a '$ENVMGR_RUN_DIR/$A/egress.jsonl') = 600 ]"
if [ "$(id -u)" = 0 ]; then # QEMU and the proxy run as the env's own user: the socket is theirs, in root's registry
    quid=$(awk '/^Uid:/ {print $3}' "/proc/$(cat "$ENVMGR_RUN_DIR/$A/qemu.pid")/status")
    check "$A: the egress socket belongs to QEMU's user ($quid), in the root-owned registry" bash -c \
        "t=\$(readlink '$ENVMGR_RUN_DIR/$A/egress.sock'); case \$t in /run/envmgr-qemu-users/*.sock) ;; *) exit 1;; esac; [ \$(stat -c %u \$t) = $quid ] && [ $quid != 0 ] && [ \$(stat -c %U:%a /run/envmgr-qemu-users) = root:711 ]"
fi
check "$A: /etc/environment points http_proxy and https_proxy at the proxy" \
    bash -c "'$ENVMGR' exec $A -- cat /etc/environment | grep -qx 'https_proxy=$PROXY/'"
ECHO_ADDR=$("$ENVMGR" net show $A --json | python3 -c "
import json, sys
for r in json.load(sys.stdin)['relays']:
    if r['rule'] == '127.0.0.1:$ECHO':
        print(r['guest_address'])")
check "$A: net show lists the raw TCP relay of 127.0.0.1:$ECHO ($ECHO_ADDR)" test -n "$ECHO_ADDR"
z0=$(zombies)

# allowlisted HTTP through the proxy
check "$A: allowlisted URL through the proxy works" \
    bash -c "[ \"\$('$ENVMGR' exec $A --timeout 40 -- curl -sS -m 15 -x $PROXY http://127.0.0.1:$HTTP/ok.txt)\" = hello-envmgr ]"
check "$A: a program honouring /etc/environment goes through the proxy by itself" bash -c \
    "[ \"\$('$ENVMGR' exec $A --timeout 40 -- sh -c 'set -a; . /etc/environment; curl -sS -m 15 http://web.envmgr.test:$HTTP/ok.txt')\" = hello-envmgr ]"
check "$A: CONNECT tunnel to an allowlisted host:port works" \
    bash -c "[ \"\$('$ENVMGR' exec $A --timeout 40 -- curl -sS -m 15 -p -x $PROXY http://127.0.0.1:$HTTP/ok.txt)\" = hello-envmgr ]"
# not allowlisted: a fast 403
t0=$(date +%s%N)
c=$(code_via_proxy $A http://127.0.0.1:$HTTP2/ok.txt)
t1=$(date +%s%N)
check "$A: a URL not in the allowlist gets 403 (got $c)" test "$c" = 403
check "$A: ... at once (under 5 s, $(( (t1 - t0) / 1000000 )) ms)" test $(( (t1 - t0) / 1000000 )) -lt 5000
G $A curl -s -m 15 -p -x $PROXY http://127.0.0.1:$HTTP2/ok.txt >/dev/null 2>&1
check "$A: CONNECT to a host:port not in the allowlist fails" test $? != 0
# a name that resolves to loopback, when only that name is listed
body=$(G $A curl -s -m 15 -x $PROXY http://public.envmgr-test.example:$HTTP2/ok.txt)
check "$A: a listed name resolving to 127.0.0.1 is refused (not listed by address)" \
    bash -c "echo \"\$1\" | grep -q 'resolves to 127.0.0.1, a loopback address'" _ "$body"
out=$(G $A sh -c "printf 'GET /ok.txt HTTP/1.0\r\n\r\n' | nc -w 8 public.envmgr-test.example $HTTP2" 2>&1)
check "$A: ... and its raw TCP relay closes at once" test -z "$out"
# bypassing the proxy
check "$A: direct TCP to the host's loopback HTTP server (10.0.2.2:$HTTP) fails" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- curl -sS -m 8 --noproxy '*' http://10.0.2.2:$HTTP/ok.txt >/dev/null 2>&1"
check "$A: direct TCP to the host's echo server (10.0.2.2:$ECHO) fails" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- nc -z -w 5 10.0.2.2 $ECHO"
check "$A: 10.0.2.2 host services (22, 80, 443) are closed" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- sh -c 'nc -z -w 3 10.0.2.2 22 || nc -z -w 3 10.0.2.2 80 || nc -z -w 3 10.0.2.2 443'"
check "$A: 127.0.0.1:$HTTP from the guest is the guest itself, not the host" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- curl -sS -m 8 --noproxy '*' http://127.0.0.1:$HTTP/ >/dev/null 2>&1"
# DNS over UDP and ICMP (root in the guest even adds a default route first)
G $A ip route add default via 10.0.2.2 >/dev/null 2>&1
check "$A: DNS over UDP to slirp's 10.0.2.3 gets no answer" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- dig +time=2 +tries=1 @10.0.2.3 example.org >/dev/null 2>&1"
check "$A: DNS over UDP to an outside resolver address gets no answer" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- dig +time=2 +tries=1 @192.0.2.53 example.org >/dev/null 2>&1"
check "$A: ICMP ping to an outside address gets no answer" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- ping -c 2 -W 2 192.0.2.1 >/dev/null 2>&1"
check "$A: IPv6 to slirp's host address (fec0::2) fails too" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- sh -c 'nc -6 -z -w 3 fec0::2 $HTTP || nc -6 -z -w 3 fec0::2 $ECHO'"
check "$A: names outside the allowlist do not resolve in the guest" \
    bash -c "! '$ENVMGR' exec $A --timeout 40 -- getent hosts example.org >/dev/null 2>&1"
# raw TCP endpoints
check "$A: the allowlisted raw TCP endpoint echoes (at $ECHO_ADDR:$ECHO)" \
    bash -c "[ \"\$('$ENVMGR' exec $A --timeout 40 -- sh -c 'echo raw-ping | nc -N -w 8 $ECHO_ADDR $ECHO')\" = raw-ping ]"
check "$A: ... and by its name through the guest's hosts file" \
    bash -c "[ \"\$('$ENVMGR' exec $A --timeout 40 -- sh -c 'echo by-name | nc -N -w 8 echo.envmgr.test $ECHO')\" = by-name ]"
# hostile requests from the guest: refusals, never a crash
c=$(G $A sh -c "printf 'CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n' | nc -w 8 10.0.2.100 3128 | head -c 12")
check "$A: CONNECT to host:0 gets 400 ($c)" test "$c" = "HTTP/1.1 400"
c=$(G $A sh -c "printf 'CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n' | nc -w 8 10.0.2.100 3128 | head -c 12")
check "$A: CONNECT to an out-of-range port gets 400 ($c)" test "$c" = "HTTP/1.1 400"
c=$(G $A sh -c "printf 'GET http://%%31%%32%%37.0.0.1:$HTTP/ HTTP/1.1\r\n\r\n' | nc -w 8 10.0.2.100 3128 | head -c 12")
check "$A: a percent-encoded host gets 400 ($c)" test "$c" = "HTTP/1.1 400"
c=$(code_via_proxy $A "http://[::1]:$HTTP/ok.txt")
check "$A: an IPv6 literal not in the allowlist gets 403 ($c)" test "$c" = 403
c=$(code_via_proxy $A -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" http://127.0.0.1:$HTTP/ok.txt)
check "$A: an absurd header gets 431 ($c)" test "$c" = 431
c=$(G $A sh -c "(printf 'GET http://127.0.0.1:$HTTP/ HTTP/1.1\r\nX-Slow: '; sleep 14) | nc -w 20 10.0.2.100 3128 | head -c 12")
check "$A: a slowloris client gets 408 ($c)" test "$c" = "HTTP/1.1 408"
check "$A: ... after the 10 s head timeout, not later" test \
    "$(event_count $A "e.get('status') == 408 and 9500 <= e['duration_ms'] < 12000")" = 1
check "$A: the proxy still serves after all that" \
    bash -c "[ \"\$('$ENVMGR' exec $A --timeout 40 -- curl -sS -m 15 -x $PROXY http://127.0.0.1:$HTTP/ok.txt)\" = hello-envmgr ]"

# the egress log
check "$A: the host's second server never saw a connection" test ! -s "$T/http2.log"
check "$A: allowed attempts are logged with bytes both ways and the rule" test \
    "$(event_count $A "e['verdict'] == 'allowed' and e['bytes_in'] > 0 and e['bytes_out'] > 0 and e['rule'] and e['env'] == '$A'")" -ge 6
check "$A: the refused URL is logged as denied, with its reason" test \
    "$(event_count $A "e['verdict'] == 'denied' and e['port'] == $HTTP2 and e['dest'] == '127.0.0.1' and 'allowlist' in e['reason']")" -ge 2
check "$A: the name resolving to loopback is logged as denied (proxy and relay)" test \
    "$(event_count $A "e['verdict'] == 'denied' and e['dest'] == 'public.envmgr-test.example' and 'loopback' in e['reason']")" = 2
check "$A: raw TCP is logged as method TCP via relay" test \
    "$(event_count $A "e['method'] == 'TCP' and e['via'] == 'relay' and e['verdict'] == 'allowed'")" = 2
check "$A: hostile requests are logged as denied (port 0, range, encoding, IPv6, 431, 408)" test \
    "$(event_count $A "e['verdict'] == 'denied' and e.get('status') in (400, 403, 408, 431) and e['dest'] != 'public.envmgr-test.example' and e.get('port') != $HTTP2")" -ge 6
check "$A: every line has time, env, dest, port, method, bytes, verdict, rule" test \
    "$(event_count $A "not all(k in e for k in ('time', 'env', 'dest', 'port', 'method', 'bytes_out', 'bytes_in', 'verdict', 'rule'))")" = 0
check "$A: nothing but the proxy and relays reached the host (DNS, ICMP, 10.0.2.2 are not in the log)" test \
    "$(event_count $A "e['dest'] in ('10.0.2.2', '10.0.2.3', '192.0.2.53', '192.0.2.1')")" = 0
"$ENVMGR" net log $A --table >"$T/table.txt"
check "$A: net log --table prints one row per attempt" \
    test "$(($(wc -l <"$T/table.txt") - 1))" = "$(events $A | wc -l)"
check "$A: per-connection relays are reaped (no zombie per connection)" test "$(zombies)" -le "$z0"

# reset: the proxy restarts with QEMU, the guest files come back
old=$(helper_pid $A)
check "$A: reset" "$ENVMGR" reset $A
new=$(helper_pid $A)
check "$A: after reset a new egress proxy runs ($old -> $new)" bash -c "[ -n '$new' ] && [ '$new' != '$old' ]"
check "$A: ... and the old one is gone" bash -c "! ps -o stat= -p $old | grep -qv Z"
check "$A: after reset the proxy works and /etc/environment is set again" bash -c \
    "[ \"\$('$ENVMGR' exec $A --timeout 40 -- sh -c 'set -a; . /etc/environment; curl -sS -m 15 http://web.envmgr.test:$HTTP/ok.txt')\" = hello-envmgr ]"

# --- env B: mode none -------------------------------------------------------------
: >"$T/http.log"; : >"$T/echo.log"
out=$("$ENVMGR" up --name $B --accel tcg --network none --allow-private 127.0.0.1:$HTTP 2>&1); rc=$?
[ $rc = 0 ] && ok "up $B (mode none)" || { bad "up $B: $out"; finish; exit 1; }
cmd=$(qemu_cmdline $B)
# As root, QEMU drops to the env's user itself (-runas, set*id calls after its filter is in place):
# elevateprivileges is allowed then, and the user it ends up as has no privilege to elevate to.
if [ "$(id -u)" = 0 ]; then elev='-runas [0-9]*:[0-9]* -sandbox on,obsolete=deny,elevateprivileges=allow'; else elev='elevateprivileges=deny'; fi
check "$B: every sandbox flag stays on, IPv6 off, no guestfwd" bash -c "echo \"\$1\" | grep -q -- '-netdev user,id=net0,restrict=on,ipv6=off -device' && echo \"\$1\" | grep -q -- \"\$2\" && echo \"\$1\" | grep -q 'spawn=deny,resourcecontrol=deny'" _ "$cmd" "$elev"
check "$B: no egress proxy" test ! -e "$ENVMGR_RUN_DIR/$B/egress-proxy.pid"
check "$B: the proxy address does not answer" \
    bash -c "! '$ENVMGR' exec $B --timeout 40 -- curl -sS -m 8 -x $PROXY http://127.0.0.1:$HTTP/ok.txt >/dev/null 2>&1"
check "$B: no relay address answers" bash -c "! '$ENVMGR' exec $B --timeout 40 -- nc -z -w 5 $ECHO_ADDR $ECHO"
check "$B: 10.0.2.2 ($HTTP, $ECHO) does not answer" bash -c \
    "! '$ENVMGR' exec $B --timeout 40 -- sh -c 'nc -z -w 3 10.0.2.2 $HTTP || nc -z -w 3 10.0.2.2 $ECHO'"
G $B ip route add default via 10.0.2.2 >/dev/null 2>&1
check "$B: DNS over UDP (10.0.2.3, outside) gets no answer" bash -c \
    "! '$ENVMGR' exec $B --timeout 40 -- sh -c 'dig +time=2 +tries=1 @10.0.2.3 example.org || dig +time=2 +tries=1 @192.0.2.53 example.org' >/dev/null 2>&1"
check "$B: ICMP to an outside address gets no answer" \
    bash -c "! '$ENVMGR' exec $B --timeout 40 -- ping -c 2 -W 2 192.0.2.1 >/dev/null 2>&1"
check "$B: the proxy saw nothing (no egress log)" test ! -e "$ENVMGR_RUN_DIR/$B/egress.jsonl"
check "$B: the host's servers saw nothing" bash -c "[ ! -s '$T/http.log' ] && [ ! -s '$T/echo.log' ]"
check "$B: net show says none" bash -c "'$ENVMGR' net show $B | grep -q '^mode:   none'"

# --- bad input, --task, --unsafe-open-network ---------------------------------------------
"$ENVMGR" up --name $C --network none --allow 127.0.0.1:1 >/dev/null 2>&1
check "up --network none --allow: exit 2" test $? = 2
"$ENVMGR" up --name $C --allow 127.0.0.1:0 >/dev/null 2>&1
check "up --allow host:0: exit 2" test $? = 2
out=$("$ENVMGR" up --name $C --network open 2>&1)
check "up --network open: exit 2, pointing at --unsafe-open-network" bash -c "echo \"\$1\" | grep -q unsafe-open-network" _ "$out"
"$ENVMGR" net log no-such-env >/dev/null 2>&1
check "net log of a missing env: exit 2" test $? = 2
check "no env was created by bad input" test ! -e "$ENVMGR_RUN_DIR/$C"
cat >"$T/task.json" <<EOF
{"id": "net-task", "instruction": "Fetch the page.",
 "network": {"mode": "allowlist", "allow": ["web.envmgr.test:$HTTP"]},
 "limits": {"max_steps": 2, "step_timeout_s": 30, "episode_timeout_s": 120},
 "config": [{"type": "execute", "parameters": {"command": "set -a; . /etc/environment; curl -sS -m 15 http://web.envmgr.test:$HTTP/ok.txt > /tmp/page.txt; curl -s -m 15 --noproxy '' -x $PROXY http://127.0.0.1:$HTTP2/ok.txt; true", "timeout": 60}}],
 "evaluator": {"func": "check_include_exclude", "result": {"type": "egress_log"},
               "expected": {"type": "rule", "rules": {"include": ["\"verdict\":\"allowed\"", "\"verdict\":\"denied\"", "\"port\":$HTTP2"]}}}}
EOF
sed 's|"web.envmgr.test:'$HTTP'"|"web.envmgr.test:'$HTTP'", "127.0.0.1:'$HTTP'"|' "$T/task.json" >"$T/task-loopback.json"
out=$("$ENVMGR" up --name $C --accel tcg --task "$T/task-loopback.json" 2>&1); rc=$?
check "a task listing the host's loopback is refused: exit 2, naming --allow-private" \
    bash -c "[ $rc = 2 ] && echo \"\$1\" | grep -q 'network.allow\[1\].*127.0.0.1 is a loopback address.*--allow-private'" _ "$out"
"$ENVMGR" up --name $C --accel tcg --allow 127.0.0.1:$HTTP >/dev/null 2>&1
check "--allow 127.0.0.1:PORT is refused too (exit 2): loopback only through --allow-private" test $? = 2
check "up --task FILE takes the task's network section, with the operator's private rules" \
    "$ENVMGR" up --name $C --accel tcg --task "$T/task.json" --allow-private 127.0.0.1:$HTTP
check "$C: net show lists the task's rule and the operator's" \
    bash -c "'$ENVMGR' net show $C | grep -q 'web.envmgr.test:$HTTP' && '$ENVMGR' net show $C | grep -q '127.0.0.1:$HTTP'"
check "$C: down" "$ENVMGR" down $C
check "up --unsafe-open-network" "$ENVMGR" up --name $D --accel tcg --unsafe-open-network
check "$D: mode open" bash -c "'$ENVMGR' net show $D | grep -q '^mode:   open'"
c=$(code_via_proxy $D http://127.0.0.1:$HTTP/ok.txt)
check "$D: even open, the host's loopback stays refused unless listed by address ($c)" test "$c" = 403
check "$D: down" "$ENVMGR" down $D

# --- an episode: the trace and the egress_log getter ------------------------------------
out=$("$ENVMGR" run "$T/task.json" --env $B --agent "$ROOT/tasks/agents/null" --out "$T/ep" 2>&1); rc=$?
echo "$out" | tail -1
check "episode in $B (mode none) with an allowlist task runs" test $rc = 0
check "the egress_log getter saw the allowed and the denied attempt (score 1)" \
    python3 -c "import json,sys; sys.exit(json.load(open('$T/ep/result.json'))['score'] != 1)"
check "the trace holds the egress events" python3 -c "
import json, sys
ev = [json.loads(l) for l in open('$T/ep/trace/trace.jsonl') if json.loads(l)['type'] == 'egress']
sys.exit(not (len(ev) == 2 and {e['verdict'] for e in ev} == {'allowed', 'denied'}))"
check "the trace header records the network policy, not open" python3 -c "
import json, sys
h = json.loads(open('$T/ep/trace/trace.jsonl').readline())
sys.exit(not (h['unsafe_open_network'] is False and h['network']['mode'] == 'allowlist'))"
check "the trace verifies" "$ENVMGR" trace verify "$T/ep/trace"
check "$B: keeps the network policy of the last task that ran in it" \
    bash -c "'$ENVMGR' net show $B | grep -q '^mode:   allowlist'"
check "the trace header records the default egress limits (256 MiB, 600 a minute)" python3 -c "
import json, sys
n = json.loads(open('$T/ep/trace/trace.jsonl').readline())['network']
sys.exit(not (n['limits'] == {'max_bytes_out': 268435456, 'max_connections_per_minute': 600} and n['maxima'] == n['limits']))"

# --- egress limits set by a task, within the operator's maxima -----------------------------
cat >"$T/task-limits.json" <<EOF
{"id": "net-limits", "instruction": "Fetch the page three times.",
 "network": {"mode": "allowlist", "allow": ["web.envmgr.test:$HTTP"], "limits": {"max_connections_per_minute": 2}},
 "limits": {"max_steps": 2, "step_timeout_s": 30, "episode_timeout_s": 120},
 "config": [{"type": "execute", "parameters": {"command": "set -a; . /etc/environment; for i in 1 2 3; do curl -s -m 15 -o /dev/null http://web.envmgr.test:$HTTP/ok.txt; done; true", "timeout": 60}}],
 "evaluator": {"func": "check_include_exclude", "result": {"type": "egress_log"},
               "expected": {"type": "rule", "rules": {"include": ["\"status\":429", "more than 2 new connections in a minute"]}}}}
EOF
out=$("$ENVMGR" run "$T/task-limits.json" --env $B --agent "$ROOT/tasks/agents/null" --out "$T/ep-limits" 2>&1); rc=$?
echo "$out" | tail -1
check "a task's max_connections_per_minute: 2 is enforced in the guest (the third connection gets 429)" \
    python3 -c "import json,sys; sys.exit(json.load(open('$T/ep-limits/result.json'))['score'] != 1)"
check "... the trace header records the task's limit and the maxima" python3 -c "
import json, sys
n = json.loads(open('$T/ep-limits/trace/trace.jsonl').readline())['network']
sys.exit(not (n['limits']['max_connections_per_minute'] == 2 and n['maxima']['max_connections_per_minute'] == 600))"
check "... and net show prints it" bash -c "'$ENVMGR' net show $B | grep -q '^limits: .*new connections per minute 2$'"
sed 's|"max_connections_per_minute": 2|"max_bytes_out": 1073741824|' "$T/task-limits.json" >"$T/task-greedy.json"
out=$("$ENVMGR" run "$T/task-greedy.json" --agent "$ROOT/tasks/agents/null" --out "$T/ep-greedy" 2>&1); rc=$?
check "a task asking for more than the maximum is refused before a VM starts: exit 2, one line naming field and maximum" \
    bash -c "[ $rc = 2 ] && [ \$(echo \"\$1\" | wc -l) = 1 ] && echo \"\$1\" | grep -q 'network.limits.max_bytes_out: 1073741824 is above the operator.s maximum 268435456 (--max-egress-bytes)'" _ "$out"
out=$("$ENVMGR" run "$T/task-greedy.json" --env $B --agent "$ROOT/tasks/agents/null" --out "$T/ep-greedy" 2>&1); rc=$?
check "... and by an existing env (exit 2)" \
    bash -c "[ $rc = 2 ] && echo \"\$1\" | grep -q 'network.limits.max_bytes_out: .*(--max-egress-bytes)'" _ "$out"

# --- teardown: nothing left behind -----------------------------------------------------
check "down $A $B" "$ENVMGR" down $A $B
check "no QEMU and no egress proxy left under the run directory" no_qemu_under "$ENVMGR_RUN_DIR/"
no_helper_under() { ! pgrep -f -- "net serve $1" >/dev/null; }
check "no envmgr helper process left (net serve)" no_helper_under "$ENVMGR_RUN_DIR/"
finish

#!/usr/bin/env bash
# Keys typed into a guest whose vCPU is starved of host CPU all arrive. An RL rollout of 4 TCG guests
# on 2 cores lost 19 characters in the middle of `mkdir -p ~/projects/envmgr/src`: envmgr sent keys
# 10 ms apart by host time, and QEMU drops what a guest does not read (its PS/2 keyboard keeps 16
# bytes; its VNC server drops the messages it has not read when the client hangs up, and its main
# loop waits for a starved vCPU). Now keys go in batches the guest has taken (vm/input_drain.h).
# The starvation: tests/tools/vstall stops the vCPU thread 300 ms out of every 400 (a ptrace stop,
# as a host with no CPU to give it; QEMU's main loop runs on) and uses no CPU itself, so the test
# is light on a shared machine. Before the fix every `envmgr act` of 60 characters lost its last
# 5-7. What arrives is what a real X client in the guest receives (tests/tools/xrecorder.py).
# Needs to ptrace QEMU (root: QEMU runs as a user of its own); skipped otherwise.
# Prints `keys_under_load: N passed, N failed`.
SUITE=keys_under_load
source "$(dirname "$0")/lib.sh"

E=it-keys-1
PY=/usr/bin/python3
EVENTS="$PY $ROOT/tests/tools/input_events.py"
VSTALL=$ROOT/build/tools/vstall
TEXT='mkdir -p ~/projects/envmgr/src && cd ~/projects; ls -la "$HOME"|wc -l #1'
STALL_PID=
stop_stall() {
    [ -n "$STALL_PID" ] || return 0
    kill "$STALL_PID" 2>/dev/null
    wait "$STALL_PID" 2>/dev/null
    STALL_PID=
}
trap 'stop_stall; cleanup' EXIT # the stall first: QEMU goes down with its vCPU let go

[ -x "$VSTALL" ] || { bad "no $VSTALL (make integration builds it)"; finish; exit 1; }
out=$("$ENVMGR" up --name $E --accel tcg 2>&1) || { bad "up $E: $out"; finish; exit 1; }
ok "up $E"

# The recorder: an override-redirect window over the whole screen, focused, logging every event.
"$ENVMGR" exec $E --stdin -- sh -c 'cat > /tmp/xrec.py' <"$ROOT/tests/tools/xrecorder.py"
"$ENVMGR" exec $E -- sh -c 'DISPLAY=:0 setsid -f python3 /tmp/xrec.py --override 0 0 1280 800 \
    >/tmp/rec.log 2>/tmp/rec.err </dev/null'
if ! wait_until 30 bash -c "'$ENVMGR' exec $E -- grep -q ready /tmp/rec.log"; then
    bad "the recorder window did not map: $("$ENVMGR" exec $E -- cat /tmp/rec.err)"
    finish
    exit 1
fi
ok "the recorder window is up"

fetch_log() { "$ENVMGR" exec $E -- cat /tmp/rec.log >"$T/rec.log" 2>/dev/null; }
lines() { fetch_log; wc -l <"$T/rec.log"; }
json_str() { $PY -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }
# typed NAME WANT ACTION...: the actions (JSON, one `envmgr act` each) type exactly WANT. The log is
# read as soon as the last act returns (an action returns once the guest has the keys), then again
# for a few seconds, so a failure shows what was lost rather than what was late.
typed() {
    local name=$1 want=$2 from got t0 ms a
    shift 2
    from=$(lines)
    t0=$(date +%s%N)
    for a in "$@"; do
        out=$("$ENVMGR" act $E "$a" 2>&1) || { bad "$name: act failed: $out"; return; }
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    for _ in 1 2 3 4 5; do
        fetch_log
        got=$($EVENTS "$T/rec.log" "$from" --typed)
        [ "$got" = "$(json_str "$want")" ] && break
        sleep 1
    done
    check "$name ($ms ms): got $got" test "$got" = "$(json_str "$want")"
}
TYPING="{\"action_type\":\"TYPING\",\"text\":$(json_str "$TEXT")}"

typed "an idle guest gets every key" "$TEXT" "$TYPING"

# The vCPU thread (QMP query-cpus-fast) and the stall on it.
VCPU=$(qmp_return $E query-cpus-fast | $PY -c 'import json,sys; print(json.load(sys.stdin)[0]["thread-id"])')
"$VSTALL" "$VCPU" 300 100 2>"$T/vstall.err" &
STALL_PID=$!
sleep 0.5
if ! kill -0 "$STALL_PID" 2>/dev/null; then
    STALL_PID=
    echo "$SUITE: skipped the starved guest: vstall cannot stop QEMU's vCPU here ($(cat "$T/vstall.err"))"
    finish
    exit
fi
check "the vCPU is stopped most of the time" grep -q '^TracerPid:[[:space:]]*[1-9]' "/proc/$VCPU/status"

for i in 1 2 3; do
    typed "a starved guest gets every key of TYPING, run $i" "$TEXT" "$TYPING"
done
# the action pair of the rollout that lost keys
typed "a starved guest gets TYPING, then PRESS enter" "mkdir -p ~/projects/envmgr/src"$'\n' \
    '{"action_type":"TYPING","text":"mkdir -p ~/projects/envmgr/src"}' '{"action_type":"PRESS","key":"enter"}'
typed "a starved guest gets a HOTKEY's keys and a capital" "AaB" \
    '{"action_type":"HOTKEY","keys":["shift","a"]}' '{"action_type":"TYPING","text":"aB"}'

stop_stall
check "the vCPU runs free again" grep -q '^TracerPid:[[:space:]]*0$' "/proc/$VCPU/status"
typed "and the guest still types after" "$TEXT" "$TYPING"
finish

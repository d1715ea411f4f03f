#!/usr/bin/env bash
# Time stands still while the agent thinks: between an observation and the next action the guest
# is paused (QMP stop), so its clock does not advance however long the agent takes; a task can opt
# out (pause_while_thinking: false); WAIT runs the guest for its duration; `envmgr pause` stops an
# idle env and the next exec resumes it. The guest's own clock is the witness (date in the guest).
# Prints `pause: N passed, N failed`.
SUITE=pause
source "$(dirname "$0")/lib.sh"
E=it-pause
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }
AGENT=$ROOT/tasks/agents/scripted

# variant NAME PAUSE WAIT_S: the guest-clock task, with the opt-out flag and a WAIT between the dates
variant() {
    python3 - "$ROOT/tests/data/tasks/guest-clock.json" "$T/$1.json" "$2" "$3" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["pause_while_thinking"] = sys.argv[3] == "true"
if float(sys.argv[4]) > 0:
    t["solution"].insert(1, {"action_type": "WAIT", "seconds": float(sys.argv[4])})
json.dump(t, open(sys.argv[2], "w"))
PY
}
# guest seconds between the two dates of a run
delta() { python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(r['evaluation']['metrics'][0]['result']['value'])" "$T/$1/result.json" 2>/dev/null || echo none; }
ge() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$1" "$2" 2>/dev/null; }

variant paused true 0
"$ENVMGR" run "$T/paused.json" --env $E --agent "$AGENT --tasks $T/paused.json --think 8" --out "$T/paused" >/dev/null 2>&1
d=$(delta paused); echo "paused while thinking 8 s: the guest's clock moved $d s"
check "paused: the guest clock moved less than 4 s while the agent thought 8 s" ge 4 "$d"
check "paused: the trace header says so" grep -q '"pause_while_thinking":true' "$T/paused/trace/trace.jsonl"
check "paused: result.json counts the pauses" python3 -c "
import json, sys; t = json.load(open('$T/paused/result.json'))['timings']; sys.exit(0 if t['pauses'] >= 4 else 1)"

variant running false 0
"$ENVMGR" run "$T/running.json" --env $E --agent "$AGENT --tasks $T/running.json --think 8" --out "$T/running" >/dev/null 2>&1
d=$(delta running); echo "opted out, thinking 8 s: the guest's clock moved $d s"
check "opt-out: the guest clock runs on while the agent thinks (>= 8 s)" ge "$d" 8
check "opt-out: the trace header says so" grep -q '"pause_while_thinking":false' "$T/running/trace/trace.jsonl"

variant wait true 5
"$ENVMGR" run "$T/wait.json" --env $E --agent "$AGENT --tasks $T/wait.json" --out "$T/wait" >/dev/null 2>&1
d=$(delta wait); echo "WAIT 5 s: the guest's clock moved $d s"
check "WAIT lets guest time pass (>= 5 s)" ge "$d" 5

# An idle env paused by hand: its clock stands still, screenshots work, exec resumes it.
t1=$("$ENVMGR" exec $E -- date +%s.%N 2>/dev/null)
check "envmgr pause" "$ENVMGR" pause $E
check "a paused env still gives a screenshot" "$ENVMGR" screenshot $E "$T/paused.png"
sleep 6
t2=$("$ENVMGR" exec $E -- date +%s.%N 2>/dev/null)
echo "paused 6 s by hand: the guest's clock moved $(python3 -c "print('%.1f' % (float('$t2' or 0) - float('$t1' or 0)))") s"
check "exec on a paused env resumes it and its clock stood still (< 4 s in 6 s)" \
    python3 -c "import sys; d = float('$t2' or 0) - float('$t1' or 0); sys.exit(0 if 0 < d < 4 else 1)"
check "envmgr resume on a running env is fine" "$ENVMGR" resume $E
out=$("$ENVMGR" pause no-such-env 2>&1); rc=$?
check "pause of an unknown env: one line naming it, exit != 0" \
    bash -c "test $rc != 0 && test \$(echo \"\$1\" | wc -l) = 1 && echo \"\$1\" | grep -q no-such-env" _ "$out"
"$ENVMGR" down $E >/dev/null
check "nothing left running" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

#!/usr/bin/env bash
# The step loop's settle rule on a real guest: after an action, the observation waits until the
# screen is still AND the guest is idle, so a dialog an application draws only after a second
# of work is in the frame the agent gets (late-change probe: the frame after a later 3 s WAIT is
# the same). Every step records how its wait ended; the episode replays exactly. Prints `settle: N passed, N failed`.
SUITE=settle
source "$(dirname "$0")/lib.sh"
E=it-settle
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }
"$ENVMGR" run "$ROOT/tests/data/tasks/late-dialog.json" --env $E --agent "$ROOT/tasks/agents/scripted --tasks $ROOT/tests/data/tasks/late-dialog.json" \
    --out "$T/ep" >/dev/null 2>&1
check "the episode ran" test -s "$T/ep/trace/trace.jsonl"
steps() { python3 -c "
import json, sys
for l in open('$T/ep/trace/trace.jsonl'):
    j = json.loads(l)
    if j.get('type') == 'step':
        print(j['action']['action_type'], j.get('frame_after', '-'), j.get('settle', {}).get('result', '-'),
              round(j.get('settle', {}).get('ms', 0)))
"; }
steps | tee "$T/steps"
typed=$(awk '$1 == "TYPING" {print $2}' "$T/steps")
later=$(awk '$1 == "WAIT" {print $2}' "$T/steps")
check "the frame after typing is the finished screen: 3 s later it is the same (no late change)" \
    test -n "$typed" -a "$typed" = "$later"
check "the typing step waited out the guest's work (settle took > 1 s)" \
    test "$(awk '$1 == "TYPING" {print ($4 > 1000)}' "$T/steps")" = 1
check "every executed step records how its settle ended" \
    bash -c "! awk '\$1 != \"DONE\" && \$3 == \"-\"' '$T/steps' | grep -q ."
out=$("$ENVMGR" replay "$T/ep/trace" --env $E --out "$T/rp" --fast 2>&1); rc=$?
echo "$out"
check "the late-dialog episode replays exactly with --fast (same settle rule, guest paused while thinking)" \
    test $rc = 0

# A step that changes nothing ends within a few display refreshes, not a fixed window: clicks on the
# empty desktop (the first moves the pointer there), then presses of shift.
python3 - "$T/still.json" <<'PY'
import json, sys
json.dump({"id": "still-steps", "instruction": "clicks and keys that change nothing", "config": [],
           "evaluator": {"func": "infeasible"}, "limits": {"max_steps": 20, "step_timeout_s": 60, "episode_timeout_s": 600},
           "solution": [{"action_type": "CLICK", "x": 1100, "y": 600}] * 8 + [{"action_type": "PRESS", "key": "shift"}] * 5
                       + [{"action_type": "FAIL"}]}, open(sys.argv[1], "w"))
PY
"$ENVMGR" run "$T/still.json" --env $E --agent "$ROOT/tasks/agents/scripted --tasks $T/still.json" --out "$T/still" >/dev/null 2>&1
still_steps() { python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1] + "/trace/trace.jsonl"):
    j = json.loads(l)
    if j.get("type") == "step" and "settle" in j:
        s, t = j["settle"], j.get("timing", {})
        print(j["action"]["action_type"], j["frame_before"], j.get("frame_after", "-"), s["result"], round(s["ms"]),
              round(s.get("window_ms", -1)), s.get("frames", -1),
              int(0 <= t.get("sent_ms", -1) <= t.get("settled_ms", -1) <= t.get("frame_ms", -1) <= t.get("recorded_ms", -1)),
              "%.3f" % s.get("work_ms", -1))
PY
}
still_steps "$T/still" | tee "$T/still.steps"
check "13 steps recorded with their settle" test "$(wc -l <"$T/still.steps")" = 13
# the first click and the first key after the restore run the guest's cold paths (TCG translates the
# code anew in every QEMU): from the third click and the third key on, nothing changes
# (the window grows with the guest's own work, counted in vCPU time, which host load does not
# stretch; the wait itself does stretch under load, so its bound is the median's and loose)
short() { python3 - "$T/still.steps" "$1" "$2" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])][int(sys.argv[2]) - 1:int(sys.argv[3])]
assert all(r[3] == "settled" and int(r[5]) < 150 for r in rows), rows
assert statistics.median(int(r[4]) for r in rows) < 250, rows
PY
}
check "clicks that change nothing: settled on a short window (< 150 ms, not settle_ms), median wait < 250 ms" \
    short 3 8
check "key presses that change nothing: the same" short 11 13
check "every step's timing: sent <= settled <= frame taken <= recorded" \
    bash -c "awk '\$8 != 1 {bad=1} END {exit bad}' '$T/still.steps'"
check "each step records the guest's work that chose its window (<= 30 ms: 55 ms, else settle_ms)" \
    bash -c "awk '\$9 < 0 || (\$9 <= 30) != (\$6 < 100) {bad=1} END {exit bad}' '$T/still.steps'"
check "each observation is the frame the step settled on, frozen (the next step's frame_before is this frame_after)" \
    bash -c "awk 'NR > 1 && \$2 != prev {bad=1} {prev=\$3} END {exit bad}' '$T/still.steps'"
"$ENVMGR" run "$T/still.json" --env $E --agent "$ROOT/tasks/agents/scripted --tasks $T/still.json" --out "$T/still-late" \
    --probe-late 2000 >/dev/null 2>&1
check "no late change: a frame 2 s after each observation is the same" \
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["late_probe"]; assert p["observations"] >= 13 and p["late_changes"] == 0, p' \
    "$T/still-late/result.json"
out=$("$ENVMGR" replay "$T/still/trace" --env $E --out "$T/still-rp" --fast 2>&1); rc=$?
echo "$out" | head -2
check "the still-steps episode replays exactly" test $rc = 0

"$ENVMGR" down $E >/dev/null
check "nothing left running" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

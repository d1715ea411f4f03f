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
"$ENVMGR" down $E >/dev/null
check "nothing left running" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

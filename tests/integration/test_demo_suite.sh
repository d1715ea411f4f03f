#!/usr/bin/env bash
# The demo suite on a real guest: every task's scripted solution (VNC actions only) scores 1.0;
# the null agent (DONE at once) scores 0.0 on every task; `null --fail` scores 1.0 exactly on the
# infeasible tasks. Prints `demo-suite: N passed, N failed`.
SUITE=demo-suite
source "$(dirname "$0")/lib.sh"
SUITE_DIR=$ROOT/tasks/demo
AG=$ROOT/tasks/agents
[ -d "$SUITE_DIR" ] && [ -x "$AG/scripted" ] || { bad "tasks/demo and tasks/agents exist"; finish; exit 1; }
E=it-demo
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }

# score_of OUT ID, infeasible ID: read the results and the task files
score_of() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]+'/'+sys.argv[2]+'/result.json'))['score'])" "$1" "$2"; }
infeasible() { python3 -c "
import json,sys
t=json.load(open(sys.argv[1])); f=t['evaluator']['func']
sys.exit(0 if 'infeasible' in (f if isinstance(f,list) else [f]) else 1)" "$1"; }

"$ENVMGR" run "$SUITE_DIR" --env $E --agent "$AG/scripted" --out "$T/scripted" | tee "$T/scripted.txt"
"$ENVMGR" run "$SUITE_DIR" --env $E --agent "$AG/null" --out "$T/null" >"$T/null.txt" 2>&1
"$ENVMGR" run "$SUITE_DIR" --env $E --agent "$AG/null --fail" --out "$T/nullfail" >"$T/nullfail.txt" 2>&1
n=0
for task in "$SUITE_DIR"/*.json; do
    id=$(basename "$task" .json); n=$((n + 1))
    check "$id: the scripted solution scores 1.0" test "$(score_of "$T/scripted" "$id")" = 1.0
    check "$id: the null agent scores 0.0" test "$(score_of "$T/null" "$id")" = 0.0
    if infeasible "$task"; then
        check "$id (infeasible): FAIL at once scores 1.0" test "$(score_of "$T/nullfail" "$id")" = 1.0
    else
        check "$id: FAIL at once scores 0.0" test "$(score_of "$T/nullfail" "$id")" = 0.0
    fi
    check "$id: its trace verifies" "$ENVMGR" trace verify "$T/scripted/$id/trace" >/dev/null
done
check "the suite has at least 12 tasks ($n)" test $n -ge 12
check "the run prints a table with a mean" grep -q "mean score" "$T/scripted.txt"
"$ENVMGR" down $E >/dev/null
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

#!/usr/bin/env bash
# The demo suite on real guests, 2 envs at once (envmgr suite run): every task's scripted solution
# (VNC actions only) scores 1.0; the null agent (DONE at once) scores 0.0 on every task; `null --fail`
# scores 1.0 on the infeasible tasks and 0.0 on two feasible ones. `envmgr run` on a folder runs in
# sequence and prints a table. Prints `demo-suite: N passed, N failed`.
SUITE=demo-suite
source "$(dirname "$0")/lib.sh"
SUITE_DIR=$ROOT/tasks/demo
AG=$ROOT/tasks/agents
[ -d "$SUITE_DIR" ] && [ -x "$AG/scripted" ] || { bad "tasks/demo and tasks/agents exist"; finish; exit 1; }

infeasible() { python3 -c "
import json,sys
t=json.load(open(sys.argv[1])); f=t['evaluator']['func']
sys.exit(0 if 'infeasible' in (f if isinstance(f,list) else [f]) else 1)" "$1"; }

# FAIL at once: the infeasible tasks and two feasible ones (a terminal task, a file-manager task) are
# enough to show that only the infeasible ones score it; all sixteen cost CI minutes for nothing more.
FAIL_PICK=$T/fail-pick
infeasible_ids=$(for f in "$SUITE_DIR"/infeasible-*.json; do basename "$f" .json; done)
pick_tasks "$FAIL_PICK" "$SUITE_DIR" $infeasible_ids terminal-sort-unique files-rename
for a in "scripted" "null" "null --fail"; do
    out=$T/$(echo "$a" | tr -c 'a-z\n' '_')
    dir=$SUITE_DIR; [ "$a" = "null --fail" ] && dir=$FAIL_PICK
    args=$a; [ "$a" = scripted ] && args="scripted --tasks $SUITE_DIR"
    "$ENVMGR" suite run "$dir" --agent "$AG/$args" --envs 2 --accel tcg --out "$out" --progress plain \
        >"$out.log" 2>&1 || echo "suite run with $a exited $?"
    tail -3 "$out.log"
done
n=0
for task in "$SUITE_DIR"/*.json; do
    id=$(basename "$task" .json); n=$((n + 1))
    check "$id: the scripted solution scores 1.0" test "$(score_of "$T/scripted" "$id")" = 1.0
    check "$id: the null agent scores 0.0" test "$(score_of "$T/null" "$id")" = 0.0
    if infeasible "$task"; then
        check "$id (infeasible): FAIL at once scores 1.0" test "$(score_of "$T/null___fail" "$id")" = 1.0
    elif [ -f "$FAIL_PICK/$id.json" ]; then
        check "$id: FAIL at once scores 0.0" test "$(score_of "$T/null___fail" "$id")" = 0.0
    fi
    check "$id: its trace verifies" "$ENVMGR" trace verify "$T/scripted/traces/$id/trace" >/dev/null
done
check "the suite has at least 12 tasks ($n)" test $n -ge 12

# `envmgr run DIR`: in sequence, a table with a mean (the two infeasible tasks keep it short).
mkdir -p "$T/folder" && cp "$SUITE_DIR"/infeasible-*.json "$T/folder/"
"$ENVMGR" run "$T/folder" --agent "$AG/scripted --tasks $T/folder" --out "$T/folder-out" --accel tcg >"$T/table.txt" 2>&1
cat "$T/table.txt"
check "envmgr run on a folder prints a table with a mean" grep -q "mean score 1.000" "$T/table.txt"
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

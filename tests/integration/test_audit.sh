#!/usr/bin/env bash
# `envmgr suite audit` on the desktop image (tests/data/audit: a sound task, a pre-satisfied one, one
# whose app and getter tool the image lacks, a sound infeasible one): the audit finds exactly the
# pre-satisfied and the broken task (whose reference solution cannot score on this image either),
# leaves the sound ones alone, writes audit.json and exits 1. Prints `audit: N passed, N failed`.
SUITE=audit
source "$(dirname "$0")/lib.sh"
DATA=$ROOT/tests/data/audit

out=$("$ENVMGR" suite audit "$DATA" --out "$T/a" --solutions "$DATA" --envs 2 --accel tcg --progress plain 2>"$T/audit.err")
rc=$?
echo "$out"
check "the audit exits 1: something was found" test $rc = 1
check "it writes audit.json" test -s "$T/a/audit.json"
kinds() { python3 -c "import json,sys; a=json.load(open(sys.argv[1])); print(' '.join(sorted(f['kind'] for f in a['tasks'][sys.argv[2]].get('findings', []))))" "$T/a/audit.json" "$1"; }
check "the pre-satisfied task is found ($(kinds audit-presatisfied))" test "$(kinds audit-presatisfied)" = pre_satisfied
check "the broken task: its launch and its getter flagged, its solution below 1 ($(kinds audit-broken))" \
    test "$(kinds audit-broken)" = "flagged flagged solution_below_1"
check "the launch's finding names the missing program" bash -c "echo \"\$1\" | grep -q 'audit-broken .*flagged .*no-such-calculator.*not found on the image'" _ "$out"
check "the getter's finding names its exit status 127" bash -c "echo \"\$1\" | grep -q 'audit-broken .*flagged .*evaluator.result.*exit status 127'" _ "$out"
check "the sound task has no finding (its solution scores 1)" test -z "$(kinds audit-good)"
check "the sound infeasible task has no finding (DONE 0, FAIL 1)" test -z "$(kinds audit-infeasible)"
check "the counts line" bash -c "echo \"\$1\" | grep -q '^4 tasks audited: 2 with findings'" _ "$out"
check "each pass is an ordinary run: done (4), fail (the infeasible one), solutions (4)" bash -c \
    "[ \$(wc -l <'$T/a/done/results.jsonl') = 4 ] && [ \$(wc -l <'$T/a/fail/results.jsonl') = 1 ] && [ \$(wc -l <'$T/a/solutions/results.jsonl') = 4 ]"
check "the done pass's summary counts the flagged episode" python3 -c \
    "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['all']['flagged'] == 1 else 1)" "$T/a/done/summary.json"
# --solutions names one task file: only that task's solution runs and is judged; the other tasks get no
# solution_below_1 for having none.
"$ENVMGR" suite audit "$DATA" --out "$T/b" --solutions "$DATA/audit-good.json" --envs 2 --accel tcg \
    --progress plain >"$T/b.out" 2>"$T/b.err"
check "--solutions FILE: the solutions pass runs that one task" bash -c \
    "[ \$(wc -l <'$T/b/solutions/results.jsonl') = 1 ] && grep -q '\"audit-good\"' '$T/b/solutions/results.jsonl'"
check "--solutions FILE: a task without a solution there gets no solution_below_1" bash -c \
    "! grep -q solution_below_1 '$T/b.out'"
"$ENVMGR" suite audit "$DATA" >/dev/null 2>&1
check "no --out: a usage error (exit 2)" test $? = 2
check "no QEMU of the audit is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

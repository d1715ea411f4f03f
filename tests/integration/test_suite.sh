#!/usr/bin/env bash
# `envmgr suite` on real desktop guests under TCG, with the scripted agent on
# tests/data/suite (4 tasks, 2 domains): a run on 2 envs where every
# reference solution scores 1.0 and its results.jsonl / summary.json /
# junit.xml; shards (deterministic) and their merge; --repeat; SIGINT and
# SIGTERM mid-run, then --resume (no finished line lost, no partial line, no
# QEMU left); kill -9 of envmgr (with and without its workers), then gc and
# --resume; a QEMU killed or frozen mid-episode and a frozen worker
# (env_error recorded, env restored, episode retried, the suite goes on); a QEMU killed with no
# retry left (the env_error is final, no score, exit 1);
# compare; gc of golden states whose image is gone. Prints `N passed, N failed`.
SUITE=suite
source "$(dirname "$0")/lib.sh"

DATA=$ROOT/tests/data/suite
AGENT="$ROOT/tasks/agents/scripted --tasks $DATA --tasks $T/slow" # where the solutions are
IDS="count-files kernel-name slow-marker terminal-echo"
BG=()
stop_bg() {
    local p
    # Only processes that are still this script's children: a pid may have been reused since.
    for p in "${BG[@]}"; do
        [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$$" ] || continue
        [ "$(ps -o pgid= -p "$p" | tr -d ' ')" = "$p" ] && kill -9 -- "-$p" 2>/dev/null
        kill -9 "$p" 2>/dev/null
    done
    cleanup
}
trap stop_bg EXIT

# Backgrounded as "${SRUN[@]}" ... & so that $! is envmgr itself, not a subshell.
SRUN=("$ENVMGR" suite run --agent "$AGENT" --accel tcg --progress plain)
srun() { "${SRUN[@]}" "$@"; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# lines FILE: complete lines in a results file
lines() { [ -f "$1" ] && grep -c '' "$1" || echo 0; }
qemus() { pgrep -f -- "$ENVMGR_RUN_DIR/" | wc -l; }
suite_dirs() { ls -d "$ENVMGR_RUN_DIR"/suite-* 2>/dev/null | wc -l; }
no_envs_left() { [ "$(qemus)" = 0 ] && [ "$(suite_dirs)" = 0 ]; }

# check_results DIR IDS...: every line is whole JSON; each id has one final
# line with score 1.0; no other episode is final.
check_results() { python3 "$DATA/check_results.py" "$@"; }

# --- task lists and shards (no VM) --------------------------------------------
full=$("$ENVMGR" suite list "$DATA" | cut -f1 | tr '\n' ' ')
check "suite list: the 4 tasks, sorted by id" test "$full" = "$IDS "
idx=$("$ENVMGR" suite list "$DATA/test_all.json" | tr '\n' ' ')
check "an OSWorld index lists the same tasks and domains" test "$idx" = "$("$ENVMGR" suite list "$DATA" | tr '\n' ' ')"
s1=$("$ENVMGR" suite list "$DATA" --shard 1/2 | cut -f1 | tr '\n' ' ')
s2=$("$ENVMGR" suite list "$DATA" --shard 2/2 | cut -f1 | tr '\n' ' ')
check "shards 1/2 and 2/2 split the list ($s1| $s2)" \
    test "$(echo $s1 $s2 | tr ' ' '\n' | sort | tr '\n' ' ')" = "$IDS "
check "shards are disjoint" test -z "$(comm -12 <(echo $s1 | tr ' ' '\n' | sort) <(echo $s2 | tr ' ' '\n' | sort))"
check "shards are deterministic" test "$("$ENVMGR" suite list "$DATA" --shard 1/2 | cut -f1 | tr '\n' ' ')" = "$s1"
"$ENVMGR" suite list "$DATA" --shard 3/2 >/dev/null 2>&1
check "--shard 3/2 is bad input (exit 2)" test $? = 2
srun "$T/nosuite" --out "$T/x" >/dev/null 2>&1
check "a missing suite is bad input (exit 2)" test $? = 2
"$ENVMGR" suite run "$DATA" --out "$T/x" >/dev/null 2>&1
check "no --agent: exit 2" test $? = 2

# --- a full run on 2 envs -------------------------------------------------------
t0=$(date +%s.%N)
srun "$DATA" --envs 2 --out "$T/full" >"$T/full.out" 2>"$T/full.err"; rc=$?
t1=$(date +%s.%N)
cat "$T/full.out"
[ $rc = 0 ] && ok "suite run, 2 envs: exit 0 ($(awk "BEGIN {printf \"%.1f\", $t1 - $t0}") s)" || { bad "suite run: exit $rc"; tail -20 "$T/full.err"; }
check "every scripted solution scores 1.0, one final line per task" check_results "$T/full" $IDS
check "both envs ran episodes" test "$(python3 -c "
import json; print(len({json.loads(l)['env'] for l in open('$T/full/results.jsonl')}))")" = 2
check "the table has an all row at 100%" grep -qE '^all +4 +4 +100.0%' "$T/full.out"
check "plain log lines when not a terminal (no carriage returns)" bash -c "! grep -q $'\r' '$T/full.err'"
check "the number of envs is printed" grep -q "4 episodes on 2 envs" "$T/full.err"
check "summary.json: complete, pass rate 1, by domain, envs, memory" python3 - "$T/full/summary.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["complete"] and s["expected_episodes"] == 4 and s["finished_episodes"] == 4
assert s["all"]["pass_rate"] == 1.0 and s["all"]["mean_score"] == 1.0 and s["all"]["p50_episode_s"] > 0
assert sorted(s["domains"]) == ["shell", "system"] and all(d["tasks"] == 2 for d in s["domains"].values())
assert s["envs"] == 2 and s["accel"] == "tcg" and s["resources"]["peak_rss_mib"] > 50
EOF
check "junit.xml: valid XML, a testcase per task, no failure, trace paths in system-out" python3 - "$T/full" <<'EOF'
import os, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
root = ET.parse(d + "/junit.xml").getroot()
assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "0"
cases = root.findall("./testsuite/testcase")
assert sorted(c.get("name") for c in cases) == ["count-files", "kernel-name", "slow-marker", "terminal-echo"]
assert {c.get("classname") for c in cases} == {"shell", "system"}
for c in cases:
    assert c.find("failure") is None
    out = c.find("system-out").text
    path = out.split("\n")[0].split("trace: ")[1]
    assert os.path.isfile(path + "/trace.jsonl"), path
EOF
check "traces under DIR/traces/<task id>/" test -f "$T/full/traces/terminal-echo/trace/trace.jsonl"
check "a trace verifies" "$ENVMGR" trace verify "$T/full/traces/slow-marker/trace"
check "no QEMU and no suite env left after the run" no_envs_left

# --- compare (no VM) ------------------------------------------------------------
"$ENVMGR" suite compare "$T/full" "$T/full" >"$T/cmp.out"; rc=$?
check "compare of a run with itself: exit 0" test $rc = 0
mkdir -p "$T/worse"
cp "$T/full/suite.json" "$T/worse/"
python3 - "$T/full/results.jsonl" "$T/worse/results.jsonl" <<'EOF'
import json, sys
with open(sys.argv[2], "w") as out:
    for line in open(sys.argv[1]):
        o = json.loads(line)
        if o["task_id"] == "terminal-echo":
            o.update(score=0.0, exit_cause="max_steps", reason="exact_match: result differs")
        out.write(json.dumps(o) + "\n")
EOF
"$ENVMGR" suite compare "$T/full" "$T/worse" >"$T/cmp.out"; rc=$?
check "compare: a regression exits non-zero ($rc)" test $rc = 1
check "compare: the regression is listed first, with its reason" \
    bash -c "head -1 '$T/cmp.out' | grep -qE '^REGRESSED +terminal-echo +1.00 -> 0.00 +\(max_steps'"
"$ENVMGR" suite compare "$T/worse" "$T/full" >"$T/cmp.out"; rc=$?
check "compare: an improvement exits 0" bash -c "[ $rc = 0 ] && grep -q '^IMPROVED' '$T/cmp.out'"
mkdir -p "$T/unset"
cp "$T/full/suite.json" "$T/unset/"
sed -E '/"terminal-echo"/ s/"exit_cause": ?"[a-z_]+"/"exit_cause": "setup_error"/; /"terminal-echo"/ s/"score": ?[0-9.]+/"score": 0.0/' \
    "$T/full/results.jsonl" >"$T/unset/results.jsonl"
"$ENVMGR" suite compare "$T/full" "$T/unset" >"$T/cmp.out"; rc=$?
check "compare: a task that lost its score (setup_error) is NO SCORE, not a regression to 0, and fails the gate ($rc)" \
    bash -c "[ $rc = 1 ] && grep -qE '^NO SCORE +terminal-echo +1.00 -> - +\(setup_error' '$T/cmp.out' && ! grep -q '^REGRESSED' '$T/cmp.out'"
"$ENVMGR" suite compare "$T/full" "$T/nothing" >/dev/null 2>&1
check "compare: a missing run directory is exit 2" test $? = 2
"$ENVMGR" suite summary "$T/worse" >"$T/sum.out"
check "suite summary re-renders a run (junit now has a failure)" \
    bash -c "grep -qE '^all +4 +4 +75.0%' '$T/sum.out' && grep -q 'failures=\"1\"' '$T/worse/junit.xml'"

# --- bad reuse of a run directory -------------------------------------------------
srun "$DATA" --envs 1 --out "$T/full" >/dev/null 2>&1
check "a run into a finished DIR without --resume is refused (exit 2)" test $? = 2
"$ENVMGR" suite run "$DATA" --agent "$AGENT --stop-after 1" --out "$T/full" --resume >/dev/null 2>&1
check "--resume with another agent is refused (exit 2)" test $? = 2
out=$(srun "$DATA" --envs 2 --out "$T/full" --resume 2>&1); rc=$?
check "--resume of a finished run runs nothing and exits 0" \
    bash -c "[ $rc = 0 ] && echo '$out' | grep -q '4 of 4 episodes already finished, 0 to run'"

# --- shards and merge (as the Slurm array does it, on one machine) ------------------
"${SRUN[@]}" "$DATA" --envs 1 --shard 1/2 --out "$T/shard1" >"$T/shard1.out" 2>&1 &
p1=$!
"${SRUN[@]}" "$DATA" --envs 1 --shard 2/2 --out "$T/shard2" >"$T/shard2.out" 2>&1 &
p2=$!
BG+=($p1 $p2)
wait $p1; r1=$?
wait $p2; r2=$?
check "two shards run side by side (exit $r1, $r2)" test "$r1$r2" = 00
"$ENVMGR" suite merge --out "$T/merged" "$T/shard2" "$T/shard1" >"$T/merge.out" 2>&1; rc=$?
cat "$T/merge.out" | tail -8
check "merge: exit 0, both shards found" bash -c "[ $rc = 0 ] && grep -q 'shards: 2 of 2' '$T/merge.out'"
check "merged results == the full run's task set, every score 1.0" check_results "$T/merged" $IDS
check "merged junit.xml: 4 testcases" python3 -c "
import xml.etree.ElementTree as ET; r = ET.parse('$T/merged/junit.xml').getroot()
assert r.get('tests') == '4' and r.get('failures') == '0' and len(r.findall('./testsuite/testcase')) == 4"
check "merged traces resolve" test -f "$T/merged/traces/kernel-name/trace/trace.jsonl"
"$ENVMGR" suite merge --out "$T/merged1" "$T/shard1" >/dev/null 2>&1
check "merge of one shard of two: exit 1 (incomplete)" test $? = 1

# --- --repeat ----------------------------------------------------------------------
mkdir -p "$T/one"
cp "$DATA/shell/count-files.json" "$T/one/"
srun "$T/one" --repeat 3 --out "$T/rep" >"$T/rep.out" 2>&1; rc=$?
check "without --envs the host's default is printed with its reason" grep -qE 'episodes on [0-9]+ envs? \([0-9]+ cores?' "$T/rep.out"
check "--repeat 3: exit 0, three final episodes" \
    bash -c "[ $rc = 0 ] && python3 -c \"
import json; ks = sorted((json.loads(l)['task_id'], json.loads(l)['repeat']) for l in open('$T/rep/results.jsonl'))
assert ks == [('count-files', 0), ('count-files', 1), ('count-files', 2)], ks\""
check "--repeat: a trace per repeat" test -f "$T/rep/traces/count-files/rep-2/trace/trace.jsonl"

# --- SIGINT mid-run, then --resume ------------------------------------------------------
"${SRUN[@]}" "$DATA" --envs 2 --out "$T/int" >"$T/int.out" 2>"$T/int.err" &
pid=$!
BG+=($pid)
wait_until 120 bash -c "[ \$(grep -c '' '$T/int/results.jsonl' 2>/dev/null || echo 0) -ge 1 ]"
kill -INT $pid
wait $pid; rc=$?
n=$(lines "$T/int/results.jsonl")
check "SIGINT mid-run: exit 130 ($rc) with $n of 4 episodes recorded" bash -c "[ $rc = 130 ] && [ $n -ge 1 ] && [ $n -lt 4 ]"
check "SIGINT: no QEMU and no suite env left" no_envs_left
check "SIGINT: results.jsonl holds only whole lines" python3 -c "
import json; raw = open('$T/int/results.jsonl').read(); assert raw.endswith('\n'); [json.loads(l) for l in raw.splitlines()]"
check "SIGINT: summary.json says incomplete" python3 -c "
import json; s = json.load(open('$T/int/summary.json')); assert not s['complete'] and s['finished_episodes'] == $n"
cp "$T/int/results.jsonl" "$T/int-before.jsonl"
srun "$DATA" --envs 2 --out "$T/int" --resume >"$T/resume.out" 2>"$T/resume.err"; rc=$?
check "--resume: exit 0" test $rc = 0
check "--resume: it skipped the $n finished episodes" grep -q "$n of 4 episodes already finished, $((4 - n)) to run" "$T/resume.err"
check "--resume: no finished line lost or changed" cmp -s "$T/int-before.jsonl" <(head -n "$n" "$T/int/results.jsonl")
check "--resume: every task done once, all 1.0" check_results "$T/int" $IDS
check "--resume: no QEMU left" no_envs_left

# --- SIGTERM -------------------------------------------------------------------------------
"${SRUN[@]}" "$DATA" --envs 2 --out "$T/term" >"$T/term.out" 2>"$T/term.err" &
pid=$!
BG+=($pid)
wait_until 120 grep -q '^suite: start' "$T/term.err"
sleep 1
kill -TERM $pid
wait $pid; rc=$?
check "SIGTERM mid-run: exit 130 ($rc)" test $rc = 130
check "SIGTERM: no QEMU and no suite env left" no_envs_left

# --- kill -9 of envmgr and its workers, then gc; --resume beside a gc ----------------------
setsid "$ENVMGR" suite run "$DATA" --agent "$AGENT" --accel tcg --progress plain --envs 2 --out "$T/k9" \
    >"$T/k9.out" 2>"$T/k9.err" &
pid=$!
BG+=($pid)
wait_until 120 bash -c "[ \$(grep -c '' '$T/k9/results.jsonl' 2>/dev/null || echo 0) -ge 1 ]"
pgid=$(ps -o pgid= -p $pid | tr -d ' ')
# The whole process group (envmgr, its workers, the agents; QEMUs live in
# their own sessions), and never this script's own group.
[ -n "$pgid" ] && [ "$pgid" != "$(ps -o pgid= -p $$ | tr -d ' ')" ] && { kill -9 -- -"$pgid"; wait $pid; } 2>/dev/null
sleep 0.5
left=$(qemus)
check "kill -9 of the process group leaves its QEMUs running ($left)" test "$left" -ge 1
"$ENVMGR" gc --keep-golden >"$T/gc.out" 2>&1; rc=$?
cat "$T/gc.out"
check "gc: exit 0, reaps the suite envs of the dead envmgr" \
    bash -c "[ $rc = 0 ] && grep -q 'suite env whose envmgr is gone' '$T/gc.out'"
check "gc: no QEMU and no suite env left" no_envs_left
check "kill -9: results.jsonl holds only whole lines" python3 -c "
import json; raw = open('$T/k9/results.jsonl').read(); assert raw.endswith('\n'); [json.loads(l) for l in raw.splitlines()]"
"${SRUN[@]}" "$DATA" --envs 2 --out "$T/k9" --resume >"$T/k9r.out" 2>"$T/k9r.err" &
pid=$!
BG+=($pid)
wait_until 120 grep -q '^suite: start' "$T/k9r.err"
"$ENVMGR" gc --keep-golden >"$T/gc2.out" 2>&1
check "gc beside a live suite leaves its envs alone" grep -q 'removed 0 envs' "$T/gc2.out"
wait $pid; rc=$?
check "--resume after kill -9 and gc: exit 0 ($rc)" test $rc = 0
check "--resume after kill -9: every task done once, all 1.0" check_results "$T/k9" $IDS
check "--resume after kill -9: no QEMU left" no_envs_left

# kill -9 of envmgr alone: its workers notice (PR_SET_PDEATHSIG) and take their envs down.
"${SRUN[@]}" "$DATA" --envs 2 --out "$T/k9b" >"$T/k9b.out" 2>"$T/k9b.err" &
pid=$!
BG+=($pid)
wait_until 120 bash -c "[ \$(grep -c '^suite: start' '$T/k9b.err') -ge 2 ]"
{ kill -9 $pid; wait $pid; } 2>/dev/null
check "kill -9 of envmgr alone: its workers tear their envs down" wait_until 60 no_envs_left

# --- a QEMU killed mid-episode ------------------------------------------------------------
"${SRUN[@]}" "$DATA/system" --envs 1 --out "$T/qk" >"$T/qk.out" 2>"$T/qk.err" &
pid=$!
BG+=($pid)
wait_until 120 grep -q '^suite: start slow-marker' "$T/qk.err"
sleep 3
qpid=$(cat "$ENVMGR_RUN_DIR"/suite-*/qemu.pid 2>/dev/null | head -1)
[ -n "$qpid" ] && kill -9 "$qpid"
wait $pid; rc=$?
grep -E 'env_error|slow-marker' "$T/qk.err"
check "QEMU killed mid-episode: the suite goes on (exit $rc)" test $rc = 0
check "the episode is recorded as env_error (not final), then retried to 1.0" python3 - "$T/qk/results.jsonl" <<'EOF'
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["task_id"] == "slow-marker"]
assert [(l["attempt"], l["final"], l["exit_cause"]) for l in ls] == [(0, False, "env_error"), (1, True, "done")], ls
assert ls[1]["score"] == 1.0
EOF
check "the failed attempt's trace is kept beside the retry's" test -d "$T/qk/traces/slow-marker.env_error-0"
check_results "$T/qk" kernel-name slow-marker && ok "after the retry every task scores 1.0" || bad "scores after a retry"
check "summary.json counts the retried attempt" python3 -c "
import json; s = json.load(open('$T/qk/summary.json')); assert s['retried_attempts'] == 1 and s['complete']"

# --- the same without a retry: the crash is final, no score, and the run fails --------------
"${SRUN[@]}" "$DATA/system" --envs 1 --retries 0 --out "$T/qk0" >"$T/qk0.out" 2>"$T/qk0.err" &
pid=$!
BG+=($pid)
wait_until 120 grep -q '^suite: start slow-marker' "$T/qk0.err"
sleep 3
qpid=$(cat "$ENVMGR_RUN_DIR"/suite-*/qemu.pid 2>/dev/null | head -1)
[ -n "$qpid" ] && kill -9 "$qpid"
wait $pid; rc=$?
tail -3 "$T/qk0.err"
check "--retries 0, QEMU killed: the crashed episode fails the run (exit $rc)" test $rc = 1
check "the error names the env_error and results.jsonl" \
    grep -q 'suite: 1 episode ended in env_error after 0 retries (not scored; .*results.jsonl' "$T/qk0.err"
check "the crash is no 0: env_errors 1, the pass rate over the episode that ran" python3 - "$T/qk0" <<'EOF'
import json, sys
d = sys.argv[1]
ls = [json.loads(l) for l in open(d + "/results.jsonl")]
assert [(l["task_id"], l["final"], l["exit_cause"]) for l in ls if l["task_id"] == "slow-marker"] == \
    [("slow-marker", True, "env_error")], ls
a = json.load(open(d + "/summary.json"))["all"]
assert a["episodes"] == 2 and a["env_errors"] == 1 and a["passed"] == 1, a
assert a["pass_rate"] == 1.0 and a["mean_score"] == 1.0, a
j = open(d + "/junit.xml").read()
assert 'failures="0" errors="1"' in j and 'type="env_error"' in j, j
EOF
check "the table says it was not scored" grep -q '1 ended in env_error after retries (crashed, not scored' "$T/qk0.out"

# --- hangs: a frozen QEMU and a frozen worker, side by side ------------------------------
# Two copies of slow-marker (~14 s each) on 2 envs with a 30 s watchdog: one
# env's QEMU is stopped (SIGSTOP), the other env's worker process is.
mkdir -p "$T/slow"
for x in a b; do sed "s/\"slow-marker\"/\"slow-$x\"/" "$DATA/system/slow-marker.json" >"$T/slow/slow-$x.json"; done
"${SRUN[@]}" "$T/slow" --envs 2 --watchdog 30 --out "$T/hang" >"$T/hang.out" 2>"$T/hang.err" &
pid=$!
BG+=($pid)
wait_until 120 bash -c "[ \$(grep -c '^suite: start slow-' '$T/hang.err') -ge 2 ]"
sleep 2
ea=$(sed -n 's/^suite: start slow-a on \(suite-[0-9]*-[0-9]*\).*/\1/p' "$T/hang.err" | head -1)
eb=$(sed -n 's/^suite: start slow-b on \(suite-[0-9]*-[0-9]*\).*/\1/p' "$T/hang.err" | head -1)
qpid=$(cat "$ENVMGR_RUN_DIR/$ea/qemu.pid" 2>/dev/null)
w=$(pgrep -P $pid -x "envmgr-env${eb##*-}")
echo "freezing the QEMU of $ea ($qpid) and the worker of $eb ($w)"
[ -n "$qpid" ] && kill -STOP "$qpid"
[ -n "$w" ] && kill -STOP "$w"
wait $pid; rc=$?
grep -E 'watchdog|env_error' "$T/hang.err"
check "frozen QEMU and worker: the suite goes on (exit $rc)" test $rc = 0
check "frozen QEMU and worker: each episode env_error, retried, then 1.0" python3 - "$T/hang/results.jsonl" <<'EOF2'
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
for t in ("slow-a", "slow-b"):
    mine = [(l["attempt"], l["final"], l["exit_cause"], l["score"]) for l in ls if l["task_id"] == t]
    assert mine == [(0, False, "env_error", 0.0), (1, True, "done", 1.0)], (t, mine)
EOF2
check "the watchdog killed the frozen worker and started a new one" grep -q 'still silent' "$T/hang.err"
check "frozen QEMU and worker: no QEMU left" no_envs_left
check "the frozen worker is gone" gone "$w"

# --- gc of golden states whose image is gone (a scratch cache) ------------------------------
C=$T/cache
mkdir -p "$C/golden/stale00000000000" "$C/golden/current0000000000"
live=$(sha256sum "$ROOT/vm-images/out/desktop/manifest.json" | cut -d' ' -f1)
echo '{"image_sha256":"0000000000000000000000000000000000000000000000000000000000000000","pointer":[0,0]}' \
    >"$C/golden/stale00000000000/golden.json"
echo "{\"image_sha256\":\"$live\",\"pointer\":[0,0]}" >"$C/golden/current0000000000/golden.json"
head -c 1048576 /dev/zero >"$C/golden/stale00000000000/ram.bin"
touch "$C/golden/stale00000000000.lock"
ENVMGR_CACHE_DIR=$C "$ENVMGR" gc >"$T/gcg.out" 2>&1; rc=$?
cat "$T/gcg.out"
check "gc removes a golden state whose image is gone" bash -c "[ $rc = 0 ] && [ ! -e '$C/golden/stale00000000000' ]"
check "gc keeps the golden state of the current image" test -f "$C/golden/current0000000000/golden.json"

finish

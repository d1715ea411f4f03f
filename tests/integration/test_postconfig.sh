#!/usr/bin/env bash
# Tasks with an evaluator.postconfig on a real desktop guest (tests/data/postconfig): the postconfig
# runs after the agent's last step and before the getters, and is recorded as postconfig lines after
# the step lines. A postconfig that writes a file a vm_file getter reads; OSWorld's usual shape (pkill
# the app so it writes its config, sleep, read the config; a pkill that finds nothing is tolerated
# and flagged); a postconfig step whose own check fails leaves the episode unevaluated
# (setup_error), never a 0. Each trace verifies with its HMAC, shows its postconfig, exports it,
# and replays REPRODUCED. Prints `postconfig: N passed, N failed`.
SUITE=postconfig
source "$(dirname "$0")/lib.sh"
D=$ROOT/tests/data/postconfig
AG=$ROOT/tasks/agents
SCRIPTED="$AG/scripted --tasks $D" # where the solutions are: the agent is never told the task's path
E=it-postconfig
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }
export ENVMGR_TRACE_KEY=postconfig-test-key
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
run() { "$ENVMGR" run "$D/$1.json" --env $E --agent "$2" --out "$T/$3" >"$T/$3.out" 2>&1; }
# order TRACE: the setup, step and postconfig lines come in that order, the postconfig ones
# after the last step and before the evaluation
order() { python3 - "$1/trace.jsonl" <<'EOF'
import json, sys
types = [json.loads(l)["type"] for l in open(sys.argv[1])]
kinds = [t for t in types if t in ("setup", "step", "postconfig", "evaluation", "trailer")]
last_step = max(i for i, t in enumerate(kinds) if t == "step")
first_post = kinds.index("postconfig")
assert "setup" not in kinds[last_step:] and first_post > last_step, kinds
assert kinds[-2:] == ["evaluation", "trailer"] and all(t == "postconfig" for t in kinds[first_post:-2]), kinds
EOF
}

# --- a postconfig that writes a file a vm_file getter reads -----------------------------
run postconfig-pointer "$SCRIPTED" ptr; rc=$?
cat "$T/ptr.out"
check "pointer: the run exits 0 (it crashed before: a setup line after step lines)" test $rc = 0
check "pointer: the scripted solution scores 1.0" test "$(field "$T/ptr/result.json" score)" = 1.0
check "pointer: exit cause done, scored" \
    test "$(field "$T/ptr/result.json" exit_cause)/$(field "$T/ptr/result.json" status)" = done/scored
check "pointer: the trace verifies (HMAC)" "$ENVMGR" trace verify "$T/ptr/trace"
check "pointer: the verify report counts 1 postconfig line" \
    bash -c "'$ENVMGR' trace verify '$T/ptr/trace' | grep -q '\"postconfig\": 1'"
check "pointer: the postconfig line comes after the steps, before the evaluation" order "$T/ptr/trace"
check "pointer: trace show lists the postconfig step" \
    bash -c "'$ENVMGR' trace show '$T/ptr/trace' | grep -qE '^postconfig: 1 step, 0 failed'"
run postconfig-pointer "$AG/null" ptr-null
check "pointer: the null agent (DONE at once) scores 0.0" test "$(field "$T/ptr-null/result.json" score)" = 0.0

# --- OSWorld's shape: pkill the app, sleep, read the config it wrote ------------------------
run postconfig-app "$SCRIPTED" app; rc=$?
cat "$T/app.out"
check "app: exit 0, the scripted solution scores 1.0" \
    bash -c "[ $rc = 0 ] && [ \"\$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"score\"])' '$T/app/result.json')\" = 1.0 ]"
check "app: the trace verifies (HMAC)" "$ENVMGR" trace verify "$T/app/trace"
check "app: 3 postconfig lines after the steps" order "$T/app/trace"
check "app: the pkill that found nothing is tolerated, flagged in result.json" python3 - "$T/app/result.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
flags = r.get("setup_flags", [])
assert flags == [{"phase": "postconfig", "index": 2, "type": "execute", "why": "exit status 1"}], flags
EOF
check "app: ... and in its trace line (ok, tolerated, exit code)" python3 - "$T/app/trace/trace.jsonl" <<'EOF'
import json, sys
post = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["type"] == "postconfig"]
assert [p["index"] for p in post] == [0, 1, 2], post
assert [p["step"]["type"] for p in post] == ["execute", "sleep", "execute"], post
assert all(p["ok"] for p in post) and "tolerated" not in post[0], post
assert post[2]["tolerated"] == "exit status 1" and post[2]["detail"]["exit_code"] == 1, post[2]
EOF
check "app: trace show marks the tolerated step" \
    bash -c "'$ENVMGR' trace show '$T/app/trace' | grep -qE '#2 +ok .* execute  tolerated: exit status 1'"
check "app: the HTML export has the postconfig section" bash -c \
    "'$ENVMGR' trace export '$T/app/trace' --html '$T/app-html' >/dev/null && grep -q '<section id=\"postconfig\"><h2>Postconfig (3 steps)' '$T/app-html/index.html'"
run postconfig-app "$AG/null" app-null
check "app: the null agent scores 0.0 (the config the app wrote says so)" \
    test "$(field "$T/app-null/result.json" score)/$(field "$T/app-null/result.json" status)" = 0.0/scored

# --- replay runs the postconfig too, and reproduces -----------------------------------------
out=$("$ENVMGR" replay "$T/app/trace" --env $E --out "$T/rp" 2>&1); rc=$?
echo "$out"
check "replay of the app task: REPRODUCED (exit 0)" test $rc = 0
check "replay.json: reproduced, the score matches" \
    test "$(field "$T/rp/replay.json" reproduced)/$(field "$T/rp/replay.json" score_matches)" = True/True
check "the replay's own trace has the postconfig lines after its steps" order "$T/rp/trace"
check "the replay's own trace verifies" "$ENVMGR" trace verify "$T/rp/trace"

# --- a postconfig step whose own check fails: not evaluated, never a 0 ------------------------
run postconfig-check "$SCRIPTED" chk
rc_chk=$?
check "check: envmgr run exits 1 and prints no score, not a 0 ($rc_chk)" \
    bash -c "[ $rc_chk = 1 ] && grep -q 'no score (not_evaluated) (setup_error' '$T/chk.out'"
check "check: the episode ends as setup_error, not evaluated" \
    test "$(field "$T/chk/result.json" exit_cause)/$(field "$T/chk/result.json" status)" = setup_error/not_evaluated
check "check: the reason names the postconfig step" \
    bash -c "python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"reason\"])' '$T/chk/result.json' | grep -q 'postconfig\[0\] (execute): the command exited with status 3 (check: true)'"
check "check: the failed step is in the trace (ok false, its stderr), the next one did not run" python3 - "$T/chk/trace/trace.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
post = [l for l in lines if l["type"] == "postconfig"]
assert len(post) == 1 and post[0]["ok"] is False and "the app left no config" in post[0]["detail"]["stderr"], post
ev = [l for l in lines if l["type"] == "evaluation"][0]
assert ev["status"] == "not_evaluated" and ev["exit_cause"] == "setup_error", ev
EOF
check "check: trace verify" "$ENVMGR" trace verify "$T/chk/trace"

# the same task in a suite (envmgr run DIR: a one-env suite and its table): counted in setup_errors,
# out of the pass rate and the mean, a JUnit error, exit 1
mkdir -p "$T/chk-suite" && cp "$D/postconfig-check.json" "$T/chk-suite/"
"$ENVMGR" run "$T/chk-suite" --agent "$SCRIPTED" --accel tcg --out "$T/chks" >"$T/chks.out" 2>"$T/chks.err"
rc_chks=$?
check "check, in a suite: exit 1 naming setup_error ($rc_chks)" \
    bash -c "[ $rc_chks = 1 ] && grep -q 'suite: 1 episode ended in setup_error' '$T/chks.err'"
check "check, in a suite: the table shows no score, not a 0, and leaves it out of the mean" \
    bash -c "grep -qE '^postconfig-check +- .*setup_error \(no score: not_evaluated\)' '$T/chks.out' && grep -q '1 of 1 tasks ran (1 without a score), mean score 0.000' '$T/chks.out'"
check "check, in a suite: setup_errors 1, no episode scored, a JUnit error" python3 - "$T/chks" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1] + "/summary.json"))["all"]
assert a["episodes"] == 1 and a["setup_errors"] == 1 and a["passed"] == 0 and a["pass_rate"] == 0, a
j = open(sys.argv[1] + "/junit.xml").read()
assert 'failures="0" errors="1"' in j and 'type="setup_error"' in j, j
EOF

"$ENVMGR" down $E >/dev/null
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

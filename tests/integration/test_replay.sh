#!/usr/bin/env bash
# Record an episode on a real guest, replay it (frames and score reproduce), and check that a
# tampered trace is refused, a changed task is refused unless --force, and a real divergence is
# reported with its step, both frames and a diff image. Prints `replay: N passed, N failed`.
SUITE=replay
source "$(dirname "$0")/lib.sh"
D=$ROOT/tests/data
AGENT=$ROOT/tasks/agents/scripted
[ -x "$AGENT" ] || AGENT=$D/agents/scripted-fallback
cp "$D/tasks/terminal-echo.json" "$T/task.json"
AGENT="$AGENT --tasks $T/task.json" # where its solution is: the agent is never told the task's path
E=it-replay
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

export ENVMGR_TRACE_KEY=replay-test-key
"$ENVMGR" run "$T/task.json" --env $E --agent "$AGENT" --out "$T/rec" >/dev/null 2>&1
check "the recorded run scored 1.0" test "$(field "$T/rec/result.json" score)" = 1.0
check "the trace verifies with its HMAC key" "$ENVMGR" trace verify "$T/rec/trace"
out=$(ENVMGR_TRACE_KEY= "$ENVMGR" trace verify "$T/rec/trace" 2>&1); rc=$?
check "without the key an HMAC trace does not verify" test $rc != 0

out=$("$ENVMGR" replay "$T/rec/trace" --env $E --out "$T/rp1" 2>&1); rc=$?
echo "$out"
check "replay reproduces (exit 0)" test $rc = 0
check "replay.json says reproduced" test "$(field "$T/rp1/replay.json" reproduced)" = True
check "every step compared matched" \
    test "$(field "$T/rp1/replay.json" steps_compared)" = "$(field "$T/rp1/replay.json" steps_matched)"
out=$("$ENVMGR" replay "$T/rec/trace" --env $E --out "$T/rp2" --fast 2>&1); rc=$?
echo "$out"
check "replay --fast reproduces" test $rc = 0
"$ENVMGR" replay "$T/rec/trace" --env $E --out "$T/rp3" --until 2 --fast >/dev/null 2>&1
check "replay --until 2 compares 2 steps" test "$(field "$T/rp3/replay.json" steps_compared)" = 2

# A changed byte anywhere: refused, with the line number.
cp -r "$T/rec/trace" "$T/tampered"
sed -i '3s/"agent_ms":/"agent_ms": /' "$T/tampered/trace.jsonl"
out=$("$ENVMGR" replay "$T/tampered" --env $E --out "$T/rp4" 2>&1); rc=$?
check "a tampered trace is refused" test $rc != 0
check "the refusal names the line" bash -c "echo \"\$1\" | grep -q 'line'" _ "$out"
out=$("$ENVMGR" trace verify "$T/tampered" 2>&1)
check "trace verify names line 3" bash -c "echo \"\$1\" | grep -qE 'line (2|3)'" _ "$out"

# The task changed (setup now leaves a different screen) and the operator gives it with --task: refused,
# then a real divergence with --force. Without --task the replay uses the task the trace carries.
python3 - "$T/task.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["config"].append({"type": "launch", "parameters": {"command": ["xterm", "-geometry", "40x10+600+300"]}})
t["config"].append({"type": "wait_screen", "parameters": {"timeout": 30, "stable_ms": 1500}})
json.dump(t, open(sys.argv[1], "w"))
PY
out=$("$ENVMGR" replay "$T/rec/trace" --env $E --out "$T/rp5" --task "$T/task.json" 2>&1); rc=$?
check "a changed task file is refused without --force (exit 2)" test $rc = 2
out=$("$ENVMGR" replay "$T/rec/trace" --env $E --out "$T/rp6" --task "$T/task.json" --force --fast 2>&1); rc=$?
echo "$out"
check "with --force the changed setup diverges (exit 1)" test $rc = 1
check "the first divergent step is reported" bash -c "echo \"\$1\" | grep -q 'first divergent step'" _ "$out"
check "both frames and a diff image are kept" bash -c "ls '$T/rp6/divergence/'*-recorded.png '$T/rp6/divergence/'*-replayed.png '$T/rp6/divergence/'*-diff.png"

# Export: a self-contained page and numbered frames.
check "export --html writes index.html" "$ENVMGR" trace export "$T/rec/trace" --html "$T/html"
check "the page uses no network" bash -c "! grep -qE '(src|href)=\"(https?:)?//' '$T/html/index.html'"
check "export --frames writes numbered PNGs" bash -c "'$ENVMGR' trace export '$T/rec/trace' --frames '$T/frames' >/dev/null && ls '$T/frames/0000.png'"
"$ENVMGR" down $E >/dev/null
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

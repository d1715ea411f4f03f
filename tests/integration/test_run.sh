#!/usr/bin/env bash
# Episodes on a real guest: a scripted solution scores 1.0 with a verifiable trace; agents that crash,
# hang, write garbage, send refused actions or never finish end with the right exit cause; bad task
# files are refused before any VM starts. Prints `run: N passed, N failed`.
SUITE=run
source "$(dirname "$0")/lib.sh"
D=$ROOT/tests/data
TASK=$D/tasks/terminal-echo.json
SCRIPTED=$ROOT/tasks/agents/scripted
[ -x "$SCRIPTED" ] || SCRIPTED=$D/agents/scripted-fallback
SCRIPTED="$SCRIPTED --tasks $TASK" # where its solution is: the agent is never told the task's path
E=it-run
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

out=$("$ENVMGR" run "$TASK" --env $E --agent "$SCRIPTED" --out "$T/ok" --video 2>&1); rc=$?
echo "$out"
check "scripted solution runs (exit 0)" test $rc = 0
check "scripted solution scores 1.0" test "$(field "$T/ok/result.json" score)" = 1.0
check "exit cause done" test "$(field "$T/ok/result.json" exit_cause)" = done
check "trace verifies" "$ENVMGR" trace verify "$T/ok/trace"
check "trace shows the score" bash -c "'$ENVMGR' trace show '$T/ok/trace' | grep -q 'score:    1'"
check "the env was reverted after the run" bash -c "! '$ENVMGR' exec $E -- test -e /tmp/out.txt"
# --video: OSWorld's recording.mp4, built on the host from the trace's frames and timings
check "--video: result.json names OUT/recording.mp4" test "$(field "$T/ok/result.json" video)" = "$T/ok/recording.mp4"
probe=$(ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=codec_name,width,height,nb_read_frames \
    -show_entries format=duration -of default=nw=1 "$T/ok/recording.mp4" 2>&1)
check "--video: an H.264 video at the screen's size, a frame per change, as long as the episode" \
    python3 - "$probe" "$T/ok/trace/trace.jsonl" <<'PY'
import json, sys
p = dict(l.split("=", 1) for l in sys.argv[1].splitlines() if "=" in l)
steps = [json.loads(l) for l in open(sys.argv[2]) if '"type":"step"' in l]
hdr = json.loads(open(sys.argv[2]).readline())
span = steps[-1]["t"] - steps[0]["t"]
ok = (p["codec_name"] == "h264" and int(p["width"]) == hdr["screen"]["width"] and int(p["height"]) == hdr["screen"]["height"]
      and int(p["nb_read_frames"]) >= 2 and span + 1 <= float(p["duration"]) <= span + 1 + 60)
print(p, "span", span)
sys.exit(0 if ok else 1)
PY
check "--video: trace export --video makes the same kind of file" bash -c \
    "'$ENVMGR' trace export '$T/ok/trace' --video '$T/again.mp4' >/dev/null && head -c 8 '$T/again.mp4' | tail -c 4 | grep -q ftyp"

run_with() { "$ENVMGR" run "$TASK" --env $E --agent "$1" --out "$T/$2" >/dev/null 2>&1; }
run_with "$D/agents/crash" crash
check "a crashing agent: agent_error" test "$(field "$T/crash/result.json" exit_cause)" = agent_error
check "a crashing agent: score 0 (nothing done)" test "$(field "$T/crash/result.json" score)" = 0.0
check "a crashing agent: the trace still verifies" "$ENVMGR" trace verify "$T/crash/trace"
run_with "$D/agents/garbage" garbage
check "a garbage-writing agent: agent_error" test "$(field "$T/garbage/result.json" exit_cause)" = agent_error
s=$(date +%s)
run_with "$D/agents/hang" hang
check "a hanging agent: timeout" test "$(field "$T/hang/result.json" exit_cause)" = timeout
check "a hanging agent is cut at the step timeout (10 s), not later" test $(( $(date +%s) - s )) -lt 60
check "no process of the hanging agent survives" no_qemu_under "$D/agents/hang"
run_with "$D/agents/refused-then-done" refused
check "refused actions are reported to the agent, then DONE ends it" \
    test "$(field "$T/refused/result.json" exit_cause)" = done
check "pyautogui code outside the subset ran in the guest, as the desktop user on its display (exit 0)" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
p = [x for x in s if x["action"]["action_type"] == "PYAUTOGUI"]
sys.exit(0 if len(p) == 2 and "error" not in p[0] and p[0]["source"] == "pyautogui" else 1)' "$T/refused/trace/trace.jsonl"
check "a syntax error in the agent's code is its error, recorded in the step; the episode went on" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
p = [x for x in s if x["action"]["action_type"] == "PYAUTOGUI"]
sys.exit(0 if "SyntaxError" in p[1].get("error", "") and p[1].get("frame_after") and s[-1]["action"]["action_type"] == "DONE" else 1)' "$T/refused/trace/trace.jsonl"
check "the trace with guest-run code verifies" bash -c "'$ENVMGR' trace verify '$T/refused/trace' >/dev/null"
check "refused steps are in the trace with their error" grep -q '"REFUSED"' "$T/refused/trace/trace.jsonl"
run_with "$D/agents/waiter" waiter
check "an agent that never finishes: max_steps" test "$(field "$T/waiter/result.json" exit_cause)" = max_steps

# No silent failure (issue 29): a launch of a program the image lacks, and a getter piping into a tool
# it lacks under conj "or", are flagged in result.json even though the other metric makes the score 1.
cat >"$T/flags.json" <<'EOF2'
{"id": "flags", "instruction": "nothing to do",
 "config": [{"type": "launch", "parameters": {"command": ["no-such-app", "--x"]}}],
 "evaluator": {"func": ["exact_match", "check_include_exclude"], "conj": "or",
   "result": [{"type": "vm_command_line", "command": "echo 2+3 | no-such-calc", "shell": true},
              {"type": "vm_command_line", "command": ["echo", "ok"]}],
   "expected": [{"type": "rule", "rules": {"expected": "5"}},
                {"type": "rule", "rules": {"include": ["ok"], "exclude": []}}]}}
EOF2
"$ENVMGR" run "$T/flags.json" --env $E --agent "$ROOT/tasks/agents/null" --out "$T/flags" >/dev/null 2>&1
check "flags: the 'or' still scores 1.0" test "$(field "$T/flags/result.json" score)" = 1.0
check "flags: result.json says flagged, the launch names the missing program, the getter its exit 127" \
    python3 - "$T/flags/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s, g = r.get("setup_flags", []), r.get("getter_flags", [])
ok = (r.get("flagged") is True and any("no-such-app" in f["why"] and "not found on the image" in f["why"] for f in s)
      and any(f["path"] == "evaluator.result[0]" and "exit status 127" in f["why"] for f in g))
print(s, g)
sys.exit(0 if ok else 1)
PY
check "flags: a clean episode is not flagged" python3 -c \
    "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['flagged'] is False else 1)" "$T/ok/result.json"

# Bad task files: one line naming the JSON path, exit 2, no VM started.
echo '{"id":"x","instruction":"y","evaluator":{"func":"exact_match","result":{"type":7}}}' >"$T/bad.json"
out=$("$ENVMGR" run "$T/bad.json" --agent /bin/true 2>&1); rc=$?
check "a bad task: exit 2" test $rc = 2
check "a bad task: one line naming evaluator.result.type" \
    bash -c "[ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q 'evaluator.result.type'" _ "$out"
check "a bad task starts no env" test -z "$(ls "$ENVMGR_RUN_DIR" | grep run- || true)"
# --image (issue 28): a task about an app the image lacks is refused before any VM starts, naming them
echo '{"id":"g","instruction":"y","related_apps":["gimp","os"],"evaluator":{"func":"infeasible"}}' >"$T/gimp.json"
out=$("$ENVMGR" run "$T/gimp.json" --agent /bin/true 2>&1); rc=$?
check "an OSWorld task whose app the default image lacks: exit 2, one line naming related_apps and desktop" \
    bash -c "[ $rc = 2 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q 'related_apps: gimp: not on image .desktop.'" _ "$out"
out=$("$ENVMGR" run "$T/gimp.json" --agent /bin/true --image desktop --force-image 2>&1); rc=$?
check "--image desktop --force-image: the same refusal" bash -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q 'related_apps: gimp'" _ "$out"
out=$("$ENVMGR" run "$TASK" --env $E --agent /bin/true --image apps 2>&1); rc=$?
check "--image with --env: a usage error (the env runs its own image)" bash -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q -- '--image: only for the temporary env'" _ "$out"
out=$("$ENVMGR" run "$T/gimp.json" --env $E --agent /bin/true 2>&1); rc=$?
check "--env on an image without the app: refused before the episode, naming it" \
    bash -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q 'related_apps: gimp: not on image .desktop.'" _ "$out"
check "a refused task starts no env" test -z "$(ls "$ENVMGR_RUN_DIR" | grep run- || true)"
"$ENVMGR" run /nonexistent.json --agent /bin/true >/dev/null 2>&1
check "a missing task file: exit 2" test $? = 2
"$ENVMGR" down $E >/dev/null
# `envmgr run DIR` (issue 28): the suite runner with one env, then run's table; a task that does not load
# is a row of its own and the others still run; a folder takes no --env.
mkdir -p "$T/folder" && cp "$ROOT"/tasks/demo/infeasible-*.json "$T/folder/" && echo '{"id":"bad"' >"$T/folder/zz-bad.json"
"$ENVMGR" run "$T/folder" --agent "$ROOT/tasks/agents/null --fail" --out "$T/folder-out" --accel tcg >"$T/table.txt" 2>"$T/table.err"
rc=$?; cat "$T/table.txt"
check "run DIR: exit 0, a table with its mean" bash -c "[ $rc = 0 ] && grep -q '2 of 3 tasks ran, mean score 1.000' '$T/table.txt'"
check "run DIR: the task that does not load is a row naming its problem" grep -q '^zz-bad .* error: task: invalid JSON' "$T/table.txt"
check "run DIR: the suite layout (results.jsonl, summary.json, traces/<id>/)" \
    bash -c "[ \$(wc -l <'$T/folder-out/results.jsonl') = 3 ] && [ -f '$T/folder-out/summary.json' ] && [ -f '$T/folder-out/traces/infeasible-ms-word/result.json' ]"
out=$("$ENVMGR" run "$T/folder" --agent /bin/true --out "$T/folder-out" 2>&1); rc=$?
check "run DIR into an OUT that holds a run: refused, no table" bash -c "[ $rc = 2 ] && ! printf '%s' \"\$1\" | grep -q TASK" _ "$out"
out=$("$ENVMGR" run "$T/folder" --env $E --agent /bin/true 2>&1); rc=$?
check "run DIR --env: a usage error" bash -c "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q -- '--env: only for a single task'" _ "$out"
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

#!/usr/bin/env bash
# An agent written against OSWorld's interface (reset, predict -> (response, actions)) run by
# `envmgr suite run` through the adapter (python3 -m envmgr_osworld_agent) on 2 envs of the desktop
# image: the example fake-model agent (clients/python/examples/osworld_fake_agent.py) answers a
# set-of-marks episode (tag_N=(x, y) lines, pyautogui.click(tag_2)), plain pyautogui code and FAIL,
# and scores 1.0 on each; the responses are in the traces; junit, video, resume and compare work as
# for any agent; `envmgr suite export --osworld` writes OSWorld's results tree.
# Prints `osworld_agent: N passed, N failed`.
SUITE=osworld_agent
source "$(dirname "$0")/lib.sh"
export PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$ROOT/clients/python # the adapter; an installed client has it too
SUITE_DIR=$T/demo
pick_tasks "$SUITE_DIR" "$ROOT/tasks/demo" desktop-create-folder terminal-mkdir-tree infeasible-ms-word
AGENT="python3 -m envmgr_osworld_agent --path $ROOT/clients/python/examples --agent osworld_fake_agent:FakeSomAgent"
RUN=$T/run-1

"$ENVMGR" suite run "$SUITE_DIR" --agent "$AGENT" --envs 2 --accel tcg --video --out "$RUN" --progress plain \
    >"$T/suite.log" 2>&1
rc=$?
tail -8 "$T/suite.log"
check "suite run on 2 envs exits 0" test "$rc" = 0
check "it ran on 2 envs" grep -q "on 2 envs" "$T/suite.log"
for id in desktop-create-folder terminal-mkdir-tree infeasible-ms-word; do
    check "$id: the OSWorld-style agent scores 1.0" test "$(score_of "$RUN" "$id")" = 1.0
done
TR=$RUN/traces/desktop-create-folder/trace/trace.jsonl
check "the set-of-marks episode: its code ran in the guest (PYAUTOGUI steps with tag_ lines, no error)" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
g = [x for x in s if x["action"]["action_type"] == "PYAUTOGUI"]
sys.exit(0 if len(g) == 3 and all(x["action"]["code"].startswith("tag_1=(700, 400)\n") and "error" not in x for x in g)
         and "pyautogui.click(tag_2)" in g[1]["action"]["code"] else 1)' "$TR"
check "the model's response is in the trace, on the reply's first step line with the code as sent" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
sys.exit(0 if s[0]["response"].startswith("The terminal has the focus") and s[0]["pyautogui"].startswith("import pyautogui")
         and s[0]["source"] == "pyautogui" and s[-1]["action"]["action_type"] == "DONE" else 1)' \
    "$RUN/traces/terminal-mkdir-tree/trace/trace.jsonl"
check "junit.xml has the 3 episodes" test "$(grep -c '<testcase' "$RUN/junit.xml")" = 3
check "--video: each episode's recording.mp4" test "$(ls "$RUN"/traces/*/recording.mp4 | wc -l)" = 3
check "the agent's log has its responses" grep -q "response:" "$RUN/traces/terminal-mkdir-tree/agent.log"

"$ENVMGR" suite run "$SUITE_DIR" --agent "$AGENT" --envs 2 --accel tcg --out "$RUN" --resume --progress plain \
    >"$T/resume.log" 2>&1
check "--resume: exits 0 and runs nothing again" bash -c "[ $? = 0 ] && [ \$(grep -c '\"final\":true' '$RUN/results.jsonl') = 3 ]"
check "compare with itself: no regression (exit 0)" "$ENVMGR" suite compare "$RUN" "$RUN"

# OSWorld's results tree
OSW=$T/osworld
check "suite export --osworld exits 0" bash -c "'$ENVMGR' suite export '$RUN' --osworld '$OSW' >'$T/export.out' 2>&1"
check "it says what it exported" grep -q "exported 3 episodes" "$T/export.out"
E=$OSW/demo/terminal-mkdir-tree
check "<domain>/<id>/: traj.jsonl, result.txt 1.0, recording.mp4 that ffprobe reads as H.264" bash -c "
    [ -s '$E/traj.jsonl' ] && [ \"\$(cat '$E/result.txt')\" = 1.0 ] &&
    [ \"\$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name -of csv=p=0 '$E/recording.mp4')\" = h264 ]"
check "traj.jsonl: one line per reply in OSWorld's keys, the action as sent, the response, done at the end" python3 -c '
import json, os, re, sys
d = sys.argv[1]
t = [json.loads(l) for l in open(os.path.join(d, "traj.jsonl"))]
keys = ["step_num", "action_timestamp", "action", "response", "reward", "done", "info", "screenshot_file"]
ok = len(t) == 2 and all(list(x) == keys for x in t) and [x["step_num"] for x in t] == [1, 2]
ok = ok and t[0]["action"].startswith("import pyautogui\npyautogui.typewrite(") and "terminal has the focus" in t[0]["response"]
ok = ok and t[-1]["done"] is True and t[-1]["info"] == {"done": True} and t[0]["done"] is False
for x in t:
    ok = ok and re.fullmatch(r"\d{8}@\d{12}", x["action_timestamp"]) is not None
    ok = ok and x["screenshot_file"] == "step_%d_%s.png" % (x["step_num"], x["action_timestamp"])
    ok = ok and open(os.path.join(d, x["screenshot_file"]), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
sys.exit(0 if ok else 1)' "$E"
check "the set-of-marks episode: 4 traj lines, the tag code as the action" python3 -c '
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(t) == 4 and t[1]["action"].startswith("tag_1=(700, 400)\ntag_2=(776, 466)\n") else 1)' \
    "$OSW/demo/desktop-create-folder/traj.jsonl"
check "the infeasible episode: FAIL with OSWorld's fail key" python3 -c '
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(t) == 1 and t[0]["info"] == {"fail": True} and t[0]["done"] is True else 1)' \
    "$OSW/demo/infeasible-ms-word/traj.jsonl"
"$ENVMGR" suite export "$RUN" --osworld "$OSW" >"$T/again.out" 2>&1
check "exporting over an earlier export is refused (exit 1), nothing overwritten" \
    bash -c "[ $? = 1 ] && grep -q 'export into a new folder' '$T/again.out' && [ \$(wc -l <'$E/traj.jsonl') = 2 ]"
"$ENVMGR" suite export "$T" --osworld "$T/x" >"$T/bad.out" 2>&1
check "a folder that is no suite run: one line, exit 1" bash -c "[ $? = 1 ] && [ \$(wc -l <'$T/bad.out') = 1 ]"
"$ENVMGR" suite export "$RUN" >"$T/bad2.out" 2>&1
check "no --osworld: usage error (exit 2)" test $? = 2

check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

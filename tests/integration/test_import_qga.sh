#!/usr/bin/env bash
# `envmgr image import --guest qga` (issue 41): a disk with its own bootloader whose guest runs Debian's
# QEMU guest agent (tests/tools/boot-disk.sh --qga: built here from Debian packages, cached by its
# inputs) is imported; its golden state is made once the agent answers and the screen settles; `envmgr
# exec` runs commands as root with their output and exit code; the clock is set after a reset; a task
# with upload_file and execute setup steps and a vm_file getter scores 1.0 with its solution and 0
# with the null agent; a task that needs envmgr's toolbelt is refused at plan time naming the step; a
# disk without the agent imported as qga is refused with one line and nothing kept.
. "$(dirname "$0")/lib.sh"

BOOT=$("$ROOT/tests/tools/boot-disk.sh") && QGA=$("$ROOT/tests/tools/boot-disk.sh" --qga) ||
    { bad "the boot disks (tests/tools/boot-disk.sh: the desktop image, apt-get download qemu-guest-agent)"; finish; exit; }
import_scratch

# A disk without the agent, imported as qga: one line naming the agent, exit 2, nothing kept.
import_not_kept "a disk without qemu-ga imported as qga: the agent did not answer within 40 s" \
    'noagent: not kept: .*QEMU guest agent did not answer on org.qemu.guest_agent.0 within 40 s' \
    noagent "$BOOT" --guest qga --screen 720x400 --memory 256 --ready-timeout 40 --accel tcg

# The import.
import_ok "import the qemu-ga disk (--guest qga)" qga qga "$QGA" --screen 720x400 --memory 256 \
    --ready-timeout 240 --accel tcg
check "the manifest says guest qga" python3 -c \
    "import json,sys; sys.exit(json.load(open(sys.argv[1]))['guest'] != 'qga')" "$ENVMGR_IMAGE_DIR/qga/manifest.json"

E=qga-$$
check "up --image qga" "$ENVMGR" up --name $E --image qga --accel tcg
exec_basics $E "guest-exec"
check "exec runs as root (the agent's user; no desktop user on qga)" test "$("$ENVMGR" exec $E -- id -u)" = 0
out=$(printf 'written through the agent\n' | "$ENVMGR" exec $E --stdin -- sh -c 'cat >/tmp/w; cat /tmp/w')
check "exec --stdin: a file written and read back" test "$out" = "written through the agent"
out=$("$ENVMGR" exec $E --timeout 2 -- sh -c 'sleep 30' 2>&1); rc=$?
check "exec --timeout 2 of a 30 s command: ends (timeout(1) in the guest), exit non-zero" test $rc != 0
out=$("$ENVMGR" act $E '{"action_type":"PYAUTOGUI","code":"import os\nx = os.getcwd()"}' 2>&1); rc=$?
check "pyautogui code outside the subset (the toolbelt runs it): exit 2, one line naming the toolbelt" bash -c \
    "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q \"needs envmgr's toolbelt in the guest; image qga has guest qga\"" _ "$out"
[ $rc = 2 ] || printf '%s\n' "$out"
lat=()
for i in 1 2 3 4 5 6 7 8 9; do t0=$(date +%s.%N); "$ENVMGR" exec $E -- true; lat+=("$(ms_since $t0)"); done
echo "   exec true: p50 $(printf '%s\n' "${lat[@]}" | sort -n | sed -n 5p) ms over 9 (wall, CLI included)"
reset_clock $E "agent sync + guest-set-time"

# A task: an uploaded file (guest-file-write), an execute step, the agent's command on the console, a
# vm_file getter (guest-file-read) and a command getter.
mkdir -p "$T/task"
echo 21 >"$T/task/q.txt"
cat >"$T/task/double.json" <<'J'
{"id": "qga-double", "instruction": "Write twice the number in /tmp/q into /tmp/answer.", "image": "qga",
 "config": [{"type": "upload_file", "parameters": {"files": [{"local_path": "q.txt", "path": "/tmp/q"}]}},
            {"type": "execute", "parameters": {"command": "echo setup-ran > /tmp/setup", "shell": true}}],
 "evaluator": {"func": ["exact_match", "exact_match"], "conj": "and",
   "result": [{"type": "vm_file", "path": "/tmp/answer", "dest": "answer"},
              {"type": "vm_command_line", "command": ["cat", "/tmp/setup"]}],
   "expected": [{"type": "rule", "rules": {"expected": "42\n"}}, {"type": "rule", "rules": {"expected": "setup-ran\n"}}]},
 "solution": [{"action_type": "TYPING", "text": "echo $(( $(cat /tmp/q) * 2 )) > /tmp/answer\n"},
              {"action_type": "WAIT", "seconds": 1}]}
J
score() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['score'])" "$1/result.json" 2>/dev/null; }
out=$("$ENVMGR" run "$T/task/double.json" --env $E --agent "$ROOT/tasks/agents/scripted --tasks $T/task/double.json" \
    --out "$T/solved" 2>&1); rc=$?
check "the task with its solution (scripted): exit 0, score 1.0" test "$rc $(score "$T/solved")" = "0 1.0"
[ "$(score "$T/solved")" = 1.0 ] || printf '%s\n' "$out" | tail -5
check "its trace verifies" bash -c "'$ENVMGR' trace verify '$T/solved/trace' >/dev/null"
out=$("$ENVMGR" run "$T/task/double.json" --image qga --accel tcg --agent "$ROOT/tasks/agents/null" --out "$T/null" 2>&1); rc=$?
check "the task with the null agent (a temporary env): score 0" test "$(score "$T/null")" = 0.0
[ "$(score "$T/null")" = 0.0 ] || printf '%s\n' "$out" | tail -5

# What needs envmgr's toolbelt is refused at plan time, naming the step, before any VM starts.
cat >"$T/tabs.json" <<'J'
{"id": "t", "instruction": "x", "config": [{"type": "execute", "parameters": {"command": ["true"]}},
 {"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.com"]}}], "evaluator": {"func": "infeasible"}}
J
out=$("$ENVMGR" run "$T/tabs.json" --image qga --agent "$ROOT/tasks/agents/null" --out "$T/tabs" 2>&1); rc=$?
check "a toolbelt step on a qga image: exit 2, one line naming config[1] chrome_open_tabs" bash -c \
    "[ $rc = 2 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q \"config\[1\]: chrome_open_tabs needs envmgr's toolbelt in the guest.*image .qga. has guest qga\"" _ "$out"
cat >"$T/a11y.json" <<'J'
{"id": "a", "instruction": "x", "evaluator": {"func": "exact_match", "result": {"type": "accessibility_tree"},
 "expected": {"type": "rule", "rules": {"expected": "x"}}}}
J
out=$("$ENVMGR" run "$T/a11y.json" --env $E --agent "$ROOT/tasks/agents/null" --out "$T/a11y" 2>&1); rc=$?
check "a toolbelt getter in the env on it (--env): exit 2 naming evaluator.result[0]" bash -c \
    "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q \"evaluator.result\[0\]: accessibility_tree needs envmgr's toolbelt\"" _ "$out"
check "refused tasks started no env" test -z "$(ls "$ENVMGR_RUN_DIR" | grep run- || true)"

check "down" "$ENVMGR" down $E
check "image rm qga" "$ENVMGR" image rm qga
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

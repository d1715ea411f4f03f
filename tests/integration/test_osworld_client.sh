#!/usr/bin/env bash
# OSWorld's own run loop against envmgr serve, through the Python client INSTALLED into a venv
# (issue 31): DesktopEnv's construction arguments, env.vm_ip, _get_obs, controller recording
# (GET /v1/envs/{id}/video), steps with pause, info's done/fail keys, evaluate (score 1.0),
# recording.mp4 that ffprobe reads, and a replay of the episode's trace.
#   desktop image (the default): the demo task, solved by a set-of-marks answer run in the guest.
#   OSWORLD_CLIENT_IMAGE=apps (test_osworld_client_apps.sh, make test-apps): OSWorld-Verified's os task
#   e0df059f unchanged, solved by plain Python and a pyperclip answer; then a tree-only observation
#   that still carries the screenshot, and FAIL's info.
# Prints `osworld_client: N passed, N failed` (`osworld_client_apps: ...` on the apps image).
IMAGE=${OSWORLD_CLIENT_IMAGE:-desktop}
SUITE=osworld_client$([ "$IMAGE" = desktop ] || echo "_$IMAGE")
source "$(dirname "$0")/lib.sh"
export PYTHONDONTWRITEBYTECODE=1
PY=/usr/bin/python3 # Debian's, with python3-venv

SERVE_PID=
stop_server() {
    [ -n "$SERVE_PID" ] || return 0
    kill -TERM "$SERVE_PID" 2>/dev/null
    for _ in $(seq 600); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$SERVE_PID" 2>/dev/null && kill -9 "$SERVE_PID"
    wait "$SERVE_PID" 2>/dev/null
    local rc=$?
    SERVE_PID=
    return $rc
}
trap 'stop_server; cleanup' EXIT

check "a fresh venv" "$PY" -m venv "$T/venv"
check "pip install ./clients/python (no network)" \
    bash -c "cd '$ROOT' && '$T/venv/bin/pip' install --no-cache-dir --no-index -q ./clients/python"

"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" --out "$T/out" --task-root "$ROOT/tasks" \
    --accel tcg >"$T/serve.out" 2>"$T/serve.err" &
SERVE_PID=$!
wait_until 20 grep -q 'token file' "$T/serve.out"
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
[ -n "$URL" ] || { bad "server did not start: $(cat "$T/serve.err")"; finish; exit 1; }
TOKEN=$(cat "$T/token")

# no episode yet: the video endpoint says so
code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" -d "{\"image\":\"$IMAGE\"}" "$URL/v1/envs")
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/body" 2>/dev/null)
check "GET video before any episode: 404" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID/video")" = 404
check "POST video: 405" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID/video")" = 405
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID"

if [ "$IMAGE" = desktop ]; then
    TASK=$ROOT/tasks/demo/terminal-mkdir-tree.json R=$T/results/pyautogui/screenshot/scripted/demo/terminal-mkdir-tree
    STEPS=4 SCREEN=1280,800 FIRST="tag_3="
else
    OSW=e0df059f-28a6-4169-924f-b9623e7184cc DATA=$ROOT/tests/data/osworld-client
    TASK=$DATA/$OSW.json R=$T/results/pyautogui/screenshot/scripted/os/$OSW
    STEPS=4 SCREEN=1920,1080 FIRST="os.rename("
    check "the OSWorld task file is OSWorld-Verified's, unchanged (README.md's sha256)" \
        bash -c "grep -q \"\$(sha256sum '$TASK' | cut -d' ' -f1)\" '$DATA/README.md'"
fi
tally "osworld loop" < <(cd "$T" && timeout 1800 "$T/venv/bin/python" "$ROOT/clients/python/tests/osworld_loop_check.py" \
    "$URL" "$TOKEN" "$TASK" "$R" "$IMAGE" 2>"$T/loop.err")
check "the loop ran all its checks without a traceback" bash -c "[ ! -s '$T/loop.err' ] || { tail -20 '$T/loop.err' >&2; false; }"
check "OSWorld's results: traj.jsonl with $STEPS steps, step_N pngs, result.txt 1.0" \
    bash -c "[ \$(wc -l <'$R/traj.jsonl') = $STEPS ] && [ \$(ls '$R'/step_*.png | wc -l) = $STEPS ] && grep -qx 1.0 '$R/result.txt'"
dur=$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height -of csv=p=0 "$R/recording.mp4" 2>&1)
check "ffprobe reads recording.mp4 as H.264 ${SCREEN/,/x} ($dur)" test "$dur" = "h264,$SCREEN"
check "the video is also kept beside the episode's trace under --out" \
    bash -c "ls '$T'/out/*/*/recording.mp4 >/dev/null 2>&1"

mkdir -p "$T/tr" && tar -xf "$R/trace.tar" -C "$T/tr" 2>/dev/null
check "the first answer (code outside the subset) ran in the guest: a PYAUTOGUI step, no error" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
a = s[0]["action"]
sys.exit(0 if a["action_type"] == "PYAUTOGUI" and sys.argv[2] in a["code"] and "error" not in s[0] else 1)' \
    "$T/tr/trace/trace.jsonl" "$FIRST"
if [ "$IMAGE" = apps ]; then
    check "the pyperclip answer ran in the guest without an error (the image has pyperclip and xclip)" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
sys.exit(0 if "pyperclip.copy" in s[1]["action"].get("code", "") and "error" not in s[1] else 1)' "$T/tr/trace/trace.jsonl"
fi
# an API episode with an inline task does not carry it in its trace: --task with --force
check "envmgr replay re-runs the guest-run code and reproduces frames and score" \
    bash -c "'$ENVMGR' replay '$T/tr/trace' --task '$TASK' --force --fast --out '$T/replay' >'$T/replay.out' 2>&1 || { tail -5 '$T/replay.out' >&2; false; }"

if [ "$IMAGE" = desktop ]; then
    # an episode with no score: evaluate() raises, never returns a 0 (a postconfig check fails)
    cat >"$T/noscore.py" <<'PY'
import json, sys
from envmgr_client import EnvmgrEnv, EnvmgrNoScore
url, token, task = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
with EnvmgrEnv(url, token) as env:
    env.reset(task_config=task)
    try:
        print("FAIL evaluate() of an unevaluated episode returned %r" % env.evaluate())
    except EnvmgrNoScore as e:
        ok = (e.status, e.exit_cause) == ("not_evaluated", "setup_error") and "postconfig[0]" in e.reason
        print(("ok   " if ok else "FAIL ") + "evaluate() raises EnvmgrNoScore (%s, %s), not a 0" % (e.status, e.exit_cause))
        print(("ok   " if env.last_evaluation.get("status") == "not_evaluated" else "FAIL ") +
              "last_evaluation keeps the answer")
PY
    tally "no score" < <(timeout 600 "$T/venv/bin/python" "$T/noscore.py" "$URL" "$TOKEN" \
        "$ROOT/tests/data/postconfig/postconfig-check.json" 2>&1)
fi
check "SIGTERM: the server exits 0" stop_server
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

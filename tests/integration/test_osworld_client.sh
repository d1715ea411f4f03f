#!/usr/bin/env bash
# OSWorld's own run loop against envmgr serve, through the Python client INSTALLED into a venv
# (issue 31): DesktopEnv's construction arguments, env.vm_ip, _get_obs, controller recording
# (GET /v1/envs/{id}/video), steps with pause, info's done/fail keys, evaluate on a demo task
# solved by scripted pyautogui code (score 1.0), recording.mp4 that ffprobe reads, and a tree-only
# observation that still carries the screenshot. Prints `osworld_client: N passed, N failed`.
SUITE=osworld_client
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
code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" -d '{"image":"desktop"}' "$URL/v1/envs")
ID=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$T/body" 2>/dev/null)
check "GET video before any episode: 404" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID/video")" = 404
check "POST video: 405" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID/video")" = 405
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID"

R=$T/results/pyautogui/screenshot/scripted/demo/terminal-mkdir-tree
tally "osworld loop" < <(cd "$T" && timeout 1200 "$T/venv/bin/python" "$ROOT/clients/python/tests/osworld_loop_check.py" \
    "$URL" "$TOKEN" "$ROOT/tasks/demo/terminal-mkdir-tree.json" "$R" 2>"$T/loop.err")
check "the loop ran all its checks without a traceback" bash -c "[ ! -s '$T/loop.err' ] || { tail -20 '$T/loop.err' >&2; false; }"
check "OSWorld's results: traj.jsonl with 4 steps, step_N pngs, result.txt 1.0" \
    bash -c "[ \$(wc -l <'$R/traj.jsonl') = 4 ] && [ \$(ls '$R'/step_*.png | wc -l) = 4 ] && grep -qx 1.0 '$R/result.txt'"
dur=$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height -of csv=p=0 "$R/recording.mp4" 2>&1)
check "ffprobe reads recording.mp4 as H.264 1280x800 ($dur)" test "$dur" = "h264,1280,800"
check "the video is also kept beside the episode's trace under --out" \
    bash -c "ls '$T'/out/*/*/recording.mp4 >/dev/null 2>&1"

mkdir -p "$T/tr" && tar -xf "$R/trace.tar" -C "$T/tr" 2>/dev/null
check "the set-of-marks answer ran in the guest: a PYAUTOGUI step with the code, no error" python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
a = s[0]["action"]
sys.exit(0 if a["action_type"] == "PYAUTOGUI" and "tag_3=" in a["code"] and "error" not in s[0] else 1)' "$T/tr/trace/trace.jsonl"
# an API episode with an inline task does not carry it in its trace: --task with --force
check "envmgr replay re-runs the guest-run code and reproduces frames and score" \
    bash -c "'$ENVMGR' replay '$T/tr/trace' --task '$ROOT/tasks/demo/terminal-mkdir-tree.json' --force --fast --out '$T/replay' >'$T/replay.out' 2>&1 || { tail -5 '$T/replay.out' >&2; false; }"

check "SIGTERM: the server exits 0" stop_server
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

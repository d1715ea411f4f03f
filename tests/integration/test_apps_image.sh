#!/usr/bin/env bash
# --image on every front end (issue 28), on the apps image: OSWorld's task files name no image, so
# `envmgr suite run INDEX --image apps` and `envmgr serve --image apps` (a default for API requests that
# name none) put them on the apps image; without it the API refuses such a task before any VM starts,
# naming its app and the image that has it. (`envmgr run FILE --image apps` and `suite list --image` are
# in test_apps_tasks.sh, the refusals of run and suite list in test_run.sh and test_apps_tasks.sh.)
# SKIPPED unless ENVMGR_APPS=1 (`make test-apps`). Prints `apps-image: N passed, N failed`.
. "$(dirname "$0")/lib.sh"
SUITE=apps-image
if [ "${ENVMGR_APPS:-0}" != 1 ]; then
    echo "apps-image: skipped (set ENVMGR_APPS=1 to boot the apps image; ~5 min under TCG)"
    finish
    exit 0
fi
AG=$ROOT/tasks/agents
# An OSWorld-shaped copy of an apps task: the same file without its `image` field.
osw=$T/osworld-shaped
mkdir -p "$osw" && cp -r "$ROOT/tasks/apps/files" "$osw/"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('image'); json.dump(d, open(sys.argv[2],'w'))" \
    "$ROOT/tasks/apps/vlc-pause.json" "$osw/vlc-pause.json"
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

# --- suite run INDEX --image apps --------------------------------------------------------
"$ENVMGR" suite run "$osw" --image apps --agent "$AG/scripted --tasks $osw" --envs 1 --accel tcg \
    --out "$T/suite" --progress plain >"$T/suite.out" 2>&1
rc=$?
tail -3 "$T/suite.out"
check "suite run --image apps: exit 0" test $rc = 0
check "suite run --image apps: the solution scores 1.0 on the apps image" \
    python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; sys.exit(0 if r['score'] == 1.0 else 1)" \
    "$T/suite/results.jsonl"
check "suite run --image apps: the trace's header has the apps image's manifest and screen (1920x1080)" \
    python3 -c "import json,sys; h=json.loads(open(sys.argv[1]).readline())
import hashlib; sys.exit(0 if h['screen']['width'] == 1920 and h['image_manifest_sha256'] == hashlib.sha256(open(sys.argv[2],'rb').read()).hexdigest() else 1)" \
    "$T/suite/traces/vlc-pause/trace/trace.jsonl" "$ROOT/vm-images/out/apps/manifest.json"

# --- serve --image apps, and serve without it --------------------------------------------
SERVE_PID=
serve() { # serve NAME [ARGS...]: start a server whose token and address are $T/NAME.*
    local n=$1; shift
    "$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/$n.token" --out "$T/$n.out.d" --task-root "$osw" \
        --accel tcg "$@" >"$T/$n.out" 2>"$T/$n.err" &
    SERVE_PID=$!
    wait_until 20 grep -q 'token file' "$T/$n.out"
    URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/$n.out")
    TOKEN=$(cat "$T/$n.token" 2>/dev/null)
}
stop_server() {
    [ -n "$SERVE_PID" ] || return 0
    kill -TERM "$SERVE_PID" 2>/dev/null
    wait_until 60 bash -c "! kill -0 $SERVE_PID 2>/dev/null" || kill -9 "$SERVE_PID" 2>/dev/null
    wait "$SERVE_PID" 2>/dev/null
    SERVE_PID=
}
trap 'stop_server; cleanup' EXIT
post() { curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" -d "$1" "$URL/v1/envs"; }

serve plain
code=$(post '{"task": "vlc-pause.json"}')
check "serve without --image: an OSWorld task about VLC is refused before any VM starts ($code)" test "$code" = 422 -o "$code" = 400
check "serve without --image: the reply names related_apps and --image apps" \
    grep -q 'related_apps: vlc: not on image .desktop.; image .apps. has them (--image apps)' "$T/body"
check "serve without --image: no env was started" no_qemu_under "$ENVMGR_RUN_DIR/"
stop_server

serve apps --image apps
code=$(post '{"task": "vlc-pause.json"}')
check "serve --image apps: the same task makes an env (201)" test "$code" = 201
check "serve --image apps: the env runs the apps image at its screen size" \
    test "$(field "$T/body" "['image']") $(field "$T/body" "['width']")" = "apps 1920"
ID=$(field "$T/body" "['id']")
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID"
code=$(post '{"image": "desktop"}')
check "serve --image apps: a request naming its image still gets it (201, desktop)" \
    bash -c "[ $code = 201 ] && grep -q '\"image\":\"desktop\"' '$T/body'"
ID=$(field "$T/body" "['id']")
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $TOKEN" "$URL/v1/envs/$ID"
check "SIGTERM: the server exits" stop_server
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

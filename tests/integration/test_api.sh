#!/usr/bin/env bash
# envmgr serve on loopback against real guests under TCG: auth, routing, the
# env lifecycle, reset/step/screenshot/evaluate/trace, metrics, bad input
# (huge bodies, bad JSON, wrong tokens, unknown ids, a client that hangs up
# mid-step, a slow client), --max-envs, the unix socket, teardown on
# SIGTERM/SIGINT, and the Python client's unittest suite. Prints `api: N passed, N failed`.
SUITE=api
source "$(dirname "$0")/lib.sh"
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ left in the source tree

SERVE_PID=
stop_server() { # stop_server SIGNAL: 0 when the server exited 0 within 60 s
    local sig=${1:-TERM} rc=0
    [ -n "$SERVE_PID" ] || return 0
    kill -"$sig" "$SERVE_PID" 2>/dev/null
    for _ in $(seq 600); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$SERVE_PID" 2>/dev/null; then kill -9 "$SERVE_PID"; rc=1; fi
    wait "$SERVE_PID" 2>/dev/null || rc=1
    SERVE_PID=
    return $rc
}
trap 'stop_server KILL; cleanup' EXIT

start_server() { # start_server ARGS...: sets URL (tcp) or nothing (unix)
    : >"$T/serve.out"
    "$ENVMGR" serve --out "$T/out" --task-root "$ROOT/tasks" --accel tcg "$@" >"$T/serve.out" 2>"$T/serve.err" &
    SERVE_PID=$!
    wait_until 20 grep -q 'token file' "$T/serve.out"
}
# req METHOD PATH [CURL ARGS...]: prints the status; the body lands in $T/body, headers in $T/hdr
req() {
    local m=$1 p=$2; shift 2
    curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $TOKEN" "$@" "$URL$p"
}
# jf PATH: a field of $T/body (a.b.0.c)
jf() { python3 -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."):
    v = v[int(k)] if isinstance(v, list) else v.get(k) if isinstance(v, dict) else None
print("null" if v is None else v)' "$T/body" "$1" 2>/dev/null; }

# --- start ------------------------------------------------------------------
start_server --listen 127.0.0.1:0 --token-file "$T/token" --max-envs 2
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
check "serve listens on loopback ($URL)" bash -c "[[ '$URL' == http://127.0.0.1:* ]]"
check "the token file is created 0600" test "$(stat -c %a "$T/token" 2>/dev/null)" = 600
TOKEN=$(cat "$T/token")
check "the token is 64 hex digits" bash -c "[[ '$TOKEN' =~ ^[0-9a-f]{64}$ ]]"
[ -n "$URL" ] || { bad "server did not start: $(cat "$T/serve.err")"; finish; exit 1; }

# --- auth and routing ---------------------------------------------------------
check "health needs no token" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/health")" = 200
check "no token: 401" test "$(curl -s -o "$T/body" -w '%{http_code}' "$URL/v1/envs")" = 401
check "401 is a JSON error naming Authorization" test "$(jf field)" = Authorization
check "wrong token: 401" test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer 0000000000000000000000' "$URL/v1/envs")" = 401
check "token of another scheme: 401" test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Basic $TOKEN" "$URL/v1/envs")" = 401
check "metrics need the token" test "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/metrics")" = 401
check "a wrong token is refused before the body is read (413-sized body: still 401)" \
    test "$(head -c 3000000 /dev/zero | curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @- -H 'Authorization: Bearer nope-nope-nope-nope' "$URL/v1/envs")" = 401
check "unknown endpoint: 404" test "$(req GET /v1/nothing)" = 404
check "unknown endpoint: JSON error" bash -c "grep -q 'no such endpoint' '$T/body'"
check "wrong method: 405" test "$(req PUT /v1/envs)" = 405
check "405 says what is allowed" grep -qi '^Allow: GET, POST' "$T/hdr"
check "unknown env id: 404 naming the id" bash -c "[ \$(curl -s -o '$T/body' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' '$URL/v1/envs/nosuch/screenshot') = 404 ] && grep -q '\"field\":\"id\"' '$T/body'"
check "malformed env id: 400" test "$(req GET '/v1/envs/a%20b/screenshot')" = 400

# --- bad input creates nothing ---------------------------------------------------
check "inline task without evaluator: 400" test "$(req POST /v1/envs -d '{"task":{"id":"x","instruction":"y"}}')" = 400
check "the error names the task field" bash -c "grep -q '\"field\":\"task' '$T/body'"
check "task path outside --task-root: 400" test "$(req POST /v1/envs -d '{"task":"../../etc/passwd"}')" = 400
check "image name with a slash: 400" test "$(req POST /v1/envs -d '{"image":"../x"}')" = 400
check "unknown field: 400" test "$(req POST /v1/envs -d '{"imgae":"desktop"}')" = 400
GIMP_TASK='{"task":{"id":"g","instruction":"y","related_apps":["gimp"],"evaluator":{"func":"infeasible"}}}'
check "a task about an app the default image lacks: 400 (issue 28)" test "$(req POST /v1/envs -d "$GIMP_TASK")" = 400
check "the error names related_apps, the app and the image" bash -c "grep -q 'related_apps: gimp: not on image .desktop.' '$T/body'"
check "an explicit image without the app: 400 too" \
    test "$(req POST /v1/envs -d '{"image":"desktop","task":{"id":"g","instruction":"y","related_apps":["gimp"],"evaluator":{"func":"infeasible"}}}')" = 400
check "no VM was started for bad input" test -z "$(ls "$ENVMGR_RUN_DIR" 2>/dev/null)"

# --- an env -------------------------------------------------------------------------
check "create: 201" test "$(req POST /v1/envs -d '{"image":"desktop"}')" = 201
ID=$(jf id)
check "create returns an id and the screen size" test "$(jf width)x$(jf height)" = 1280x800
check "GET /v1/envs lists it" bash -c "[ \$(curl -s -o '$T/body' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' '$URL/v1/envs') = 200 ] && grep -q '\"$ID\"' '$T/body'"
check "step before reset: 409" test "$(req POST "/v1/envs/$ID/step" -d '{"action":{"action_type":"WAIT","seconds":0}}')" = 409
check "reset with a task about an app the env's image lacks: 400" test "$(req POST "/v1/envs/$ID/reset" -d "$GIMP_TASK")" = 400
check "the refused reset names related_apps, the app and the image" grep -q 'related_apps: gimp: not on image .desktop.' "$T/body"
check "the refused reset started no episode: step still 409" \
    test "$(req POST "/v1/envs/$ID/step" -d '{"action":{"action_type":"WAIT","seconds":0}}')" = 409
check "reset with a task path: 200" test "$(req POST "/v1/envs/$ID/reset" -d '{"task":"demo/terminal-mkdir-tree.json"}')" = 200
python3 -c 'import json,base64,sys; o=json.load(open(sys.argv[1]))["observation"]; open(sys.argv[2],"wb").write(base64.b64decode(o["screenshot"]))' "$T/body" "$T/obs.png" 2>/dev/null
read -r w h colours < <("$PNGTOOL" info "$T/obs.png" 2>/dev/null)
check "the observation holds a 1280x800 PNG of the desktop ($colours colours)" bash -c "[ '$w x $h' = '1280 x 800' ] && [ ${colours:-0} -gt 8 ]"
check "the observation carries the task's instruction and step 0" python3 -c '
import json, sys
o = json.load(open(sys.argv[1]))["observation"]
t = json.load(open(sys.argv[2]))
sys.exit(0 if o["instruction"] == t["instruction"] and o["step"] == 0 else 1)' "$T/body" "$ROOT/tasks/demo/terminal-mkdir-tree.json"
check "step (computer_13): 200" test "$(req POST "/v1/envs/$ID/step" -d '{"action":{"action_type":"MOVE_TO","x":100,"y":100}}')" = 200
check "step returns observation, reward, done, info" test "$(jf done)/$(jf reward)/$(jf info.actions)/$(jf observation.step)" = False/0/1/1
check "step (pyautogui code): 200" test "$(req POST "/v1/envs/$ID/step?screenshot=none" -d '{"action":"pyautogui.moveTo(200, 210); pyautogui.moveTo(210, 220)"}')" = 200
check "pyautogui expanded to two actions; ?screenshot=none leaves the PNG out" \
    test "$(jf info.actions)/$(jf observation.screenshot)" = 2/null

# --- bad input on a live env: a clear error, and the env stays usable -----------------
check "off-screen click: 400" test "$(req POST "/v1/envs/$ID/step" -d '{"action":{"action_type":"CLICK","x":5000,"y":1}}')" = 400
check "off-screen click names action.x" test "$(jf field)" = action.x
check "unknown key: 400 naming action.key" bash -c "[ \$(curl -s -o '$T/body' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' -d '{\"action\":{\"action_type\":\"PRESS\",\"key\":\"nosuchkey\"}}' '$URL/v1/envs/$ID/step') = 400 ] && grep -q '\"field\":\"action.key\"' '$T/body'"
check "PYAUTOGUI without code: 400" test "$(req POST "/v1/envs/$ID/step" -d '{"action":{"action_type":"PYAUTOGUI","code":""}}')" = 400
check "body that is not JSON: 400 naming body" bash -c "[ \$(curl -s -o '$T/body' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' -d '{\"action\":' '$URL/v1/envs/$ID/step') = 400 ] && grep -q '\"field\":\"body\"' '$T/body'"
check "body that is an array: 400" test "$(req POST "/v1/envs/$ID/step" -d '[1,2]')" = 400
check "duplicate keys: 400" test "$(req POST "/v1/envs/$ID/step" -d '{"action":"DONE","action":"FAIL"}')" = 400
check "action of the wrong type: 400" test "$(req POST "/v1/envs/$ID/step" -d '{"action":42}')" = 400
check "a body on GET: 400" test "$(req GET "/v1/envs/$ID/screenshot" -d 'x')" = 400
check "3 MB body (Content-Length): 413" test "$(head -c 3000000 /dev/zero | tr '\0' ' ' | req POST "/v1/envs/$ID/step" --data-binary @-)" = 413
check "3 MB body (chunked, no length): 413" test "$(head -c 3000000 /dev/zero | tr '\0' ' ' | req POST "/v1/envs/$ID/step" -H 'Transfer-Encoding: chunked' --data-binary @-)" = 413
check "the env still steps after all that" test "$(req POST "/v1/envs/$ID/step?screenshot=none" -d '{"action":{"action_type":"MOVE_TO","x":300,"y":300}}')" = 200
check "refused actions were not counted as steps" test "$(jf info.step)" = 3

# --- a client that hangs up mid-step ---------------------------------------------------
curl -s -o /dev/null --max-time 1 -X POST -H "Authorization: Bearer $TOKEN" \
    -d '{"action":{"action_type":"WAIT","seconds":3}}' "$URL/v1/envs/$ID/step?screenshot=none"
check "the client gave up mid-step (curl timed out)" test $? = 28
check "the next step waits for the abandoned one, then runs: 200" \
    test "$(req POST "/v1/envs/$ID/step?screenshot=none" -d '{"action":{"action_type":"MOVE_TO","x":310,"y":310}}')" = 200
check "both steps are in the episode (step 5)" test "$(jf info.step)" = 5

# --- a slow client does not hold the others up -------------------------------------------
python3 - "$URL" >"$T/slow.out" 2>&1 <<'PY' &
import socket, sys, time, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(b"POST /v1/envs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # headers never finish
time.sleep(4)
s.close()
print("slow done")
PY
SLOW=$!
sleep 0.5
t0=$(date +%s%N)
check "while a client dawdles, a screenshot is served: 200" test "$(req GET "/v1/envs/$ID/screenshot")" = 200
t1=$(date +%s%N)
check "... at once ($(( (t1 - t0) / 1000000 )) ms)" test $(( (t1 - t0) / 1000000 )) -lt 3000
wait $SLOW
read -r w h colours < <("$PNGTOOL" info "$T/body" 2>/dev/null)
check "GET screenshot is a 1280x800 PNG" test "$w x $h" = "1280 x 800"
check "GET screenshot?format=raw is 1280*800*4 bytes with its size in headers" \
    bash -c "[ \$(curl -s -D '$T/hdr' -H 'Authorization: Bearer $TOKEN' '$URL/v1/envs/$ID/screenshot?format=raw' | wc -c) = 4096000 ] && grep -qi '^X-Width: 1280' '$T/hdr'"
check "bad screenshot format: 400" test "$(req GET "/v1/envs/$ID/screenshot?format=jpeg")" = 400

# --- --max-envs ----------------------------------------------------------------------------
check "a second env: 201" test "$(req POST /v1/envs -d '{}')" = 201
ID2=$(jf id)
check "a third env is over --max-envs 2: 429" test "$(req POST /v1/envs -d '{}')" = 429
check "delete: 200" test "$(req DELETE "/v1/envs/$ID2")" = 200
check "delete again: 404" test "$(req DELETE "/v1/envs/$ID2")" = 404
check "the deleted env's run directory is gone" test ! -e "$ENVMGR_RUN_DIR/$ID2"

# --- evaluate and the trace ---------------------------------------------------------------
check "step DONE: done" bash -c "[ \$(curl -s -o '$T/body' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' -d '{\"action\":\"DONE\"}' '$URL/v1/envs/$ID/step?screenshot=none') = 200 ] && grep -q '\"done\":true' '$T/body'"
check "step after the end: 409" test "$(req POST "/v1/envs/$ID/step" -d '{"action":"WAIT"}')" = 409
check "evaluate: 200" test "$(req POST "/v1/envs/$ID/evaluate")" = 200
check "evaluate gives a score 0..1, a reason, and says it is a score (status scored, not flagged)" python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert 0 <= d["score"] <= 1 and d["reason"] and d["exit_cause"] == "done" and d["status"] == "scored" and d["flagged"] is False, d' "$T/body"
check "trace: 200 application/x-tar" bash -c "[ \$(curl -s -o '$T/trace.tar' -D '$T/hdr' -w '%{http_code}' -H 'Authorization: Bearer $TOKEN' '$URL/v1/envs/$ID/trace') = 200 ] && grep -qi 'content-type: application/x-tar' '$T/hdr'"
mkdir -p "$T/tr" && tar -xf "$T/trace.tar" -C "$T/tr" 2>/dev/null
check "the tar holds trace.jsonl and frames" bash -c "[ -s '$T/tr/trace/trace.jsonl' ] && ls '$T/tr/trace/frames/' | grep -q '.png'"
check "envmgr trace verify accepts the served trace" "$ENVMGR" trace verify "$T/tr/trace" >/dev/null
check "the trace records the seven actions of the six steps" test "$(grep -c '"type":"step"' "$T/tr/trace/trace.jsonl")" = 7

# --- metrics -------------------------------------------------------------------------------
check "metrics: 200" test "$(req GET /v1/metrics)" = 200
m() { awk -v k="$1" '$1 == k {print $2}' "$T/body"; }
check "metrics: one env owned" test "$(m envmgr_envs)" = 1
check "metrics: resets counted with a latency histogram" bash -c "[ '$(m envmgr_resets_total)' -ge 1 ] && grep -q 'envmgr_reset_seconds_bucket{le=\"+Inf\"} ' '$T/body'"
check "metrics: screenshots, actions, denied egress" bash -c "[ '$(m envmgr_screenshots_total)' -ge 3 ] && [ '$(m envmgr_actions_total)' -ge 6 ] && grep -q '^envmgr_egress_denied_total ' '$T/body'"

# --- the Python client -----------------------------------------------------------------------
out=$(cd "$T" && ENVMGR_URL=$URL ENVMGR_TOKEN=$TOKEN ENVMGR_TOKEN_FILE=$T/token ENVMGR_TASKS=$ROOT/tasks TMPDIR=$T \
      timeout 600 python3 -m unittest discover -s "$ROOT/clients/python/tests" -p 'test_*.py' -v 2>&1); rc=$?
echo "$out" | grep -E ' \.\.\. (ok|FAIL|ERROR|skipped)' | sed 's/^/     /'
ran=$(echo "$out" | sed -n 's/^Ran \([0-9]*\) tests\{0,1\}.*/\1/p')
check "python client tests pass against the server (${ran:-0} tests)" bash -c "[ $rc = 0 ] && [ '${ran:-0}' -ge 5 ]"
[ $rc = 0 ] || echo "$out" | tail -30

# --- stop: every env the server owns is torn down ------------------------------------------------
check "SIGTERM: the server exits 0" stop_server TERM
check "no QEMU left under the run directory" no_qemu_under "$ENVMGR_RUN_DIR/"
check "no env directory left" test -z "$(ls "$ENVMGR_RUN_DIR" 2>/dev/null)"
check "a given token file is kept" test -s "$T/token"

# --- a unix socket, a generated token, SIGINT ------------------------------------------------------
start_server --socket "$T/api.sock"
TF=$(sed -n 's/^envmgr serve: token file //p' "$T/serve.out")
check "the socket is 0600" test "$(stat -c %a "$T/api.sock" 2>/dev/null)" = 600
check "the generated token file is 0600" test "$(stat -c %a "$TF" 2>/dev/null)" = 600
UTOKEN=$(cat "$TF" 2>/dev/null)
ureq() { local m=$1 p=$2; shift 2; curl -s -o "$T/body" -w '%{http_code}' --unix-socket "$T/api.sock" -X "$m" -H "Authorization: Bearer $UTOKEN" "$@" "http://localhost$p"; }
check "unix socket: create an env: 201" test "$(ureq POST /v1/envs -d '{}')" = 201
check "unix socket: freeform reset and a step" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --unix-socket '$T/api.sock' -X POST -H 'Authorization: Bearer $UTOKEN' 'http://localhost/v1/envs/$(jf id)/reset?screenshot=none') = 200 ]"
check "unix socket: the Python client works over it" python3 -c "
import sys; sys.path.insert(0, '$ROOT/clients/python')
from envmgr_client import Client
assert len(Client('unix:$T/api.sock', '$UTOKEN').envs()) == 1"
check "SIGINT: the server exits 0" stop_server INT
check "its env is torn down" test -z "$(ls "$ENVMGR_RUN_DIR" 2>/dev/null)"
check "the socket is removed" test ! -e "$T/api.sock"
check "the generated token file is removed" test ! -e "$TF"
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"

# --- bad options --------------------------------------------------------------------------------------
"$ENVMGR" serve --listen 127.0.0.1:0 --socket "$T/x.sock" >/dev/null 2>&1
check "--listen with --socket: exit 2" test $? = 2
"$ENVMGR" serve --max-envs 0 >/dev/null 2>&1
check "--max-envs 0: exit 2" test $? = 2
echo "0123456789abcdef0123" >"$T/loose-token" && chmod 644 "$T/loose-token"
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/loose-token" >/dev/null 2>"$T/err"
check "a token file others can read is refused (exit 2)" bash -c "[ $? = 2 ] && grep -q 'readable by others' '$T/err'"
finish

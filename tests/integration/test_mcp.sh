#!/usr/bin/env bash
# envmgr's MCP server (docs/mcp.md), driven by the official MCP TypeScript SDK from the npm registry
# (tests/mcp: installed by scripts/install-deps) over stdio (envmgr mcp) and streamable HTTP (envmgr
# serve's POST /v1/mcp): tools listed, screenshots, actions, a demo task's episode to 1.0, an unknown
# tool, bad arguments, a closed env; and messages that are not valid JSON-RPC, each answered with the
# specification's error while the server goes on. Prints `N passed, N failed`.
SUITE=mcp
source "$(dirname "$0")/lib.sh"

SDK=$ROOT/tests/mcp
PY=/usr/bin/python3
if [ ! -d "$SDK/node_modules/@modelcontextprotocol/sdk" ]; then
    bad "the MCP SDK is installed in tests/mcp (scripts/install-deps runs npm ci there)"
    finish
    exit 1
fi

# --- JSON-RPC on stdio: every bad message gets its error, and the server answers the next one ---------
out=$(printf '%s\n' \
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}' \
    'not json at all' \
    '[{"jsonrpc":"2.0","id":2,"method":"ping"}]' \
    '{"jsonrpc":"1.0","id":3,"method":"ping"}' \
    '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}' \
    '{"jsonrpc":"2.0","id":4}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":5,"method":"resources/list"}' \
    '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}' \
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":"x"}' \
    "$(head -c 4200000 /dev/zero | tr '\0' 'x')" \
    '{"jsonrpc":"2.0","id":8,"method":"ping"}' |
    timeout 60 "$ENVMGR" mcp --accel tcg 2>"$T/mcp-raw.err")
echo "$out" >"$T/mcp-raw.out"
check "stdio: each message that is not valid JSON-RPC gets the specification's error, in order" $PY -c '
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
codes = [(r.get("id"), r["error"]["code"] if "error" in r else "ok") for r in got]
want = [(1, "ok"), (None, -32700), (None, -32600), (3, -32600), (None, -32600), (4, -32600), (5, -32601),
        (6, -32602), (7, -32602), (None, -32600), (8, "ok")]
assert codes == want, codes
assert got[0]["result"]["protocolVersion"] == "2025-11-25", got[0]' "$T/mcp-raw.out"
check "stdio: no env was made for messages that need none" no_qemu_under "$ENVMGR_RUN_DIR/"

# --- the official SDK over stdio ------------------------------------------------------------------------
tally sdk < <(cd "$SDK" && timeout 900 node mcp_client_check.mjs stdio "$ENVMGR" "$ROOT/tasks" "$T/mcp-out" \
    "$ENVMGR_RUN_DIR" 2>"$T/sdk-stdio.err")
check "stdio: the server left no QEMU when the client closed" wait_until 20 no_qemu_under "$ENVMGR_RUN_DIR/"
out=$(cd "$T" && timeout 600 node "$SDK/example.mjs" "$ENVMGR" "$ROOT/tasks" 2>&1)
check "docs/mcp.md's example runs and scores 1.0" grep -qx "score 1.0" <<<"$out"
check "stdio: the episode's trace verifies" bash -c "'$ENVMGR' trace verify \"\$(ls -d '$T'/mcp-out/*/1/trace | head -1)\" >/dev/null"

# --- streamable HTTP under envmgr serve -------------------------------------------------------------------
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$T/token" --out "$T/serve-out" --task-root "$ROOT/tasks" \
    --accel tcg >"$T/serve.out" 2>"$T/serve.err" &
SERVE=$!
trap 'kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null; cleanup' EXIT
if ! wait_until 20 grep -q 'token file' "$T/serve.out"; then
    bad "envmgr serve started: $(cat "$T/serve.err")"
    finish
    exit 1
fi
URL=$(sed -n 's/^envmgr serve: listening on //p' "$T/serve.out")
TOKEN=$(cat "$T/token")
post() { curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' "$@" "$URL/v1/mcp"; }
code_of() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["error"]["code"])' "$T/body" 2>/dev/null; }
check "http: no token is 401" test "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$URL/v1/mcp")" = 401
st=$(post -d 'not json')
check "http: a body that is not JSON is 400 with -32700 ($st $(code_of))" test "$st $(code_of)" = "400 -32700"
st=$(post -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
check "http: a request before initialize (no session) is 400 ($st $(code_of))" test "$st $(code_of)" = "400 -32600"
st=$(post -H 'Mcp-Session-Id: 00ff' -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
check "http: an unknown session is 404, so the client initializes again ($st)" test "$st" = 404
check "http: GET (no SSE stream offered) is 405" \
    test "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$URL/v1/mcp")" = 405
tally sdk < <(cd "$SDK" && timeout 900 node mcp_client_check.mjs http "$URL" "$TOKEN" 2>"$T/sdk-http.err")
check "http: the ended session's env is deleted" bash -c "curl -s -H 'Authorization: Bearer $TOKEN' '$URL/v1/envs' | grep -q '\"envs\":\[\]'"
kill $SERVE 2>/dev/null; wait $SERVE 2>/dev/null
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

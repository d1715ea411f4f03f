#!/usr/bin/env bash
# OSWorld's vocabulary on a real guest, with the project's own OSWorld-shaped tasks
# (tests/data/osworld): http(s) assets fetched on the host (local servers on 127.0.0.1, a test CA
# made here with openssl), pinned by a lock file, offline, through a mirror, a tampered cache
# refused; {CLIENT_PASSWORD} piped to `sudo -S`; execute's stdout read back by cache_file; getters
# as the desktop user with `~`; vm_file multi; OSWorld's list_directory tree; a failing setup step
# visible in the trace; setup_error for a failed verification and a browser step without a browser;
# `task check` and a suite with unsupported tasks. Prints `osworld: N passed, N failed`.
SUITE=osworld
source "$(dirname "$0")/lib.sh"
D=$ROOT/tests/data/osworld
AGENT=$ROOT/tests/data/agents/scripted-fallback
export ENVMGR_ASSET_CACHE=$T/assets NO_PROXY=127.0.0.1 no_proxy=127.0.0.1
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# ---- servers: HTTP and HTTPS (a CA and a 127.0.0.1 certificate made now) ----
mkdir -p "$T/www/docs" "$T/mirror/docs" "$T/suite/os"
printf 'quarterly report\nline two\n' >"$T/www/docs/report.txt"
head -c 3000000 /dev/urandom >"$T/www/docs/big.bin"
serve() { python3 "$D/serve.py" "$@" >/dev/null 2>&1 & echo $!; }
SRV=$(serve "$T/www" "$T/http.port")
wait_until 10 test -s "$T/http.port" || bad "the HTTP test server starts"
BASE=http://127.0.0.1:$(cat "$T/http.port")
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=envmgr-test-ca -keyout "$T/ca.key" -out "$T/ca.pem" \
    -addext basicConstraints=critical,CA:TRUE >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$T/srv.key" -out "$T/srv.csr" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1\n' >"$T/san.ext"
openssl x509 -req -in "$T/srv.csr" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial -days 2 -extfile "$T/san.ext" \
    -out "$T/srv.pem" >/dev/null 2>&1
TLS=$(serve "$T/www" "$T/https.port" "$T/srv.pem" "$T/srv.key")
wait_until 10 test -s "$T/https.port" || bad "the HTTPS test server starts"
TLSBASE=https://127.0.0.1:$(cat "$T/https.port")
stop_servers() { kill "$SRV" "$TLS" 2>/dev/null; wait "$SRV" "$TLS" 2>/dev/null; }
trap 'stop_servers; cleanup' EXIT

mkdir -p "$T/task"
sed "s|@BASE@|$BASE|g" "$D/download.json.in" >"$T/task/download.json"

# ---- task check: no VM ----
out=$("$ENVMGR" task check "$T/task/download.json" "$D/semantics.json" "$D/verify-fails.json" "$D/browser-missing.json")
check "task check: OSWorld-shaped tasks load (exit 0)" test $? = 0
check "task check: the summary counts them" grep -q '^4 tasks: 4 load, 0 refused' <<<"$out"
out=$("$ENVMGR" task check "$D/google.json" "$T/task/download.json"); rc=$?
check "task check: a refused task exits 1" test $rc = 1
check "task check: every problem, one line each, with its JSON path" \
    test "$(grep -c "^$D/google.json: " <<<"$out")" = 5
check "task check: Google-account steps are one clear line" \
    grep -q "google.json: config\[0\].type: setup step \`googledrive\` needs a Google account" <<<"$out"
check "task check: refusal reasons with counts" grep -q '^ *1  getter `gotoRecreationPage_and_get_html_content` never reads the page' <<<"$out"
"$ENVMGR" task check --json "$D/google.json" >"$T/check.json"
check "task check --json" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['refused']==1 and len(d['files'][0]['problems'])==5" "$T/check.json"

# ---- task fetch: parallel, lock file, https with the test CA ----
# The servers are on loopback: only the operator's --allow-private lets the host fetch from them.
ALLOW="--allow-private 127.0.0.1:$(cat "$T/http.port") --allow-private 127.0.0.1:$(cat "$T/https.port")"
sed "s|@BASE@|$TLSBASE|g; s|asset-download|asset-download-tls|" "$D/download.json.in" >"$T/task/tls.json"
python3 - "$T/task/big.json" "$BASE" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1].replace("big.json", "download.json")))
t["id"] = "asset-big"
t["config"][0]["parameters"]["files"] = [{"url": sys.argv[2] + "/docs/big.bin", "path": "/tmp/big.bin"}]
json.dump(t, open(sys.argv[1], "w"))
EOF
out=$("$ENVMGR" task fetch "$T/task" 2>&1); rc=$?
check "task fetch without --allow-private: the loopback servers are refused (exit 1)" \
    bash -c "[ $rc = 1 ] && grep -q 'a loopback address: only the operator may allow it' <<<\"\$1\"" _ "$out"
out=$("$ENVMGR" task fetch $ALLOW "$T/task" 2>&1); rc=$?
echo "$out" | tail -3
check "task fetch without the test CA: the https asset fails (exit 1)" test $rc = 1
check "task fetch: a certificate error names the URL" grep -q "asset \`$TLSBASE/docs/report.txt\`" <<<"$out"
out=$(ENVMGR_ASSET_CA_FILE=$T/ca.pem "$ENVMGR" task fetch $ALLOW --parallel 3 "$T/task" 2>&1); rc=$?
echo "$out" | tail -2
check "task fetch with the test CA: every asset cached (exit 0)" test $rc = 0
check "task fetch: the lock file pins every URL" python3 -c "
import json,sys; a=json.load(open(sys.argv[1]))['assets']; assert len(a)==3 and all(len(v['sha256'])==64 for v in a.values())" "$T/task/assets.lock.json"
check "task fetch: a progress line" grep -q '^assets: 3/3' <<<"$out"
out=$("$ENVMGR" task fetch --offline "$T/task" 2>&1)
check "task fetch --offline: all cached already" grep -q '3 cached before, 0 fetched' <<<"$out"
# upstream changes and vanishing: clear errors naming the URL (another cache, same lock)
printf 'quarterly report, revised\n' >"$T/www/docs/report.txt"
out=$(ENVMGR_ASSET_CACHE=$T/assets2 "$ENVMGR" task fetch $ALLOW "$T/task/download.json" 2>&1)
check "a changed upstream file is refused against the lock" grep -q "upstream file changed" <<<"$out"
mv "$T/www/docs/report.txt" "$T/www/docs/report.moved"
out=$(ENVMGR_ASSET_CACHE=$T/assets2 "$ENVMGR" task fetch $ALLOW "$T/task/download.json" 2>&1)
check "a vanished upstream file is an error naming it" grep -q "report.txt\`: upstream file vanished (HTTP 404)" <<<"$out"
printf 'quarterly report\nline two\n' >"$T/www/docs/report.txt"

# ---- episodes on a guest ----
E=it-osworld
"$ENVMGR" up --name $E --accel tcg >/dev/null || { bad "up"; finish; exit 1; }
run() { local name=$1 task=$2; shift 2; "$ENVMGR" run "$task" --env $E --agent "$AGENT --tasks $task" --out "$T/$name" "$@" >"$T/$name.log" 2>&1; }

kill "$SRV"; wait "$SRV" 2>/dev/null  # from here on the HTTP assets come from the cache only
run dl "$T/task/download.json" --offline
check "download + cloud_file from the host cache, offline: score 1" test "$(field "$T/dl/result.json" score)" = 1.0
check "the setup trace names the asset and its hash" grep -q '"pinned":true' "$T/dl/trace/trace.jsonl"
check "the downloaded file belongs to the desktop user" \
    test "$("$ENVMGR" exec $E -- stat -c %U /home/user/Desktop/report.txt 2>/dev/null)" != root
run big "$T/task/big.json" --offline
check "a 3 MB asset is uploaded from the cache" python3 -c "
import json,sys
s=[json.loads(l) for l in open(sys.argv[1]) if '\"setup\"' in l][0]
assert s['ok'] and s['detail']['files'][0]['path']=='/tmp/big.bin' and s['detail']['files'][0]['cached'], s" "$T/big/trace/trace.jsonl"
# a mirror folder stands in for the (stopped) server, also for a URL the cache lacks
cp "$T/www/docs/report.txt" "$T/mirror/docs/other.txt"
sed "s|@BASE@/docs/report.txt|$BASE/docs/other.txt|g; s|asset-download|asset-mirror|" "$D/download.json.in" >"$T/task/mirror.json"
run mirror "$T/task/mirror.json" --offline --asset-mirror "$BASE/=$T/mirror"
check "--asset-mirror PREFIX=DIR serves an asset offline: score 1" test "$(field "$T/mirror/result.json" score)" = 1.0
sed "s|@BASE@/docs/report.txt|$BASE/docs/absent.txt|g; s|asset-download|asset-absent|" "$D/download.json.in" >"$T/task/absent.json"
run absent "$T/task/absent.json" --offline
check "offline and not cached: setup_error" test "$(field "$T/absent/result.json" exit_cause)" = setup_error
check "offline and not cached: the reason names the URL" grep -q "offline: \`$BASE/docs/absent.txt\` is not in the asset cache" "$T/absent/result.json"
# a tampered cache entry is refused, naming the URL
blob=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['assets']; print(a[sys.argv[2]]['sha256'])" "$T/task/assets.lock.json" "$BASE/docs/report.txt")
chmod u+w "$ENVMGR_ASSET_CACHE/blobs/$blob" && echo tampered >>"$ENVMGR_ASSET_CACHE/blobs/$blob"
# (the setup cache would restore the state saved from the good bytes, reading no asset: off here)
ENVMGR_SETUP_CACHE=off run tampered "$T/task/download.json" --offline
check "a tampered cached asset: setup_error" test "$(field "$T/tampered/result.json" exit_cause)" = setup_error
check "a tampered cached asset: the reason says it was modified" grep -q "was modified" "$T/tampered/result.json"

run sem "$D/semantics.json"
cat "$T/sem.log" | tail -3
check "OSWorld semantics task scores 1 ({CLIENT_PASSWORD} + sudo -S, cache_file, ~, multi, tree, as_root)" \
    test "$(field "$T/sem/result.json" score)" = 1.0
python3 -c "import json,sys; [print(m['func'], m['score'], m.get('reason','')[:200]) for m in json.load(open(sys.argv[1]))['evaluation']['metrics']]" "$T/sem/result.json" 2>/dev/null
check "the failing setup step is in the trace with its exit status and stderr" python3 -c "
import json,sys
lines=[json.loads(l) for l in open(sys.argv[1])]
s=[l for l in lines if l.get('type')=='setup' and l['step'].get('type')=='command'][0]
assert s['detail']['exit_code']==3 and 'this step fails' in s['detail']['stderr'] and s['tolerated']=='exit status 3', s" "$T/sem/trace/trace.jsonl"
check "the tolerated step is flagged in the result" python3 -c "
import json,sys; f=json.load(open(sys.argv[1]))['setup_flags']; assert any(x['why']=='exit status 3' for x in f), f" "$T/sem/result.json"
check "OSWorld's proxy step says the network policy answers" grep -q "network policy (mode none) applies" "$T/sem/result.json"
check "the trace of the semantics task verifies" "$ENVMGR" trace verify "$T/sem/trace"

run verify "$D/verify-fails.json"
check "a verification that never passes: setup_error" test "$(field "$T/verify/result.json" exit_cause)" = setup_error
run browser "$D/browser-missing.json"
check "chrome_open_tabs without a browser: setup_error" test "$(field "$T/browser/result.json" exit_cause)" = setup_error
check "chrome_open_tabs without a browser: the reason names the app" grep -q "needs a browser (Chrome or Chromium)" "$T/browser/result.json"
"$ENVMGR" down $E >/dev/null

# ---- a suite with an unsupported task: run what loads, record the rest ----
cp "$D/verify-fails.json" "$D/google.json" "$T/suite/os/"
"$ENVMGR" suite run "$T/suite" --agent "$AGENT --tasks $T/suite" --out "$T/run" --envs 1 --accel tcg --progress plain >"$T/suite.log" 2>&1
rc=$?
check "suite run with an unsupported task exits 1 for the other's setup_error alone, not for the unsupported one ($rc)" \
    bash -c "[ $rc = 1 ] && grep -q 'suite: 1 episode ended in setup_error' '$T/suite.log' && ! grep -qi 'unsupported.*exit' '$T/suite.log'"
check "the unsupported task has a results line with its reason" python3 -c "
import json,sys
l=[json.loads(x) for x in open(sys.argv[1])]
u=[x for x in l if x['exit_cause']=='unsupported']; assert len(u)==1 and 'Google account' in u[0]['reason'], l" "$T/run/results.jsonl"
check "the summary counts it apart" python3 -c "
import json,sys; a=json.load(open(sys.argv[1]))['all']; assert a['unsupported']==1 and a['episodes']==1, a" "$T/run/summary.json"
check "JUnit marks it skipped" grep -q '<skipped message="unsupported: config\[0\].type: setup step' "$T/run/junit.xml"
"$ENVMGR" suite run "$T/suite" --agent "$AGENT --tasks $T/suite" --out "$T/run-strict" --strict >/dev/null 2>&1
check "suite run --strict refuses the whole suite (exit 2)" test $? = 2
stop_servers
check "no QEMU of this run is left" no_qemu_under "$ENVMGR_RUN_DIR/"
finish

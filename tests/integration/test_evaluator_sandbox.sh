#!/usr/bin/env bash
# The evaluator sandbox end to end through `envmgr metric run` (no guest needed): the registry
# loads, registry metrics score 1 and 0 on fixtures written here, bad usage exits 2, and hostile
# inputs and scripts end as evaluator_error within their limits with the host untouched.
# Fixtures: tests/tools/metric_fixtures.py (openpyxl, python-docx, hand-written pptx/pdf/png).
source "$(dirname "$0")/lib.sh"

F=$T/fixtures TASK=$T/task OUT=$T/out
mkdir -p "$TASK" "$OUT"
if ! /usr/bin/python3 "$ROOT/tests/tools/metric_fixtures.py" "$F" --hostile; then
    bad "fixtures: tests/tools/metric_fixtures.py failed"; finish; exit 1
fi
RULES='{"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}'

# metric NAME ARGS...: runs envmgr metric run; sets rc, out (stdout), err (stderr), secs
metric() {
    local t0 t1
    t0=$(date +%s%N)
    "$ENVMGR" metric run "$@" >"$OUT/stdout" 2>"$OUT/stderr"
    rc=$?
    t1=$(date +%s%N)
    secs=$(( (t1 - t0) / 1000000000 ))
    out=$(cat "$OUT/stdout") err=$(cat "$OUT/stderr")
}
# scored NAME WANT ARGS...: the metric scores WANT (exit 0)
scored() {
    local name=$1 want=$2; shift 2
    metric "$@"
    if [ "$rc" = 0 ] && [[ "$out" == *"\"status\":\"scored\",\"score\":$want"* ]]; then ok "$name"
    else bad "$name: rc $rc, $out $err"; fi
}
# eval_error NAME PATTERN MAXSECS ARGS...: exit 1, status evaluator_error, the reason matching PATTERN, in time
eval_error() {
    local name=$1 pat=$2 max=$3; shift 3
    metric "$@"
    if [ "$rc" = 1 ] && [[ "$out" == *'"status":"evaluator_error"'* ]] && [[ "$err" == *"evaluator_error: "*$pat* ]] &&
        [ "$secs" -le "$max" ] && [ "$(echo "$err" | wc -l)" = 1 ]; then ok "$name ($secs s)"
    else bad "$name: rc $rc in $secs s (limit $max), $out / $err"; fi
}
usage_error() {
    local name=$1; shift
    metric "$@"
    if [ "$rc" = 2 ] && [ "$(echo "$err" | head -1 | grep -c '^envmgr: ')" = 1 ]; then ok "$name"
    else bad "$name: rc $rc, $err"; fi
}

# ---- the registry, the catalog, the docs ----
list=$("$ENVMGR" metric list 2>&1); lrc=$?
if [ "$lrc" = 0 ] && echo "$list" | grep -q '^compare_table  *tables  *optional' &&
    echo "$list" | grep -q '^compare_images  *images ' && echo "$list" | grep -q '^compare_images_exact  *builtin '; then
    ok "metric list: the registry loads (compare_table, compare_images) beside the C metrics (compare_images_exact)"
else bad "metric list: rc $lrc"; fi
n=$("$ENVMGR" metric list --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "${n:-0}" -ge 110 ] && ok "metric list --json: $n metrics" || bad "metric list --json: $n metrics"
if "$ROOT/scripts/gen-metric-docs" --check; then ok "docs/task-format.md lists every metric (scripts/gen-metric-docs)"
else bad "docs/task-format.md is stale: run make metric-docs"; fi

# ---- registry metrics score 1 and 0 through the sandbox ----
scored "compare_table: same workbook scores 1" 1.0 compare_table --result "$F/ok.xlsx" --expected "$F/same.xlsx" --options "$RULES"
scored "compare_table: another value scores 0" 0.0 compare_table --result "$F/ok.xlsx" --expected "$F/other.xlsx" --options "$RULES"
scored "compare_table: a missing result file is OSWorld's None (scores 0)" 0.0 compare_table \
    --result "$T/nonexistent.xlsx" --expected "$F/ok.xlsx" --options "$RULES"
scored "compare_docx_files: 1 and ..." 1.0 compare_docx_files --result "$F/ok.docx" --expected "$F/same.docx"
scored "compare_docx_files: ... 0" 0.0 compare_docx_files --result "$F/ok.docx" --expected "$F/other.docx"
scored "is_expected_url_pattern_match: text and rule artifacts" 1.0 is_expected_url_pattern_match \
    --result-text "https://www.example.com/a?q=1" --expected-json '{"expected": ["example\\.com/a"]}'
scored "compare_images_exact: the C metric" 1.0 compare_images_exact --result "$F/small.png" --expected "$F/small.png"

# ---- bad usage: exit 2, one line, nothing run ----
usage_error "unknown metric: exit 2" compare_tables --result "$F/ok.xlsx"
usage_error "compare_table without options.rules: exit 2" compare_table --result "$F/ok.xlsx"
usage_error "a mistyped registry option: exit 2" compare_docx_files --result "$F/ok.docx" --expected "$F/ok.docx" \
    --options '{"ignore_case": "yes"}'
usage_error "compare_pdfs without --expected: exit 2" compare_pdfs --result "$F/ok.pdf"

# ---- hostile documents ----
eval_error "zip-bomb xlsx" "inflates" 60 compare_table --result "$F/bomb.xlsx" --expected "$F/ok.xlsx" --options "$RULES"
eval_error "billion-laughs docx" "its DTD declares entity 'lol'" 60 compare_docx_files --result "$F/laughs.docx" --expected "$F/ok.docx"
eval_error "XXE docx (an external entity naming /etc/passwd), as the result" \
    "word/document.xml: its DTD declares external entity 'xxe' (file:///etc/passwd)" 60 \
    compare_docx_files --result "$F/xxe.docx" --expected "$F/ok.docx"
eval_error "XXE docx as the expected file" "expected: word/document.xml: its DTD declares external entity" 60 \
    compare_docx_files --result "$F/ok.docx" --expected "$F/xxe.docx"
eval_error "compare_images_exact: an expected file that is no PNG (the task's fault)" "expected: " 10 \
    compare_images_exact --result "$F/small.png" --expected "$F/ok.docx"
scored "compare_images_exact: a result that is no PNG (the agent's) scores 0" 0.0 compare_images_exact \
    --result "$F/ok.docx" --expected "$F/small.png"
eval_error "30000x30000 PNG" "pixel" 60 compare_images --result "$F/huge.png" --expected "$F/small.png"

# ---- hostile scripts (the `script` metric, from the task folder) ----
cat >"$TASK/hostile.py" <<'EOF'
#!/usr/bin/python3
"""Tries what options.attack says; prints a score only if the attack worked, else fails."""
import json, os, socket, sys, time
req = json.load(sys.stdin)
opt = req["options"]
attack = opt["attack"]
if attack == "socket":
    s = socket.create_connection(("127.0.0.1", opt["port"]), timeout=3)
    s.sendall(b"escaped\n")
elif attack == "read":
    for p in opt["targets"]:
        try:
            with open(p, "rb") as f:
                f.read(1)
            print(json.dumps({"score": 1, "reason": "read " + p}))
            sys.exit(0)
        except OSError as e:
            print(f"{p}: {e}", file=sys.stderr)
    sys.exit(1)
elif attack == "write":
    for p in opt["targets"]:
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "a") as f:
                f.write("pwned\n")
        except OSError as e:
            print(f"{p}: {e}", file=sys.stderr)
    sys.exit(1)  # whatever landed in the private /tmp is gone with the sandbox
elif attack == "fork":
    n = 0
    for _ in range(3000):   # bounded, so a broken limit cannot take the host's pids
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    time.sleep(60)
elif attack == "memory":
    b = bytearray(16 << 30)
elif attack == "disk":
    with open("/tmp/fill", "wb") as f:
        for _ in range(512):
            f.write(bytes(1 << 20))
elif attack == "cpu":
    while True:
        pass
print(json.dumps({"score": 1, "reason": "the attack worked: " + attack}))
EOF
cat >"$TASK/garbage.sh" <<'EOF'
#!/bin/sh
echo 'this is not json'
EOF
cat >"$TASK/slow.sh" <<'EOF'
#!/bin/sh
sleep 60
EOF
chmod +x "$TASK"/*.py "$TASK"/*.sh
echo "host secret" >"$T/secret.txt"
echo "result text" >"$T/input.txt"
in_sum=$(sha256sum "$T/input.txt")
hostile() { local name=$1 pat=$2 max=$3 opts=$4; eval_error "$name" "$pat" "$max" script --task-dir "$TASK" \
    --result "$T/input.txt" --options "$opts"; }

# a TCP listener on the host's loopback: the sandbox has no network, so nothing may reach it
port_file=$T/port
/usr/bin/python3 -c "
import socket, sys
s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)
open('$port_file', 'w').write(str(s.getsockname()[1]))
s.settimeout(30)
try:
    c, _ = s.accept(); open('$T/connected', 'w').write('yes')
except OSError:
    pass
" &
listener=$!
wait_until 10 test -s "$port_file"
hostile "socket: no network" "exited with status 1" 30 "{\"path\": \"hostile.py\", \"attack\": \"socket\", \"port\": $(cat "$port_file")}"
[ ! -e "$T/connected" ] && ok "socket: the host listener saw no connection" || bad "socket: the sandbox reached the host"
kill "$listener" 2>/dev/null; wait "$listener" 2>/dev/null

hostile "read /etc/shadow, the host home, a host file" "exited with status 1" 30 \
    "{\"path\": \"hostile.py\", \"attack\": \"read\", \"targets\": [\"/etc/shadow\", \"${HOME:-/root}/.bashrc\", \"$T/secret.txt\", \"$TASK/hostile.py\"]}"
hostile "write outside the private /tmp" "exited with status 1" 30 \
    "{\"path\": \"hostile.py\", \"attack\": \"write\", \"targets\": [\"$T/outside/pwned\", \"$TASK/pwned\", \"/in/result/0.txt\", \"/usr/pwned\", \"/pwned\", \"$ROOT/evaluator/metrics/pwned\"]}"
if [ ! -e "$T/outside" ] && [ ! -e "$TASK/pwned" ] && [ ! -e /usr/pwned ] && [ ! -e /pwned ] &&
    [ ! -e "$ROOT/evaluator/metrics/pwned" ] && [ "$(sha256sum "$T/input.txt")" = "$in_sum" ]; then
    ok "write: the host paths are untouched, the input unchanged"
else bad "write: something landed on the host"; fi

hostile "fork bomb: stopped by the process limit" "exited with status 1" 60 '{"path": "hostile.py", "attack": "fork"}'
wait_until 5 no_qemu_under "hostile.py" && ok "fork bomb: no process left" || bad "fork bomb: processes survived"
hostile "memory: the address-space limit" "MemoryError" 30 '{"path": "hostile.py", "attack": "memory"}'
hostile "disk: the file-size limit (Python ignores SIGXFSZ: EFBIG)" "File too large" 30 '{"path": "hostile.py", "attack": "disk"}'
hostile "cpu: the deadline" "timed out after 2 s" 15 '{"path": "hostile.py", "attack": "cpu", "timeout_s": 2}'
wait_until 5 no_qemu_under "hostile.py" && ok "no script process outlives its run" || bad "a script process survived"

# ---- garbage, timeouts ----
hostile "garbage on stdout" "expected {" 30 '{"path": "garbage.sh"}'
hostile "a hung script is killed at options.timeout_s" "timed out after 1 s" 10 '{"path": "slow.sh", "timeout_s": 1}'
eval_error "a registry metric past --timeout" "timed out after 0.05 s" 10 compare_docx_files --timeout 0.05 \
    --result "$F/ok.docx" --expected "$F/same.docx"
finish

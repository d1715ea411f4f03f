#!/usr/bin/env bash
# The README cannot lie: every fenced block preceded by a `<!-- example -->` line is run, in the
# order it appears, in one bash session (python blocks through python3), from a scratch directory
# holding a copy of tasks/, with the built envmgr first on PATH and the client on PYTHONPATH. The
# only rewrite is the API port: 127.0.0.1:7480 becomes a free port, so a server someone else runs
# on this machine does not collide. Also: every docs/*.md is linked from the README, and every
# local link in it resolves. Prints `readme: N passed, N failed`.
SUITE=readme
source "$(dirname "$0")/lib.sh"
export PYTHONDONTWRITEBYTECODE=1
README=$ROOT/README.md
W=$T/work
mkdir -p "$W" && cp -r "$ROOT/tasks" "$W/tasks"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# --- the blocks, as one script ----------------------------------------------------------------------
# Each block is announced (@@block N LINE LANG) and acknowledged (@@ok N) so a failure names it;
# set -e stops at the first failing command.
python3 - "$README" "$PORT" >"$T/examples.sh" 2>"$T/extract.err" <<'PY'
import re, sys
readme, port = sys.argv[1], sys.argv[2]
lines = open(readme, encoding="utf-8").read().split("\n")
out = ["set -eo pipefail", 'echo $$ >"$0.pgid"  # the session leader: its group is ended afterwards']
n, i = 0, 0
while i < len(lines):
    if lines[i].strip() == "<!-- example -->":
        m = re.match(r"^```(\w+)\s*$", lines[i + 1] if i + 1 < len(lines) else "")
        if not m or m.group(1) not in ("sh", "python"):
            sys.exit("README line %d: <!-- example --> must precede a ```sh or ```python block" % (i + 1))
        end = i + 2
        while end < len(lines) and lines[end] != "```":
            end += 1
        if end == len(lines):
            sys.exit("README line %d: example block not closed" % (i + 2))
        body = "\n".join(lines[i + 2:end]).replace("127.0.0.1:7480", "127.0.0.1:" + port)
        n += 1
        out.append("echo '@@block %d %d %s'" % (n, i + 2, m.group(1)))
        out.append(body if m.group(1) == "sh" else "python3 - <<'README_PY_EOF'\n%s\nREADME_PY_EOF" % body)
        out.append("echo \"@@ok %d (at $SECONDS s)\"" % n)
        i = end
    i += 1
print("\n".join(out))
PY
check "the example blocks extract" test -s "$T/examples.sh"
[ -s "$T/extract.err" ] && bad "$(cat "$T/extract.err")"
blocks=$(grep -c "^echo '@@block" "$T/examples.sh")
check "the README has example blocks for each way in ($blocks)" test "$blocks" -ge 10

# --- run them --------------------------------------------------------------------------------------
# In their own session (the script writes its pid, the group's id, to examples.sh.pgid), so a server
# or viewer a failed block left running is ended with the group.
start=$(date +%s)
(cd "$W" && PATH="$(dirname "$ENVMGR"):$PATH" PYTHONPATH="$ROOT/clients/python" \
    exec setsid --wait bash "$T/examples.sh" >"$T/examples.out" 2>&1)
rc=$?
[ -s "$T/examples.sh.pgid" ] && kill -- -"$(cat "$T/examples.sh.pgid")" 2>/dev/null
for n in $(seq "$blocks"); do
    line=$(sed -n "s/^echo '@@block $n \([0-9]*\) .*/\1/p" "$T/examples.sh")
    at=$(sed -n "s/^@@ok $n (at \(.*\))$/\1/p" "$T/examples.out")
    check "README example $n (line $line) runs${at:+, done at $at}" grep -q "^@@ok $n " "$T/examples.out"
done
check "the examples exit 0 ($(( $(date +%s) - start )) s)" test "$rc" = 0
if [ "$rc" != 0 ]; then echo "--- output of the examples (last 40 lines):"; tail -40 "$T/examples.out"; fi

# What the examples claim, checked on what they left behind.
check "the screenshot is a 1280x800 PNG" bash -c "'$PNGTOOL' info '$W/shot.png' 2>/dev/null | grep -q '^1280 800 '"
check "view printed the address to open" grep -q 'vncviewer 127.0.0.1::' "$T/examples.out"
check "the stdio agent's infeasible task scored 1.00" grep -q '^infeasible-ms-word: score 1.00' "$T/examples.out"
check "the trace verified" grep -q '"chain": "ok"' "$T/examples.out"
check "the replay reproduced" grep -q 'REPRODUCED' "$T/examples.out"
check "the API answered health" grep -q '"status": *"ok"' "$T/examples.out"
check "the Python client's episode scored 1.0" grep -q '^score 1.0$' "$T/examples.out"
check "compare found no regression" grep -q '^0 regressed, 0 missing' "$T/examples.out"
check "doctor found the host ready" grep -q '^doctor: ready to run envs' "$T/examples.out"
check "merge joined both shards" test "$(wc -l <"$W/runs/merged/results.jsonl" 2>/dev/null)" = 2
check "the examples leave no env running" test -z "$(find "$ENVMGR_RUN_DIR" -mindepth 1 -maxdepth 1 -type d 2>/dev/null)"

# --- links --------------------------------------------------------------------------------------------
for d in "$ROOT"/docs/*.md; do
    check "README links docs/${d##*/}" grep -qF "](docs/${d##*/}" "$README"
done
broken=$(grep -oE '\]\([^)#: ]+' "$README" | sed 's/^](//' | sort -u | while read -r l; do
    [ -e "$ROOT/$l" ] || echo "$l"; done)
check "every local link in the README resolves${broken:+ (broken: $broken)}" test -z "$broken"
finish

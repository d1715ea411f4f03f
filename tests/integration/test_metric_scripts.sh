#!/usr/bin/env bash
# The evaluator scripts (evaluator/metrics/*.py), metric by metric, on fixtures each test writes
# itself (openpyxl writes the xlsx, python-docx the docx, ...): a 1-case, a 0-case and a malformed
# input per metric. Runs them as envmgr does (run.py, stdin request) but without the sandbox: the
# sandbox and the hostile inputs are tests/integration/test_evaluator_sandbox.sh's.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here" || exit 1
out=$(/usr/bin/python3 -m unittest discover -s tests/metrics -p 'test_*.py' 2>&1)
rc=$?
echo "$out" | tail -40
ran=$(echo "$out" | grep -oE '^Ran [0-9]+ test' | grep -oE '[0-9]+' | tail -1)
fails=$(echo "$out" | grep -oE '^FAILED \(.*\)' | grep -oE '(failures|errors)=[0-9]+' | grep -oE '[0-9]+')
bad=0; for n in $fails; do bad=$((bad + n)); done
[ -n "$ran" ] || ran=0
[ -n "$bad" ] || bad=0
[ "$rc" -ne 0 ] && [ "$bad" = 0 ] && bad=1
# The registry envmgr reads must be what the scripts declare.
if ! /usr/bin/python3 -I evaluator/metrics/run.py --registry | cmp -s - evaluator/metrics/registry.json; then
    echo "FAIL evaluator/metrics/registry.json is stale: run make registry"; bad=$((bad + 1))
else
    ran=$((ran + 1))
fi
echo "metric-scripts: $((ran - bad)) passed, $bad failed"

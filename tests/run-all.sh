#!/usr/bin/env bash
# The whole test suite: CUnit unit tests, then the integration tests on real
# QEMU guests. Prints one closing line `N passed, N failed` over everything.
#   tests/run-all.sh [--integration-only] [UNIT_BINARIES...]
#   ENVMGR_TESTS="core net"  runs only tests/integration/test_{core,net}.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
passed=0 failed=0
selected() { [ -z "${ENVMGR_TESTS:-}" ] || [[ " $ENVMGR_TESTS " == *" $1 "* ]]; }
# The apps image (6-10 min to build) builds in the background while the other tests run, mostly on
# the core their one-vCPU guests leave idle; test_apps_tasks runs last and waits for it (the build
# cache's lock). Its output goes to a log shown only if the build fails.
apps_build_pid= apps_build_log= log= lane_out= lane_pid=
# A stopped run (INT, TERM) ends through EXIT too: no build left running, no log left behind.
trap '[ -n "$apps_build_pid" ] && kill -TERM -- -"$apps_build_pid" 2>/dev/null; [ -n "$lane_pid" ] && kill -TERM "$lane_pid" 2>/dev/null; rm -f $apps_build_log $log $lane_out' EXIT
trap 'exit 130' INT TERM
if selected apps_tasks; then
    apps_build_log=$(mktemp /tmp/envmgr-it-apps-build.XXXXXX)
    setsid nice -n 10 make -s -C "$here/../vm-images" image-apps >"$apps_build_log" 2>&1 &
    apps_build_pid=$!
fi
# Tests that start no guest (the unit tests; host-only integration tests: Xvfb, evaluator scripts,
# docs) run in a second lane beside the guests' tests, on the CPU a one-vCPU TCG guest leaves idle:
# about 3 minutes of CI's budget. Their output is held and printed at the end, each test whole.
# ENVMGR_ONE_LANE=1 runs everything in one lane, in order.
HOST_ONLY=" toolbelt metric_scripts evaluator_sandbox fuzz_corpus layers osworld_doc trace_html "
unit=1
if [ "${1:-}" = --integration-only ]; then shift; unit=; fi
unit_bins=("$@")

# run_test NAME FILE: runs one integration test, prints its output, and its counts as `= P F`
run_test() {
    local name=$1 t=$2 t0=$SECONDS rc row p f n
    echo "== integration: $name"
    log=$(mktemp /tmp/envmgr-it-log.XXXXXX)
    bash "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    echo "-- $name took $((SECONDS - t0)) s"   # where CI's time budget goes
    row=$(grep -E '^[a-z_-]*:? ?[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(echo "$row" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(echo "$row" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=0
    if [ "$rc" -ne 0 ] && [ "$f" = 0 ]; then f=1; echo "$name: exited $rc without reporting a failure"; fi
    if n=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log") && [ "$n" -gt 0 ]; then
        echo "$name: $n sanitizer report(s) in the log"; f=$((f + 1))
    fi
    rm -f "$log"
    log=
    echo "= $p $f"
}

run_unit() {
    local out row p f
    out=$("$here/run-unit.sh" "${unit_bins[@]}" 2>&1); echo "$out"
    row=$(echo "$out" | grep -E '^unit: [0-9]+ passed, [0-9]+ failed$' | tail -1)
    p=$(echo "$row" | sed -E 's/^unit: ([0-9]+) passed, ([0-9]+) failed$/\1/')
    f=$(echo "$row" | sed -E 's/^unit: ([0-9]+) passed, ([0-9]+) failed$/\2/')
    [ -n "$row" ] || { p=0; f=1; }
    echo "= $p $f"
}

# count: adds the `= P F` rows of a lane's output to the totals, printing everything else
count() {
    local line
    while IFS= read -r line; do
        if [[ "$line" =~ ^=\ ([0-9]+)\ ([0-9]+)$ ]]; then
            passed=$((passed + BASH_REMATCH[1])); failed=$((failed + BASH_REMATCH[2]))
        else
            printf '%s\n' "$line"
        fi
    done
}

tests=()
for t in "$here"/integration/test_*.sh; do
    [ "$(basename "$t")" = test_apps_tasks.sh ] || tests+=("$t")
done
tests+=("$here/integration/test_apps_tasks.sh")
host_lane() {
    [ -n "$unit" ] && run_unit
    for t in "${tests[@]}"; do
        name=$(basename "$t" .sh); name=${name#test_}
        selected "$name" && [[ "$HOST_ONLY" == *" $name "* ]] && run_test "$name" "$t"
    done
}
lane_out=
if [ "${ENVMGR_ONE_LANE:-0}" = 1 ]; then
    [ -n "$unit" ] && count < <(run_unit)
else
    lane_out=$(mktemp /tmp/envmgr-it-lane.XXXXXX)
    host_lane >"$lane_out" 2>&1 &
    lane_pid=$!
fi
for t in "${tests[@]}"; do
    name=$(basename "$t" .sh); name=${name#test_}
    selected "$name" || continue
    [ -n "$lane_out" ] && [[ "$HOST_ONLY" == *" $name "* ]] && continue
    if [ "$name" = apps_tasks ] && [ -n "$apps_build_pid" ]; then
        t0=$SECONDS
        wait "$apps_build_pid"; rc=$?
        apps_build_pid=
        echo "-- the apps image build (in the background) ended $((SECONDS - t0)) s after the other tests, exit $rc"
        [ "$rc" = 0 ] || tail -20 "$apps_build_log"
    fi
    count < <(run_test "$name" "$t")
done
if [ -n "$lane_out" ]; then
    wait "$lane_pid"
    lane_pid=
    echo "== the tests without a guest (run beside the others):"
    count <"$lane_out"
    rm -f "$lane_out"
    lane_out=
fi
if [ -n "${ENVMGR_SANITIZER_LOGS:-}" ] && [ -d "$ENVMGR_SANITIZER_LOGS" ]; then
    for r in "$ENVMGR_SANITIZER_LOGS"/*; do
        [ -s "$r" ] || continue   # valgrind leaves an empty log when it found nothing
        # an allocation too large for memory returned NULL, as the tests of the fallible allocator ask
        ! grep -qv 'WARNING: AddressSanitizer failed to allocate' "$r" && continue
        echo "sanitizer report $r:"; head -30 "$r"; failed=$((failed + 1))
    done
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

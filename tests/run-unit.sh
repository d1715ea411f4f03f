#!/usr/bin/env bash
# Runs every CUnit binary given, sums CUnit's "tests" rows, prints `N passed, N failed`.
# ENVMGR_VALGRIND=1 runs each under valgrind (leaks and errors fail the run).
set -u
passed=0 failed=0
for t in "$@"; do
    log=$(mktemp /tmp/envmgr-unit-log.XXXXXX)
    if [ "${ENVMGR_VALGRIND:-0}" = 1 ]; then
        # --fair-sched: valgrind runs one thread at a time, and its default lock let test_spawn's
        # malloc-churning threads starve the threads that fork (13 s with it, not done in 13 min)
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --fair-sched=yes \
            --suppressions="$(dirname "$0")/valgrind.supp" "$t" >"$log" 2>&1
    else
        "$t" >"$log" 2>&1
    fi
    rc=$?
    row=$(awk '$1=="tests" {print $4, $5}' "$log" | tail -1)   # Passed Failed
    p=${row%% *} f=${row##* }
    [[ "$p" =~ ^[0-9]+$ ]] || p=0
    [[ "$f" =~ ^[0-9]+$ ]] || f=0
    if [ $rc -ne 0 ] && [ "$f" = 0 ]; then f=1; fi   # crashed, leaked or never reported
    if [ $rc -ne 0 ]; then
        echo "FAIL $(basename "$t") (exit $rc)"; sed 's/^/    /' "$log" | tail -40
    else
        echo "ok   $(basename "$t"): $p tests"
    fi
    passed=$((passed + p)); failed=$((failed + f))
    rm -f "$log"
done
echo "unit: $passed passed, $failed failed"
[ "$failed" = 0 ]

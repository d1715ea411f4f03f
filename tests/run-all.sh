#!/usr/bin/env bash
# The whole test suite: CUnit unit tests, then the integration tests on real
# QEMU guests. Prints one closing line `N passed, N failed` over everything.
#   tests/run-all.sh [--integration-only] [UNIT_BINARIES...]
#   ENVMGR_TESTS="core net"  runs only tests/integration/test_{core,net}.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
passed=0 failed=0
if [ "${1:-}" = --integration-only ]; then shift; else
    out=$("$here/run-unit.sh" "$@" 2>&1); echo "$out"
    row=$(echo "$out" | grep -E '^unit: [0-9]+ passed, [0-9]+ failed$' | tail -1)
    p=$(echo "$row" | sed -E 's/^unit: ([0-9]+) passed, ([0-9]+) failed$/\1/')
    f=$(echo "$row" | sed -E 's/^unit: ([0-9]+) passed, ([0-9]+) failed$/\2/')
    [ -n "$row" ] || { p=0; f=1; }
    passed=$((passed + p)); failed=$((failed + f))
fi
for t in "$here"/integration/test_*.sh; do
    name=$(basename "$t" .sh); name=${name#test_}
    if [ -n "${ENVMGR_TESTS:-}" ] && ! [[ " $ENVMGR_TESTS " == *" $name "* ]]; then continue; fi
    echo "== integration: $name"
    log=$(mktemp /tmp/envmgr-it-log.XXXXXX)
    t0=$SECONDS
    bash "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    echo "-- $name took $((SECONDS - t0)) s"   # where CI's time budget goes
    row=$(grep -E '^[a-z_-]*:? ?[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(echo "$row" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(echo "$row" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=0
    if [ "$rc" -ne 0 ] && [ "$f" = 0 ]; then f=1; echo "$name: exited $rc without reporting a failure"; fi
    # Under `make asan` a sanitizer report anywhere in the log fails the suite, even if its checks passed.
    if n=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log") && [ "$n" -gt 0 ]; then
        echo "$name: $n sanitizer report(s) in the log"; f=$((f + 1))
    fi
    rm -f "$log"
    passed=$((passed + p)); failed=$((failed + f))
done
# `make asan` sends every sanitizer report to files (stderr is often silenced in tests): each one fails.
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

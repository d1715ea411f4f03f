#!/usr/bin/env bash
# Every input in tests/fuzz/corpus/<target>/ (seeds and past crashes) through its
# target's entry point, built with gcc (and under valgrind with ENVMGR_VALGRIND=1).
# Prints `fuzz-corpus: N passed, N failed`.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build}
pass=0 fail=0
for dir in "$root"/tests/fuzz/corpus/*/; do
    target=$(basename "$dir")
    bin=$build/fuzz-replay/$target
    [ -x "$bin" ] || { echo "FAIL $target: $bin not built (make test builds it)"; fail=$((fail + 1)); continue; }
    for input in "$dir"*; do
        [ -f "$input" ] || continue
        if [ "${ENVMGR_VALGRIND:-0}" = 1 ]; then
            valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite "$bin" "$input" >/dev/null 2>&1
        else
            "$bin" "$input" >/dev/null 2>&1
        fi
        if [ $? = 0 ]; then pass=$((pass + 1)); else echo "FAIL $target $(basename "$input")"; fail=$((fail + 1)); fi
    done
done
echo "fuzz-corpus: $pass passed, $fail failed"
[ "$fail" = 0 ]

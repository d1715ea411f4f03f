#!/usr/bin/env bash
# What the env boundaries of the QEMU process cost (make bench; figures, not pass/fail): `up` and
# `reset` wall time (the CLI, as a user sees it) with QEMU as root and in no cgroup of its own
# (ENVMGR_QEMU_RUNAS=off ENVMGR_CGROUP=off: the way envmgr ran before) and with both (the default
# as root), same run, alternating, for a mode-none env and an allowlist env (proxy as the env's
# user too); and the memory of the QEMU log keeper each env now has.
# BOUNDARY_BENCH_N=N rounds (default 10).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${ENVMGR_BIN:-$root/bin/envmgr}
work=$(mktemp -d /tmp/envmgr-boundary-bench.XXXXXX)
export ENVMGR_RUN_DIR=$work/run
mkdir -p -m 700 "$ENVMGR_RUN_DIR"
cleanup() {
    for e in bb-none bb-allow; do "$B" down $e >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap cleans up when the bench is stopped
n=${BOUNDARY_BENCH_N:-10}
line() { printf '%-44s %-28s [%s]\n' "$1" "$2" "$accel"; }
ms() { local t0=$(date +%s%N); "$@" >/dev/null 2>&1 || return 1; echo $((($(date +%s%N) - t0) / 1000000)); }
p50() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
if [ "$(id -u)" != 0 ]; then
    echo "boundary_bench: envmgr is not root: QEMU already runs as the operator's user and no cgroup is made (skipped)"
    exit 0
fi
"$B" up --name bb-none >/dev/null 2>&1
accel=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['accel'].upper())" "$ENVMGR_RUN_DIR/bb-none/env.json")
"$B" down bb-none >/dev/null 2>&1
for mode in before after; do : >"$work/$mode.up" >"$work/$mode.reset" >"$work/$mode.up-allow" >"$work/$mode.reset-allow"; done
for ((i = 0; i < n; i++)); do
    for mode in before after; do
        if [ $mode = before ]; then export ENVMGR_QEMU_RUNAS=off ENVMGR_CGROUP=off; else unset ENVMGR_QEMU_RUNAS ENVMGR_CGROUP; fi
        ms "$B" up --name bb-none >>"$work/$mode.up"
        ms "$B" reset bb-none >>"$work/$mode.reset"
        ms "$B" up --name bb-allow --allow example.com:443 >>"$work/$mode.up-allow"
        ms "$B" reset bb-allow >>"$work/$mode.reset-allow"
        if [ $mode = after ] && [ $i = 0 ]; then
            keeper=$(pgrep -f -- "__qemu-log $ENVMGR_RUN_DIR/bb-none\$" | head -1)
            pss=$(awk '/^Pss:/ {print $2}' /proc/$keeper/smaps_rollup 2>/dev/null || echo "?")
        fi
        "$B" down bb-none >/dev/null 2>&1
        "$B" down bb-allow >/dev/null 2>&1
    done
done
unset ENVMGR_QEMU_RUNAS ENVMGR_CGROUP
for what in up reset up-allow reset-allow; do
    b=$(p50 <"$work/before.$what") a=$(p50 <"$work/after.$what")
    label="$what (mode none)"
    case $what in *-allow) label="${what%-allow} (allowlist: proxy too)" ;; esac
    line "$label, p50: root/no cgroup -> own user+cgroup" "$b ms -> $a ms (n=$n)"
done
line "QEMU log keeper per env (PSS)" "${pss:-?} KiB"

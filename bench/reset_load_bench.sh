#!/usr/bin/env bash
# make bench: reset under load (figures, not pass/fail). The reset p50/p99 of one env on a quiet host,
# then with one other guest busy (a shell loop on its vCPU), in the same run: how much a neighbour's
# load stretches a reset and its tail.
#   bench/reset_load_bench.sh [RESETS]    (default 30)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${ENVMGR_BIN:-$root/bin/envmgr}
n=${1:-30}
own_run=
[ -n "${ENVMGR_RUN_DIR:-}" ] || { ENVMGR_RUN_DIR=$(mktemp -d /tmp/envmgr-reset-load.XXXXXX); own_run=$ENVMGR_RUN_DIR; }
export ENVMGR_RUN_DIR
cleanup() { "$B" down bench-busy >/dev/null 2>&1 || true; [ -z "$own_run" ] || rm -rf "$own_run"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
resets() { "$root/build/bench/envbench" --resets "$n" --shots 1 | grep -E '^(reset \(n=|  of which stop)'; }
echo "reset, quiet host:          $(resets)"
"$B" up --name bench-busy >/dev/null
"$B" exec bench-busy -- sh -c 'nohup sh -c "while :; do :; done" >/dev/null 2>&1 &' >/dev/null
echo "reset, one other guest busy: $(resets)"
"$B" down bench-busy >/dev/null

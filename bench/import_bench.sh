#!/usr/bin/env bash
# make bench, imported images (docs/images.md): figures, not pass/fail.
#   bench/import_bench.sh [--runs N]
# The test disk with its own bootloader (tests/tools/boot-disk.sh) imported under guest interface none
# into a scratch image root and cache: the import's checks and copy, its golden state (cold boot until
# the screen settles), then `envmgr reset` p50 and p99 of an env of it and of a desktop env, interleaved
# in the same run (issue 41's acceptance: the imported image's p50 within 1.5x of the desktop's).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENVMGR=${ENVMGR_BIN:-$root/bin/envmgr}
runs=10
while [ $# -gt 0 ]; do
    case $1 in
        --runs) runs=$2; shift 2 ;;
        *) echo "usage: import_bench.sh [--runs N]" >&2; exit 2 ;;
    esac
done
boot=$("$root/tests/tools/boot-disk.sh") || exit 1
own_run=
[ -n "${ENVMGR_RUN_DIR:-}" ] || { ENVMGR_RUN_DIR=$(mktemp -d /tmp/envmgr-bench.XXXXXX); own_run=$ENVMGR_RUN_DIR; }
export ENVMGR_RUN_DIR
tmp=$(mktemp -d /tmp/envmgr-import-bench.XXXXXX)
mkdir -p "$tmp/images" "$tmp/cache"
cp "${ENVMGR_CACHE_DIR:-/var/cache/envmgr}/accel.json" "$tmp/cache/" 2>/dev/null
imp() { ENVMGR_IMAGE_DIR=$tmp/images ENVMGR_CACHE_DIR=$tmp/cache "$ENVMGR" "$@"; }
I=import-bench-$$ D=import-bench-desk-$$
trap 'imp down $I >/dev/null 2>&1; "$ENVMGR" down $D >/dev/null 2>&1; rm -rf "$tmp" $own_run' EXIT
trap 'exit 130' INT TERM
t0=$(date +%s.%N)
out=$(imp image import boot "$boot" --screen 720x400 --memory 256 --ready-timeout 300 2>&1) || { echo "import_bench: $out"; exit 1; }
t1=$(date +%s.%N)
golden=$(printf '%s\n' "$out" | sed -n 's/.*golden state ready in \([0-9.]*\) s.*/\1/p')
accel=$(printf '%s\n' "$out" | sed -n 's/.*golden state of boot (\([a-z]*\)).*/\1/p')
imp up --name $I --image boot >/dev/null || exit 1
"$ENVMGR" up --name $D >/dev/null || exit 1
# reset ENV...: one `reset` of each, appending "restore_ms wall_ms" to $tmp/<env>
ms() { python3 -c "import sys; print(f'{(float(sys.argv[2]) - float(sys.argv[1])) * 1000:.0f}')" "$@"; }
for ((k = 0; k < runs; k++)); do
    for e in $I $D; do
        a=$(date +%s.%N)
        if [ $e = $I ]; then r=$(imp reset $e 2>&1); else r=$("$ENVMGR" reset $e 2>&1); fi || { echo "import_bench: $r"; exit 1; }
        b=$(date +%s.%N)
        echo "$(printf '%s' "$r" | sed -n 's/.*restore \([0-9]*\) ms.*/\1/p') $(ms "$a" "$b")" >>"$tmp/$e"
    done
done
stats() { python3 - "$1" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
def p(v, q): v = sorted(v); return v[min(len(v) - 1, int(q * len(v)))]
r, w = [a for a, _ in rows], [b for _, b in rows]
print(f"{statistics.median(w):.0f} {p(w, 0.99):.0f} {statistics.median(r):.0f}")
PY
}
read -r iw ip ir <<<"$(stats "$tmp/$I")"
read -r dw dp dr <<<"$(stats "$tmp/$D")"
echo "import ($accel, 18 MiB raw disk, SYSLINUX): checks and copy $(python3 -c "print(f'{$t1 - $t0 - ${golden:-0}:.1f}')") s, golden state (cold boot until the screen settles) ${golden:-?} s"
echo "reset p50/p99 over $runs ($accel, interleaved): imported $iw/$ip ms (restore $ir), desktop $dw/$dp ms (restore $dr); imported/desktop p50 $(python3 -c "print(f'{$iw / $dw:.2f}')")x"

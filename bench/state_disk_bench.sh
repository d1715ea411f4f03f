#!/usr/bin/env bash
# make bench with ENVMGR_BENCH_REFLINK=1 (opt-in: it mounts a file system): bench/state_bench.sh with
# the golden states and the saved states on XFS with reflink, so a state's flat RAM file shares the
# golden RAM file's data (docs/states.md, "Disk per saved state"). Needs root and xfsprogs. Makes a
# sparse file (ENVMGR_BENCH_XFS_SIZE, default 20G) under /tmp, mkfs.xfs -m reflink=1, a loop mount,
# copies the image's golden state into it (found by its manifest's sha256; none: the bench's
# `envmgr up` boots one there), and removes it all after. It measures the flat RAM file
# (ENVMGR_STATE_RAM=file unless set): a state's RAM served over FUSE has no file to share extents.
#   bench/state_disk_bench.sh [state_bench.sh's options]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ] || ! command -v mkfs.xfs >/dev/null; then
    echo "state disk bench: skipped (needs root and mkfs.xfs from xfsprogs)"
    exit 0
fi
image=desktop
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do [ "${args[i]}" = --image ] && image=${args[i + 1]}; done
work=$(mktemp -d /tmp/envmgr-xfs-bench.XXXXXX) || exit 1
mnt=$work/mnt
trap 'mountpoint -q "$mnt" && umount "$mnt"; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
truncate -s "${ENVMGR_BENCH_XFS_SIZE:-20G}" "$work/xfs.img" && mkfs.xfs -q -m reflink=1 "$work/xfs.img" &&
    mkdir "$mnt" && mount -o loop "$work/xfs.img" "$mnt" || { echo "state disk bench: no XFS loop mount here"; exit 1; }
cache=$mnt/cache
mkdir -p "$cache/golden" && chmod 755 "$work" "$mnt" "$cache" "$cache/golden"
imgdir=$(readlink -f "${ENVMGR_IMAGE_DIR:-$root/vm-images/out}/$image")
sha=$(sha256sum "$imgdir/manifest.json" 2>/dev/null | cut -d' ' -f1)
from=${ENVMGR_CACHE_DIR:-/var/cache/envmgr}/golden # root's cache (base/paths.c)
copied=0
for g in "$from"/*/golden.json; do
    [ -n "$sha" ] && grep -q "\"image_sha256\": *\"$sha\"" "$g" 2>/dev/null || continue
    cp -a --sparse=always "$(dirname "$g")" "$cache/golden/" && copied=$((copied + 1))
done
echo "state disk bench: XFS (reflink=1) on a loop device, $copied golden state(s) of $image copied from $from"
ENVMGR_STATE_RAM=${ENVMGR_STATE_RAM:-file} ENVMGR_CACHE_DIR=$cache ENVMGR_BENCH_STATE_PARENT=$mnt \
    "$root/bench/state_bench.sh" "$@"

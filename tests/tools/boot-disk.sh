#!/usr/bin/env bash
# Prints the path of the test disk with its own bootloader (make-boot-disk.sh), building it into
# <cache root>/test-disks/ when missing: keyed by what makes it (the script, the desktop image's kernel
# and initramfs, SYSLINUX's version), so CI builds it once. Disks of older inputs are pruned.
#   tests/tools/boot-disk.sh [--restless] [IMAGE_ROOT]    (IMAGE_ROOT: where the desktop image is; default the
#   checkout's). --restless: a disk whose guest prints without end (its screen never settles).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kind=boot cmd=()
if [ "${1:-}" = --restless ]; then kind=restless cmd=("while :; do echo restless; done"); shift; fi
cache=${ENVMGR_CACHE_DIR:-/var/cache/envmgr}
[ "$(id -u)" = 0 ] || cache=${ENVMGR_CACHE_DIR:-$HOME/.cache/envmgr}
desktop=$(readlink -f "${1:-${ENVMGR_IMAGE_DIR:-$root/vm-images/out}}/desktop")
if [ ! -r "$desktop/vmlinuz" ] || [ ! -r "$desktop/initrd.img" ]; then
    echo "$0: no desktop image in ${1:-${ENVMGR_IMAGE_DIR:-$root/vm-images/out}} (its kernel boots the test disk): make image" >&2
    exit 1
fi
key=$( (sha256sum "$root/tests/tools/make-boot-disk.sh" "$desktop/vmlinuz" "$desktop/initrd.img" | cut -d' ' -f1
        echo "${cmd[*]:-}"
        dpkg-query -W -f='${Version}' syslinux syslinux-common syslinux-efi 2>/dev/null) | sha256sum | cut -c1-16)
disk=$cache/test-disks/$kind-$key.raw
if [ ! -s "$disk" ]; then
    mkdir -p "$cache/test-disks"
    "$root/tests/tools/make-boot-disk.sh" "$desktop/vmlinuz" "$desktop/initrd.img" "$disk" "${cmd[@]}" >&2
    find "$cache/test-disks" -name "$kind-*.raw" ! -name "${disk##*/}" -mmin +60 -delete
fi
echo "$disk"

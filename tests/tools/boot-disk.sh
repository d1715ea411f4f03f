#!/usr/bin/env bash
# Prints the path of the test disk with its own bootloader (make-boot-disk.sh), building it into
# <cache root>/test-disks/ when missing: keyed by what makes it (the script, the desktop image's kernel
# and initramfs, SYSLINUX's version), so CI builds it once. Disks of older inputs are pruned.
#   tests/tools/boot-disk.sh [--restless|--qga|--osworld] [IMAGE_ROOT]    (IMAGE_ROOT: where the desktop image is;
#   default the checkout's). --restless: a disk whose guest prints without end (its screen never settles). --qga: a
#   disk whose guest runs Debian's QEMU guest agent (make-qga-initrd.sh; keyed by the package's version too).
#   --osworld: a disk whose guest runs the stand-in of OSWorld's server on port 5000 (make-osworld-initrd.sh,
#   osworld-standin/server.py; keyed by both and by the versions of the host packages it copies).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kind=boot cmd=()
if [ "${1:-}" = --restless ]; then kind=restless cmd=("while :; do echo restless; done"); shift; fi
if [ "${1:-}" = --qga ]; then kind=qga cmd=(/qga-init); shift; fi
if [ "${1:-}" = --osworld ]; then kind=osworld cmd=(/osworld-init); shift; fi
cache=${ENVMGR_CACHE_DIR:-/var/cache/envmgr}
[ "$(id -u)" = 0 ] || cache=${ENVMGR_CACHE_DIR:-$HOME/.cache/envmgr}
desktop=$(readlink -f "${1:-${ENVMGR_IMAGE_DIR:-$root/vm-images/out}}/desktop")
if [ ! -r "$desktop/vmlinuz" ] || [ ! -r "$desktop/initrd.img" ]; then
    echo "$0: no desktop image in ${1:-${ENVMGR_IMAGE_DIR:-$root/vm-images/out}} (its kernel boots the test disk): make image" >&2
    exit 1
fi
key=$( (sha256sum "$root/tests/tools/make-boot-disk.sh" "$desktop/vmlinuz" "$desktop/initrd.img" | cut -d' ' -f1
        echo "${cmd[*]:-}"
        if [ $kind = qga ]; then
            sha256sum "$root/tests/tools/make-qga-initrd.sh" | cut -d' ' -f1
            apt-cache policy qemu-guest-agent 2>/dev/null | sed -n 's/^ *Candidate: //p'
            dpkg-query -W -f='${Version} ' libc6 libglib2.0-0 coreutils util-linux 2>/dev/null
        fi
        if [ $kind = osworld ]; then
            sha256sum "$root/tests/tools/make-osworld-initrd.sh" "$root/tests/tools/osworld-standin/server.py" | cut -d' ' -f1
            dpkg-query -W -f='${Version} ' python3.11-minimal libpython3.11-minimal libpython3.11-stdlib bash \
                coreutils util-linux iproute2 grep sed libc6 libexpat1 zlib1g libtinfo6 libbpf1 libelf1 libmnl0 \
                libbsd0 libmd0 libcap2 libselinux1 libpcre2-8-0 libacl1 libattr1 2>/dev/null
        fi
        dpkg-query -W -f='${Version}' syslinux syslinux-common syslinux-efi 2>/dev/null) | sha256sum | cut -c1-16)
disk=$cache/test-disks/$kind-$key.raw
if [ ! -s "$disk" ]; then
    mkdir -p "$cache/test-disks"
    initrd=$desktop/initrd.img
    if [ $kind = qga ]; then
        initrd=$cache/test-disks/.qga-initrd.$$
        trap 'rm -f "$initrd"' EXIT
        "$root/tests/tools/make-qga-initrd.sh" "$desktop/initrd.img" "$initrd" >&2
    fi
    if [ $kind = osworld ]; then
        initrd=$cache/test-disks/.osworld-initrd.$$
        trap 'rm -f "$initrd"' EXIT
        "$root/tests/tools/make-osworld-initrd.sh" "$desktop/initrd.img" "$initrd" >&2
    fi
    "$root/tests/tools/make-boot-disk.sh" "$desktop/vmlinuz" "$initrd" "$disk" "${cmd[@]}" >&2
    find "$cache/test-disks" -name "$kind-*.raw" ! -name "${disk##*/}" -mmin +60 -delete
fi
echo "$disk"

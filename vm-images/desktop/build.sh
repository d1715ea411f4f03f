#!/bin/bash
# Build the envmgr desktop guest: Debian 12 (bookworm) with Xorg on the VGA
# framebuffer, XFCE logged in automatically by nodm, xterm, mousepad, thunar,
# the QEMU guest agent and the toolbelt (pyautogui, envmgr-guest).  Outputs,
# for direct kernel boot:
#     OUTDIR/disk.qcow2  ext4 root file system (zstd-compressed qcow2)
#     OUTDIR/vmlinuz  OUTDIR/initrd.img
#     OUTDIR/manifest.json  (written last: its presence marks a complete build)
#     OUTDIR/build.log      step timings
#
# Usage (root): build.sh OUTDIR WORKDIR, normally through ../build-image.sh.
# The steps live in ../lib/recipe.sh (shared with the other images); this
# image is the single layer "desktop" (image.conf).  Guest conventions:
# ../README.md.
set -euo pipefail
umask 022
export LC_ALL=C.UTF-8

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIB=$HERE/../lib
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$LIB/common.sh"
# shellcheck source-path=SCRIPTDIR source=image.conf
. "$HERE/image.conf"
# shellcheck source-path=SCRIPTDIR source=../lib/recipe.sh
. "$LIB/recipe.sh"

recipe_main "$@"

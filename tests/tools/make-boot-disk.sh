#!/usr/bin/env bash
# A small raw disk that boots from its own bootloader, for tests of `envmgr image import`:
# an MBR (syslinux's mbr.bin) with one bootable FAT16 partition holding SYSLINUX, a Linux kernel
# and an initramfs; the kernel runs the initramfs's shell on the VGA console (no root file system,
# so no wait for one). The partition is also an EFI system partition with SYSLINUX's EFI loader as
# \EFI\BOOT\BOOTX64.EFI (when syslinux-efi is installed), so the same disk boots under SeaBIOS and
# OVMF. No download: Debian's syslinux, syslinux-common, syslinux-efi, mtools and dosfstools.
#   tests/tools/make-boot-disk.sh KERNEL INITRD OUT.raw [SHELL_COMMAND]
# KERNEL and INITRD: a Debian kernel and an initramfs-tools initramfs (the desktop image's).
# SHELL_COMMAND: what the initramfs's shell runs instead of reading the console (a screen that never
# stands still, for the golden state's bound).
set -euo pipefail
[ $# = 3 ] || [ $# = 4 ] || { echo "usage: $0 KERNEL INITRD OUT.raw [SHELL_COMMAND]" >&2; exit 2; }
kernel=$1 initrd=$2 out=$3 init_args=
[ $# = 4 ] && init_args=" -- -c \"$4\""
mbr=/usr/lib/syslinux/mbr/mbr.bin
for t in syslinux mcopy mkfs.fat; do
    command -v $t >/dev/null || { echo "$0: $t missing (scripts/install-deps)" >&2; exit 1; }
done
[ -r $mbr ] || { echo "$0: $mbr missing (syslinux-common)" >&2; exit 1; }
tmp=$(mktemp -d "${out}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=2048                                            # the partition's first sector (1 MiB)
need_kib=$(( ($(stat -c %s "$kernel") + $(stat -c %s "$initrd")) / 1024 + 2048 ))
part_kib=$(( (need_kib + 1023) / 1024 * 1024 ))
[ "$part_kib" -ge 16384 ] || part_kib=16384            # FAT16's least
# hidden sectors = the partition's start: SYSLINUX's boot sector finds ldlinux.sys by it
mkfs.fat -F 16 -h $start -n ENVMGRTEST -C "$tmp/part.img" $part_kib >/dev/null
cat >"$tmp/syslinux.cfg" <<CFG
DEFAULT linux
PROMPT 0
TIMEOUT 0
LABEL linux
  KERNEL /vmlinuz
  APPEND initrd=/initrd.img rdinit=/bin/sh console=tty0 quiet loglevel=0 vt.global_cursor_default=0$init_args
CFG
mcopy -i "$tmp/part.img" "$kernel" ::/vmlinuz
mcopy -i "$tmp/part.img" "$initrd" ::/initrd.img
mcopy -i "$tmp/part.img" "$tmp/syslinux.cfg" ::/syslinux.cfg
efi=/usr/lib/SYSLINUX.EFI/efi64/syslinux.efi ldlinux=/usr/lib/syslinux/modules/efi64/ldlinux.e64
if [ -r $efi ] && [ -r $ldlinux ]; then   # UEFI: the removable-media path, its config beside it
    mmd -i "$tmp/part.img" ::/EFI ::/EFI/BOOT
    mcopy -i "$tmp/part.img" $efi ::/EFI/BOOT/BOOTX64.EFI
    mcopy -i "$tmp/part.img" $ldlinux ::/EFI/BOOT/ldlinux.e64
    mcopy -i "$tmp/part.img" "$tmp/syslinux.cfg" ::/EFI/BOOT/syslinux.cfg
fi
syslinux --install "$tmp/part.img"
total=$(( start + part_kib * 2 ))
truncate -s $(( total * 512 )) "$tmp/disk.raw"
dd if="$tmp/part.img" of="$tmp/disk.raw" bs=512 seek=$start conv=notrunc status=none
dd if=$mbr of="$tmp/disk.raw" bs=440 count=1 conv=notrunc status=none
# one partition entry: bootable, type 0xef (EFI system partition: FAT; mbr.bin looks only at the
# bootable flag), CHS fields unused (0xfe,0xff,0xff), then the boot signature
/usr/bin/python3 - "$tmp/disk.raw" $start $(( part_kib * 2 )) <<'PY'
import struct, sys
path, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
entry = struct.pack("<B3sB3sII", 0x80, b"\xfe\xff\xff", 0xef, b"\xfe\xff\xff", start, count)
with open(path, "r+b") as f:
    f.seek(446); f.write(entry + bytes(48)); f.seek(510); f.write(b"\x55\xaa")
PY
mv "$tmp/disk.raw" "$out"

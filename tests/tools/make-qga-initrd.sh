#!/usr/bin/env bash
# An initramfs with the QEMU guest agent inside, for tests of the qga guest interface: the desktop
# image's initramfs (its kernel's modules, virtio_console among them, and a shell) with a second
# archive after it (the kernel unpacks both) holding Debian's qemu-ga (`apt-get download
# qemu-guest-agent`: no install, no other download) and what the agent runs: coreutils' timeout (every
# guest command runs under it), date, dirname, chown, id, util-linux's hwclock (guest-set-time runs it),
# each with the host's libraries (the same Debian release as the package), and /qga-init, which loads
# virtio_console, starts the agent on the port named org.qemu.guest_agent.0, and leaves a shell on the
# VGA console. Boot it with rdinit=/bin/sh -- -c /qga-init (make-boot-disk.sh's SHELL_COMMAND).
#   tests/tools/make-qga-initrd.sh DESKTOP_INITRD OUT.img
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 DESKTOP_INITRD OUT.img" >&2; exit 2; }
base=$1 out=$2
tmp=$(mktemp -d "${out}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download -q qemu-guest-agent >/dev/null 2>"$tmp/apt.log") ||
    { echo "$0: apt-get download qemu-guest-agent failed: $(tail -1 "$tmp/apt.log")" >&2; exit 1; }
dpkg-deb -x "$tmp"/qemu-guest-agent_*.deb "$tmp/deb"
cat >"$tmp/qga-init" <<'SH'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /proc /sys /dev /tmp /run
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
modprobe virtio_pci 2>/dev/null
modprobe virtio_console 2>/dev/null
port= i=0
while [ -z "$port" ] && [ $i -lt 30 ]; do
    for n in /sys/class/virtio-ports/*/name; do
        [ "$(cat "$n" 2>/dev/null)" = org.qemu.guest_agent.0 ] && { d=${n%/name}; port=/dev/${d##*/}; }
    done
    [ -n "$port" ] || sleep 1
    i=$((i + 1))
done
[ -n "$port" ] && qemu-ga -m virtio-serial -p "$port" -t /run </dev/null >/dev/null 2>&1 &
exec sh -i
SH
# host files into the archive under usr/ (the initramfs's /bin, /lib, /sbin are links into usr/)
python3 - "$tmp/extra.cpio" "$tmp/qga-init" "$tmp/deb/usr/sbin/qemu-ga" /usr/bin/timeout /usr/bin/date \
    /usr/bin/dirname /usr/bin/chown /usr/bin/id /usr/sbin/hwclock <<'PY'
import os, re, subprocess, sys
out, init, progs = sys.argv[1], sys.argv[2], sys.argv[3:]
entries = [("qga-init", 0o100755, open(init, "rb").read())]
libs = {}
for p in progs:
    where = "usr/sbin/" if p.endswith(("qemu-ga", "hwclock")) else "usr/bin/"
    entries.append((where + os.path.basename(p), 0o100755, open(p, "rb").read()))
    for line in subprocess.run(["ldd", p], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line) or re.match(r"\s*(/\S*ld-linux\S*)()", line)
        if m:
            name = os.path.basename(m.group(1)); path = m.group(2) or m.group(1)
            libs[name] = os.path.realpath(path)
for name, path in sorted(libs.items()):
    entries.append(("usr/lib/x86_64-linux-gnu/" + name, 0o100755, open(path, "rb").read()))
def pad(n): return b"\0" * (-n % 4)
with open(out, "wb") as f:
    for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], 1):
        nb = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0]
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
        f.write(hdr + nb + pad(len(hdr) + len(nb)) + data + pad(len(data)))
PY
gzip -9n "$tmp/extra.cpio"
cat "$base" "$tmp/extra.cpio.gz" >"$tmp/initrd.img"
mv "$tmp/initrd.img" "$out"

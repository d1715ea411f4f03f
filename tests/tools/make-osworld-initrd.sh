#!/usr/bin/env bash
# An initramfs whose guest runs a stand-in of OSWorld's in-guest server (tests/tools/osworld-standin/
# server.py) on port 5000, for tests of the `osworld` guest interface: the desktop image's initramfs
# (its kernel's modules, virtio_net among them, klibc's shell and tools) with a second archive after it
# (the kernel unpacks both) holding, from the host (the same Debian release as the desktop image; no
# download):
#   - Debian's Python, /usr/bin/python3.11 (python3 and python link to it), and of its standard library
#     only the modules the server loads, found by loading it in the host's Python (each with its
#     compiled .pyc, so the guest compiles nothing), without ssl (downloads in the guest are http only),
#     OpenSSL's hashes, bz2 or lzma;
#   - bash (task commands run `bash eval.sh`; the console's shell), iproute2's ip, grep, sed, util-linux's
#     setsid (the console shell's controlling terminal), coreutils' timeout, date (envmgr sets the clock
#     with date -s) and the usual others (the list below; over klibc's), each with its host libraries;
#   - /osworld-init: mounts proc, sys and dev, loads virtio_pci and virtio_net, brings lo up and eth0
#     up as 10.0.2.15/24 with 10.0.2.2 the gateway (QEMU's slirp defaults), creates the user `user`
#     (uid 1000, home /home/user, with a Desktop folder), starts the server on 0.0.0.0:5000 as root (its
#     log in /tmp/osworld-standin.log), in /home/user with HOME=/home/user, and leaves bash on the VGA
#     console in /home/user, where an agent types.
# Boot it with rdinit=/bin/sh -- -c /osworld-init (make-boot-disk.sh's SHELL_COMMAND).
#   tests/tools/make-osworld-initrd.sh DESKTOP_INITRD OUT.img
set -euo pipefail
[ $# = 2 ] || { echo "usage: $0 DESKTOP_INITRD OUT.img" >&2; exit 2; }
base=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
server=$root/tests/tools/osworld-standin/server.py
py=/usr/bin/python3.11
for f in $py /usr/bin/bash /usr/bin/ip /usr/bin/timeout "$server"; do
    [ -r "$f" ] || { echo "$0: $f missing (python3.11-minimal, bash, iproute2, coreutils)" >&2; exit 1; }
done
# coreutils' own, over klibc's where the first archive has one (klibc's ls, cat, mkdir take no or few options)
coreutils="timeout date echo ls cat mkdir mv ln sleep chmod chown cp rm touch env id head tail wc sort cut tr
           stat dirname basename uname readlink"
tmp=$(mktemp -d "${out}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/osworld-init" <<'SH'
#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /proc /sys /dev /tmp /run /root /home/user/Desktop
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
chmod 1777 /tmp
echo 'root:x:0:0:root:/root:/bin/bash' >/etc/passwd
echo 'user:x:1000:1000:user:/home/user:/bin/bash' >>/etc/passwd
echo 'root:x:0:' >/etc/group
echo 'user:x:1000:' >>/etc/group
echo osworld >/proc/sys/kernel/hostname
chown -R 1000:1000 /home/user 2>/dev/null
modprobe virtio_pci 2>/dev/null
modprobe virtio_net 2>/dev/null
ip link set lo up
i=0
while ! ip link show eth0 >/dev/null 2>&1 && [ $i -lt 30 ]; do sleep 1; i=$((i + 1)); done
ip addr add 10.0.2.15/24 dev eth0 2>/dev/null
ip link set eth0 up 2>/dev/null
ip route add default via 10.0.2.2 2>/dev/null
cd /home/user
export HOME=/home/user LANG=C.UTF-8
python3 /usr/lib/osworld-standin/server.py --host 0.0.0.0 --port 5000 </dev/null >/tmp/osworld-standin.log 2>&1 &
export PS1='user@osworld:\w# '
bash -c 'printf "\033[H\033[2J"' >/dev/tty1   # the firmware's lines off the screen
exec setsid -c bash --norc -i </dev/tty1 >/dev/tty1 2>&1
SH
# The standard library modules the server loads: its imports, what its routes load when they run, and
# what a child `python3 -c` loads at start (site, encodings). Printed as paths, then each .so's libraries.
"$py" -I - "$server" >"$tmp/modules" <<'PY'
import importlib.util, sys
# no TLS in the guest (urllib goes without it), hashlib on the interpreter's own hashes (not OpenSSL's),
# shutil without bz2 and lzma: each would bring a large library for nothing the server does
for name in ("ssl", "_hashlib", "_bz2", "_lzma", "bz2", "lzma"):
    sys.modules[name] = None
spec = importlib.util.spec_from_file_location("standin", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
import site, encodings.aliases, encodings.ascii, encodings.latin_1, encodings.utf_8, encodings.cp437, encodings.idna
import platform, mimetypes, urllib.request, email.parser, email.feedparser, http.client, tempfile, uuid, shlex
import runpy, linecache, tokenize, traceback, argparse
platform.platform(); platform.system(); mimetypes.guess_type("a.txt")
try:
    urllib.request.urlopen("http://127.0.0.1:9/", timeout=1)
except Exception:
    pass
seen = set()
for mod in list(sys.modules.values()):
    f = getattr(mod, "__file__", None)
    if f and f.startswith(sys.prefix + "/lib/python3.11/") and f not in seen:
        seen.add(f)
        print(f)
PY
grep -q '/os.py$' "$tmp/modules" || { echo "$0: could not list the server's modules" >&2; exit 1; }
/usr/bin/python3 - "$tmp/extra.cpio" "$tmp/osworld-init" "$server" "$tmp/modules" "$py" /usr/bin/bash \
    /usr/bin/ip /usr/bin/setsid /usr/bin/grep /usr/bin/sed $(printf '/usr/bin/%s ' $coreutils) <<'PY'
import importlib.util, os, re, subprocess, sys
out, init, server, modlist, progs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
files = {}          # archive path -> (mode, data, mtime)
def add(dst, src, mode=0o100644):
    st = os.stat(src)
    files[dst] = (mode, open(src, "rb").read(), int(st.st_mtime))
add("osworld-init", init, 0o100755)
add("usr/lib/osworld-standin/server.py", server, 0o100755)
elf = list(progs)
for p in progs:
    add("usr/bin/" + os.path.basename(p), p, 0o100755)
files["usr/bin/python3"] = (0o120777, b"python3.11", 0)
files["usr/bin/python"] = (0o120777, b"python3.11", 0)
for path in open(modlist).read().split():
    rel = path.lstrip("/")
    if path.endswith(".so"):
        add(rel, path, 0o100755)
        elf.append(path)
        continue
    add(rel, path)
    pyc = importlib.util.cache_from_source(path)
    if os.path.exists(pyc):
        add(pyc.lstrip("/"), pyc)
files["usr/lib/python3.11/lib-dynload/.keep"] = (0o100644, b"", 0)   # the interpreter looks for the folder
libs = {}
for p in elf:
    for line in subprocess.run(["ldd", p], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line) or re.match(r"\s*(/\S*ld-linux\S*)()", line)
        if m:
            libs[os.path.basename(m.group(1))] = os.path.realpath(m.group(2) or m.group(1))
for name, path in sorted(libs.items()):
    add("usr/lib/x86_64-linux-gnu/" + name, path, 0o100755)
# the folders the first archive does not have, parents first (the kernel creates no missing parent)
have = {"usr", "usr/bin", "usr/sbin", "usr/lib", "usr/lib/x86_64-linux-gnu"}
dirs = set()
for name in files:
    d = os.path.dirname(name)
    while d and d not in have:
        dirs.add(d)
        d = os.path.dirname(d)
entries = [(d, 0o40755, b"", 0) for d in sorted(dirs, key=lambda d: (d.count("/"), d))]
entries += [(n, m, data, t) for n, (m, data, t) in sorted(files.items())]
def pad(n): return b"\0" * (-n % 4)
with open(out, "wb") as f:
    for ino, (name, mode, data, mtime) in enumerate(entries + [("TRAILER!!!", 0, b"", 0)], 1):
        nb = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 2 if mode & 0o40000 else 1, mtime, len(data), 0, 0, 0, 0, len(nb), 0]
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields)
        f.write(hdr + nb + pad(len(hdr) + len(nb)) + data + pad(len(data)))
PY
gzip -9n "$tmp/extra.cpio"
cat "$base" "$tmp/extra.cpio.gz" >"$tmp/initrd.img"
mv "$tmp/initrd.img" "$out"

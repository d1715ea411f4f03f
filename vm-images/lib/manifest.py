#!/usr/bin/env python3
"""Write an image's manifest.json: the last file of a build.

Usage: manifest.py OUTDIR PACKAGES-TSV --name N --suite S --input-key K
                   --append A --width W --height H --memory-mb M [--cpus N]
                   [--user U --password P] [--toolbelt 0|1 --accessibility 0|1]

PACKAGES-TSV holds "name<TAB>version" lines (dpkg-query in the image).
Every file under "files" is hashed here; `envmgr image verify` recomputes and
compares them.  The manifest is written to a temp file and renamed, so a
manifest.json that exists is always complete, and its presence marks the
whole build as complete.
"""
import argparse
import datetime
import hashlib
import json
import os

FORMAT = 1
BOOT_FILES = {"kernel": "vmlinuz", "initrd": "initrd.img", "disk": "disk.qcow2"}


def file_info(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"sha256": h.hexdigest(), "size": os.path.getsize(path)}


def read_packages(path):
    pkgs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, version = line.split("\t")
            pkgs[name] = version
    if not pkgs:
        raise SystemExit(f"manifest.py: no packages in {path}")
    return [{"name": n, "version": pkgs[n]} for n in sorted(pkgs)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("packages")
    ap.add_argument("--name", required=True)
    ap.add_argument("--suite", required=True)
    ap.add_argument("--input-key", required=True)
    ap.add_argument("--append", required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--memory-mb", type=int, required=True)
    ap.add_argument("--cpus", type=int, default=1, choices=range(1, 17), metavar="1..16",
                    help="the guest's vCPUs (QEMU -smp)")
    ap.add_argument("--ready-timeout-s", type=int, default=400,
                    help="how long a cold boot may take to a ready desktop (envmgr's golden state build)")
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--toolbelt", type=int, choices=(0, 1), default=0)
    ap.add_argument("--accessibility", type=int, choices=(0, 1), default=0)
    a = ap.parse_args()
    if len(a.input_key) != 64 or any(c not in "0123456789abcdef" for c in a.input_key):
        raise SystemExit("manifest.py: --input-key must be a sha256 hex digest")

    manifest = {
        "format": FORMAT,
        "name": a.name,
        "built": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "suite": a.suite,
        "input_key": a.input_key,
        "boot": dict(BOOT_FILES, append=a.append, width=a.width, height=a.height,
                     memory_mb=a.memory_mb, cpus=a.cpus, ready_timeout_s=a.ready_timeout_s),
        "files": {f: file_info(os.path.join(a.outdir, f)) for f in
                  ("disk.qcow2", "vmlinuz", "initrd.img")},
        "packages": read_packages(a.packages),
    }
    if a.user:
        # The desktop user and its password (sudo asks for it): tasks type it.
        manifest["user"] = {"name": a.user, "password": a.password or ""}
    if a.toolbelt:
        # The guest-side CLI the getters call through the guest agent (JSON
        # out), and whether an AT-SPI accessibility bus runs in the session.
        manifest["toolbelt"] = {"cli": "/usr/local/bin/envmgr-guest",
                                "python_modules": ["pyautogui", "envmgr_guest"],
                                "accessibility": bool(a.accessibility)}
    final = os.path.join(a.outdir, "manifest.json")
    tmp = final + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)
    os.replace(tmp, final)


if __name__ == "__main__":
    main()

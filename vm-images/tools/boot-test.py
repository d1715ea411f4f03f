#!/usr/bin/env python3
"""Boot an envmgr guest image once under QEMU (TCG) and check its conventions.

Usage: boot-test.py [IMAGE-DIR] [--screenshot FILE.png] [--timeout SECONDS]

IMAGE-DIR defaults to out/desktop next to this tools/ directory.  The image is
booted from a throw-away qcow2 overlay exactly as manifest.json "boot" says,
then checked through the guest agent and QMP:
  * the guest agent answers (time from start is reported);
  * /tmp/.envmgr-desktop-ready appears (boot-to-ready time is reported);
  * root can use the display with DISPLAY=:0 and no XAUTHORITY, the screen is
    WIDTHxHEIGHT, the keyboard layout is us, blanking and DPMS are off, no
    windows (dialogs) are open on the fresh desktop;
  * two screendumps a few seconds apart are identical; the last one is
    written as a PNG (--screenshot) for a person to look at.
Everything it starts or creates is stopped and removed on exit.  TCG only:
KVM on some hosts cannot run Debian's kernel.  Exit status 0 = all checks ok.
"""
import argparse
import base64
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib

T0 = time.monotonic()


def elapsed():
    return time.monotonic() - T0


def say(msg):
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


class Channel:
    """One JSON-lines connection to a QEMU unix socket (QMP or guest agent).

    Both sockets serve a single client: keep one connection, never share it.
    """

    def __init__(self, path, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.buf = b""

    def send(self, obj):
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError from None
        if not data:
            raise ConnectionError("socket closed")
        self.buf += data

    def recv(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            self._fill(deadline)
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.strip(b"\xff \r")
        return json.loads(line) if line else self.recv(max(0.01, deadline - time.monotonic()))

    def close(self):
        self.sock.close()


class Agent(Channel):
    def sync(self, timeout):
        """guest-sync-delimited: skip stale replies up to the 0xFF marker."""
        ident = random.randrange(1, 2**31)
        self.buf = b""
        self.send({"execute": "guest-sync-delimited", "arguments": {"id": ident}})
        deadline = time.monotonic() + timeout
        while b"\xff" not in self.buf:
            self._fill(deadline)
        self.buf = self.buf[self.buf.index(b"\xff") + 1:]
        while True:
            reply = self.recv(max(0.01, deadline - time.monotonic()))
            if reply.get("return") == ident:
                return

    def call(self, cmd, args=None, timeout=20):
        msg = {"execute": cmd}
        if args is not None:
            msg["arguments"] = args
        self.send(msg)
        reply = self.recv(timeout)
        if "error" in reply:
            raise RuntimeError(f"{cmd}: {reply['error']}")
        return reply["return"]

    def run(self, argv, env=None, timeout=30):
        """guest-exec + poll; returns (exit code, stdout, stderr)."""
        args = {"path": argv[0], "arg": argv[1:], "capture-output": True}
        if env is not None:
            args["env"] = env
        pid = self.call("guest-exec", args)["pid"]
        deadline = time.monotonic() + timeout
        while True:
            st = self.call("guest-exec-status", {"pid": pid})
            if st["exited"]:
                out = base64.b64decode(st.get("out-data", "")).decode(errors="replace")
                err = base64.b64decode(st.get("err-data", "")).decode(errors="replace")
                return st.get("exitcode", -1), out, err
            if time.monotonic() > deadline:
                raise TimeoutError(f"guest-exec {argv} still running")
            time.sleep(0.2)


def qmp_call(qmp, cmd, args=None, timeout=30):
    msg = {"execute": cmd}
    if args is not None:
        msg["arguments"] = args
    qmp.send(msg)
    while True:
        reply = qmp.recv(timeout)
        if "error" in reply:
            raise RuntimeError(f"{cmd}: {reply['error']}")
        if "return" in reply:  # anything else is an event
            return reply["return"]


def stable_screen(qmp, tmp, what, check, pause=3):
    """Two screendumps `pause` s apart; returns the last file."""
    shots = []
    for i in range(2):
        time.sleep(pause)
        ppm = os.path.join(tmp, f"screen{i}.ppm")
        qmp_call(qmp, "screendump", {"filename": ppm})
        with open(ppm, "rb") as f:
            shots.append(f.read())
    check(shots[0] == shots[1], f"screen stable over {pause} s: {what}")
    return ppm


def wait_window(agent, env, title_part, timeout):
    """Id of the first managed window whose wmctrl line contains title_part."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rc, out, _ = agent.run(["/usr/bin/wmctrl", "-l", "-x"], env=env)
        for line in out.splitlines():
            if title_part.lower() in line.lower():
                return line.split()[0]
        time.sleep(1)
    return None


def ppm_to_png(ppm, png):
    with open(ppm, "rb") as f:
        data = f.read()
    # P6\n<w> <h>\n<max>\n<rgb...> (QEMU writes no comments)
    parts = data.split(maxsplit=4)
    if parts[0] != b"P6" or parts[3] != b"255":
        raise ValueError("unexpected PPM header")
    w, h, pix = int(parts[1]), int(parts[2]), parts[4]
    stride = w * 3
    raw = b"".join(b"\x00" + pix[y * stride:(y + 1) * stride] for y in range(h))

    def chunk(kind, body):
        c = struct.pack(">I", len(body)) + kind + body
        return c + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    with open(png, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))
    return w, h


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("image", nargs="?", default=os.path.join(here, "..", "out", "desktop"))
    ap.add_argument("--screenshot", help="write the final screen as this PNG")
    ap.add_argument("--timeout", type=float, default=180, help="boot-to-ready limit (s)")
    ap.add_argument("--run", action="append", default=[], metavar="SHELL-CMD",
                    help="also run this as root in the guest (DISPLAY=:0) and print its "
                         "output; with --screenshot, the screen after these is NAME-final.png")
    a = ap.parse_args()

    img = os.path.realpath(a.image)
    with open(os.path.join(img, "manifest.json")) as f:
        boot = json.load(f)["boot"]
    tmp = tempfile.mkdtemp(prefix="envmgr-boot-test.")
    qemu = None
    failures = []

    def check(ok, what):
        say(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            failures.append(what)

    try:
        overlay = os.path.join(tmp, "overlay.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b",
                        os.path.join(img, boot["disk"]), overlay], check=True)
        qga_path, qmp_path = os.path.join(tmp, "qga.sock"), os.path.join(tmp, "qmp.sock")
        cmd = [
            "qemu-system-x86_64", "-nodefaults", "-machine", "pc,accel=tcg", "-cpu", "max",
            "-m", str(boot["memory_mb"]), "-smp", str(boot.get("cpus", 1)),
            "-kernel", os.path.join(img, boot["kernel"]),
            "-initrd", os.path.join(img, boot["initrd"]), "-append", boot["append"],
            "-drive", f"file={overlay},if=virtio,format=qcow2",
            "-device", f"VGA,edid=on,xres={boot['width']},yres={boot['height']}",
            "-device", "virtio-serial",
            "-chardev", f"socket,id=qga,path={qga_path},server=on,wait=off",
            "-device", "virtserialport,chardev=qga,name=org.qemu.guest_agent.0",
            "-netdev", "user,id=n0,restrict=on", "-device", "virtio-net-pci,netdev=n0",
            "-device", "qemu-xhci", "-device", "usb-tablet",
            "-vnc", f"unix:{os.path.join(tmp, 'vnc.sock')}",
            "-qmp", f"unix:{qmp_path},server=on,wait=off",
            "-serial", f"file:{os.path.join(tmp, 'serial.log')}", "-display", "none",
        ]
        say("starting QEMU (TCG)")
        qemu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        qmp = Channel(qmp_path)
        qmp.recv(10)  # greeting
        qmp.send({"execute": "qmp_capabilities"})
        qmp.recv(10)

        agent = Agent(qga_path)
        deadline = time.monotonic() + a.timeout
        while True:
            try:
                agent.sync(2)
                agent.call("guest-ping")
                break
            except (TimeoutError, ValueError):
                if time.monotonic() > deadline or qemu.poll() is not None:
                    raise SystemExit("guest agent never answered")
        check(True, f"guest agent answers at {elapsed():.1f}s")
        # The guest's clock comes from the emulated RTC; set it like the host will.
        agent.call("guest-set-time", {"time": time.time_ns()})

        marker = None
        while time.monotonic() < deadline:
            rc, out, _ = agent.run(["/bin/cat", "/tmp/.envmgr-desktop-ready"])
            if rc == 0:
                marker = out
                break
            time.sleep(1)
        check(marker is not None and "status=ok" in marker,
              f"desktop-ready marker at {elapsed():.1f}s: {marker!r}")

        # Root and the display: DISPLAY=:0, XAUTHORITY unset.
        env = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DISPLAY=:0"]
        rc, out, err = agent.run(["/usr/bin/xdpyinfo"], env=env)
        dims = f"{boot['width']}x{boot['height']} pixels"
        check(rc == 0 and dims in out, f"root: xdpyinfo works, screen {dims} ({err.strip()[:80]})")
        rc, out, err = agent.run(["/usr/bin/xdotool", "getmouselocation"], env=env)
        check(rc == 0, f"root: xdotool works: {out.strip() or err.strip()}")
        rc, out, _ = agent.run(["/usr/bin/setxkbmap", "-query"], env=env)
        check(rc == 0 and any(l.split() == ["layout:", "us"] for l in out.splitlines()),
              "keyboard layout us")
        rc, out, _ = agent.run(["/usr/bin/xset", "q"], env=env)
        check(rc == 0 and "timeout:  0" in out and "DPMS is Disabled" in out,
              "screen saver off, DPMS disabled")
        rc, out, _ = agent.run(["/usr/bin/wmctrl", "-l"], env=env)
        wins = [l for l in out.splitlines() if l.split()[1:2] != ["-1"]]
        check(rc == 0 and not wins, f"no windows or dialogs open: {wins}")
        rc, out, _ = agent.run(["/bin/sh", "-c",
                                "hostname; id -nG user; systemctl is-system-running; "
                                "systemctl --failed --no-legend; ip -br addr"])
        say("guest: " + " | ".join(out.strip().splitlines()))

        # Stable screen: two dumps 3 s apart must match.
        ppm = stable_screen(qmp, tmp, "fresh desktop", check)
        if a.screenshot:
            w, h = ppm_to_png(ppm, a.screenshot)
            say(f"screenshot {w}x{h} -> {a.screenshot}")

        # ctrl+alt+t opens an xterm (real key events through the PS/2
        # keyboard, as VNC sends them); its cursor must not blink.
        qmp_call(qmp, "send-key", {"keys": [{"type": "qcode", "data": k}
                                            for k in ("ctrl", "alt", "t")]})
        xterm = wait_window(agent, env, "xterm", 30)
        check(xterm is not None, "ctrl+alt+t opened an xterm")
        ppm = stable_screen(qmp, tmp, "xterm (no cursor blink)", check)
        if a.screenshot:
            ppm_to_png(ppm, a.screenshot.replace(".png", "-xterm.png"))
        if xterm:
            agent.run(["/usr/bin/wmctrl", "-i", "-c", xterm], env=env)

        # mousepad as the desktop user: no restored session, no dialogs.
        agent.call("guest-exec", {"path": "/usr/sbin/runuser", "arg": [
            "-u", "user", "--", "/usr/bin/env", "DISPLAY=:0", "/usr/bin/mousepad"]})
        mp = wait_window(agent, env, "Mousepad", 60)
        check(mp is not None, "mousepad opened one window")
        ppm = stable_screen(qmp, tmp, "mousepad (no cursor blink)", check)
        if a.screenshot:
            ppm_to_png(ppm, a.screenshot.replace(".png", "-mousepad.png"))

        for c in a.run:
            rc, out, err = agent.run(["/bin/sh", "-c", c], env=env, timeout=60)
            print(f"--- guest$ {c}  (exit {rc})\n{out}{err}", flush=True)
        if a.run and a.screenshot:
            time.sleep(5)
            qmp_call(qmp, "screendump", {"filename": ppm})
            ppm_to_png(ppm, a.screenshot.replace(".png", "-final.png"))

        overlay_mb = os.path.getsize(overlay) / 2**20
        say(f"overlay grew to {overlay_mb:.1f} MB during boot")
        agent.close()
        # Wait for the reply: QEMU drops queued commands of a closed client.
        qmp_call(qmp, "quit")
        qmp.close()
        qemu.wait(timeout=30)
    finally:
        if qemu is not None and qemu.poll() is None:
            qemu.terminate()
            try:
                qemu.wait(timeout=10)
            except subprocess.TimeoutExpired:
                qemu.kill()
                qemu.wait()
        serial = os.path.join(tmp, "serial.log")
        if failures and os.path.exists(serial):
            with open(serial, errors="replace") as f:
                print("--- serial console (tail)\n" + "".join(f.readlines()[-30:]))
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        say(f"{len(failures)} check(s) failed")
        return 1
    say("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

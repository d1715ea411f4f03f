#!/usr/bin/env python3
"""Open envmgr's live page in a real headless Chromium and check that noVNC
connects and draws a non-blank canvas. Drives Chromium over its remote
debugging protocol with the standard library only (a minimal websocket
client), and prints one JSON line: {"state", "colours", "width", "height",
"console": [...], "input_sent": bool}.

usage: live_view_check.py URL [--timeout S] [--screenshot PNG] [--try-input]
Exit 0 when the page connected and the canvas shows more than 8 colours.
"""
import argparse
import base64
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WS:
    """Just enough RFC 6455 for the DevTools socket: text frames, client masking."""

    def __init__(self, url, timeout=30):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n") % (m.group(3), m.group(1), m.group(2), key)
        self.sock.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("devtools websocket closed during the handshake")
            buf += chunk
        head, self.rest = buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("devtools websocket refused: %r" % head[:200])
        self.next_id = 0

    def _read(self, n):
        while len(self.rest) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("devtools websocket closed")
            self.rest += chunk
        out, self.rest = self.rest[:n], self.rest[n:]
        return out

    def send(self, obj):
        data = json.dumps(obj).encode()
        mask = os.urandom(4)
        n = len(data)
        hdr = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                               bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                               bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0f
            if op in (1, 2, 0):
                msg += payload
                if b0 & 0x80:
                    return json.loads(msg)
            elif op == 8:
                raise RuntimeError("devtools websocket closed")

    def call(self, method, **params):
        self.next_id += 1
        my = self.next_id
        self.send({"id": my, "method": method, "params": params})
        while True:
            m = self.recv()
            if m.get("id") == my:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    events = []


PROBE = r"""(() => {
  const c = document.querySelector('#screen canvas');
  const state = document.body.dataset.state;
  if (!c || !c.width || !c.height) return JSON.stringify({state, colours: 0, width: 0, height: 0});
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const seen = new Set();
  for (let i = 0; i < d.length && seen.size < 1000; i += 4 * 97) seen.add((d[i] << 16) | (d[i+1] << 8) | d[i+2]);
  return JSON.stringify({state, colours: seen.size, width: c.width, height: c.height});
})()"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--screenshot")
    ap.add_argument("--input", action="store_true",
                    help="once connected, make noVNC send input (viewOnly off, as a hostile page could): a "
                         "right-click on the desktop and ctrl+alt+t; the server must drop them unless the page "
                         "is in control mode")
    a = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print(json.dumps({"state": "no-chromium"}))
        return 2
    profile = tempfile.mkdtemp(prefix="envmgr-chromium.")
    proc = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                             "--disable-component-update", "--disable-sync", "--no-first-run",
                             "--user-data-dir=" + profile, "--remote-debugging-port=0", "--remote-allow-origins=*",
                             "--window-size=1280,860", "about:blank"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    result = {"state": "none", "colours": 0, "console": []}
    try:
        port = None
        deadline = time.time() + 30
        while time.time() < deadline and port is None:
            line = proc.stderr.readline().decode(errors="replace")
            if not line and proc.poll() is not None:
                break
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if m:
                port = int(m.group(1))
        if port is None:
            raise RuntimeError("chromium did not start its debugging endpoint")
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
            targets = [t for t in json.load(r) if t.get("type") == "page"]
        ws = WS(targets[0]["webSocketDebuggerUrl"])
        ws.call("Runtime.enable")
        ws.call("Page.enable")
        ws.call("Page.navigate", url=a.url)
        deadline = time.time() + a.timeout
        probe = {}
        while time.time() < deadline:
            time.sleep(0.5)
            r = ws.call("Runtime.evaluate", expression=PROBE, returnByValue=True)
            value = r.get("result", {}).get("value")
            if value:
                probe = json.loads(value)
            if probe.get("state") == "connected" and probe.get("colours", 0) > 8:
                break
        result.update(probe)
        if a.input and probe.get("state") == "connected":
            r = ws.call("Runtime.evaluate", returnByValue=True, expression=(
                "(() => { window.envmgrRfb.viewOnly = false;"
                " const r = document.querySelector('#screen canvas').getBoundingClientRect();"
                " return JSON.stringify([r.left + 0.72 * r.width, r.top + 0.62 * r.height]); })()"))
            x, y = json.loads(r["result"]["value"])
            ws.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
            for t in ("mousePressed", "mouseReleased"):
                ws.call("Input.dispatchMouseEvent", type=t, x=x, y=y, button="right", clickCount=1)
                time.sleep(0.2)
            # ctrl+alt+t: the desktop's "open a terminal" (modifiers: Alt 1, Ctrl 2)
            keys = [("Control", "ControlLeft", 17, 2), ("Alt", "AltLeft", 18, 3), ("t", "KeyT", 84, 3)]
            for key, code, vk, mods in keys:
                ws.call("Input.dispatchKeyEvent", type="rawKeyDown", key=key, code=code, windowsVirtualKeyCode=vk,
                        modifiers=mods)
            for key, code, vk, mods in reversed(keys):
                ws.call("Input.dispatchKeyEvent", type="keyUp", key=key, code=code, windowsVirtualKeyCode=vk,
                        modifiers=0)
            result["input_sent"] = True
            time.sleep(1)
        if a.screenshot:
            shot = ws.call("Page.captureScreenshot", format="png")
            with open(a.screenshot, "wb") as f:
                f.write(base64.b64decode(shot["data"]))
        for ev in ws.events:
            if ev.get("method") == "Runtime.consoleAPICalled":
                result["console"].append(" ".join(str(x.get("value", x.get("description", "")))
                                                  for x in ev["params"].get("args", []))[:300])
            elif ev.get("method") == "Runtime.exceptionThrown":
                result["console"].append("exception: " + json.dumps(ev["params"]["exceptionDetails"])[:300])
    except Exception as e:  # reported, not raised: the caller reads the JSON line
        result["error"] = str(e)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    print(json.dumps(result))
    return 0 if result.get("state") == "connected" and result.get("colours", 0) > 8 else 1


if __name__ == "__main__":
    sys.exit(main())

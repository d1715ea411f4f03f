#!/usr/bin/env python3
"""The input events xrecorder.py logged after line FROM, as one compact line a
shell test compares with what an action should have sent:

    press1@125,125 release1@125,125 down:Shift_L key:a up:Shift_L

Buttons are X's (1 left, 2 middle, 3 right, 4/5 wheel up/down, 6/7 left/right);
a press or release with modifiers held says them ("press1@10,20+shift+ctrl").
Key events: down:NAME and up:NAME. Motion is left out (the press and release
coordinates say where the pointer went). --held NAME prints the milliseconds
between NAME's first press and its release instead; --typed the text the key
presses typed (Return as \n).

Usage: input_events.py LOG FROM [--held KEYSYM | --typed]"""
import json
import sys


def events(path, start):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()[start:]
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and e.get("ev") in ("press", "release", "key"):
            yield e


def token(e):
    mods = "".join("+" + m for m in ("shift", "ctrl", "alt") if e.get(m))
    if e["ev"] == "key":
        return "%s:%s" % ("down" if e["down"] else "up", e["keysym"])
    return "%s%d@%d,%d%s" % (e["ev"], e["button"], e["x"], e["y"], mods)


def main():
    path, start = sys.argv[1], int(sys.argv[2])
    if sys.argv[3:4] == ["--held"]:
        name = sys.argv[4]
        down = up = None
        for e in events(path, start):
            if e["ev"] == "key" and e["keysym"] == name:
                if e["down"] and down is None:
                    down = e["time"]
                elif not e["down"] and down is not None:
                    up = e["time"]
        print(up - down if down is not None and up is not None else -1)
        return
    if sys.argv[3:4] == ["--typed"]:
        typed = "".join("\n" if e["keysym"] == "Return" else e.get("text", "")
                        for e in events(path, start) if e["ev"] == "key" and e["down"])
        print(json.dumps(typed))
        return
    print(" ".join(token(e) for e in events(path, start)))


main()

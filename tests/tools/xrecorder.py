#!/usr/bin/python3
"""A real X client window that records the input it receives, for the
toolbelt's pyautogui test: one JSON line per event on stdout.

Usage: xrecorder.py [--override] X Y W H   (a top-level window at X,Y of size
WxH; with no window manager the server puts it exactly there; --override makes
it override-redirect, so a window manager leaves it there and above the rest).
Prints {"ready": ...} once mapped and focused.  Every event has the X server's
"time" (ms) and the modifiers held ("shift", "ctrl", "alt").
Events: press/release (button, x, y: root coordinates),
motion (only the last position before any other event is reported), key
(down: bool, keysym name and the text it types, resolved with the current
keyboard map, refreshed on MappingNotify).  Exits on SIGTERM."""
import json
import sys

from Xlib import X, XK, display

XK.load_keysym_group("xf86")  # XF86_Back, XF86_Forward: what a browser back button sends


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    args = sys.argv[1:]
    override = args[:1] == ["--override"]
    x, y, w, h = (int(v) for v in args[override:override + 4])
    d = display.Display()
    s = d.screen()
    win = s.root.create_window(x, y, w, h, 0, s.root_depth, X.InputOutput, X.CopyFromParent,
                               background_pixel=s.white_pixel, override_redirect=override,
                               event_mask=X.ButtonPressMask | X.ButtonReleaseMask
                               | X.PointerMotionMask | X.KeyPressMask | X.KeyReleaseMask
                               | X.StructureNotifyMask | X.ExposureMask)
    win.set_wm_name("envmgr xrecorder")
    win.set_wm_class("xrecorder", "XRecorder")
    win.map()
    d.sync()
    last_motion = None
    while True:
        e = d.next_event()
        if e.type == X.MapNotify:
            win.set_input_focus(X.RevertToParent, X.CurrentTime)
            d.sync()
            out({"ready": True, "window": win.id})
            continue
        if e.type == X.MappingNotify:
            d.refresh_keyboard_mapping(e)
            continue
        if e.type == X.MotionNotify:
            last_motion = {"ev": "motion", "x": e.root_x, "y": e.root_y}
            continue
        if last_motion:
            out(last_motion)
            last_motion = None
        if e.type not in (X.ButtonPress, X.ButtonRelease, X.KeyPress, X.KeyRelease):
            continue
        held = {"time": e.time, "shift": bool(e.state & X.ShiftMask), "ctrl": bool(e.state & X.ControlMask),
                "alt": bool(e.state & X.Mod1Mask)}
        if e.type in (X.ButtonPress, X.ButtonRelease):
            out(dict(held, ev="press" if e.type == X.ButtonPress else "release", button=e.detail,
                     x=e.root_x, y=e.root_y))
        elif e.type in (X.KeyPress, X.KeyRelease):
            shift = 1 if e.state & X.ShiftMask else 0
            ks = d.keycode_to_keysym(e.detail, shift) or d.keycode_to_keysym(e.detail, 0)
            name = XK.keysym_to_string(ks)
            if name is None or not name.isprintable():
                name = next((n[3:] for n in dir(XK) if n.startswith("XK_") and getattr(XK, n) == ks),
                            "0x%x" % ks)
            text = chr(ks) if 0x20 <= ks <= 0x7e or 0xa0 <= ks <= 0xff else \
                (chr(ks & 0xffffff) if ks & 0xff000000 == 0x01000000 else "")
            out(dict(held, ev="key", down=e.type == X.KeyPress, keysym=name, text=text))


main()

#!/usr/bin/python3
"""Checks of the toolbelt's pyautogui against a real X client (xrecorder.py)
on the X server in $DISPLAY (Xvfb, no window manager).  Prints one line per
check, "ok NAME" or "FAIL NAME: why"; test_toolbelt.sh counts them.

Usage: toolbelt_check.py TOOLBELT_DIR RECORDER_LOG
The recorder must already be running with its window at 100,100 400x300 and
writing its JSON lines to RECORDER_LOG."""
import json
import os
import subprocess
import sys
import time

TOOLBELT, LOG = sys.argv[1], sys.argv[2]
sys.path.insert(0, TOOLBELT)
import pyautogui  # noqa: E402
from checklib import check  # noqa: E402

pyautogui.PAUSE = 0.02
results = []
_pos = [0]


def events(wait=0.4):
    """Recorder events since the previous call (after letting it catch up)."""
    time.sleep(wait)
    with open(LOG, encoding="utf-8") as f:
        lines = f.read().splitlines()
    new = [json.loads(x) for x in lines[_pos[0]:]]
    _pos[0] = len(lines)
    return [e for e in new if "ev" in e]


def buttons(evs):
    return [(e["ev"], e["button"], e["x"], e["y"]) for e in evs if e["ev"] in ("press", "release")]


def typed(evs):
    return "".join(e["text"] for e in evs if e["ev"] == "key" and e["down"]
                   and e["keysym"] not in ("Shift_L", "Shift_R", "Control_L"))


def expect(got, want):
    return got == want, "got %r, want %r" % (got, want)


# ---------------------------------------------------------------- screen
check("size() is the Xvfb screen", lambda: expect(tuple(pyautogui.size()), (1280, 800)))


def t_move():
    pyautogui.moveTo(150, 160)
    return expect(tuple(pyautogui.position()), (150, 160))


check("moveTo/position", t_move)
events()


def t_moverel():
    pyautogui.moveRel(10, -5)
    p1 = tuple(pyautogui.position())
    pyautogui.move(-10, 5)
    return expect((p1, tuple(pyautogui.position())), ((160, 155), (150, 160)))


check("moveRel/move", t_moverel)
events()

# ---------------------------------------------------------------- buttons
check("click(x, y): button 1 at the point", lambda: (pyautogui.click(200, 200), expect(
    buttons(events()), [("press", 1, 200, 200), ("release", 1, 200, 200)]))[-1])
check("click((x, y)) tuple form", lambda: (pyautogui.click((205, 206)), expect(
    buttons(events()), [("press", 1, 205, 206), ("release", 1, 205, 206)]))[-1])
check("doubleClick: two clicks", lambda: (pyautogui.doubleClick(x=210, y=211), expect(
    buttons(events()), [("press", 1, 210, 211), ("release", 1, 210, 211)] * 2))[-1])
check("rightClick: button 3", lambda: (pyautogui.rightClick(220, 221), expect(
    buttons(events()), [("press", 3, 220, 221), ("release", 3, 220, 221)]))[-1])
check("middleClick: button 2", lambda: (pyautogui.middleClick(230, 231), expect(
    buttons(events()), [("press", 2, 230, 231), ("release", 2, 230, 231)]))[-1])
check("click(button='right', clicks=2)", lambda: (pyautogui.click(240, 241, clicks=2, button="right"), expect(
    buttons(events()), [("press", 3, 240, 241), ("release", 3, 240, 241)] * 2))[-1])


def t_downup():
    pyautogui.mouseDown(250, 251)
    pyautogui.mouseUp(260, 261)
    return expect(buttons(events()), [("press", 1, 250, 251), ("release", 1, 260, 261)])


check("mouseDown/mouseUp at two points", t_downup)


def t_scroll():
    pyautogui.moveTo(300, 300)
    events()
    pyautogui.scroll(3)
    pyautogui.scroll(-2)
    pyautogui.vscroll(1)
    pyautogui.hscroll(2)
    pyautogui.hscroll(-1)
    got = [b for ev, b, _, _ in buttons(events()) if ev == "press"]
    return expect(got, [4, 4, 4, 5, 5, 4, 7, 7, 6])


check("scroll/vscroll/hscroll: wheel buttons 4 5 / 7 6", t_scroll)


def t_scroll_at():
    pyautogui.scroll(1, x=310, y=320)
    return expect(buttons(events()), [("press", 4, 310, 320), ("release", 4, 310, 320)])


check("scroll(clicks, x, y) moves first", t_scroll_at)


def t_drag():
    pyautogui.moveTo(150, 150)
    events()
    pyautogui.dragTo(400, 350, duration=0.3)
    evs = events()
    b = buttons(evs)
    moved = [e for e in evs if e["ev"] == "motion"]
    ok = b == [("press", 1, 150, 150), ("release", 1, 400, 350)] and len(moved) >= 1
    return ok, "buttons %r, motions %d" % (b, len(moved))


check("dragTo: press, motion, release at the target", t_drag)


def t_drag_rel():
    pyautogui.moveTo(200, 200)
    events()
    pyautogui.dragRel(50, 20, button="right")
    return expect(buttons(events()), [("press", 3, 200, 200), ("release", 3, 250, 220)])


check("dragRel with the right button", t_drag_rel)

# ---------------------------------------------------------------- keys
pyautogui.click(300, 250)
events()
TEXT = "Hello, World! ~{}|:\"<>?_+ 0123 abc"
check("typewrite: text with shifted characters", lambda: (pyautogui.typewrite(TEXT), expect(
    typed(events(0.6)), TEXT))[-1])
check("write: characters missing from the keymap (é€ñ)", lambda: (pyautogui.write("aé€ñb"), expect(
    typed(events(0.6)), "aé€ñb"))[-1])


def t_keymap_restored():
    from Xlib import XK
    d = pyautogui._d()
    return expect([d.keysym_to_keycodes(XK.string_to_keysym(n)) for n in ("eacute", "EuroSign")], [[], []])


check("keymap restored after write", t_keymap_restored)


def keys(evs):
    return [("down" if e["down"] else "up", e["keysym"], e["ctrl"]) for e in evs if e["ev"] == "key"]


check("typewrite(list of key names)", lambda: (pyautogui.typewrite(["a", "b", "enter", "tab"]), expect(
    [k for k in keys(events()) if k[0] == "down"],
    [("down", "a", False), ("down", "b", False), ("down", "Return", False), ("down", "Tab", False)]))[-1])
check("press('enter') and key names in any case", lambda: (pyautogui.press("Enter"), pyautogui.press("esc"), expect(
    keys(events()), [("down", "Return", False), ("up", "Return", False), ("down", "Escape", False),
                     ("up", "Escape", False)]))[-1])
check("press(list, presses=2)", lambda: (pyautogui.press(["left", "f5"], presses=2), expect(
    [k[1] for k in keys(events()) if k[0] == "down"], ["Left", "F5", "Left", "F5"]))[-1])
check("hotkey('ctrl', 's'): s with ctrl held, released in reverse", lambda: (pyautogui.hotkey("ctrl", "s"), expect(
    keys(events()), [("down", "Control_L", False), ("down", "s", True), ("up", "s", True),
                     ("up", "Control_L", True)]))[-1])


def t_keydown():
    pyautogui.keyDown("shift")
    pyautogui.press("a")
    pyautogui.keyUp("shift")
    return expect(typed(events()), "A")


check("keyDown('shift') + press('a') types A", t_keydown)
check("unknown key names are ignored", lambda: (pyautogui.press("nosuchkey"), expect(keys(events()), []))[-1])

# ---------------------------------------------------------------- settings
def t_failsafe():
    pyautogui.moveTo(0, 0) if not pyautogui.FAILSAFE else None
    pyautogui.FAILSAFE = False
    pyautogui.moveTo(0, 0)
    pyautogui.FAILSAFE = True
    try:
        pyautogui.click(100, 100)
        raised = False
    except pyautogui.FailSafeException:
        raised = True
    pyautogui.FAILSAFE = False
    pyautogui.click(100, 100)
    pyautogui.FAILSAFE = True
    events()
    return raised, "no FailSafeException with the pointer at (0, 0)"


check("FAILSAFE: corner raises FailSafeException, False disables it", t_failsafe)


def t_pause():
    pyautogui.PAUSE = 0.3
    t0 = time.monotonic()
    pyautogui.moveTo(200, 200)
    dt = time.monotonic() - t0
    pyautogui.PAUSE = 0.02
    return 0.3 <= dt < 1.5, "moveTo took %.2f s with PAUSE=0.3" % dt


check("PAUSE sleeps after each call", t_pause)
check("sleep, onScreen, isValidKey", lambda: (pyautogui.sleep(0.01), expect(
    (pyautogui.onScreen(5, 5), pyautogui.onScreen(2000, 5), pyautogui.isValidKey("enter"),
     pyautogui.isValidKey("nosuchkey")), (True, False, True, False)))[-1])


def t_osworld_command():
    # An OSWorld setup command, run the way the guest runs it: a fresh python3
    # that finds the module on its path.
    env = dict(os.environ, PYTHONPATH=TOOLBELT)
    events()
    p = subprocess.run([sys.executable, "-c",
                        "import pyautogui; import time; pyautogui.click(330, 340); "
                        "pyautogui.hotkey('ctrl', 'a'); time.sleep(0.1);"], env=env,
                       capture_output=True, text=True, timeout=30)
    evs = events()
    ok = p.returncode == 0 and buttons(evs) == [("press", 1, 330, 340), ("release", 1, 330, 340)] \
        and ("down", "a", True) in keys(evs)
    return ok, "rc %d %s %r" % (p.returncode, p.stderr[-300:], keys(evs))


check("python3 -c 'import pyautogui; ...' as a setup command", t_osworld_command)

#!/usr/bin/env python3
"""Writes tests/data/pyautogui_corpus/corpus.jsonl: action strings in the shapes OSWorld's agents
answer with (its mm_agents prompt formats: plain pyautogui code blocks, set-of-marks code with the
tag_N=(x, y) lines the agent prepends, Claude computer-use tool calls turned into pyautogui,
UI-TARS' parsed actions, and the plain Python agents write around them: variables, loops,
unpacking), written for envmgr from those formats (not collected from published trajectories),
each with the outcome OSWorld's in-guest `python -c` gives it: "ok", or the exception's class.
Coordinates fit envmgr's 1280x800 screen. Deterministic: run it again to regenerate.

    tests/tools/gen_pyautogui_corpus.py > tests/data/pyautogui_corpus/corpus.jsonl
"""
import json
import random

rng = random.Random(31)
W, H = 1280, 800
HEAD = "import pyautogui\nimport time\n"
TEXTS = ["hello world", "Budget 2024", "envmgr", "=SUM(A1:A10)", "report_final.docx", "~/Documents",
         "Dear team,\nthe meeting moved to 3 pm.", "https://www.example.com", "ls -la", "x = 1 + 2",
         "Quarterly Report", "don't stop", "50%", "name@example.org", "C:\\temp is not here"]
KEYS = ["enter", "tab", "esc", "backspace", "delete", "up", "down", "left", "right", "home", "end",
        "pageup", "pagedown", "f2", "space"]
HOTKEYS = [("ctrl", "c"), ("ctrl", "v"), ("ctrl", "a"), ("ctrl", "s"), ("ctrl", "z"), ("ctrl", "shift", "t"),
           ("alt", "tab"), ("ctrl", "l"), ("shift", "tab"), ("ctrl", "h"), ("ctrl", "f"), ("ctrl", "home")]
out = []


def xy():
    return rng.randrange(20, W - 20), rng.randrange(40, H - 40)


def add(style, code, outcome="ok"):
    out.append({"style": style, "code": code, "osworld": outcome})


# -- plain pyautogui (OSWorld's prompt agents: a ```python block, often with imports and sleeps) -----
for i in range(60):
    x, y = xy()
    t = rng.choice(TEXTS)
    k = rng.choice(KEYS)
    hk = rng.choice(HOTKEYS)
    kind = i % 10
    if kind == 0:
        add("plain", "pyautogui.click(%d, %d)" % (x, y))
    elif kind == 1:
        add("plain", HEAD + "pyautogui.click(%d, %d)\ntime.sleep(0.5)\npyautogui.typewrite(%r)" % (x, y, t))
    elif kind == 2:
        add("plain", "pyautogui.hotkey(%s)" % ", ".join(repr(s) for s in hk))
    elif kind == 3:
        add("plain", "import pyautogui\npyautogui.press(%r)" % k)
    elif kind == 4:
        add("plain", "pyautogui.doubleClick(%d, %d)\npyautogui.hotkey('ctrl', 'a')\npyautogui.write(%r, interval=0.01)"
            % (x, y, t))
    elif kind == 5:
        add("plain", "pyautogui.scroll(%d)" % rng.choice([-10, -5, -3, 3, 5, 10]))
    elif kind == 6:
        add("plain", HEAD + "# open the context menu\npyautogui.rightClick(%d, %d)\ntime.sleep(1)" % (x, y))
    elif kind == 7:
        add("plain", "pyautogui.moveTo(%d, %d, duration=0.5)\npyautogui.dragTo(%d, %d, duration=0.5)" % (x, y, *xy()))
    elif kind == 8:
        add("plain", "pyautogui.typewrite(%r)\npyautogui.press('enter')" % t)
    else:
        add("plain", "pyautogui.press(['down', 'down', 'enter'])\ntime.sleep(%s)" % rng.choice(["0.5", "1", "2"]))

# -- set-of-marks: the agent prepends tag_N=(x, y) for every box it drew, the model names a tag ---------
for i in range(50):
    n = rng.randrange(3, 25)
    tags = "".join("tag_%d=(%d, %d)\n" % ((j + 1,) + xy()) for j in range(n))
    a, b = rng.randrange(1, n + 1), rng.randrange(1, n + 1)
    t = rng.choice(TEXTS)
    kind = i % 10
    if kind == 0:
        body = "pyautogui.click(tag_%d)" % a
    elif kind == 1:
        body = HEAD + "pyautogui.click(tag_%d)\ntime.sleep(0.5)\npyautogui.typewrite(%r)" % (a, t)
    elif kind == 2:
        body = "pyautogui.doubleClick(tag_%d)" % a
    elif kind == 3:
        body = "pyautogui.moveTo(tag_%d)\npyautogui.dragTo(tag_%d, duration=0.5)" % (a, b)
    elif kind == 4:
        body = "pyautogui.rightClick(tag_%d)" % a
    elif kind == 5:
        body = "x, y = tag_%d\npyautogui.click(x, y)\npyautogui.hotkey('ctrl', 'a')" % a
    elif kind == 6:
        body = "pyautogui.click(*tag_%d)\npyautogui.press('enter')" % a
    elif kind == 7:
        body = "pyautogui.click(tag_%d[0] + 10, tag_%d[1])" % (a, a)
    elif kind == 8:  # the model names a box that was not drawn: OSWorld's python raises NameError
        body = "pyautogui.click(tag_%d)" % (n + rng.randrange(1, 9))
        add("som", tags + body, "NameError")
        continue
    else:
        body = "pyautogui.tripleClick(tag_%d)\npyautogui.write(%r)" % (a, t)
    add("som", tags + body)

# -- Claude computer use: tool calls turned into pyautogui (keyDown/keyUp chords, moves with duration) --
for i in range(40):
    x, y = xy()
    t = rng.choice(TEXTS)
    kind = i % 8
    if kind == 0:
        add("claude", "pyautogui.moveTo(%d, %d, duration=0.5)\npyautogui.click()\npyautogui.sleep(0.5)\n" % (x, y))
    elif kind == 1:
        add("claude", "pyautogui.keyDown('ctrl')\npyautogui.keyDown('s')\npyautogui.keyUp('s')\npyautogui.keyUp('ctrl')\n")
    elif kind == 2:
        chars = "".join("pyautogui.press(%r)\n" % c if c != "\n" else "pyautogui.press('enter')\n" for c in t[:12])
        add("claude", chars + "pyautogui.sleep(0.1)\n")
    elif kind == 3:
        add("claude", "pyautogui.moveTo(%d, %d)\npyautogui.scroll(%d)\n" % (x, y, rng.choice([-5, 5, -3, 3])))
    elif kind == 4:
        add("claude", "pyautogui.scroll(%d, %d, %d)\n" % (rng.choice([-5, 5]), x, y))
    elif kind == 5:
        add("claude", "pyautogui.moveTo(%d, %d, duration=0.5)\npyautogui.dragTo(%d, %d, duration=0.5)\n" % (x, y, *xy()))
    elif kind == 6:
        add("claude", "pyautogui.keyDown('shift')\npyautogui.click(%d, %d)\npyautogui.keyUp('shift')\n" % (x, y))
    else:
        add("claude", "pyautogui.hscroll(%d, %d, %d)\npyautogui.mouseDown(%d, %d)\npyautogui.mouseUp(%d, %d)\n"
            % (rng.choice([-3, 3]), x, y, x, y, x, y))

# -- UI-TARS: parsed actions, a blank line after the imports, write with interval, hotkeys ------------
for i in range(40):
    x, y = xy()
    t = rng.choice(TEXTS).replace("\n", " ")
    kind = i % 8
    pre = "import pyautogui\nimport time\n\n"
    if kind == 0:
        add("uitars", pre + "pyautogui.click(%d, %d, button='left')" % (x, y))
    elif kind == 1:
        add("uitars", pre + "pyautogui.doubleClick(%d, %d, button='left')" % (x, y))
    elif kind == 2:
        add("uitars", pre + "pyautogui.click(%d, %d, button='right')" % (x, y))
    elif kind == 3:
        add("uitars", pre + "pyautogui.write('%s', interval=0.1)\npyautogui.press('enter')" % t.replace("'", ""))
    elif kind == 4:
        add("uitars", pre + "\npyautogui.moveTo(%d, %d)\n\npyautogui.dragTo(%d, %d, duration=1.0)\n" % (x, y, *xy()))
    elif kind == 5:
        add("uitars", pre + "pyautogui.scroll(-5, x=%d, y=%d)" % (x, y))
    elif kind == 6:
        add("uitars", pre + "pyautogui.hotkey('ctrl', 'v')")
    else:
        add("uitars", pre + "time.sleep(1)\npyautogui.moveTo(%d, %d)" % (x, y))

# -- plain Python around pyautogui: variables, loops, unpacking, helpers, what models write ----------
py = [
    "for _ in range(3):\n    pyautogui.press('down')\npyautogui.press('enter')",
    "for i in range(5):\n    pyautogui.press('tab')\n    time.sleep(0.1)",
    "cells = [(200, 300), (200, 330), (200, 360)]\nfor x, y in cells:\n    pyautogui.click(x, y)",
    "pyautogui.click(*(640, 400))",
    "pos = (512, 384)\npyautogui.moveTo(*pos)\npyautogui.click()",
    "x, y = pyautogui.position()\npyautogui.click(x, y)",
    "w, h = pyautogui.size()\npyautogui.click(w // 2, h // 2)",
    "text = 'Total: ' + str(3 * 7)\npyautogui.typewrite(text)",
    "name = 'report'\npyautogui.write(f'{name}_final.txt')\npyautogui.press('enter')",
    "def select_all():\n    pyautogui.hotkey('ctrl', 'a')\nselect_all()\npyautogui.press('delete')",
    "keys = ['ctrl', 'shift', 'n']\npyautogui.hotkey(*keys)",
    "import time\nstart = time.time()\npyautogui.click(100, 100)\nelapsed = time.time() - start",
    "coords = {'ok': (700, 500), 'cancel': (600, 500)}\npyautogui.click(*coords['ok'])",
    "if pyautogui.onScreen(1000, 700):\n    pyautogui.click(1000, 700)",
    "pyautogui.PAUSE = 0.2\npyautogui.press('esc')",
    "pyautogui.FAILSAFE = False\npyautogui.moveTo(0, 0)\npyautogui.click()",
    "for row in range(1, 4):\n    pyautogui.click(150, 200 + 20 * row)\n    pyautogui.typewrite(str(row))\n    pyautogui.press('enter')",
    "i = 0\nwhile i < 3:\n    pyautogui.press('right')\n    i += 1",
    "pyautogui.typewrite(['a', 'b', 'c', 'enter'])",
    "lines = ['first', 'second']\npyautogui.write('\\n'.join(lines))",
    "pyautogui.moveRel(10, 0)\npyautogui.click()",
    "pyautogui.dragRel(100, 0, duration=0.3)",
    "pyautogui.hotkey('ctrl', 'c'); time.sleep(0.2); pyautogui.hotkey('ctrl', 'v')",
    "x = 300\ny = 200\npyautogui.click(x=x, y=y, clicks=2, interval=0.1)",
    "try:\n    pyautogui.click(400, 300)\nexcept Exception as e:\n    print(e)",
    "import pyautogui as pag\npag.click(640, 400)",
    "from pyautogui import press\npress('f5')",
    "pyautogui.press('down', presses=4, interval=0.05)",
    "pyautogui.keyDown('alt'); pyautogui.press('f'); pyautogui.keyUp('alt')",
    "pyautogui.click(button='middle')",
]
for code in py:
    add("python", code)

# -- what OSWorld's python refuses: the agent's error, recorded, the episode goes on ------------------
errs = [
    ("pyautogui.click(100, 200", "SyntaxError"),
    ("```python\npyautogui.click(100, 200)\n```", "SyntaxError"),
    ("I will click the OK button.\npyautogui.click(700, 500)", "SyntaxError"),
    ("pyautogui.typewrite('unterminated)", "SyntaxError"),
    ("for i in range(3)\n    pyautogui.press('tab')", "SyntaxError"),
    ("pyautogui.click(100, 200)\n  pyautogui.press('enter')", "IndentationError"),
    ("pyautogui.click(tag_1)", "NameError"),
    ("pyautogui.click(x, y)", "NameError"),
    ("pyautogui.clik(100, 200)", "AttributeError"),
    ("pyautogui.hotkey('ctrl', 'c') pyautogui.hotkey('ctrl', 'v')", "SyntaxError"),
    ("{\"action_type\": \"CLICK\", \"x\": 10, \"y\": 10}", "ok"),  # a dict display is valid Python: runs, does nothing
    ("# nothing to do yet\n", "ok"),
    ("time.sleep(0.5)", "ok"),
]
for code, outcome in errs:
    add("errors", code, outcome)

for o in out:
    print(json.dumps(o))

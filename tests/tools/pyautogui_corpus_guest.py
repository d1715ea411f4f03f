"""Runs in the guest (as the desktop user, DISPLAY=:0): each corpus line's code the way envmgr's
env_act runs agent code (compiled as `<action>`, pyautogui and time in its globals, FAILSAFE off),
with the toolbelt's pyautogui over XTEST, and prints its outcome as a JSON string per line: "ok",
or the exception's class name. Sleeps are skipped (the outcome, not the timing, is checked)."""
import json
import sys
import time

import pyautogui

time.sleep = lambda s: None
for line in sys.stdin:
    code = json.loads(line)["code"]
    pyautogui.PAUSE = 0
    pyautogui.FAILSAFE = False
    try:
        exec(compile(code, "<action>", "exec"), {"__name__": "__main__", "pyautogui": pyautogui, "time": time})
        outcome = "ok"
    except BaseException as e:  # noqa: B036 - SystemExit too: any end of the agent's code is an outcome
        outcome = type(e).__name__
    print(json.dumps(outcome), flush=True)

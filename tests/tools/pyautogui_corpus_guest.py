"""Runs in the guest (as the desktop user, DISPLAY=:0): each corpus line's code the way envmgr's
env_act runs agent code (the toolbelt's envmgr_guest.agent_code: its run_code, after its
detach_stdio), and prints its outcome as a JSON string per line: "ok", or the exception's class
name. Sleeps are skipped (the outcome, not the timing, is checked)."""
import json
import sys
import time

import pyautogui
from envmgr_guest.agent_code import detach_stdio, run_code

lines = sys.stdin.read().splitlines()
detach_stdio()
time.sleep = lambda s: None
for line in lines:
    pyautogui.PAUSE = 0
    try:
        run_code(json.loads(line)["code"])
        outcome = "ok"
    except BaseException as e:  # noqa: B036 - SystemExit too: any end of the agent's code is an outcome
        outcome = type(e).__name__
    print(json.dumps(outcome), flush=True)

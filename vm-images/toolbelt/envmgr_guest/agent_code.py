"""An agent's pyautogui code, run as OSWorld's in-guest server runs it (envmgr's PYAUTOGUI action):

    python3 -m envmgr_guest.agent_code CODE

as the desktop user, with pyautogui (the toolbelt's, over XTEST) and time in its globals and
FAILSAFE off. An exception ends it with status 1 and the traceback on stderr, whose last line the
host reports as the agent's error.

The code's own output goes to this process's stdout and stderr, but what it starts does not
inherit them: a program that stays behind (xclip, which pyperclip runs to own the clipboard;
a `subprocess.Popen` of an app) would hold the guest agent's pipes open, and the host would wait
for their end until the step's timeout.
"""
import os
import sys
import time

import pyautogui


def detach_stdio():
    """Keep stdout and stderr for Python's own writes (on descriptors children do not inherit);
    give descriptors 0-2, which children inherit, /dev/null."""
    out, err = os.dup(1), os.dup(2)  # os.dup's descriptors are not inheritable
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    sys.stdout = open(out, "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stderr = open(err, "w", buffering=1, encoding="utf-8", errors="replace")
    sys.stdin = open(os.devnull, encoding="utf-8")


def run_code(code):
    """Run one piece of agent code; its exceptions are the caller's."""
    pyautogui.FAILSAFE = False
    exec(compile(code, "<action>", "exec"), {"__name__": "__main__", "pyautogui": pyautogui, "time": time})


def main(argv):
    if len(argv) != 2:
        print("usage: python3 -m envmgr_guest.agent_code CODE", file=sys.stderr)
        return 2
    detach_stdio()
    run_code(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

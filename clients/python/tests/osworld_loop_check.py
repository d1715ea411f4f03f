"""OSWorld's run loop (the call sequence of its lib_run_single.run_single_example: reset, agent.reset
with env.vm_ip, _get_obs, controller.start_recording, agent.predict and env.step(action, pause),
evaluate, controller.end_recording) driven through the INSTALLED envmgr_client against a real
`envmgr serve`, with a scripted agent that answers pyautogui code. Written for envmgr, not copied.

    osworld_loop_check.py URL TOKEN TASK_JSON RESULT_DIR IMAGE

IMAGE "desktop": the demo task tasks/demo/terminal-mkdir-tree.json, solved by a set-of-marks answer.
IMAGE "apps": OSWorld-Verified's os task e0df059f, unchanged, solved by plain Python and a clipboard
answer (pyperclip, as OSWorld's UI-TARS agent types text); then a tree-only agent on the same image.

Prints "ok   NAME" / "FAIL NAME: why" lines (tests/integration/test_osworld_client.sh tallies them).
"""
import json
import logging
import os
import sys
import time

import envmgr_client
from envmgr_client import EnvmgrEnv

URL, TOKEN, TASK, OUT, IMAGE = sys.argv[1:6]
PNG = b"\x89PNG\r\n\x1a\n"


def check(name, cond, why=""):
    print(("ok   %s" % name) if cond else ("FAIL %s: %s" % (name, why or "false")), flush=True)


def som_turns():
    """The demo task: a set-of-marks answer (the tag_N=(x, y) lines the agent prepends for its boxes,
    code that names a tag, a variable and a loop: outside the translated subset, it runs in the guest)."""
    tags = "".join("tag_%d=(%d, %d)\n" % (i + 1, 100 + 40 * i, 120 + 25 * i) for i in range(12))
    return [
        ("The terminal is focused (tag 3 is its window); I type the command.", [
            tags + "import pyautogui\nimport time\npyautogui.moveTo(*tag_3)\n"
            "command = 'mkdir -p ~/projects/envmgr/src'\nfor word in command.split(' ')[:-1]:\n"
            "    pyautogui.typewrite(word + ' ', interval=0.01)\npyautogui.typewrite(command.split(' ')[-1])",
            "pyautogui.press('enter')\ntime.sleep(0.5)",
        ]),
        ("The command ran; I wait for the shell.", ["WAIT"]),
        ("The directory exists.", ["DONE"]),
    ]


def rename_turns():
    """OSWorld's e0df059f: plain Python that renames the directory (OSWorld's guest runs any code an
    agent writes), then text through the clipboard as UI-TARS types it, at OSWorld's 1920x1080."""
    return [
        ("I rename the directory on the desktop.", [
            "import os\nd = os.path.expanduser('~/Desktop')\n"
            "os.rename(os.path.join(d, 'todo_list_Jan_1'), os.path.join(d, 'todo_list_Jan_2'))",
        ]),
        ("I note the new name on the clipboard.", [
            "import pyperclip\npyperclip.copy('todo_list_Jan_2')\npyautogui.click(1500.48, 700.2, button='left')",
            "WAIT",
        ]),
        ("The directory is renamed.", ["DONE"]),
    ]


class ScriptedAgent:
    """An agent with OSWorld's interface: reset(logger, vm_ip=...), predict(instruction, obs) ->
    (response, actions), actions being pyautogui code strings or WAIT/DONE/FAIL."""

    def __init__(self, turns):
        self.turns = turns
        self.turn = 0
        self.vm_ip = None
        self.seen = []

    def reset(self, runtime_logger=None, vm_ip=None):
        self.turn, self.vm_ip = 0, vm_ip

    def predict(self, instruction, obs):
        self.seen.append(obs)
        self.turn += 1
        return self.turns[min(self.turn, len(self.turns)) - 1]


check("the client is the installed one, not the checkout's",
      "site-packages" in envmgr_client.__file__, envmgr_client.__file__)

example = json.load(open(TASK, encoding="utf-8"))
os.makedirs(OUT, exist_ok=True)
# DesktopEnv's provider arguments are accepted (and ignored), an unknown one is refused
try:
    EnvmgrEnv(URL, TOKEN, action_space="pyautogui", no_such_argument=1)
    check("an unknown constructor argument is refused", False, "no TypeError")
except TypeError:
    check("an unknown constructor argument is refused", True)

env = EnvmgrEnv(URL, TOKEN, image=IMAGE, action_space="pyautogui", provider_name="docker", path_to_vm=None,
                headless=True, os_type="Ubuntu", screen_size=(1920, 1080), client_password="password")
turns = som_turns() if IMAGE == "desktop" else rename_turns()
agent = ScriptedAgent(turns)
steps = sum(len(actions) for _, actions in turns)
logger = logging.getLogger("osworld-loop")
try:
    env.reset(task_config=example)
    try:
        agent.reset(logger, vm_ip=env.vm_ip)
    except Exception:
        agent.reset(vm_ip=env.vm_ip)
    check("env.vm_ip is the server's host", agent.vm_ip == "127.0.0.1", repr(agent.vm_ip))
    time.sleep(1)  # OSWorld sleeps 60 s here; the episode's timeout counts from reset
    obs = env._get_obs()
    check("_get_obs: a PNG screenshot and the instruction",
          obs["screenshot"].startswith(PNG) and obs["instruction"] == example["instruction"])
    check("_get_obs: DesktopEnv's keys", {"screenshot", "accessibility_tree", "terminal", "instruction"} <= set(obs))
    env.controller.start_recording()
    done, step_idx, last_info = False, 0, {}
    while not done and step_idx < 15:
        response, actions = agent.predict(example["instruction"], obs)
        for action in actions:
            stamp = time.strftime("%Y%m%d@%H%M%S")
            obs, reward, done, info = env.step(action, 0.5)
            with open(os.path.join(OUT, "step_%d_%s.png" % (step_idx + 1, stamp)), "wb") as f:
                f.write(obs["screenshot"])
            with open(os.path.join(OUT, "traj.jsonl"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"step_num": step_idx + 1, "action_timestamp": stamp, "action": action,
                                    "response": response, "reward": reward, "done": done, "info": info,
                                    "screenshot_file": "step_%d_%s.png" % (step_idx + 1, stamp)}) + "\n")
            step_idx += 1
            last_info = info
            if done:
                break
    check("the episode ended on DONE after %d steps" % steps, done and step_idx == steps,
          "done=%s steps=%d" % (done, step_idx))
    check("info has OSWorld's done key beside envmgr's", last_info.get("done") is True and
          last_info.get("exit_cause") == "done" and "fail" not in last_info, repr(last_info))
    time.sleep(1)  # OSWorld sleeps 20 s before evaluating
    result = env.evaluate()
    with open(os.path.join(OUT, "result.txt"), "w", encoding="utf-8") as f:
        f.write("%s\n" % result)
    check("evaluate scores the solved task 1.0", result == 1.0, "%r (%s)" % (result, env.last_evaluation))
    env.trace(os.path.join(OUT, "trace.tar"))
    mp4 = env.controller.end_recording(os.path.join(OUT, "recording.mp4"))
    check("end_recording wrote an mp4", os.path.getsize(mp4) > 1000 and open(mp4, "rb").read(12)[4:8] == b"ftyp")
finally:
    env.close()

if IMAGE != "apps":
    sys.exit(0)
# A tree-only agent (OSWorld's a11y_tree observation) on the apps image still gets the screenshot,
# as OSWorld's env always hands it over; FAIL puts OSWorld's "fail" key in info.
env = EnvmgrEnv(URL, TOKEN, image="apps", action_space="pyautogui", observation_type="a11y_tree")
try:
    obs = env.reset()
    check("a11y_tree observation: the screenshot is there too",
          (obs["screenshot"] or b"").startswith(PNG) and "<" in (obs["accessibility_tree"] or ""))
    obs = env._get_obs()
    check("a11y_tree _get_obs: screenshot and tree", obs["screenshot"].startswith(PNG) and obs["accessibility_tree"])
    obs, reward, done, info = env.step("FAIL", 0)
    check("FAIL: done, with OSWorld's fail key in info", done and info.get("fail") is True and "done" not in info,
          repr(info))
finally:
    env.close()

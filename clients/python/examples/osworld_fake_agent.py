"""Agents with OSWorld's interface and a fake model: deterministic, no network, for trying the
adapter (envmgr_osworld_agent) on envmgr's demo tasks before plugging in a real model.

    envmgr suite run tasks/demo --agent "python3 -m envmgr_osworld_agent --path clients/python/examples \\
        --agent osworld_fake_agent:FakeModelAgent" --envs 2 --out runs/fake

FakeModelAgent is shaped like OSWorld's PromptAgent: it builds the chat messages a model would get
(the instruction, the screenshot as base64, the last turns), "calls the model" and parses the answer
as OSWorld does (```python blocks, or WAIT / DONE / FAIL). The model is a table of canned answers
keyed by the instruction; a task it does not know gets FAIL.

FakeSomAgent answers as OSWorld's set-of-marks agents do where its table knows the task (else as
FakeModelAgent): the code is prefixed with one
`tag_N=(x, y)` line per mark (the centre of each box it "drew") and names the tags,
`pyautogui.click(tag_2)`; envmgr runs such code in the guest, as OSWorld does. Its marks are fixed
boxes of the demo desktop (a real set-of-marks agent takes them from the accessibility tree).
"""
import base64
import re

# canned "model" answers: instruction keyword -> the answers of successive turns
PLAIN = {
    "~/projects/envmgr/src": [
        "The terminal has the focus. I create the tree with one command.\n"
        "```python\nimport pyautogui\npyautogui.typewrite('mkdir -p ~/projects/envmgr/src\\n', interval=0.02)\n```",
        "The shell has run the command.\n```python\nDONE\n```",
    ],
}

# (x, y, w, h) boxes of the demo desktop a set-of-marks agent would draw, per turn
DESKTOP = (600, 300, 200, 200)  # an empty stretch of the desktop, centre (700, 400)
CREATE_FOLDER_ITEM = (706, 456, 140, 20)  # "Create Folder..." in the desktop's right-click menu at (700, 400)
SOM = {
    "named Projects on the desktop": [
        ([DESKTOP], "Tag 1 is the empty desktop; its right-click menu creates folders.\n"
                    "```python\npyautogui.rightClick(tag_1)\ntime.sleep(2)\n```"),
        ([DESKTOP, CREATE_FOLDER_ITEM], "Tag 2 is 'Create Folder...'.\n```python\npyautogui.click(tag_2)\n"
                                        "time.sleep(5)\n```"),
        ([DESKTOP], "The name dialog is open; I replace the name.\n```python\npyautogui.press('end')\n"
                    "pyautogui.hotkey('shift', 'home')\nname = 'Projects'\npyautogui.typewrite(name + '\\n')\n"
                    "time.sleep(2)\n```"),
        ([DESKTOP], "The folder is on the desktop.\n```python\nDONE\n```"),
    ],
}


def parse_actions(response):
    """OSWorld's parse_code_from_string, in short: each ```python block is an action; a block that
    is only WAIT, DONE or FAIL is that command."""
    blocks = re.findall(r"```(?:\w+\s+)?(.*?)```", response, re.DOTALL) or [response]
    actions = []
    for block in blocks:
        block = block.strip()
        if not block:
            continue
        last = block.split("\n")[-1].strip()
        if last in ("WAIT", "DONE", "FAIL"):
            if block != last:
                actions.append(block[: -len(last)].strip())
            actions.append(last)
        else:
            actions.append(block)
    return actions


class FakeModelAgent:
    def __init__(self, model="fake", max_tokens=1500, action_space="pyautogui", observation_type="screenshot",
                 max_trajectory_length=3):
        self.model, self.action_space, self.observation_type = model, action_space, observation_type
        self.max_trajectory_length = max_trajectory_length
        self.reset()

    def reset(self, _logger=None, vm_ip=None, **kwargs):
        self.vm_ip = vm_ip
        self.thoughts, self.actions, self.observations = [], [], []

    def messages(self, instruction, obs):
        """What a real model would be sent: the system prompt, the last turns, this screenshot."""
        msgs = [{"role": "system", "content": "You are an agent which follow my instruction and perform desktop "
                                             "computer tasks as instructed. " + instruction}]
        for thought in self.thoughts[-self.max_trajectory_length:]:
            msgs.append({"role": "assistant", "content": thought})
        shot = base64.b64encode(obs["screenshot"]).decode("ascii") if obs.get("screenshot") else ""
        msgs.append({"role": "user", "content": [{"type": "image_url",
                                                  "image_url": {"url": "data:image/png;base64," + shot}}]})
        return msgs

    def call_llm(self, messages, table):
        system = messages[0]["content"]
        turn = len(self.thoughts)
        for key, answers in table.items():
            if key in system:
                return answers[min(turn, len(answers) - 1)]
        return "I cannot do this task here.\n```python\nFAIL\n```"

    def predict(self, instruction, obs):
        if not (obs.get("screenshot") or b"").startswith(b"\x89PNG"):
            raise ValueError("the observation has no PNG screenshot")
        response = self.call_llm(self.messages(instruction, obs), PLAIN)
        actions = parse_actions(response)
        self.thoughts.append(response)
        self.actions.append(actions)
        self.observations.append({"screenshot": len(obs["screenshot"])})
        return response, actions


class FakeSomAgent(FakeModelAgent):
    """Set-of-marks answers where its table knows the task; FakeModelAgent's otherwise."""

    def predict(self, instruction, obs):
        turns = next((t for key, t in SOM.items() if key in instruction), None)
        if turns is None:
            return FakeModelAgent.predict(self, instruction, obs)
        if not (obs.get("screenshot") or b"").startswith(b"\x89PNG"):
            raise ValueError("the observation has no PNG screenshot")
        marks, response = turns[min(len(self.thoughts), len(turns) - 1)]
        # OSWorld's set-of-marks agents prefix every code action with the marks' centres
        tags = "".join("tag_%d=(%d, %d)\n" % (i + 1, x + w // 2, y + h // 2) for i, (x, y, w, h) in enumerate(marks))
        actions = [a if a in ("WAIT", "DONE", "FAIL") else tags + a for a in parse_actions(response)]
        self.thoughts.append(response)
        self.actions.append(actions)
        return response, actions

"""envmgr_osworld_agent: run an agent written against OSWorld's interface as an envmgr stdio agent,
so `envmgr run` and `envmgr suite run` drive it (a pool of envs, resume, JUnit, video, compare):

    envmgr suite run tasks/demo --agent "python3 -m envmgr_osworld_agent --agent mypkg.agents:MyAgent \\
        --kwargs '{\"model\": \"gpt-4o\"}'" --envs 4 --out runs/mine

The agent is OSWorld's shape: `Class(**kwargs)`, `agent.reset(logger, vm_ip=...)` once per episode
(before the first observation), `agent.predict(instruction, obs) -> (response, actions)`. obs is
DesktopEnv's: "screenshot" (PNG bytes), "accessibility_tree" (OSWorld's XML with envmgr's
--observation a11y_tree / screenshot_a11y_tree, else None), "terminal" (None), "instruction".
Each action (a pyautogui code string, "WAIT", "DONE", "FAIL", or a computer_13 dict) becomes one
reply, as OSWorld's run loop makes each one env.step; the observation after it is the next one envmgr
sends, and the agent predicts again on the observation after its last action. The model's response
goes with each reply (`"response"`, recorded in the trace; `envmgr suite export --osworld` writes it
into traj.jsonl). A step envmgr refused comes back as obs["error"] (OSWorld has no such key).

Python 3 standard library only. docs/osworld.md, "Bring your OSWorld agent".
"""
import argparse
import importlib
import json
import logging
import os
import sys

MAX_EMPTY = 5  # predictions in a row without an action before the adapter gives up with FAIL


def load_class(spec):
    mod, sep, name = spec.partition(":")
    if not sep or not mod or not name:
        raise ValueError("expected module:Class, got %r" % spec)
    obj = importlib.import_module(mod)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def to_reply(action, response):
    """One OSWorld action as one stdio reply (docs/agent-protocol.md)."""
    if isinstance(action, dict):
        reply = dict(action)
    elif isinstance(action, str) and action.strip() in ("WAIT", "DONE", "FAIL"):
        reply = {"action_type": action.strip()}
    elif isinstance(action, str):
        reply = {"pyautogui": action}
    else:
        raise TypeError("the agent's action is a %s, not a string or a dict" % type(action).__name__)
    if response is not None:
        reply["response"] = response if isinstance(response, str) else json.dumps(response, default=str)
    return reply


def read_obs(line):
    o = json.loads(line)
    shot, tree = o.get("screenshot"), o.get("accessibility_tree")
    obs = {"screenshot": None, "accessibility_tree": None, "terminal": None, "instruction": o.get("instruction")}
    if shot:
        with open(shot, "rb") as f:
            obs["screenshot"] = f.read()
    if tree:
        with open(tree, encoding="utf-8") as f:
            obs["accessibility_tree"] = f.read()
    if o.get("error"):
        obs["error"] = o["error"]
    return obs


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m envmgr_osworld_agent",
                                 description="an OSWorld agent (reset/predict) as an envmgr stdio agent")
    ap.add_argument("--agent", required=True, help="the agent class, module:Class (importable)")
    ap.add_argument("--kwargs", default="{}", help="JSON object of the class's constructor arguments")
    ap.add_argument("--path", action="append", default=[], help="a folder to put on sys.path first (repeatable)")
    ap.add_argument("--vm-ip", default="localhost",
                    help="what agent.reset gets as vm_ip (default localhost; the guest is not reachable from here)")
    args = ap.parse_args(argv)
    try:
        kwargs = json.loads(args.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("not an object")
    except ValueError as e:
        ap.error("--kwargs: expected a JSON object (%s)" % e)
    for p in reversed(args.path):
        sys.path.insert(0, os.path.abspath(p))
    try:
        cls = load_class(args.agent)
    except (ImportError, AttributeError, ValueError) as e:
        ap.error("--agent: %s" % e)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logger = logging.getLogger("envmgr_osworld_agent")
    agent = cls(**kwargs)
    instruction = os.environ.get("ENVMGR_INSTRUCTION")
    pending, response, started, empty = [], None, False, 0
    for line in sys.stdin:
        if not line.strip():
            continue
        obs = read_obs(line)
        instruction = obs["instruction"] or instruction
        if not started:  # as OSWorld's loop: reset once, before the first prediction
            try:
                agent.reset(logger, vm_ip=args.vm_ip)
            except Exception:  # an agent whose reset takes no logger (OSWorld's loop does the same)
                agent.reset(vm_ip=args.vm_ip)
            started = True
        while not pending:
            response, actions = agent.predict(instruction, obs)
            pending = list(actions or [])
            logger.info("response: %s", json.dumps(response, default=str)[:2000])
            if pending:
                empty = 0
                break
            empty += 1
            if empty >= MAX_EMPTY:
                logger.info("%d predictions without an action: FAIL", empty)
                pending = ["FAIL"]
        reply = to_reply(pending.pop(0), response)
        sys.stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, KeyboardInterrupt):
        sys.exit(0)

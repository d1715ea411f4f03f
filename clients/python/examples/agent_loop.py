#!/usr/bin/env python3
"""An OSWorld-style agent loop against envmgr serve.

The loop is OSWorld's lib_run_single.run_single_example shape; the only line
that differs from an OSWorld run is the one that makes the env. The "agent"
here is a scripted one that replays a task's reference solution (or a few
harmless moves), standing in for a model.

usage: agent_loop.py URL TASK.json [--token-file F] [--max-steps N]
  e.g. envmgr serve --listen 127.0.0.1:7480 --task-root tasks &
       clients/python/examples/agent_loop.py http://127.0.0.1:7480 tasks/demo/terminal-mkdir-tree.json \
           --token-file RUN_ROOT/.serve-PID.token
"""
import argparse
import json
import os
import sys

try:
    from envmgr_client import EnvmgrEnv  # installed: pip install ./clients/python
except ImportError:  # run from a checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from envmgr_client import EnvmgrEnv


class ScriptedAgent:
    """predict(instruction, obs) -> (response, actions), like OSWorld's PromptAgent."""

    def __init__(self, task):
        self.plan = list(task.get("solution") or [{"action_type": "MOVE_TO", "x": 640, "y": 400}])
        self.plan.append({"action_type": "DONE"})

    def reset(self):
        pass

    def predict(self, instruction, obs):
        assert obs["screenshot"][:8] == b"\x89PNG\r\n\x1a\n", "observations carry PNG bytes"
        return "scripted", [self.plan.pop(0)] if self.plan else [{"action_type": "DONE"}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("task")
    ap.add_argument("--token-file")
    ap.add_argument("--max-steps", type=int, default=15)
    a = ap.parse_args()
    token = open(a.token_file).read().strip() if a.token_file else None
    with open(a.task, encoding="utf-8") as f:
        example = json.load(f)
    agent = ScriptedAgent(example)

    env = EnvmgrEnv(a.url, token, action_space="computer_13")  # was: DesktopEnv(...)
    try:
        agent.reset()
        obs = env.reset(task_config=example)
        done = False
        step_idx = 0
        while not done and step_idx < a.max_steps:
            response, actions = agent.predict(example["instruction"], obs)
            for action in actions:
                obs, reward, done, info = env.step(action, 0)
                print("step %d: %s -> done=%s %s" % (step_idx + 1, json.dumps(action)[:60], done,
                                                     info.get("exit_cause") or ""))
                if done:
                    break
            step_idx += 1
        result = env.evaluate()
        print("result: %.2f (%s)" % (result, env.last_evaluation.get("reason", "")))
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

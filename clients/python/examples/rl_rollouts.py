#!/usr/bin/env python3
"""Group rollouts from one saved state with the RL interface (docs/rl.md).

    python3 rl_rollouts.py URL TOKEN_FILE TASK_JSON [N]

The task is tasks/demo/terminal-mkdir-tree.json (make ~/projects/envmgr/src in the open terminal). One
env runs the task's setup and one step (half the command typed) and saves that moment as a state; then
N envs start from that state and roll out together, one episode each, stepped at once. The "policy" is
scripted, standing in for a model: even envs finish the command right (reward 1.0), odd ones type a wrong
directory (reward 0.0). The rewards are the task's evaluate() scores, given on each episode's last step.
Prints {"state": ..., "rewards": [...], "steps": [...], "left": [...]} ("left": envs still on the server
after close(): none).
"""
import json
import os
import sys
import time

try:
    from envmgr_rl import EnvmgrRLEnv, EnvmgrVectorEnv  # installed: pip install ./clients/python
    from envmgr_client import Client
except ImportError:  # run from a checkout
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from envmgr_rl import EnvmgrRLEnv, EnvmgrVectorEnv
    from envmgr_client import Client


def policy(i, obs):
    """Env i's next action from its observation (obs["screenshot"] is the PNG, obs["step"] the step)."""
    if obs["step"] == 0:
        return {"action_type": "TYPING", "text": "/src\n" if i % 2 == 0 else "/bin\n"}
    if obs["step"] == 1:  # as the task's own solution: a second for the command to run
        return {"action_type": "WAIT", "seconds": 1}
    return {"action_type": "DONE"}


def main():
    url, token_file, task_path = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    with open(task_path, encoding="utf-8") as f:
        task = json.load(f)
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    state = "rl-example-%d-%d" % (os.getpid(), int(time.time()))  # state names are unique in the server's cache

    # the branch point: the task's setup (an open terminal), one step, saved
    with EnvmgrRLEnv(url, token, task=task) as env:
        env.reset()
        env.step({"action_type": "TYPING", "text": "mkdir -p ~/projects/envmgr"})
        env.save_state(state)

    # N envs from that state; "disabled": an env whose episode ended waits for the others
    with EnvmgrVectorEnv(url, token, n=n, task=task, from_state=state, autoreset_mode="disabled") as vec:
        obs, infos = vec.reset(seed=0)
        rewards, steps = [None] * n, [0] * n
        ended = [False] * n
        while not all(ended):
            actions = [None if ended[i] else policy(i, obs[i]) for i in range(n)]
            obs, rew, terminated, truncated, infos = vec.step(actions)
            for i in range(n):
                if (terminated[i] or truncated[i]) and not infos[i].get("ended"):  # this step ended it: the score
                    ended[i], rewards[i], steps[i] = True, rew[i], infos[i]["step"]
        ids = vec.env_ids
    left = [e["id"] for e in Client(url, token).envs() if e["id"] in ids]
    print(json.dumps({"state": state, "rewards": rewards, "steps": steps, "left": left}))


if __name__ == "__main__":
    main()

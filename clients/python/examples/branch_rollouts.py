"""Branch from step k, roll out N times: saved states the way RL and search use them (docs/states.md).

    python3 branch_rollouts.py URL TOKEN_FILE TASK_JSON [N]

The task is tasks/demo/terminal-mkdir-tree.json (make ~/projects/envmgr/src in the open
terminal). Its setup runs once; after step k=1 (half a command typed) the env is saved, and
each rollout restores that moment in a fraction of a second and finishes the command its own
way: even rollouts type the right directory (score 1), odd ones a wrong one (score 0). Each
rollout is an episode of its own, with its own trace and score. Prints {"scores": [...]}.
"""
import json
import sys

from envmgr_client import EnvmgrEnv


def main():
    url, token_file, task_path = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    with open(task_path, encoding="utf-8") as f:
        task = json.load(f)
    with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    with EnvmgrEnv(url, token) as env:
        env.reset(task_config=task)  # the golden state, then the task's setup (an open terminal)
        env.step({"action_type": "TYPING", "text": "mkdir -p ~/projects/envmgr"})  # step k = 1
        env.save_state("mkdir-step1")  # the branch point
        scores = []
        for i in range(n):
            env.load_state("mkdir-step1")  # back to step k: screen, memory and disk
            ending = "/src\n" if i % 2 == 0 else "/bin\n"
            env.step({"action_type": "TYPING", "text": ending})
            scores.append(env.evaluate())
    print(json.dumps({"scores": scores}))


if __name__ == "__main__":
    main()

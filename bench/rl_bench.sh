#!/usr/bin/env bash
# make bench, the RL interface (clients/python/envmgr_rl.py, docs/rl.md): rollouts per minute of a short
# task from a saved state, with 1 env and with N envs from that one state stepped at once
# (EnvmgrVectorEnv), and the p50 step time. A rollout: restore the state (reset), the task's reference
# solution to DONE (the demo task's: the command typed, WAIT 1, DONE), evaluate (the reward). Figures,
# not pass/fail.
#   bench/rl_bench.sh [--rollouts N] [--rounds N] [--envs N] [--task TASK.json]
# --rollouts: the 1-env rollouts (default 6); --rounds: the N-env rounds, N rollouts each (default 3);
# --envs: N (default 4). The task defaults to tasks/demo/terminal-mkdir-tree.json, its state saved
# right after its setup; one rollout of each kind runs first, not counted (the state's first restore
# starts the server of its RAM, docs/states.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ENVMGR=${ENVMGR_BIN:-$root/bin/envmgr}
rollouts=6 rounds=3 envs=4 task=$root/tasks/demo/terminal-mkdir-tree.json
while [ $# -gt 0 ]; do
    case $1 in
        --rollouts) rollouts=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --envs) envs=$2; shift 2 ;;
        --task) task=$(realpath "$2"); shift 2 ;;
        *) echo "usage: rl_bench.sh [--rollouts N] [--rounds N] [--envs N] [--task TASK.json]" >&2; exit 2 ;;
    esac
done
own_run=
[ -n "${ENVMGR_RUN_DIR:-}" ] || { ENVMGR_RUN_DIR=$(mktemp -d /tmp/envmgr-bench.XXXXXX); own_run=$ENVMGR_RUN_DIR; }
export ENVMGR_RUN_DIR
export ENVMGR_STATE_DIR=$(mktemp -d /tmp/envmgr-bench-states.XXXXXX) || exit 1
tmp=$(mktemp -d)
pid=
# the server tears down every env it owns on SIGTERM
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid"; "$root/scripts/stop-ram-servers" "$ENVMGR_STATE_DIR"
      rm -rf "$ENVMGR_STATE_DIR" "$tmp" $own_run' EXIT
trap 'exit 130' INT TERM
"$ENVMGR" serve --listen 127.0.0.1:0 --token-file "$tmp/token" --out "$tmp/out" --task-root / \
    --max-envs $((envs + 1)) --accel tcg >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
for _ in $(seq 100); do grep -q 'token file' "$tmp/serve.out" && break; sleep 0.2; done
URL=$(sed -n 's/^envmgr serve: listening on //p' "$tmp/serve.out")
[ -n "$URL" ] || { echo "rl_bench: the server did not start: $(tail -3 "$tmp/serve.err")"; exit 1; }

PYTHONPATH=$root/clients/python /usr/bin/python3 - "$URL" "$tmp/token" "$task" "$rollouts" "$rounds" "$envs" <<'PY'
import json, math, sys, time
from envmgr_rl import EnvmgrRLEnv, EnvmgrVectorEnv

url, token_file, task_path = sys.argv[1:4]
rollouts, rounds, n = map(int, sys.argv[4:7])
token = open(token_file).read().strip()
task = json.load(open(task_path))
# the task's reference solution (the demo task's: type the command, WAIT 1, DONE), else a move and DONE
POLICY = [a for a in task.get("solution") or [{"action_type": "MOVE_TO", "x": 640, "y": 400}]
          if a.get("action_type") not in ("DONE", "FAIL")] + [{"action_type": "DONE"}]
accel = "?"


def row(name, value):
    print("%-44s %-28s [%s]" % (name, value, accel))


def mean_reward(v):  # the reference solution scores 1.0: say how many did not
    return "%.2f (%d of %d below 1.0)" % (sum(v) / len(v), sum(1 for r in v if not r >= 1.0), len(v))


def kind(a):
    return a if isinstance(a, str) else a.get("action_type", "pyautogui")


def by_kind(kinds):
    return ", ".join("%s %.0f" % (k, pct(v, 50) * 1000) for k, v in kinds.items()) + " ms"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


# the state: the task's setup done (its first run, also saved by the setup cache)
t0 = time.monotonic()
with EnvmgrRLEnv(url, token, task=task) as env:
    env.reset()
    accel = env.api_env.info()["accel"].upper()
    env.save_state("rl-bench")
print("RL rollouts (%s from a saved state: restore, %d steps to DONE, evaluate; state ready in %.1f s)"
      % (task.get("id"), len(POLICY), time.monotonic() - t0))

# 1 env
steps1, resets1, evals1, rewards1, kinds1 = [], [], [], [], {}
with EnvmgrRLEnv(url, token, task=task, from_state="rl-bench") as env:
    for k in range(rollouts + 1):
        if k == 1:
            w0 = time.monotonic()
        t = time.monotonic()
        obs, info = env.reset()
        reset_s = time.monotonic() - t
        for a in POLICY:
            t = time.monotonic()
            obs, r, term, trunc, info = env.step(a)
            if k:
                steps1.append(info["step_s"])
                kinds1.setdefault(kind(a), []).append(info["step_s"])
                if term or trunc:
                    evals1.append(time.monotonic() - t - info["step_s"])
            if term or trunc:
                break
        if k:
            resets1.append(reset_s)
            rewards1.append(r)
    wall1 = time.monotonic() - w0
row("1 env: rollouts per minute", "%.1f (%d in %.0f s)" % (rollouts / wall1 * 60, rollouts, wall1))
row("1 env: step p50 / p99 (request round trip)", "%.0f / %.0f ms (%d steps)"
    % (pct(steps1, 50) * 1000, pct(steps1, 99) * 1000, len(steps1)))
row("1 env: step p50 by action", by_kind(kinds1))
row("1 env: reset (restore) p50 / evaluate p50", "%.0f / %.0f ms" % (pct(resets1, 50) * 1000, pct(evals1, 50) * 1000))
row("1 env: mean reward", mean_reward(rewards1))

# n envs from the one state, stepped at once; one episode each per round
stepsn, batch, rewardsn, kindsn = [], [], [], {}
with EnvmgrVectorEnv(url, token, n=n, task=task, from_state="rl-bench", autoreset_mode="disabled") as vec:
    for k in range(rounds + 1):
        if k == 1:
            w0 = time.monotonic()
        vec.reset()
        ended = [False] * n
        for a in POLICY:
            t = time.monotonic()
            obs, rew, term, trunc, infos = vec.step([None if e else a for e in ended])
            last = all((te or tr) for te, tr in zip(term, trunc))
            if k:
                if not last:
                    batch.append(time.monotonic() - t)
                for i in range(n):
                    if not ended[i] and not infos[i].get("ended"):
                        stepsn.append(infos[i]["step_s"])
                        kindsn.setdefault(kind(a), []).append(infos[i]["step_s"])
                        if term[i] or trunc[i]:
                            rewardsn.append(rew[i])
            ended = [te or tr for te, tr in zip(term, trunc)]
            if last:
                break
    walln = time.monotonic() - w0
row("%d envs from one state: rollouts per minute" % n,
    "%.1f (%d in %.0f s)" % (rounds * n / walln * 60, rounds * n, walln))
row("%d envs: step p50 / p99 (each env's request)" % n, "%.0f / %.0f ms (%d steps)"
    % (pct(stepsn, 50) * 1000, pct(stepsn, 99) * 1000, len(stepsn)))
row("%d envs: step p50 by action" % n, by_kind(kindsn))
row("%d envs: batch step p50 (all %d at once)" % (n, n), "%.0f ms" % (pct(batch, 50) * 1000))
row("%d envs: mean reward" % n, mean_reward(rewardsn))
PY

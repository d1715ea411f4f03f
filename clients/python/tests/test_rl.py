"""envmgr_rl (the RL loop interface, docs/rl.md) against a real `envmgr serve` with real guests.

Run by tests/integration/test_api.sh, which sets ENVMGR_URL, ENVMGR_TOKEN, ENVMGR_TOKEN_FILE and
ENVMGR_TASKS (as for test_client.py). The group rollouts need 4 envs at once: when that server has no
room for them (test_api.sh's runs with --max-envs 2 and holds one env meanwhile) this test starts a
server of its own, as test_api.sh starts its own (bin/envmgr serve on loopback, TCG, the same run and
state folders, which test_api.sh's cleanup covers), and stops it at the end (its envs are torn down).
Standard library unittest.
"""
import ctypes
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from envmgr_client import Client, EnvmgrError, EnvmgrNoScore  # noqa: E402
from envmgr_rl import HAVE_NUMPY, EnvmgrRLEnv, EnvmgrVectorEnv, png_size  # noqa: E402

URL = os.environ.get("ENVMGR_URL")
TOKEN = os.environ.get("ENVMGR_TOKEN")
TOKEN_FILE = os.environ.get("ENVMGR_TOKEN_FILE")
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TASKS = os.environ.get("ENVMGR_TASKS", os.path.join(ROOT, "tasks"))
PNG = b"\x89PNG\r\n\x1a\n"
N = 4
# an episode that ends without a score: its postconfig check fails (tests/data/postconfig)
NO_SCORE_TASK = {
    "id": "rl-no-score", "instruction": "Say DONE.",
    "evaluator": {"postconfig": [{"type": "execute", "parameters": {"command": ["sh", "-c", "exit 3"],
                                                                    "check": True}}],
                  "func": "exact_match", "result": {"type": "vm_command_line", "command": "echo hi"},
                  "expected": {"type": "rule", "rules": {"expected": "hi\n"}}},
    "limits": {"max_steps": 4, "step_timeout_s": 30, "episode_timeout_s": 300},
}


def load_task(name):
    with open(os.path.join(TASKS, "demo", name), encoding="utf-8") as f:
        return json.load(f)


def _die_with_parent():
    """In the server's child process: SIGTERM when this test's process dies (the server then tears
    its envs down), so that no server outlives an interrupted test."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Server:
    """The server to use: test_api.sh's when it has room for N more envs, else one of our own."""

    def __init__(self):
        self.url, self.token, self.token_file, self.proc, self.tmp = URL, TOKEN, TOKEN_FILE, None, None
        free = 0
        try:
            r = Client(URL, TOKEN).request("GET", "/v1/envs")
            free = r["max_envs"] - len(r["envs"])
        except EnvmgrError:
            pass
        if free >= N:
            return
        binary = os.environ.get("ENVMGR_BIN", os.path.join(ROOT, "bin", "envmgr"))
        self.tmp = tempfile.mkdtemp(prefix="envmgr-rl-test.", dir=os.environ.get("TMPDIR"))
        self.token_file = os.path.join(self.tmp, "token")
        out_path, self.err_path = os.path.join(self.tmp, "serve.out"), os.path.join(self.tmp, "serve.err")
        with open(out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                [binary, "serve", "--listen", "127.0.0.1:0", "--token-file", self.token_file,
                 "--max-envs", str(N + 1), "--out", os.path.join(self.tmp, "out"), "--task-root", TASKS,
                 "--accel", "tcg"],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            with open(out_path, encoding="utf-8") as f:
                text = f.read()
            if "token file" in text:
                self.url = text.split("listening on ", 1)[1].split()[0]
                with open(self.token_file, encoding="ascii") as f:
                    self.token = f.read().strip()
                return
            time.sleep(0.2)
        self.stop()
        with open(self.err_path, encoding="utf-8", errors="replace") as f:
            raise RuntimeError("envmgr serve did not start: " + f.read()[-2000:])

    def stop(self):
        """SIGTERM: the server tears down every env it owns, then exits 0."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        return rc


def trace_lines(env, path):
    """The lines of env's last episode's trace.jsonl (fetched as a tar)."""
    env.trace(path)
    try:
        with tarfile.open(path) as tar:
            return [json.loads(l) for l in tar.extractfile("trace/trace.jsonl").read().decode().splitlines()]
    finally:
        os.unlink(path)


@unittest.skipUnless(URL and TOKEN, "needs ENVMGR_URL and ENVMGR_TOKEN (tests/integration/test_api.sh sets them)")
class RLTest(unittest.TestCase):
    state = None

    @classmethod
    def setUpClass(cls):
        cls.t0 = time.time()
        cls.task = load_task("terminal-mkdir-tree.json")
        cls.tmp = tempfile.mkdtemp(prefix="envmgr-rl.", dir=os.environ.get("TMPDIR"))
        cls.server = Server()
        cls.url, cls.token = cls.server.url, cls.server.token

    @classmethod
    def tearDownClass(cls):
        own = cls.server.tmp is not None
        rc = cls.server.stop()
        for d in (cls.tmp, cls.server.tmp):
            if d:
                shutil.rmtree(d, ignore_errors=True)
        sys.stderr.write("\n(test_rl: %.0f s in all, %s server)\n"
                         % (time.time() - cls.t0, "its own" if own else "the given"))
        if rc != 0:
            raise AssertionError("the test's own envmgr serve exited %s on SIGTERM" % rc)

    def test_1_episode_bad_input_and_branch_point(self):
        """One env: gymnasium's shapes, bad input refused with the field and the episode untouched,
        then the moment after step 1 saved as the group's state."""
        with self.assertRaises(ValueError):
            EnvmgrRLEnv(self.url, self.token, task=self.task, observation="som")  # refused before any request
        with EnvmgrRLEnv(self.url, self.token, task=self.task, decode_image=HAVE_NUMPY) as env:
            with self.assertRaises(EnvmgrError) as cm:  # no episode yet
                env.step("DONE")
            self.assertEqual(cm.exception.status, 409)
            obs, info = env.reset(seed=7)
            self.assertEqual(info["seed"], 7)
            self.assertTrue(obs["screenshot"].startswith(PNG))
            self.assertEqual(png_size(obs["screenshot"]), (1280, 800))
            self.assertEqual((obs["instruction"], obs["step"]), (self.task["instruction"], 0))
            self.assertTrue(env.observation_space.contains(obs), env.observation_space)
            self.assertEqual(env.observation_space["screenshot"].shape, (800, 1280, 3))
            self.assertEqual(env.action_space.name, "computer_13")
            if HAVE_NUMPY:  # the decoded frame, only with numpy: the framebuffer's pixels (the guest waits paused)
                import numpy as np
                self.assertEqual((obs["image"].shape, str(obs["image"].dtype)), ((800, 1280, 3), "uint8"))
                raw = env.api_env.api.request("GET", env.api_env._path("screenshot") + "?format=raw", raw=True)
                fb = np.frombuffer(raw, dtype=np.uint8).reshape(800, 1280, 4)[:, :, :3]
                self.assertTrue((fb == obs["image"]).all())
            # bad input: EnvmgrError naming the field, and nothing reaches the episode
            bad = [(42, "action"), ({"action_type": "CLICK", "x": "10", "y": 1}, "action.x"),
                   ({"action_type": "CLICK", "x": 99999, "y": 1}, "action.x"), ({"x": 1, "y": 1}, "action.action_type"),
                   ({"action_type": "TYPING"}, "action.text"), ({"action_type": "MOVE_TO", "x": 1, "z": 2}, "action.z"),
                   ({"action_type": "PRESS", "key": "nosuchkey"}, "action.key")]  # the last one: the server's 400
            for action, field in bad:
                with self.assertRaises(EnvmgrError, msg=repr(action)) as cm:
                    env.step(action)
                self.assertEqual((cm.exception.status, cm.exception.field), (400, field), repr(action))
            self.assertFalse(env.action_space.contains({"action_type": "CLICK", "x": 99999, "y": 1}))
            obs, reward, terminated, truncated, info = env.step(
                {"action_type": "TYPING", "text": "mkdir -p ~/projects/envmgr"})
            self.assertEqual((reward, terminated, truncated), (0.0, False, False))
            self.assertEqual((obs["step"], info["step"], env.steps), (1, 1, 1))  # the refused ones were not steps
            on_server = Client(self.url, self.token).request("GET", "/v1/envs/" + env.env_id)
            self.assertEqual(on_server["episode"]["steps"], 1)
            RLTest.state = "rl-test-%d-%d" % (os.getpid(), int(time.time()))
            env.save_state(RLTest.state)
            single_id = env.env_id
        self.assertNotIn(single_id, [e["id"] for e in Client(self.url, self.token).envs()])

    def test_2_group_rollouts_from_one_state(self):
        """4 envs from the one saved state, stepped at once with different actions to their ends:
        rewards are evaluate()'s scores, the 4 episodes are 4 traces, autoreset is gymnasium's
        next-step one, and close() removes all 4 envs."""
        if not RLTest.state:
            self.skipTest("no saved state (test_1 failed)")
        state, client = RLTest.state, Client(self.url, self.token)
        vec = EnvmgrVectorEnv(self.url, self.token, n=N, task=self.task, from_state=state)
        try:
            ids = vec.env_ids
            self.assertEqual(len(set(ids)), N)
            listed = [e["id"] for e in client.envs()]
            self.assertTrue(all(i in listed for i in ids))
            mode = vec.metadata["autoreset_mode"]  # gymnasium's AutoresetMode.NEXT_STEP where it is importable
            self.assertEqual(getattr(mode, "value", mode), "NextStep")
            obs, infos = vec.reset(seed=100)
            self.assertEqual([i["seed"] for i in infos], [100, 101, 102, 103])
            self.assertEqual([i["state"] for i in infos], [state] * N)
            self.assertEqual([o["step"] for o in obs], [0] * N)
            self.assertTrue(all(vec.single_observation_space.contains(o) for o in obs))
            # the same restored snapshot: the same first frame in every env
            self.assertEqual(len({i["screenshot_sha256"] for i in infos}), 1, infos)
            # a badly shaped action for env 2 is refused before any env is stepped
            with self.assertRaises(EnvmgrError) as cm:
                vec.step(["WAIT", "WAIT", {"action_type": "CLICK", "x": -5, "y": 0}, "WAIT"])
            self.assertEqual((cm.exception.index, cm.exception.field), (2, "action.x"))
            with self.assertRaises(ValueError):
                vec.step(["WAIT"] * (N - 1))
            # per env: the actions of its episode (a second's WAIT after the command, as the task's own
            # solution has)
            wait = {"action_type": "WAIT", "seconds": 1}
            plans = [
                [{"action_type": "TYPING", "text": "/src\n"}, wait, "DONE"],             # 1.0
                [{"action_type": "TYPING", "text": "/bin\n"}, "DONE"],                   # 0.0
                [{"action_type": "TYPING", "text": "/s"}, {"action_type": "TYPING", "text": "rc\n"}, wait,
                 {"action_type": "DONE"}],                                                # 1.0, the last to end
                [{"action_type": "FAIL"}],                                                # 0.0, the first to end
            ]
            expected = [1.0, 0.0, 1.0, 0.0]
            rewards, causes, traces, autoresets = [None] * N, [None] * N, [None] * N, [0] * N
            for t in range(4):
                actions = [p[t] if t < len(p) else {"action_type": "MOVE_TO", "x": 700, "y": 500} for p in plans]
                obs, rew, term, trunc, infos = vec.step(actions)
                for i in range(N):
                    if infos[i].get("autoreset"):  # the step after its end: a new episode from the state
                        autoresets[i] += 1
                        self.assertEqual((rew[i], term[i], trunc[i], obs[i]["step"], infos[i]["state"]),
                                         (0.0, False, False, 0, state))
                    elif term[i] or trunc[i]:
                        self.assertIsNone(rewards[i], "env %d ended twice" % i)
                        rewards[i], causes[i] = rew[i], infos[i]["exit_cause"]
                        self.assertEqual(infos[i]["evaluation"]["status"], "scored")
                        self.assertEqual(infos[i]["score"], rew[i])
                        self.assertFalse(infos[i]["no_score"])
                        traces[i] = trace_lines(vec.envs[i], os.path.join(self.tmp, "t%d.tar" % i))
                    else:
                        self.assertEqual(rew[i], 0.0)
            # on a mismatch: each episode's evaluation reason
            self.assertEqual(rewards, expected, [[l.get("reason") for l in t or [] if l["type"] == "evaluation"]
                                                 for t in traces])
            self.assertEqual(causes, ["done", "done", "done", "fail"])
            self.assertEqual(autoresets, [1, 1, 0, 1])  # env 2 ended on the last step
            # 4 episodes, 4 traces: each from the state, each with its own actions and its evaluation
            acts = []
            for i, lines in enumerate(traces):
                header = lines[0]
                self.assertEqual((header["type"], header["from_state"]["name"]), ("header", state))
                acts.append(json.dumps([l["action"] for l in lines if l["type"] == "step"], sort_keys=True))
                self.assertIn("evaluation", [l["type"] for l in lines])
            self.assertEqual(len(set(acts)), N, acts)
        finally:
            vec.close()
        left = [e["id"] for e in client.envs()]
        self.assertEqual([i for i in ids if i in left], [])

    def test_3_no_score_is_never_a_zero(self):
        """An episode without a score (a postconfig check fails): raised by default, NaN when flagged."""
        with EnvmgrRLEnv(self.url, self.token, task=NO_SCORE_TASK) as env:
            env.reset()
            with self.assertRaises(EnvmgrNoScore) as cm:
                env.step("DONE")
            e = cm.exception
            self.assertEqual((e.status, e.exit_cause), ("not_evaluated", "setup_error"))
            self.assertTrue(e.terminated and e.info["no_score"] and e.obs["screenshot"].startswith(PNG))
            env.no_score = "flag"
            env.reset()
            obs, reward, terminated, truncated, info = env.step("DONE")
            self.assertTrue(math.isnan(reward))
            self.assertTrue(terminated and info["no_score"])
            self.assertEqual(info["evaluation"]["status"], "not_evaluated")

    def test_4_documented_example(self):
        """docs/rl.md's example, examples/rl_rollouts.py: 4 rollouts from one state, scores 1 0 1 0."""
        if not self.server.token_file:
            self.skipTest("needs ENVMGR_TOKEN_FILE")
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "rl_rollouts.py"), self.url,
                            self.server.token_file, os.path.join(TASKS, "demo", "terminal-mkdir-tree.json"), str(N)],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(out["rewards"], [1.0, 0.0, 1.0, 0.0], r.stdout + r.stderr)
        self.assertEqual(out["left"], [])


if __name__ == "__main__":
    unittest.main()

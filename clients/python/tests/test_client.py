"""The Python client against a real `envmgr serve` on loopback (run by
tests/integration/test_api.sh, which sets ENVMGR_URL, ENVMGR_TOKEN and
ENVMGR_TASKS). Standard library unittest."""
import io
import json
import os
import subprocess
import sys
import tarfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from envmgr_client import Client, EnvmgrEnv, EnvmgrError  # noqa: E402

URL = os.environ.get("ENVMGR_URL")
TOKEN = os.environ.get("ENVMGR_TOKEN")
TASKS = os.environ.get("ENVMGR_TASKS", os.path.join(HERE, "../../../tasks"))
PNG = b"\x89PNG\r\n\x1a\n"


def load_task(name):
    with open(os.path.join(TASKS, "demo", name), encoding="utf-8") as f:
        return json.load(f)


@unittest.skipUnless(URL and TOKEN, "needs ENVMGR_URL and ENVMGR_TOKEN (tests/integration/test_api.sh sets them)")
class ClientTest(unittest.TestCase):
    def test_health_needs_no_token(self):
        self.assertEqual(Client(URL, "x" * 20).health()["status"], "ok")

    def test_observation_types(self):
        with self.assertRaises(ValueError):
            EnvmgrEnv(URL, TOKEN, observation_type="som")   # refused before any request
        with self.assertRaises(EnvmgrError) as cm:
            env = EnvmgrEnv(URL, TOKEN)
            try:
                env.api.request("POST", env._path("reset"), {"observation": "som"})
            finally:
                env.close()
        self.assertEqual((cm.exception.status, cm.exception.field), (400, "observation"))

    def test_wrong_token_is_401(self):
        with self.assertRaises(EnvmgrError) as cm:
            Client(URL, "wrong-token-0123456789").envs()
        self.assertEqual(cm.exception.status, 401)

    def test_desktopenv_shape(self):
        task = load_task("terminal-mkdir-tree.json")
        with EnvmgrEnv(URL, TOKEN, action_space="pyautogui") as env:
            obs = env.reset(task_config=task)
            self.assertTrue(obs["screenshot"].startswith(PNG))
            self.assertEqual((obs["width"], obs["height"]), (1280, 800))
            self.assertEqual(obs["instruction"], task["instruction"])
            self.assertEqual(obs["step"], 0)
            out = env.step("pyautogui.moveTo(100, 120)", 0)
            self.assertEqual(len(out), 4)
            obs, reward, done, info = out
            self.assertTrue(obs["screenshot"].startswith(PNG))
            self.assertEqual((reward, done), (0, False))
            self.assertEqual(info["actions"], 1)
            self.assertEqual(obs["step"], 1)
            # a refused action is an error that names the field, and the env stays usable
            with self.assertRaises(EnvmgrError) as cm:
                env.step({"action_type": "CLICK", "x": 99999, "y": 1})
            self.assertEqual((cm.exception.status, cm.exception.field), (400, "action.x"))
            with self.assertRaises(EnvmgrError) as cm:  # code outside the subset runs in the guest; no code is refused
                env.step({"action_type": "PYAUTOGUI", "code": ""})
            self.assertEqual((cm.exception.status, cm.exception.field), (400, "action.code"))
            obs, _, done, info = env.step({"action_type": "MOVE_TO", "x": 200, "y": 200})
            self.assertFalse(done)
            self.assertEqual(info["step"], 2)
            obs, _, done, info = env.step("DONE")
            self.assertTrue(done)
            self.assertEqual(info["exit_cause"], "done")
            with self.assertRaises(EnvmgrError) as cm:  # the episode is over
                env.step("WAIT")
            self.assertEqual(cm.exception.status, 409)
            score = env.evaluate()
            self.assertIsInstance(score, float)
            self.assertTrue(0.0 <= score <= 1.0)
            self.assertEqual(env.evaluate(), score)  # evaluating again answers the same
            self.assertTrue(env.screenshot().startswith(PNG))
            path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "envmgr-client-trace-%d.tar" % os.getpid())
            try:
                env.trace(path)
                with tarfile.open(path) as tar:
                    names = tar.getnames()
                    self.assertIn("trace/trace.jsonl", names)
                    lines = tar.extractfile("trace/trace.jsonl").read().decode().splitlines()
                self.assertTrue(any(n.startswith("trace/frames/") for n in names))
                types = [json.loads(l)["type"] for l in lines]
                self.assertEqual(types[0], "header")
                self.assertEqual(types.count("step"), 3)
                self.assertIn("evaluation", types)
            finally:
                if os.path.exists(path):
                    os.unlink(path)
            env_id = env.env_id
        with self.assertRaises(EnvmgrError) as cm:  # closed: the server tore it down
            Client(URL, TOKEN).request("GET", "/v1/envs/" + env_id)
        self.assertEqual(cm.exception.status, 404)

    def test_freeform_env_cannot_be_evaluated(self):
        with EnvmgrEnv(URL, TOKEN) as env:
            obs = env.reset()
            self.assertEqual(obs["instruction"], "")
            with self.assertRaises(EnvmgrError) as cm:
                env.evaluate()
            self.assertEqual(cm.exception.status, 409)

    def test_osworld_agent_loop_example(self):
        """examples/agent_loop.py: OSWorld's loop with one changed line runs a task to a score of 1."""
        token_file = os.environ.get("ENVMGR_TOKEN_FILE")
        if not token_file:
            self.skipTest("needs ENVMGR_TOKEN_FILE")
        r = subprocess.run([sys.executable, os.path.join(HERE, "..", "examples", "agent_loop.py"), URL,
                            os.path.join(HERE, "fixtures", "echo-task.json"), "--token-file", token_file],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("result: 1.00", r.stdout, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()

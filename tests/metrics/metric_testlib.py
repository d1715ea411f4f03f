"""Shared by the evaluator-script tests: run one metric through run.py in a child process, the way
envmgr does (stdin request, one JSON line out), with Debian's python3 and -I (no user site)."""
import json
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "evaluator", "metrics", "run.py")
PYTHON = "/usr/bin/python3"


def run_metric(name, result, expected=None, options=None, timeout=120):
    """Returns ("score", float) or ("error", message)."""
    req = {"metric": name, "result": result, "options": options or {}}
    if expected is not None:
        req["expected"] = expected
    p = subprocess.run([PYTHON, "-I", RUN], input=json.dumps(req).encode(), capture_output=True,
                       timeout=timeout)
    lines = p.stdout.decode("utf-8", "replace").strip().splitlines()
    if not lines:
        raise AssertionError(f"{name}: no answer (exit {p.returncode}): {p.stderr.decode()[-2000:]}")
    ans = json.loads(lines[-1])
    if "score" in ans:
        assert p.returncode == 0, ans
        return ("score", ans["score"])
    assert p.returncode == 3, (p.returncode, ans)
    return ("error", ans["error"])


class MetricCase(unittest.TestCase):
    """A temp dir per test and the three assertions every metric test makes."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="envmgr-metric-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        p = self.path(name)
        with open(p, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return p

    def assertScore(self, want, name, result, expected=None, options=None):
        kind, val = run_metric(name, result, expected, options)
        self.assertEqual(kind, "score", f"{name}: expected a score, got error: {val}")
        self.assertAlmostEqual(val, want, places=6, msg=f"{name}")

    def assertError(self, name, result, expected=None, options=None):
        kind, val = run_metric(name, result, expected, options)
        self.assertEqual(kind, "error", f"{name}: expected evaluator_error, got score {val}")
        self.assertTrue(val.startswith(name + ":"), val)
        return val

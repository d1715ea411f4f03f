"""Runs one evaluator-script metric: the program envmgr starts inside its bubblewrap sandbox.

    python3 -I run.py                 request on stdin, one JSON line on stdout
    python3 -I run.py --registry      the registry as JSON (what registry.json holds)

Request (stdin, at most 1 MiB): {"metric": NAME, "result": VALUE, "expected": VALUE, "options": {...}}
where VALUE is shaped as OSWorld's getters return it (file paths are paths inside the sandbox).
"expected" is absent for metrics that take none.
Answer: {"score": 0..1} and exit 0, or {"error": "one line"} and exit 3 (evaluator_error).
"""
import importlib
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from _common import answer, one_line  # noqa: E402

REQUEST_MAX = 1 << 20


def load_families():
    for fam in _common.FAMILIES:
        try:
            importlib.import_module(fam)
        except ModuleNotFoundError as e:
            if e.name != fam:   # a family that exists but lacks a library is a real error
                raise
    return _common.REGISTRY


def load_family_of(name):
    """Import only the family registry.json names for this metric (pandas and friends cost most of a
    run's time); every family when the registry does not know the name or cannot be read."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "registry.json")) as f:
            family = json.load(f).get(name, {}).get("family")
    except (OSError, ValueError):
        family = None
    if family in _common.FAMILIES:
        importlib.import_module(family)
        if name in _common.REGISTRY:
            return _common.REGISTRY
    return load_families()


def registry_json():
    reg = load_families()
    out = {}
    for name in sorted(reg):
        m = reg[name]
        out[name] = {"family": m["family"], "expected": m["expected"], "options": m["options"],
                     "summary": m["summary"], "osworld": m["osworld"]}
    return out


def main():
    if sys.argv[1:] == ["--registry"]:
        json.dump(registry_json(), sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    raw = sys.stdin.buffer.read(REQUEST_MAX + 1)
    if len(raw) > REQUEST_MAX:
        answer({"error": "request: over 1 MiB"}, 3)
    try:
        req = json.loads(raw)
    except ValueError as e:
        answer({"error": f"request: not JSON: {one_line(e)}"}, 3)
    if not isinstance(req, dict) or not isinstance(req.get("metric"), str):
        answer({"error": "request: expected an object with a string `metric`"}, 3)
    name = req["metric"]
    options = req.get("options") or {}
    if not isinstance(options, dict):
        answer({"error": f"{name}: options: expected an object"}, 3)
    try:
        reg = load_family_of(name)
    except Exception as e:  # a broken family must not look like a score
        answer({"error": f"{name}: loading the metric families: {one_line(e)}"}, 3)
    m = reg.get(name)
    if m is None:
        answer({"error": f"{name}: no such evaluator-script metric"}, 3)
    try:
        if m["expected"] is False:
            score = m["func"](req.get("result"), **options)
        else:
            score = m["func"](req.get("result"), req.get("expected"), **options)
    except _common.MetricInputError as e:
        answer({"error": f"{name}: {one_line(e)}"}, 3)
    except MemoryError:
        answer({"error": f"{name}: out of memory"}, 3)
    except RecursionError:
        answer({"error": f"{name}: input nested too deeply"}, 3)
    except Exception as e:
        answer({"error": f"{name}: {type(e).__name__}: {one_line(e)}"}, 3)
    if isinstance(score, bool):
        score = 1.0 if score else 0.0
    if not isinstance(score, (int, float)) or isinstance(score, bool) or math.isnan(score):
        answer({"error": f"{name}: returned {type(score).__name__}, not a number"}, 3)
    score = float(score)
    if score < 0.0 or score > 1.0:
        answer({"error": f"{name}: returned {score}, outside 0..1"}, 3)
    answer({"score": score}, 0)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""file_contains: an envmgr `script` metric (standard library only).

Scores 1 when the result contains every expected string, else 0.

stdin:  {"result": <artifact>, "expected": <artifact or null>, "options": {...}}
        (artifacts as described in evaluator/getters.h: file, text or json)
The strings come from options.needles, or else from the expected artifact:
rules {"expected": [...]} as OSWorld's file_contains metric takes them, or a
plain string / list of strings.
stdout: {"score": 0 or 1, "reason": "..."}

Bad input is a score of 0 with a reason, not a crash: envmgr would score a
crash 0 too, but with a less useful reason.
"""
import json
import sys

READ_CAP = 16 << 20


def artifact_text(art):
    if not isinstance(art, dict):
        raise ValueError("no result artifact")
    kind = art.get("type")
    if kind == "file":
        with open(art["path"], "rb") as f:
            return f.read(READ_CAP).decode("utf-8", "replace")
    if kind == "text":
        return art.get("value", "")
    if kind == "json":
        value = art.get("value")
        return value if isinstance(value, str) else json.dumps(value)
    raise ValueError(f"unknown artifact type {kind!r}")


def needles(req):
    options = req.get("options") or {}
    if "needles" in options:
        want = options["needles"]
    else:
        expected = req.get("expected")
        want = expected.get("value") if isinstance(expected, dict) else None
        if isinstance(want, dict) and "expected" in want:
            want = want["expected"]
    if isinstance(want, str):
        want = [want]
    if not isinstance(want, list) or not all(isinstance(s, str) for s in want):
        raise ValueError('give the strings as options.needles or expected rules {"expected": ["..."]}')
    return want


def main():
    try:
        req = json.load(sys.stdin)
        text = artifact_text(req.get("result"))
        want = needles(req)
    except (ValueError, OSError, KeyError, TypeError, AttributeError) as e:
        print(json.dumps({"score": 0, "reason": f"file_contains: {e}"}))
        return 0
    missing = [s for s in want if s not in text]
    if missing:
        reason = f"file_contains: {len(missing)} of {len(want)} strings missing, first {missing[0]!r}"
        print(json.dumps({"score": 0, "reason": reason}))
    else:
        print(json.dumps({"score": 1, "reason": f"file_contains: all {len(want)} strings found"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

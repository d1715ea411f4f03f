#!/usr/bin/env python3
"""lines_equal: an envmgr `script` metric for tasks/demo (standard library only).

Scores 1 when the result's lines are exactly the expected lines, in order.
Trailing whitespace on each line and blank lines at the end are ignored;
nothing else is (case, order, duplicates and leading blanks all count).

stdin:  {"result": <artifact>, "expected": <artifact or null>, "options": {...}}
        result: a file artifact (vm_file) or a text artifact (vm_command_line)
        the lines: options.lines, or the expected rules {"expected": [...]}
stdout: {"score": 0 or 1, "reason": "..."}
"""
import json
import sys

READ_CAP = 16 << 20


def text_of(art):
    if not isinstance(art, dict):
        raise ValueError("no result artifact")
    if art.get("type") == "file":
        with open(art["path"], "rb") as f:
            return f.read(READ_CAP).decode("utf-8", "replace")
    if art.get("type") == "text":
        return art.get("value", "")
    raise ValueError("expected a file or text artifact, got %r" % art.get("type"))


def wanted(req):
    opts = req.get("options") or {}
    if "lines" in opts:
        want = opts["lines"]
    else:
        exp = req.get("expected")
        want = exp.get("value") if isinstance(exp, dict) else None
        if isinstance(want, dict):
            want = want.get("expected")
    if not isinstance(want, list) or not all(isinstance(s, str) for s in want):
        raise ValueError('give the lines as options.lines or expected rules {"expected": [...]}')
    return want


def main():
    try:
        req = json.load(sys.stdin)
        got = [line.rstrip() for line in text_of(req.get("result")).split("\n")]
        want = wanted(req)
    except (ValueError, OSError, KeyError, TypeError, AttributeError) as e:
        print(json.dumps({"score": 0, "reason": "lines_equal: %s" % e}))
        return 0
    while got and got[-1] == "":
        got.pop()
    if got == want:
        print(json.dumps({"score": 1, "reason": "lines_equal: all %d lines match" % len(want)}))
        return 0
    for i in range(max(len(got), len(want))):
        g = got[i] if i < len(got) else None
        w = want[i] if i < len(want) else None
        if g != w:
            reason = "lines_equal: line %d is %r, expected %r (%d lines, expected %d)" % (
                i + 1, g, w, len(got), len(want))
            break
    print(json.dumps({"score": 0, "reason": reason}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""check_results.py DIR ID...: DIR/results.jsonl holds only whole JSON lines,
each ID has exactly one final line and it scored 1.0, and no other episode is
final. Used by tests/integration/test_suite.sh and test_slurm.sh."""
import json
import sys


def main():
    d, ids = sys.argv[1], sorted(sys.argv[2:])
    raw = open(d + "/results.jsonl", "rb").read()
    assert raw.endswith(b"\n"), "results.jsonl does not end with a newline"
    final = {}
    for n, line in enumerate(raw.decode().splitlines(), 1):
        o = json.loads(line)
        for k in ("task_id", "domain", "repeat", "attempt", "final", "score", "exit_cause", "steps",
                  "duration_s", "trace"):
            assert k in o, "line %d lacks %s" % (n, k)
        if o["final"]:
            key = o["task_id"] if o["repeat"] == 0 else "%s#%d" % (o["task_id"], o["repeat"])
            assert key not in final, "two final lines for " + key
            final[key] = o
    assert sorted(final) == ids, "final episodes %s, want %s" % (sorted(final), ids)
    bad = {k: (v["score"], v["exit_cause"], v["reason"]) for k, v in final.items() if v["score"] != 1.0}
    assert not bad, "scores below 1: %s" % bad


if __name__ == "__main__":
    main()

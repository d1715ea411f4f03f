#!/usr/bin/env python3
"""The `script` metric for semantics.json: vm_file multi with gives [0, 1, 2] is a list artifact
of two files (one, two) and a null for the file the guest lacks."""
import json
import sys

req = json.load(sys.stdin)
res = req["result"]
ok = (res.get("type") == "list" and len(res["items"]) == 3 and res["items"][2] is None
      and [open(i["path"]).read() for i in res["items"][:2]] == ["one\n", "two\n"])
print(json.dumps({"score": 1 if ok else 0, "reason": "multi: " + json.dumps(res)[:300]}))

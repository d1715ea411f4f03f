#!/usr/bin/python3
"""Reference for the accessibility dumper's test: the slow way, one pyatspi
call per property per node, following the rules listed in
envmgr_guest/a11y.py (OSWorld's shape).  Prints a JSON list of
[path-of-tags, sorted attribute items, text] for every node, which the test
compares with the same list made from envmgr-guest's XML."""
import json
import sys

import pyatspi

NS = {"st": "https://accessibility.ubuntu.example.org/ns/state",
      "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
      "cp": "https://accessibility.ubuntu.example.org/ns/component",
      "val": "https://accessibility.ubuntu.example.org/ns/value",
      "act": "https://accessibility.ubuntu.example.org/ns/action"}


def node(acc, path, out):
    a = {"name": acc.name}
    for s in acc.getState().get_states():
        a["{%s}%s" % (NS["st"], pyatspi.StateType._enum_lookup[s].split("_", 1)[1].lower())] = "true"
    for k, v in acc.get_attributes().items():
        a["{%s}%s" % (NS["attr"], k)] = v
    if a.get("{%s}visible" % NS["st"]) == "true" and a.get("{%s}showing" % NS["st"]) == "true":
        try:
            c = acc.queryComponent()
            e = c.getExtents(pyatspi.XY_SCREEN)
            a["{%s}screencoord" % NS["cp"]] = str((e.x, e.y))
            a["{%s}size" % NS["cp"]] = str((e.width, e.height))
        except NotImplementedError:
            pass
    text = ""
    try:
        t = acc.queryText()
        text = t.getText(0, t.characterCount).replace("\ufffc", "").replace("\ufffd", "")
    except NotImplementedError:
        pass
    for iface, key in (("queryImage", "image"), ("querySelection", "selection")):
        try:
            getattr(acc, iface)()
            a[key] = "true"
        except NotImplementedError:
            pass
    try:
        v = acc.queryValue()
        for k, f in (("value", "currentValue"), ("min", "minimumValue"), ("max", "maximumValue"),
                     ("step", "minimumIncrement")):
            a["{%s}%s" % (NS["val"], k)] = str(getattr(v, f))
    except NotImplementedError:
        pass
    try:
        act = acc.queryAction()
        for i in range(act.nActions):
            n = act.getName(i).replace(" ", "-")
            a["{%s}%s_desc" % (NS["act"], n)] = act.getDescription(i)
            a["{%s}%s_kb" % (NS["act"], n)] = act.getKeyBinding(i)
    except NotImplementedError:
        pass
    tag = (acc.getRoleName().strip() or "unknown").replace(" ", "-")
    p = path + [tag]
    out.append(["/".join(p), sorted(a.items()), text])
    for ch in acc:
        node(ch, p, out)


def main():
    want = sys.argv[1] if len(sys.argv) > 1 else None
    out = []
    for app in pyatspi.Registry.getDesktop(0):
        if want and app.name != want:
            continue
        node(app, ["desktop-frame"], out)
    json.dump(out, sys.stdout)


main()

"""Checks of the dumper's LibreOffice extents correction (fix_vcl_extents in
vm-images/toolbelt/envmgr_guest/a11y.py) on trees shaped like the ones
LibreOffice 7.4 gives (the figures are from a maximized Calc window at
1920x1080: GTK container at y 76, VCL root pane reported at y 51).  The
apps smoke test checks the same thing on a real Calc by clicking a cell.
Usage: a11y_extents_check.py TOOLBELT_DIR.  Prints "ok   ..." / "FAIL ..." lines.
"""
import sys

sys.path.insert(0, sys.argv[1])
from envmgr_guest import a11y  # noqa: E402

ROLE = {name: i for i, name in enumerate(a11y.ROLE_NAMES)}
GTK = {"toolkit": "gtk"}


def result(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + detail))


def node(ref, role, extents, attrs=None):
    n = a11y.Node(("app", ref))
    n.role = ROLE[role]
    n.extents = extents
    n.attrs = attrs if attrs is not None else {}
    return n


def calc_tree():
    """frame > GTK panel > VCL root pane > (toolbar > GTK text, table + cells); then a sibling panel."""
    nodes = {}
    plan = []
    for ref, role, ext, attrs, depth in (
            ("frame", "frame", (0, 27, 1920, 1053), GTK, 1),
            ("box", "panel", (0, 76, 1920, 1004), GTK, 2),
            ("root", "root pane", (0, 51, 1920, 1004), {}, 3),
            ("toolbar", "tool bar", (0, 129, 1861, 42), {}, 4),
            ("namebox", "text", (4, 156, 126, 34), GTK, 5),
            ("table", "table", (41, 189, 1806, 807), {}, 4),
            ("menubar", "menu bar", (0, 51, 1920, 25), GTK, 2)):
        n = node(ref, role, ext, attrs)
        nodes[n.ref] = n
        plan.append((n, depth, None))
    cell = node("A1", "table cell", (41, 189, 82, 17))
    nodes[cell.ref] = cell
    nodes[("app", "table")].cells = [[cell.ref, None]]
    return plan, nodes


def ext(nodes, ref):
    return nodes[("app", ref)].extents


plan, nodes = calc_tree()
a11y.fix_vcl_extents(plan, nodes)
result(ext(nodes, "root") == (0, 76, 1920, 1004), "the VCL root pane moves onto its GTK container", str(ext(nodes, "root")))
result(ext(nodes, "toolbar") == (0, 154, 1861, 42), "a VCL toolbar below it moves 25 px down", str(ext(nodes, "toolbar")))
result(ext(nodes, "table") == (41, 214, 1806, 807), "the sheet moves", str(ext(nodes, "table")))
result(ext(nodes, "A1") == (41, 214, 82, 17), "its cells move (cell A1 where Calc draws it)", str(ext(nodes, "A1")))
result(ext(nodes, "namebox") == (4, 156, 126, 34), "a native GTK widget inside the root pane stays", str(ext(nodes, "namebox")))
result(ext(nodes, "menubar") == (0, 51, 1920, 25) and ext(nodes, "frame") == (0, 27, 1920, 1053),
       "nodes outside the root pane stay", "%s %s" % (ext(nodes, "menubar"), ext(nodes, "frame")))

# A window without a native menu bar (a VCL dialog): root pane and container agree, nothing moves.
plan, nodes = calc_tree()
nodes[("app", "box")].extents = (0, 51, 1920, 1004)
a11y.fix_vcl_extents(plan, nodes)
result(ext(nodes, "toolbar") == (0, 129, 1861, 42) and ext(nodes, "A1") == (41, 189, 82, 17),
       "no offset when the root pane is where its container is", str(ext(nodes, "toolbar")))

# A root pane of another size than its parent is not this bug: nothing moves.
plan, nodes = calc_tree()
nodes[("app", "box")].extents = (0, 76, 1920, 980)
a11y.fix_vcl_extents(plan, nodes)
result(ext(nodes, "toolbar") == (0, 129, 1861, 42), "no offset when the sizes differ", str(ext(nodes, "toolbar")))

# A GTK application's root pane (toolkit=gtk itself) is never moved.
plan, nodes = calc_tree()
nodes[("app", "root")].attrs = dict(GTK)
a11y.fix_vcl_extents(plan, nodes)
result(ext(nodes, "toolbar") == (0, 129, 1861, 42), "a GTK root pane is left alone", str(ext(nodes, "toolbar")))

# Nodes without extents (not showing) stay without.
plan, nodes = calc_tree()
nodes[("app", "toolbar")].extents = None
a11y.fix_vcl_extents(plan, nodes)
result(ext(nodes, "toolbar") is None and ext(nodes, "table") == (41, 214, 1806, 807),
       "a node without extents keeps none", str(ext(nodes, "toolbar")))

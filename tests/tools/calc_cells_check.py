"""Checks of the dumper's derived Calc cells (envmgr_guest/calc_cells.py and
calc_model.cursor_from_view_data) on synthetic sheets.  The apps smoke test
checks the same on a real Calc against every cell read.
Usage: calc_cells_check.py TOOLBELT_DIR.  Prints "ok   ..." / "FAIL ..." lines.
"""
import sys

sys.path.insert(0, sys.argv[1])
from envmgr_guest import a11y, calc_cells, calc_model  # noqa: E402

SHOWN = [a11y.STATE_SHOWING, a11y.STATE_VISIBLE]
failures = 0


def result(ok, what, detail=""):
    global failures
    failures += 0 if ok else 1
    print(("ok   " if ok else "FAIL ") + what + ("" if ok else ": " + str(detail)))


def model(**kw):
    """A 10x10 area A1:J10 of one format, nothing in it, cursor in A1."""
    m = {"window": "w", "sheet": "Sheet1", "area": [0, 0, 9, 9], "content": [], "groups": [[[0, 0, 9, 9]]],
         "merged_groups": [], "selection": [], "cursor": [0, 0]}
    m.update(kw)
    return m


def grid_node(r, c, text="", states=SHOWN, w=80, h=20):
    n = a11y.Node(("app", "/cell/%d/%d" % (r, c)))
    n.role = 56
    n.states = list(states)
    n.attrs = {"Formula": ""}
    n.text = text
    n.extents = (100 + c * 80, 200 + r * 20, w, h) if w else (0, 0, 0, 0)
    return n


def read_grid(plan, special=None):
    """The nodes the dumper would read: the plan's first reads."""
    special = special or {}
    return {rc: special.get(rc) or grid_node(*rc) for rc in plan.first_reads()}


def make(rc, tpl, extents, own):
    n = a11y.Node(("app", "derived/%d/%d" % rc))
    src = own or tpl
    n.attrs = tpl.attrs
    n.states, n.text = src.states, src.text
    n.name, n.extents = calc_cells.cell_name(*rc), extents
    return n


def light_node(r, c, **kw):
    """A light read: states, extents and text, no attributes."""
    n = grid_node(r, c, **kw)
    n.attrs = None
    return n


names = {0: "A", 25: "Z", 26: "AA", 51: "AZ", 701: "ZZ", 702: "AAA", 16383: "XFD"}
result(all(calc_cells.col_name(c) == n for c, n in names.items()), "column names A..XFD",
       {c: calc_cells.col_name(c) for c in names})
result(calc_cells.cell_name(6, 1) == "B7", "cell name B7")
result(calc_cells.sheet_matches("Sheet Sheet1", "Sheet1") and calc_cells.sheet_matches("Sheet1", "Sheet1")
       and not calc_cells.sheet_matches("Sheet Sheet10", "Sheet1") and not calc_cells.sheet_matches("x", ""),
       "table name matches its sheet, and only it")
m = {"window": "a.xlsx - LibreOffice Calc", "sheet": "Sheet1"}
result(calc_cells.model_matches(m, "a.xlsx - LibreOffice Calc", "Sheet Sheet1")
       and not calc_cells.model_matches(m, "b.xlsx - LibreOffice Calc", "Sheet Sheet1")
       and not calc_cells.model_matches(m, "a.xlsx - LibreOffice Calc", "Sheet Sheet2")
       and not calc_cells.model_matches(m, None, "Sheet Sheet1"),
       "the model applies to its window's sheet only")

vd = calc_model.cursor_from_view_data
result(vd("100/60/0;0;tw:1847;12/11/0/0/0/0/2/0/0/0/0", 0) == [12, 11], "cursor from view data")
result(vd("100/60/0;1;tw:1847;0/0/0/0/0/0/2/0/0/0/0;3+70000+0+0", 1) == [3, 70000], "cursor of sheet 2, '+' separators")
result(all(vd(x, t) is None for x, t in (("", 0), ("100/60/0;0;tw:1", 0), ("a;b;c;x/y/z", 0),
                                         ("1;0;tw:1;99999/1/", 0), (None, 0), ("1;0;tw:1;1/1/", 3))),
       "no cursor from malformed view data")

# a blank sheet: only the grid is read, the rest derived with the grid's x/width and y/height
p = calc_cells.CellPlan(model(), 0, 0, 9, 9)
first = p.first_reads()
result(len(first) == 19, "blank 10x10: 19 grid cells read", len(first))
read = read_grid(p)
result(p.consistent(read), "blank sheet consistent with its model")
derived, again = p.derive(read, make)
d = derived.get((4, 7))
result(len(derived) == 81 and not again and d is not None and d.name == "H5"
       and d.extents == (100 + 7 * 80, 200 + 4 * 20, 80, 20), "81 cells derived, H5 where its column and row are",
       (len(derived), again, d and (d.name, d.extents)))

# light reads: of the grid's blank cells, all but one per format group read only states, extents, text
p = calc_cells.CellPlan(model(), 0, 0, 9, 9)
light = p.light_reads()
result(len(light) == 17 and (0, 0) not in light and (0, 1) not in light, "blank 10x10: 17 of the 19 grid reads light",
       sorted(light))
read = {rc: (light_node(*rc) if rc in light else grid_node(*rc)) for rc in p.first_reads()}
read[(0, 5)].extents = (555, 200, 81, 20)
derived, again = p.derive(read, make, light)
d = derived.get((0, 5))
result(len(derived) == 98 and not again and d is not None and d.attrs == {"Formula": ""} and d.name == "F1"
       and d.extents == (555, 200, 81, 20) and derived[(3, 5)].extents[2] == 81,
       "light reads get the template's attributes, keep their own extents, and give their column's",
       (len(derived), again, d and (d.attrs, d.name, d.extents)))
read[(0, 1)].text = "x"     # the template itself is not blank: no template, so the light reads are read again
derived, again = p.derive(read, make, light)
result(set(light) <= set(again), "no template for a group: its light reads are read in full", len(again))
groups = [[[0, 0, 4, 9]], [[5, 0, 9, 9]]]
p = calc_cells.CellPlan(model(groups=groups), 0, 0, 9, 9)
light = p.light_reads()
result((0, 5) not in light and (0, 6) in light and len(light) == 16, "one full read per format group in the grid",
       sorted(set(p.first_reads()) - light))

# content, selection and cursor are read; a cell whose text the model does not know is an inconsistency
p = calc_cells.CellPlan(model(content=[[3, 3, 3, 3]], selection=[[5, 5, 6, 6]], cursor=[5, 5]), 0, 0, 9, 9)
need = set(p.first_reads())
result({(3, 3), (5, 5), (5, 6), (6, 5), (6, 6)} <= need, "content, selection and cursor cells are read")
read = read_grid(p)
read[(0, 4)].text = "surprise"
result(not p.consistent(read), "text in a cell the model calls blank: inconsistent")

# a cursor outside the rectangle (the view scrolled away) is not read
p = calc_cells.CellPlan(model(area=[20, 70, 29, 79], groups=[[[20, 70, 29, 79]]], cursor=[0, 0]), 70, 20, 79, 29)
result(all(70 <= r <= 79 and 20 <= c <= 29 for r, c in p.first_reads()), "a cursor off the view is not read")

# a hidden column: its grid cell is not showing, so its cells are neither read nor derived
p = calc_cells.CellPlan(model(), 0, 0, 9, 9)
read = read_grid(p, {(0, 4): grid_node(0, 4, states=[], w=0)})
derived, again = p.derive(read, make)
result(not any(c == 4 for _, c in derived) and not again and len(derived) == 72, "a hidden column has no derived cells",
       (len(derived), again))

# a second format covering D..F without a blank cell in the grid: its cells are read after all
groups = [[[0, 0, 2, 9], [6, 0, 9, 9]], [[3, 0, 5, 9]]]
p = calc_cells.CellPlan(model(groups=groups, content=[[3, 0, 5, 0]]), 0, 0, 9, 9)
read = read_grid(p, {(0, c): grid_node(0, c, text="x") for c in (3, 4, 5)})
result(p.consistent(read), "content in the grid consistent with the model")
derived, again = p.derive(read, make)
result(len(again) == 27 and all(3 <= c <= 5 for _, c in again), "a format group without a blank template is read",
       len(again))

# a merged area's group is read in full, and does not give its columns' extents
groups = [[[0, 0, 9, 9]], [[2, 0, 3, 0]]]
p = calc_cells.CellPlan(model(groups=[[[0, 0, 1, 9], [4, 0, 9, 9], [2, 1, 3, 9]], groups[1]],
                              merged_groups=[1]), 0, 0, 9, 9)
need = set(p.first_reads())
derived, again = p.derive(read_grid(p), make)
result((0, 2) in need and (0, 3) in need and not any(c in (2, 3) for _, c in derived) and len(again) == 18,
       "a merged area is read, its columns' cells too", (len(again), sorted(again)[:4]))

# cells outside the probed area are read
p = calc_cells.CellPlan(model(area=[0, 0, 4, 9], groups=[[[0, 0, 4, 9]]]), 0, 0, 9, 9)
result(all((r, c) in set(p.first_reads()) for r in range(10) for c in range(5, 10)),
       "cells outside the probed area are read")

sys.exit(1 if failures else 0)

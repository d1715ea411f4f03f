"""Which of a sheet's shown cells the dumper reads, and the rest derived.

Given calc_model's facts about the sheet, the cells read through AT-SPI are:
  - the grid: the rectangle's first row and first column (every column's x
    and width, every row's y and height, clipped to the view as LibreOffice
    clips them: a cell's extents are its column's by its row's),
  - the cells that can differ from a blank cell of their format: content,
    selection, the cursor, merged areas, and anything outside the probed area.
Those are read in full, but for the grid's blank cells other than one per
format group (the group's template): of those only what can differ from the
template is read (states, extents, text: the "light" reads, half the calls of
a full one) and the rest is the template's.
Every other cell is derived from a template: a blank cell of its format group
read in the grid.  It gets the template's role, states, attributes and
interfaces, the name Calc gives it (its address, "B7"), its column's x and
width and its row's y and height.  A row or column whose grid cell is not
showing (hidden, or scrolled under a frozen pane) has no derived cells.
A group without a blank template in the grid is read in full.

Consistency, checked on the grid cells read: a cell whose AT-SPI text is not
empty must be a content cell of the model.  If not, the model is not this
sheet's (another document came to the front, or the sheet changed between the
probe and the reads) and every cell is read."""

STATE_FOCUSED = 12
STATE_SELECTED = 23
STATE_SHOWING = 25
STATE_VISIBLE = 30


def col_name(c):
    s = ""
    c += 1
    while c:
        c, rem = divmod(c - 1, 26)
        s = chr(65 + rem) + s
    return s


def cell_name(r, c):
    return "%s%d" % (col_name(c), r + 1)


def sheet_matches(table_name, sheet):
    """Calc names a sheet's table "Sheet <name>" (in the UI's language)."""
    return bool(sheet) and (table_name == sheet or table_name.endswith(" " + sheet))


def model_matches(model, window_name, table_name):
    """The model is of this table: same window title (two windows of one
    document differ by their ": 2"), same sheet."""
    return (bool(window_name) and window_name == model.get("window")
            and sheet_matches(table_name or "", model.get("sheet")))


def _cells_of(ranges, r0, c0, r1, c1):
    """(row, col) of the rectangle inside [c0', r0', c1', r1'] ranges."""
    out = set()
    for a in ranges:
        ac0, ar0, ac1, ar1 = a
        for r in range(max(r0, ar0), min(r1, ar1) + 1):
            for c in range(max(c0, ac0), min(c1, ac1) + 1):
                out.add((r, c))
    return out


class CellPlan:
    def __init__(self, model, r0, c0, r1, c1):
        self.r0, self.c0, self.r1, self.c1 = r0, c0, r1, c1
        self.content = _cells_of(model["content"], r0, c0, r1, c1)
        self.group = {}
        for i, ranges in enumerate(model["groups"]):
            for rc in _cells_of(ranges, r0, c0, r1, c1):
                self.group[rc] = i
        special = set(self.content)
        special |= _cells_of(model["selection"], r0, c0, r1, c1)
        special |= _cells_of([model["cursor"] * 2], r0, c0, r1, c1)
        for i in model["merged_groups"]:
            special |= _cells_of(model["groups"][i], r0, c0, r1, c1)
        self.merged = set(model["merged_groups"])
        ac0, ar0, ac1, ar1 = model["area"]
        for r in range(r0, r1 + 1):
            for c in range(c0, c1 + 1):
                if not (ar0 <= r <= ar1 and ac0 <= c <= ac1) or (r, c) not in self.group:
                    special.add((r, c))
        self.special = special

    def all_cells(self):
        return [(r, c) for r in range(self.r0, self.r1 + 1) for c in range(self.c0, self.c1 + 1)]

    def first_reads(self):
        """The cells to read through AT-SPI: the grid and the special ones."""
        return sorted(self._grid() | self.special)

    def _grid(self):
        """The rectangle's first row and first column."""
        grid = {(self.r0, c) for c in range(self.c0, self.c1 + 1)}
        return grid | {(r, self.c0) for r in range(self.r0, self.r1 + 1)}

    def light_reads(self):
        """The first reads that need only states, extents and text: the
        grid's cells that are not special, but for the first of each format
        group (the template it will be read in full for)."""
        light, templates = set(), set()
        for rc in sorted(self._grid() - self.special):
            g = self.group.get(rc)
            if g is None:
                continue
            if g in templates:
                light.add(rc)
            else:
                templates.add(g)
        return light

    def consistent(self, read):
        """read: (row, col) -> Node of the cells read.  False if a cell shows
        text the model says it has not."""
        return all(not n.text or rc in self.content for rc, n in read.items())

    def derive(self, read, make_node, light=()):
        """(derived, again): derived (row, col) -> Node for the cells not read
        and for the light reads (light: their (row, col)); again, the cells
        that need a full read after all (no template).  make_node(rc,
        template, extents, own) builds a derived node; own is the light read
        whose states, extents and text it keeps, else None."""
        templates = {}
        for rc, n in read.items():
            g = self.group.get(rc)
            if (g is None or g in templates or rc in self.special or rc in light or n.text
                    or n.state(STATE_FOCUSED) or n.state(STATE_SELECTED)
                    or not (n.state(STATE_SHOWING) and n.state(STATE_VISIBLE))):
                continue
            templates[g] = n
        derived, again = {}, []
        for rc in self.all_cells():
            if rc in light and rc in read:
                t = templates.get(self.group.get(rc))
                if t is None:
                    again.append(rc)
                else:
                    derived[rc] = make_node(rc, t, read[rc].extents, read[rc])
                continue
            if rc in read:
                continue
            r, c = rc
            gx, gy = read.get((self.r0, c)), read.get((r, self.c0))
            if gx is None or gy is None or self.group.get((self.r0, c)) in self.merged \
                    or self.group.get((r, self.c0)) in self.merged:
                again.append(rc)
                continue
            if not (_shown(gx) and _shown(gy)):
                continue                # its row or column is not shown
            t = templates.get(self.group.get(rc))
            if t is None:
                again.append(rc)
                continue
            x, _, w, _ = gx.extents
            _, y, _, h = gy.extents
            derived[rc] = make_node(rc, t, (x, y, w, h), None)
        return derived, again


def _shown(n):
    return bool(n.extents) and n.state(STATE_SHOWING) and n.state(STATE_VISIBLE)

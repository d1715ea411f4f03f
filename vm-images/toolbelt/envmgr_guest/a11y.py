"""The accessibility tree of the desktop as XML in OSWorld's shape, read in bulk.

Shape (facts taken from OSWorld's in-guest server, not its code): the root
element is `desktop-frame`; below it one element per application, then the
AT-SPI tree.  An element's tag is the node's role name with blanks replaced by
'-' ("unknown" when empty).  Attributes, in this order:
  name                       the accessible name
  st:<state>="true"          every state set (pyatspi's STATE_X -> "x")
  attr:<key>                 the object attributes (GetAttributes)
  cp:screencoord, cp:size    "(x, y)" / "(w, h)" in screen coordinates, only
                             for nodes both visible and showing (LibreOffice's
                             own widgets corrected: fix_vcl_extents)
  image="true", selection="true"   the node implements Image / Selection
  val:value/min/max/step     for Value nodes (Python float text)
  act:<action>_desc / _kb    per action (blanks in its name -> '-')
The element text is the node's full text (Text interface), without U+FFFC and
U+FFFD.  Depth is cut at 50 levels and children at 1024 per node.  Below a
"document spreadsheet" a table's children are the cells that are showing,
row by row (OSWorld's Calc rule).  Namespaces (prefix -> URI) are those of
OSWorld's "ubuntu" map, all declared on the root.

How it is read (OSWorld walks it with one synchronous D-Bus round trip per
property per node, ~18 ms a node under TCG): the same calls, but pipelined.
The tree is walked level by level: for every node of a level, its role,
states, interfaces, name and children are requested at once and the replies
collected; then the remaining properties (attributes, extents, text, value,
actions) of all nodes at once.  Each application that offers a peer-to-peer
connection (GetApplicationBusAddress) is called over it, not through the bus
daemon.  A spreadsheet's cells are found through the Table interface (the
visible corner cells by position, then GetAccessibleAt for the rectangle
between), never by enumerating its 2^31-1 children.  Of that rectangle, the
cells that can differ from a blank cell of their format are read; the blank
ones are derived (calc_cells.py), from facts LibreOffice gives over UNO
(calc_model.py), checked against the cells read: ~70 reads instead of 1100
on a blank 1920x1080 sheet.  --read-every-cell reads them all.

Not org.a11y.atspi.Cache.GetItems: it answers with every object an
application caches, all windows, at about 1 ms an object under TCG
(LibreOffice: 1800 objects and 1.8 s for an Impress window of 220), and its
parents and indexes lag the live tree: LibreOffice and gnome-terminal
menus came out in another order or without a subtree that GetChildren has.

Showing only (--showing): a node that is not showing is left out with its
subtree, read no further than its state; the items of a closed GTK submenu
are not even asked (closed_gtk_submenu).  That is what OSWorld's agents keep
anyway (their filter drops every node not both showing and visible), and most
of a LibreOffice window: its menus list every item while closed (Writer: 187
of 1938 nodes showing, Impress 245 of 1766).  The observations of episodes
use it; the accessibility_tree getter, which metrics read, does not.

Caps: node count, output bytes and wall time; when one is hit the output is
still a well-formed tree and `truncated` says which cap was hit.
"""
import functools
import os
import re
import time

from . import calc_cells, calc_model, desktop_icons, x11raw

NS = {
    "st": "https://accessibility.ubuntu.example.org/ns/state",
    "attr": "https://accessibility.ubuntu.example.org/ns/attributes",
    "cp": "https://accessibility.ubuntu.example.org/ns/component",
    "doc": "https://accessibility.ubuntu.example.org/ns/document",
    "docattr": "https://accessibility.ubuntu.example.org/ns/document/attributes",
    "txt": "https://accessibility.ubuntu.example.org/ns/text",
    "val": "https://accessibility.ubuntu.example.org/ns/value",
    "act": "https://accessibility.ubuntu.example.org/ns/action",
}
MAX_DEPTH = 50
MAX_WIDTH = 1024
TEXT_MAX = 100000            # characters of text kept per node
CELL_CHUNK = 64              # cells fetched and read per round
PROBE_WAIT = 5.0             # s the dump waits for calc_model's probe after its own reads

IFACE = "org.a11y.atspi."
ROOT_PATH = "/org/a11y/atspi/accessible/root"
NULL_PATH = "/org/a11y/atspi/null"
COORD_SCREEN = 0
VALUE_PROPS = ("CurrentValue", "MinimumValue", "MaximumValue", "MinimumIncrement")

# AT-SPI state numbers (atspi-constants.h, the same order pyatspi uses)
STATE_ACTIVE = 1
STATE_FOCUSED = 12
STATE_SELECTABLE = 22
STATE_SELECTED = 23
STATE_SHOWING = 25
STATE_VISIBLE = 30
STATE_MANAGES_DESCENDANTS = 31


class A11yError(Exception):
    pass


# AT-SPI role names by number (atspi_role_get_name, at-spi2-core 2.46) and
# state names by number (pyatspi's STATE_X lower-cased): fixed tables, so the
# dumper needs no GObject introspection (seconds of imports under TCG).
ROLE_NAMES = [
    "invalid", "accelerator label", "alert", "animation", "arrow", "calendar", "canvas",
    "check box", "check menu item", "color chooser", "column header", "combo box", "date editor",
    "desktop icon", "desktop frame", "dial", "dialog", "directory pane", "drawing area",
    "file chooser", "filler", "focus traversable", "font chooser", "frame", "glass pane",
    "html container", "icon", "image", "internal frame", "label", "layered pane", "list",
    "list item", "menu", "menu bar", "menu item", "option pane", "page tab", "page tab list",
    "panel", "password text", "popup menu", "progress bar", "push button", "radio button",
    "radio menu item", "root pane", "row header", "scroll bar", "scroll pane", "separator",
    "slider", "spin button", "split pane", "status bar", "table", "table cell",
    "table column header", "table row header", "tearoff menu item", "terminal", "text",
    "toggle button", "tool bar", "tool tip", "tree", "tree table", "unknown", "viewport", "window",
    "extended", "header", "footer", "paragraph", "ruler", "application", "autocomplete", "editbar",
    "embedded", "entry", "chart", "caption", "document frame", "heading", "page", "section",
    "redundant object", "form", "link", "input method window", "table row", "tree item",
    "document spreadsheet", "document presentation", "document text", "document web",
    "document email", "comment", "list box", "grouping", "image map", "notification", "info bar",
    "level bar", "title bar", "block quote", "audio", "video", "definition", "article", "landmark",
    "log", "marquee", "math", "rating", "timer", "static", "math fraction", "math root",
    "subscript", "superscript", "description list", "description term", "description value",
    "footnote", "content deletion", "content insertion", "mark", "suggestion", "push button menu",
]
STATE_NAMES = [
    "invalid", "active", "armed", "busy", "checked", "collapsed", "defunct", "editable", "enabled",
    "expandable", "expanded", "focusable", "focused", "has_tooltip", "horizontal", "iconified",
    "modal", "multi_line", "multiselectable", "opaque", "pressed", "resizable", "selectable",
    "selected", "sensitive", "showing", "single_line", "stale", "transient", "vertical", "visible",
    "manages_descendants", "indeterminate", "required", "truncated", "animated", "invalid_entry",
    "supports_autocompletion", "selectable_text", "is_default", "visited", "checkable",
    "has_popup", "read_only",
]


ROLE_ICON = ROLE_NAMES.index("icon")
# a desktop icon's states: what GTK gives a showing, clickable item
ICON_STATES = tuple(STATE_NAMES.index(x) for x in ("enabled", "focusable", "selectable", "sensitive", "showing",
                                                   "visible"))


def role_name(role):
    return ROLE_NAMES[role] if 0 <= role < len(ROLE_NAMES) else ""


def states_from_bits(words):
    out = []
    for w, word in enumerate(words):
        word &= 0xFFFFFFFF
        while word:                 # the set bits only, lowest first
            low = word & -word
            out.append(w * 32 + low.bit_length() - 1)
            word ^= low
    return out


# ---------------------------------------------------------------- D-Bus
def bus_address():
    """The accessibility bus's address, from org.a11y.Bus on the session bus."""
    from . import dbusraw
    addr = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    if not addr:
        run = "/run/user/%d/bus" % os.getuid()
        if not os.path.exists(run):
            raise A11yError("no session bus (DBUS_SESSION_BUS_ADDRESS unset, no %s)" % run)
        addr = "unix:path=" + run
    try:
        c = dbusraw.Connection(addr, timeout=10)
        try:
            return c.call("org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus", "GetAddress")[0]
        finally:
            c.close()
    except (OSError, dbusraw.DBusError) as e:
        raise A11yError("no accessibility bus: %s" % e)


def connect(address=None):
    from . import dbusraw
    address = address or bus_address()
    try:
        return dbusraw.Connection(address, timeout=10)
    except (OSError, dbusraw.DBusError) as e:
        raise A11yError("cannot connect to the accessibility bus %s: %s" % (address, e))


class Batch:
    """Method calls sent pipelined (dbusraw) and collected by run().

    A call to an application the dumper holds a peer-to-peer connection to
    goes over it, the rest over the bus: the bus daemon parses and routes
    every message twice, a third of the guest's CPU in a dump under TCG."""

    def __init__(self, dumper, deadline):
        self.dumper = dumper
        self.deadline = deadline
        self.queues = {}           # id(connection) -> (connection, calls)
        self.calls = 0
        self.errors = 0
        self.timed_out = False

    def call(self, ref, iface, method, args, on_reply):
        sig, vals = args if args else ("", ())
        if sig.startswith("(") and sig.endswith(")"):
            sig = sig[1:-1]             # GVariant-style "(ii)" = two arguments
        conn = self.dumper.direct.get(ref[0])
        dest = None if conn else ref[0]
        conn = conn or self.dumper.conn
        self.queues.setdefault(id(conn), (conn, []))[1].append(
            (dest, ref[1], iface, method, sig, vals, on_reply))

    def run(self):
        # A reply may queue more calls (actions' names), on its own
        # connection: go round until every queue is empty.
        from . import dbusraw
        while not self.timed_out:
            flights = [dbusraw.Flight(c, q) for c, q in self.queues.values() if q]
            if not flights:
                break
            self.timed_out = dbusraw.pipeline(flights, self.deadline)
            for f in flights:
                if f.failed is not None:
                    if f.conn is self.dumper.conn:
                        raise A11yError("accessibility bus: %s" % f.failed)
                    # The application closed its connection (it quit or
                    # broke the protocol): what it owed is lost.
                    self.dumper.drop_direct(f.conn)
                    f.errors = len(f.calls)
                self.errors += f.errors
                self.calls += len(f.calls)
                f.calls.clear()
        return not self.timed_out


def _v(sig, *values):
    return (sig, values)


def read_identity(b, n):
    """Queue the reads of a node's role, interfaces and name on batch b.

    Properties.Get for the name, never GetAll: Qt's bridge (VLC) answers
    only Get, and GetAll can abort an application (see read_value)."""
    acc = IFACE + "Accessible"
    b.call(n.ref, acc, "GetRole", None, lambda v, n=n: setattr(n, "role", v[0]))
    b.call(n.ref, acc, "GetInterfaces", None, lambda v, n=n: setattr(n, "ifaces", tuple(v[0])))
    b.call(n.ref, "org.freedesktop.DBus.Properties", "Get", _v("(ss)", acc, "Name"),
           lambda v, n=n: setattr(n, "name", v[0]))


def read_attributes(b, n):
    acc = IFACE + "Accessible"
    b.call(n.ref, acc, "GetAttributes", None, lambda v, n=n: setattr(n, "attrs", v[0]))


def closed_gtk_submenu(n):
    """n is a GTK menu item with a submenu, and its submenu is not open:
    then no item of it is showing, and the showing-only dump need not ask
    each (LibreOffice's closed menus: a fifth of a Calc observation's calls).

    GTK's own rule (GtkMenuItemAccessible's ref_state_set, GTK 3; GAIL's
    the same in GTK 2): an item whose accessible parent is a menu item that
    is not SELECTED loses SHOWING.  A menu item with a submenu has role
    "menu" and always the Action interface and SELECTABLE state; a GtkMenu
    (a popup's own accessible, also "menu") has neither, and its items keep
    their state, so it is never taken for one."""
    return (role_name(n.role) == "menu" and n.has("Action") and n.state(STATE_SELECTABLE)
            and not n.state(STATE_SELECTED) and (n.attrs or {}).get("toolkit") == "gtk")


def read_value(b, n):
    """Queue the reads of a Value node's four properties on batch b.

    One Get per property, as pyatspi reads them.  Never GetAll: at-spi's
    bridge aborts the whole application (libdbus: "Array or variant type
    requires that type variant be written") when one of Value's properties
    has no value, as in Chromium."""
    n.value = {}
    for prop in VALUE_PROPS:
        b.call(n.ref, "org.freedesktop.DBus.Properties", "Get", _v("(ss)", IFACE + "Value", prop),
               lambda v, prop=prop, n=n: n.value.__setitem__(prop, v[0]))


# ---------------------------------------------------------------- the tree
class Node:
    __slots__ = ("ref", "role", "name", "states", "ifaces", "children", "child_count",
                 "attrs", "extents", "text", "value", "actions", "cells", "hidden")

    def __init__(self, ref):
        self.ref = ref
        self.role = 0
        self.name = ""
        self.states = []
        self.ifaces = ()
        self.children = None       # list of refs, None = not read yet
        self.child_count = 0
        self.attrs = None
        self.extents = None
        self.text = None
        self.value = None
        self.actions = None
        self.cells = None          # spreadsheet: refs of the showing cells
        self.hidden = False        # showing-only dump: not showing, left out with its subtree

    def has(self, iface):
        return (IFACE + iface) in self.ifaces

    def state(self, s):
        return s in self.states


class Dumper:
    def __init__(self, conn=None, max_nodes=10000, max_bytes=8 << 20, timeout=20.0,
                 app_aliases=None, scope="all", p2p=True, showing_only=False, calc_probe=True):
        self.conn = conn or connect()
        self.calc_probe = calc_probe   # False: read every cell of a sheet through AT-SPI
        self.max_nodes = max_nodes
        self.max_bytes = max_bytes
        self.deadline = time.monotonic() + timeout
        self.nodes = {}            # ref -> Node
        self.truncated = []
        self.app_aliases = app_aliases or {}
        self.scope = scope
        self.p2p = p2p
        self.showing_only = showing_only
        self.calls = 0
        self.errors = 0
        self.direct = {}           # bus name -> peer-to-peer dbusraw.Connection
        self.calc_model = None     # calc_model.probe()'s answer, when there is one
        self.cell_stats = {"read": 0, "light": 0, "derived": 0, "model": "none"}

    # -- structure ---------------------------------------------------
    def _batch(self):
        return Batch(self, self.deadline)

    def open_direct(self, apps):
        """A peer-to-peer connection to each application that offers one
        (Application.GetApplicationBusAddress; at-spi2-atk does, Qt does not)."""
        from . import dbusraw
        addrs = {}
        b = self._batch()
        for a in apps:
            b.call((a[0], ROOT_PATH), IFACE + "Application", "GetApplicationBusAddress", None,
                   lambda v, a=a: addrs.__setitem__(a[0], v[0]))
        self._finish(b)
        self.errors -= b.errors     # an application without the method (Qt) is not a failure
        for name, addr in addrs.items():
            if not isinstance(addr, str) or not addr.startswith("unix:"):
                continue
            try:
                self.direct[name] = dbusraw.Connection(addr, timeout=2, hello=False)
            except (OSError, dbusraw.DBusError):
                pass                # the bus still reaches it

    def drop_direct(self, conn):
        for name, c in list(self.direct.items()):
            if c is conn:
                del self.direct[name]
        conn.close()

    def close(self):
        for c in set(self.direct.values()):
            c.close()
        self.direct = {}
        self.conn.close()

    def _finish(self, b):
        ok = b.run()
        self.calls += b.calls
        self.errors += b.errors
        if not ok and "time" not in self.truncated:
            self.truncated.append("time")
        return ok

    def applications(self):
        b = self._batch()
        out = []
        b.call(("org.a11y.atspi.Registry", ROOT_PATH), IFACE + "Accessible", "GetChildren", None,
               lambda v: out.extend(tuple(r) for r in v[0]))
        self._finish(b)
        return out

    def fetch(self, refs):
        """Role, name, states, interfaces and children of objects not read
        yet.  Children come with the state's reply, in the same round: a
        GetChildren unless the object manages its descendants (a
        spreadsheet's 2^31-1 cells), whose count is asked instead."""
        b = self._batch()
        todo = [r for r in refs if r not in self.nodes and r[1] != NULL_PATH]
        acc = IFACE + "Accessible"
        props = "org.freedesktop.DBus.Properties"

        def got_children(v, n):
            n.children = [tuple(r) for r in v[0]]
            n.child_count = len(n.children)

        def got_state(v, n, b=b):
            n.states = states_from_bits(v[0])
            if self.showing_only:
                # An application has no showing state; below it, a node that
                # is not showing costs nothing more than its state.
                if n.ref[1] != ROOT_PATH and not n.state(STATE_SHOWING):
                    n.hidden = True
                    return
                read_identity(b, n)
                read_attributes(b, n)      # now, not in details: plan needs them
            if n.state(STATE_MANAGES_DESCENDANTS):
                b.call(n.ref, props, "Get", _v("(ss)", acc, "ChildCount"),
                       lambda v, n=n: setattr(n, "child_count", int(v[0])))
            else:
                b.call(n.ref, acc, "GetChildren", None, lambda v, n=n: got_children(v, n))

        for ref in todo:
            n = Node(ref)
            self.nodes[ref] = n
            b.call(ref, acc, "GetState", None, lambda v, n=n: got_state(v, n))
            if not self.showing_only:
                read_identity(b, n)
        self._finish(b)

    def fetch_children(self, nodes):
        """Children refs of nodes that manage their descendants (fetch read
        their count, not their children): the first MAX_WIDTH of them."""
        b = self._batch()
        for n in nodes:
            if n.children is not None:
                continue
            n.children = []
            cnt = n.child_count
            if cnt <= 0:
                continue
            if cnt <= MAX_WIDTH:
                b.call(n.ref, IFACE + "Accessible", "GetChildren", None,
                       lambda v, n=n: n.children.extend(tuple(r) for r in v[0]))
            else:
                slots = [None] * MAX_WIDTH
                n.children = slots
                for i in range(MAX_WIDTH):
                    b.call(n.ref, IFACE + "Accessible", "GetChildAtIndex", _v("(i)", i),
                           lambda v, slots=slots, i=i: slots.__setitem__(i, tuple(v[0])))
        self._finish(b)
        for n in nodes:
            if n.children:
                n.children = [r for r in n.children if r is not None]

    # -- selection of what is emitted --------------------------------
    def plan(self, app_refs):
        """The emitted nodes as (node, depth, calc_flag) in document order,
        within the depth, width and node caps.  The tree is read level by
        level, one batch per level."""
        seen = 0
        level = [(r, 1, None) for r in app_refs]
        flags = {}
        while level and time.monotonic() < self.deadline:
            self.fetch([r for r, _, _ in level if r not in self.nodes])
            nodes = []
            for r, depth, flag in level:
                n = self.nodes.get(r)
                if n is None or n.hidden:
                    continue
                rn = role_name(n.role)
                if not flag:
                    if rn == "document spreadsheet":
                        flag = "calc"
                    elif rn == "application" and n.name == "Thunderbird":
                        flag = "thunderbird"
                flags[r] = (depth, flag)
                seen += 1
                if self.showing_only and closed_gtk_submenu(n):
                    continue
                if depth < MAX_DEPTH and not (flag == "calc" and rn == "table"):
                    nodes.append((n, depth, flag))
            if seen >= self.max_nodes:
                break
            self.fetch_children([n for n, _, _ in nodes
                                 if n.children is None and not self._skip_children(n)])
            level = [(c, d + 1, f) for n, d, f in nodes for c in (n.children or [])[:MAX_WIDTH]]
        out = []
        stack = [r for r in reversed(app_refs)]
        while stack:
            ref = stack.pop()
            n = self.nodes.get(ref)
            if n is None or ref not in flags:
                continue
            if len(out) >= self.max_nodes:
                if "nodes" not in self.truncated:
                    self.truncated.append("nodes")
                break
            depth, flag = flags[ref]
            out.append((n, depth, flag))
            if depth == MAX_DEPTH or (flag == "calc" and role_name(n.role) == "table"):
                continue
            for c in reversed((n.children or [])[:MAX_WIDTH]):
                stack.append(c)
        return out

    def _skip_children(self, n):
        # Never enumerate a spreadsheet's cells; huge managed containers get
        # only their first MAX_WIDTH children (OSWorld's width cap).
        return False

    # -- per-node details --------------------------------------------
    def details(self, nodes):
        b = self._batch()
        for n in nodes:
            if n.attrs is None:
                read_attributes(b, n)
            if n.state(STATE_VISIBLE) and n.state(STATE_SHOWING) and n.has("Component"):
                b.call(n.ref, IFACE + "Component", "GetExtents", _v("(u)", COORD_SCREEN),
                       lambda v, n=n: setattr(n, "extents", tuple(v[0])))
            if n.has("Text"):
                b.call(n.ref, IFACE + "Text", "GetText", _v("(ii)", 0, -1),
                       lambda v, n=n: setattr(n, "text", v[0]))
            if n.has("Value"):
                read_value(b, n)
            if n.has("Action"):
                # GetActions gives the localized names; the attribute names
                # use the plain ones (GetName), like pyatspi's getName.
                def got_actions(v, n=n, b=b):
                    acts = [list(a) for a in v[0]]
                    n.actions = acts
                    for i in range(len(acts)):
                        b.call(n.ref, IFACE + "Action", "GetName", _v("(i)", i),
                               lambda v, a=acts[i]: a.__setitem__(0, v[0]))
                b.call(n.ref, IFACE + "Action", "GetActions", None, got_actions)
        self._finish(b)

    def load_cells(self, tables_in):
        """The showing cells of spreadsheet tables [(table, its window's
        name)], through the Table interface."""
        tables = [t for t, _ in tables_in]
        window_of = {t.ref: w for t, w in tables_in}
        corners = {}
        b = self._batch()
        for t in tables:
            if not t.extents or not t.has("Table"):
                continue
            x, y, w, h = t.extents
            if w <= 2 or h <= 2:
                continue
            corners[t.ref] = {}
            for key, (px, py) in (("tl", (x + 1, y + 1)), ("br", (x + w - 2, y + h - 2))):
                b.call(t.ref, IFACE + "Component", "GetAccessibleAtPoint",
                       _v("(iiu)", px, py, COORD_SCREEN),
                       lambda v, t=t, key=key: corners[t.ref].__setitem__(key, tuple(v[0])))
        self._finish(b)
        # Row and column of the corner cells from their names ("AC47": Calc
        # names cells by address; its child indexes overflow on wide sheets).
        names = {}
        b = self._batch()
        for tref, c in corners.items():
            for key, cref in c.items():
                if cref[1] == NULL_PATH:
                    continue
                b.call(cref, "org.freedesktop.DBus.Properties", "Get",
                       _v("(ss)", IFACE + "Accessible", "Name"),
                       lambda v, tref=tref, key=key: names.__setitem__((tref, key), v[0]))
        self._finish(b)
        rc = {}
        for (tref, key), name in names.items():
            m = re.match(r"^\$?([A-Z]{1,3})\$?([0-9]{1,7})$", name or "")
            if not m:
                continue
            col = 0
            for ch in m.group(1):
                col = col * 26 + (ord(ch) - 64)
            rc[(tref, key, "Row")] = int(m.group(2)) - 1
            rc[(tref, key, "Column")] = col - 1
        budget = [max(0, self.max_nodes - len(self.nodes))]
        for t in tables:
            r0, c0 = rc.get((t.ref, "tl", "Row")), rc.get((t.ref, "tl", "Column"))
            r1, c1 = rc.get((t.ref, "br", "Row")), rc.get((t.ref, "br", "Column"))
            if None in (r0, c0, r1, c1) or r0 < 0 or c0 < 0 or r1 < r0 or c1 < c0:
                continue
            grid = [[None] * (c1 - c0 + 1) for _ in range(r1 - r0 + 1)]
            t.cells = grid
            plan = None
            if self.calc_model and calc_cells.model_matches(self.calc_model, window_of.get(t.ref), t.name):
                plan = calc_cells.CellPlan(self.calc_model, r0, c0, r1, c1)
            if plan is None:
                self.cell_stats["read"] += self._read_cells(t, r0, c0, grid, [
                    (r, c) for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)], budget)
                continue
            first = plan.first_reads()
            light = plan.light_reads()
            self.cell_stats["read"] += self._read_cells(t, r0, c0, grid, first, budget, light)
            read = {(r, c): self.nodes[grid[r - r0][c - c0]] for r, c in first
                    if grid[r - r0][c - c0] is not None}
            if not plan.consistent(read):
                self.cell_stats["model"] = "inconsistent with the sheet's cells"
                rest = [x for x in plan.all_cells() if x not in read or x in light]
                self.cell_stats["read"] += self._read_cells(t, r0, c0, grid, rest, budget)
                continue

            def make_node(rc, tpl, extents, own, t=t):
                n = Node((t.ref[0], "%s/cell/%d/%d" % (t.ref[1], rc[0], rc[1])))
                n.role, n.ifaces, n.attrs = tpl.role, tpl.ifaces, tpl.attrs
                src = own or tpl
                n.states, n.text = src.states, src.text
                n.name, n.extents = calc_cells.cell_name(*rc), extents
                return n
            derived, again = plan.derive(read, make_node, light)
            self.cell_stats["read"] += self._read_cells(t, r0, c0, grid, again, budget)
            for (r, c), n in derived.items():
                self.nodes[n.ref] = n
                grid[r - r0][c - c0] = n.ref
            n_light = sum(1 for rc in derived if rc in light)
            self.cell_stats["light"] += n_light
            self.cell_stats["derived"] += len(derived) - n_light

    def _read_cells(self, t, r0, c0, grid, cells, budget, light=()):
        """Read cells [(row, col)] of table t through AT-SPI into grid; the
        count read.  Of a cell in light, only its states, extents and text
        (calc_cells.light_reads).  Cells are transient objects: the
        application forgets one soon after handing it out, so each chunk is
        read right after it is fetched (all properties in one round, errors
        for what a cell lacks)."""
        acc = IFACE + "Accessible"
        done = 0
        for k in range(0, len(cells), CELL_CHUNK):
            if budget[0] <= 0 or time.monotonic() >= self.deadline:
                if budget[0] <= 0 and "nodes" not in self.truncated:
                    self.truncated.append("nodes")
                break
            b = self._batch()

            def got(v, i, j, b=b):
                ref = tuple(v[0])
                grid[i][j] = ref
                n = Node(ref)
                self.nodes[ref] = n
                if (r0 + i, c0 + j) not in light:
                    read_identity(b, n)
                    read_attributes(b, n)
                b.call(ref, acc, "GetState", None,
                       lambda v, n=n: setattr(n, "states", states_from_bits(v[0])))
                # Calc's cells implement Value too, but its four reads
                # cost about 4 ms a cell under TCG (+4.5 s on a
                # 1920x1080 sheet) for a number the cell's text shows:
                # the val: attributes of cells are not read.
                b.call(ref, IFACE + "Component", "GetExtents", _v("(u)", COORD_SCREEN),
                       lambda v, n=n: setattr(n, "extents", tuple(v[0])))
                b.call(ref, IFACE + "Text", "GetText", _v("(ii)", 0, -1),
                       lambda v, n=n: setattr(n, "text", v[0]))
            for r, c in cells[k:k + CELL_CHUNK]:
                budget[0] -= 1
                done += 1
                b.call(t.ref, IFACE + "Table", "GetAccessibleAt", _v("(ii)", r, c),
                       lambda v, i=r - r0, j=c - c0: got(v, i, j))
            self._finish(b)
            # a cell without Text answered an error: keep None
        return done

    # -- output --------------------------------------------------------
    def app_pids(self, apps):
        """Process id of each application's connection (asked of the bus)."""
        b = self._batch()
        pids = {}
        for a in apps:
            b.call(("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus",
                   "GetConnectionUnixProcessID", _v("(s)", a[0]),
                   lambda v, a=a: pids.__setitem__(a, v[0]))
        self._finish(b)
        return pids

    def dump(self):
        t0 = time.monotonic()
        apps = self.applications()
        pids = self.app_pids(apps)
        self.focus_pid = None
        if self.scope == "focused":
            # The application owning X's active window (_NET_WM_PID), so only
            # its objects are read.  (xfwm4 has an "active" window of its own.)
            self.focus_pid = x11raw.active_window_pid()
            if self.focus_pid:
                mine = [a for a in apps if pids.get(a) == self.focus_pid]
                if mine:
                    apps = mine
        if self.p2p:
            self.open_direct(apps)
        roots = [(a[0], ROOT_PATH) for a in apps]
        if self.scope == "focused":
            roots = self._focused(roots)
        probe = self._calc_probe(roots, pids)
        try:
            return self._dump(t0, roots, probe)
        finally:
            if probe:
                probe.close()

    def _calc_probe(self, roots, pids):
        """calc_model's probe, started when a window in scope is Calc's (its
        frame's name ends so in every UI language), else None."""
        if not self.calc_probe:
            return None
        by_bus = {a[0]: pid for a, pid in pids.items()}
        office = [r for r in roots if _is_soffice(by_bus.get(r[0]))]
        self.fetch([r for r in office if r not in self.nodes])
        self.fetch_children([self.nodes[r] for r in office
                             if r in self.nodes and self.nodes[r].children is None])
        frames = [k for r in office if r in self.nodes for k in (self.nodes[r].children or ())]
        self.fetch([k for k in frames if k not in self.nodes])
        calc = [self.nodes[k].name for k in frames
                if k in self.nodes and self.nodes[k].name.endswith("LibreOffice Calc")]
        return calc_model.Probe(calc) if calc else None

    def _dump(self, t0, roots, probe):
        plan = self.plan(roots)
        t_struct = time.monotonic()
        self.details([n for n, _, _ in plan])
        tables, window = [], None
        for n, depth, flag in plan:
            if depth == 2:
                window = n.name         # the top-level window the nodes below are in
            elif flag == "calc" and role_name(n.role) == "table":
                tables.append((n, window))
        if probe and tables:
            t_wait = time.monotonic()
            self.calc_model = probe.result(min(self.deadline, time.monotonic() + PROBE_WAIT))
            self.cell_stats["probe_wait_s"] = round(time.monotonic() - t_wait, 3)
            self.cell_stats["model"] = "uno" if self.calc_model else "none: " + str(probe.error)
        if tables:
            self.load_cells(tables)
        fix_vcl_extents(plan, self.nodes)
        t_details = time.monotonic()
        xml, emitted = self.serialize(plan)
        return {
            "AT": xml,
            "nodes": emitted,
            "applications": len(roots),
            "showing_only": self.showing_only,
            "truncated": self.truncated,
            "direct_connections": len(self.direct),
            "calls": self.calls,
            "cells": self.cell_stats,
            "errors": self.errors,
            "elapsed_s": round(time.monotonic() - t0, 3),
            "structure_s": round(t_struct - t0, 3),
            "details_s": round(t_details - t_struct, 3),
        }

    def _focused(self, roots):
        """Only the application with the active top-level window, and only that window."""
        def rank(r):
            n = self.nodes.get(r)
            return 1 if n is not None and n.name in ("xfwm4", "xfce4-panel", "xfdesktop") else 0
        for r in sorted(roots, key=rank):
            n = self.nodes.get(r)
            if n is None:
                self.fetch([r])
                self.fetch_children([self.nodes[r]]) if r in self.nodes else None
                n = self.nodes.get(r)
            if n is None:
                continue
            if n.children is None:
                self.fetch_children([n])
            kids = n.children or []
            self.fetch([k for k in kids if k not in self.nodes])
            active = [k for k in kids if k in self.nodes and self.nodes[k].state(STATE_ACTIVE)
                      and self.nodes[k].state(STATE_SHOWING)]
            if active:
                n.children = active[:1]
                return [r]
        return []

    def serialize(self, plan):
        parts = ['<desktop-frame']
        for p, uri in NS.items():
            parts.append(' xmlns:%s="%s"' % (p, uri))
        parts.append('>')
        size = sum(len(s) for s in parts)
        open_tags = []          # (tag, depth)
        emitted = 0
        for n, depth, flag in self._with_desktop_icons(self._with_cells(plan)):
            while open_tags and open_tags[-1][1] >= depth:
                tag, _ = open_tags.pop()
                parts.append('</%s>' % tag)
            try:
                el = self._element(n)
            except (TypeError, ValueError, AttributeError, IndexError, KeyError):
                # an application answered a value of the wrong shape: keep
                # the node's place in the tree, without its properties
                el = ("<unknown>", "", "unknown")
            if size + len(el[0]) + len(el[1]) > self.max_bytes:
                if "bytes" not in self.truncated:
                    self.truncated.append("bytes")
                break
            size += len(el[0]) + len(el[1])
            parts.append(el[0])
            parts.append(el[1])
            open_tags.append((el[2], depth))
            emitted += 1
        while open_tags:
            tag, _ = open_tags.pop()
            parts.append('</%s>' % tag)
        parts.append('</desktop-frame>')
        return "".join(parts), emitted

    def _with_cells(self, plan):
        for n, depth, flag in plan:
            yield n, depth, flag
            if n.cells:
                for row in n.cells:
                    for ref in row:
                        c = self.nodes.get(ref) if ref else None
                        if c is not None and c.state(STATE_SHOWING):
                            yield c, depth + 1, flag

    def _with_desktop_icons(self, items):
        """xfdesktop's icon view exports no children: its icons (desktop_icons) follow it as
        `icon` nodes, the role OSWorld's agents keep when they filter a tree."""
        app, done = None, False
        for n, depth, flag in items:
            if depth == 1:
                app = n.name
            yield n, depth, flag
            if app != "xfdesktop" or depth != 3 or done or n.children or not n.state(STATE_SHOWING):
                continue
            done = True
            for i, (label, x, y, w, h) in enumerate(desktop_icons.icons()):
                icon = Node((n.ref[0], "%s/icon/%d" % (n.ref[1], i)))
                icon.role, icon.name, icon.extents = ROLE_ICON, label, (x, y, w, h)
                icon.states = list(ICON_STATES)
                yield icon, depth + 1, flag

    def _element(self, n):
        """(start tag, text, tag name) of node n.  The states' and the
        object attributes' parts are built once per distinct set: a sheet's
        derived cells share their template's, and most of a tree's strings
        repeat (the serializer was a fifth of a Calc observation's time)."""
        raw_role = role_name(n.role).strip()
        tag = (raw_role or "unknown").replace(" ", "-")
        if not _valid_name(tag):
            tag = "unknown"
        name = n.name
        if raw_role == "application":
            name = self.app_aliases.get(name, name)
        buf = ["<", tag, ' name="', _esc_attr(name), '"',
               _states_part(tuple(n.states)), _attrs_part(_items(n.attrs))]
        if n.extents and n.state(STATE_VISIBLE) and n.state(STATE_SHOWING):
            x, y, w, h = n.extents
            buf.append(' cp:screencoord="(%d, %d)" cp:size="(%d, %d)"' % (x, y, w, h))
        if n.has("Image"):
            buf.append(' image="true"')
        if n.has("Selection"):
            buf.append(' selection="true"')
        if n.value:
            for key, prop in zip(("value", "min", "max", "step"), VALUE_PROPS):
                if prop in n.value:
                    buf.append(' val:%s="%s"' % (key, _esc_attr(str(float(n.value[prop])))))
        seen = set()
        for aname, desc, kb in (n.actions or ()):
            an = aname.replace(" ", "-")
            if _valid_name(an) and an not in seen:
                seen.add(an)
                buf.append(' act:%s_desc="%s" act:%s_kb="%s"' % (an, _esc_attr(desc), an, _esc_attr(kb)))
        buf.append(">")
        text = ""
        if n.text:
            text = n.text[:TEXT_MAX].replace("\ufffc", "").replace("\ufffd", "")
        return "".join(buf), _esc_text(text), tag


@functools.lru_cache(maxsize=1024)
def _states_part(states):
    """ st:name="true" for each state set (pyatspi's STATE_X -> "x")."""
    return "".join(' st:%s="true"' % STATE_NAMES[s] for s in states if 0 <= s < len(STATE_NAMES))


def _items(attrs):
    """An attributes dict as a hashable key: its items, values as text (an
    application may answer other types)."""
    items = tuple((attrs or {}).items())
    try:
        hash(items)
    except TypeError:
        items = tuple((k, str(v)) for k, v in items)
    return items


@functools.lru_cache(maxsize=1024)
def _attrs_part(items):
    """ attr:key="value" for each object attribute whose key is an XML name
    (the first of equal keys: a dict has none)."""
    return "".join(' attr:%s="%s"' % (k, _esc_attr(v)) for k, v in items if k and _valid_name(k))


def _is_soffice(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip() == "soffice.bin"
    except (OSError, TypeError):
        return False


def _is_gtk(n):
    return (n.attrs or {}).get("toolkit") == "gtk"


def fix_vcl_extents(plan, nodes):
    """Move LibreOffice's own widgets to where they are drawn.

    LibreOffice's gtk3 plugin (7.4) draws its widgets (toolbars, the sheet,
    the document) below a native GTK menu bar, but reports their extents as
    if they began at the top of the window: 25 px too high, so a click on a
    cell's centre from the tree lands in the row above.  Its native GTK
    widgets (attribute toolkit=gtk; the Name Box, font boxes, menus) are
    right.  The offset is read off the tree itself: a VCL root pane has the
    same size as the GTK container it fills, and the container's position is
    the true one.  Every non-GTK node below such a root pane, its cells
    included, moves by the difference."""
    open_ = []                  # (depth, node, shift in force below it) of the open ancestors
    for n, depth, _ in plan:
        while open_ and open_[-1][0] >= depth:
            open_.pop()
        parent, shift = (open_[-1][1], open_[-1][2]) if open_ else (None, None)
        if (role_name(n.role) == "root pane" and parent is not None and n.extents and parent.extents
                and _is_gtk(parent) and not _is_gtk(n)
                and tuple(n.extents[2:]) == tuple(parent.extents[2:])
                and tuple(n.extents[:2]) != tuple(parent.extents[:2])):
            shift = (parent.extents[0] - n.extents[0], parent.extents[1] - n.extents[1])
        if shift and not _is_gtk(n):
            dx, dy = shift
            targets = [n] + [nodes[r] for row in (n.cells or ()) for r in row if r in nodes]
            for t in targets:
                if t.extents:
                    x, y, w, h = t.extents
                    t.extents = (x + dx, y + dy, w, h)
        open_.append((depth, n, shift))


@functools.lru_cache(maxsize=4096)
def _valid_name(s):
    if not s or not (s[0].isalpha() or s[0] == "_"):
        return False
    return all(c.isalnum() or c in "-_." for c in s)


# Characters XML 1.0 cannot hold are dropped (lxml would refuse them).
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ATTR_ESC = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;",
                           "\r": "&#13;", "\t": "&#9;"})
_TEXT_ESC = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


def _clean(s):
    if not isinstance(s, str):
        s = str(s)
    return _NOT_XML.sub("", s)


@functools.lru_cache(maxsize=8192)
def _esc_attr(s):
    return _clean(s).translate(_ATTR_ESC)


def _esc_text(s):
    return _clean(s).translate(_TEXT_ESC)


def dump(scope="all", max_nodes=10000, max_bytes=8 << 20, timeout=20.0, app_aliases=None,
         address=None, p2p=True, showing_only=False, calc_probe=True):
    d = Dumper(connect(address), max_nodes=max_nodes, max_bytes=max_bytes, timeout=timeout,
               app_aliases=app_aliases, scope=scope, p2p=p2p, showing_only=showing_only,
               calc_probe=calc_probe)
    try:
        return d.dump()
    finally:
        d.close()

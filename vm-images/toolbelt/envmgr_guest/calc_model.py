"""Which of a Calc sheet's shown cells are blank, asked of LibreOffice over UNO.

Why: through AT-SPI a cell costs about 4 ms of soffice's CPU under TCG (it is
created anew for every GetAccessibleAt, then seven reads), and a 1920x1080
sheet shows 1100 of them: 4.5 s.  Most are blank, and a blank cell of a given
format answers exactly what any other blank cell of that format answers, but
for its address, its position and whether it is selected or the cursor.  So
the dumper reads through AT-SPI the cells that can differ (calc_cells.py) and
derives the rest; this module says which cells can differ:
  - cells with content (value, text, formula, note),
  - cells of each format (LibreOffice's unique cell format ranges), so every
    cell's format group is known, and the groups holding a merged area,
  - the selection and the cursor (its view data; UNO has no other getter).

The probe runs in a child process forked when the dump starts, so that
importing pyuno and LibreOffice's type descriptions (~0.9 s under TCG) runs
beside the dumper's own AT-SPI reads instead of after them.  It talks to the
pipe the apps image's LibreOffice listens on (ooSetupConnectionURL in
libreoffice-envmgr.xcd).  Any failure (no pyuno, no pipe, not a spreadsheet,
a timeout) gives None, and the dumper reads every cell."""
import json
import os
import re
import select
import signal
import time

PIPE_NAME = "envmgr-a11y"
MAX_ROW = 1048575
MAX_COL = 16383
CHILD_LIMIT_S = 30        # the probe's own life, whatever the dumper does
MAX_RANGES = 400          # format ranges beyond which the probe gives up
CONTENT_FLAGS = 1 | 2 | 4 | 8 | 16   # CellFlags VALUE DATETIME STRING ANNOTATION FORMULA


class Probe:
    """The UNO probe, running in a child process; result() collects it."""

    def __init__(self, windows=()):
        self.pid = None
        self.fd = None
        self.error = None
        try:
            r, w = os.pipe()
        except OSError as e:
            self.error = "pipe: %s" % e
            return
        try:
            pid = os.fork()
        except OSError as e:
            os.close(r)
            os.close(w)
            self.error = "fork: %s" % e
            return
        if pid == 0:                # child: never returns
            os.close(r)
            _child(w, list(windows))
        os.close(w)
        self.pid, self.fd = pid, r

    def result(self, deadline):
        """The probe's answer (dict) or None; self.error says why not."""
        if self.pid is None:
            return None
        chunks = []
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.error = "timed out"
                    break
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    continue
                data = os.read(self.fd, 1 << 16)
                if not data:
                    break
                chunks.append(data)
                if sum(len(c) for c in chunks) > (8 << 20):
                    self.error = "answer too large"
                    break
        finally:
            self.close()
        if self.error:
            return None
        try:
            ans = json.loads(b"".join(chunks).decode())
        except ValueError:
            self.error = "no answer"
            return None
        if not isinstance(ans, dict) or "error" in ans:
            self.error = str(ans.get("error")) if isinstance(ans, dict) else "bad answer"
            return None
        return ans

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = None


def _child(w, windows):
    code = 0
    # if the dumper dies before collecting it, the probe does not outlive it long
    signal.alarm(CHILD_LIMIT_S)
    try:
        try:
            ans = probe(windows)
        except Exception as e:          # pyuno raises its own exception types
            ans = {"error": "%s: %s" % (type(e).__name__, e)}
        data = json.dumps(ans).encode()
        while data:
            data = data[os.write(w, data):]
    except BaseException:
        code = 1
    os._exit(code)


def probe(windows=(), pipe_name=PIPE_NAME):
    """The facts of a spreadsheet's active sheet (see module doc): of the
    current document's if its window is one of `windows` (titles, as the
    accessibility tree names them) or `windows` is empty, else of the first
    of `windows` (the desktop's current component lags a window just
    opened)."""
    import uno
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext(
        "com.sun.star.bridge.UnoUrlResolver", local)
    ctx = resolver.resolve("uno:pipe,name=%s;urp;StarOffice.ComponentContext" % pipe_name)
    desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
    ctl = _controller(desktop, windows)
    if ctl is None:
        return {"error": "no spreadsheet in the window(s) %s" % (windows or "in front")}
    sheet = ctl.getActiveSheet()
    # the panes' visible ranges, plus the row and column shown in part
    c0 = r0 = None
    c1 = r1 = -1
    for i in range(ctl.getCount()):
        v = ctl.getByIndex(i).getVisibleRange()
        c0 = v.StartColumn if c0 is None else min(c0, v.StartColumn)
        r0 = v.StartRow if r0 is None else min(r0, v.StartRow)
        c1, r1 = max(c1, v.EndColumn), max(r1, v.EndRow)
    if c0 is None:
        return {"error": "no view pane"}
    c1, r1 = min(c1 + 1, MAX_COL), min(r1 + 1, MAX_ROW)
    area = sheet.getCellRangeByPosition(c0, r0, c1, r1)
    content = [_addr(a) for a in area.queryContentCells(CONTENT_FLAGS).getRangeAddresses()]
    groups = []
    merged = []
    formats = area.getUniqueCellFormatRanges()
    total = 0
    any_merge = area.getIsMerged()
    for i in range(formats.getCount()):
        ranges = [_addr(a) for a in formats.getByIndex(i).getRangeAddresses()]
        total += len(ranges)
        if total > MAX_RANGES:
            return {"error": "more than %d format ranges" % MAX_RANGES}
        groups.append(ranges)
        if any_merge:
            # a group holding a merged area's origin: its cells span others
            for a in ranges:
                if sheet.getCellRangeByPosition(a[0], a[1], a[2], a[3]).getIsMerged():
                    merged.append(i)
                    break
    sel = ctl.getSelection()
    selection = []
    if sel.supportsService("com.sun.star.sheet.SheetCellRanges"):
        selection = [_addr(a) for a in sel.getRangeAddresses()]
    elif sel.supportsService("com.sun.star.sheet.SheetCellRange"):
        if not sel.supportsService("com.sun.star.sheet.SheetCell"):
            selection = [_addr(sel.getRangeAddress())]
    else:
        return {"error": "the selection is not cells"}
    cursor = cursor_from_view_data(ctl.getViewData(), sheet.getRangeAddress().Sheet)
    if cursor is None:
        return {"error": "no cursor in the view data"}
    return {"window": ctl.getFrame().getTitle(), "sheet": sheet.getName(),
            "area": [c0, r0, c1, r1], "content": content,
            "groups": groups, "merged_groups": merged, "selection": selection,
            "cursor": cursor}


def _controller(desktop, windows):
    """The spreadsheet view of one of `windows` (see probe), or None."""
    def spreadsheet_view(ctl):
        return ctl is not None and ctl.getModel() is not None and \
            ctl.getModel().supportsService("com.sun.star.sheet.SpreadsheetDocument")
    doc = desktop.getCurrentComponent()
    ctl = doc.getCurrentController() if doc is not None else None
    if spreadsheet_view(ctl) and (not windows or ctl.getFrame().getTitle() in windows):
        return ctl
    frames = desktop.getFrames()
    by_title = {}
    for i in range(frames.getCount()):
        f = frames.getByIndex(i)
        by_title.setdefault(f.getTitle(), f.getController())
    for title in windows:
        if spreadsheet_view(by_title.get(title)):
            return by_title[title]
    return None


def _addr(a):
    return [a.StartColumn, a.StartRow, a.EndColumn, a.EndRow]


def cursor_from_view_data(data, tab):
    """[column, row] of the cursor on sheet `tab` from Calc's view data
    ("zoom/..;active tab;tw:width;" then per sheet "curX/curY/...", with '+'
    instead of '/' on sheets past the old row limit), or None."""
    if not isinstance(data, str):
        return None
    parts = data.split(";")
    if len(parts) < 4 + tab:
        return None
    m = re.match(r"^(\d+)[/+](\d+)[/+]", parts[3 + tab])
    if not m:
        return None
    c, r = int(m.group(1)), int(m.group(2))
    if c > MAX_COL or r > MAX_ROW:
        return None
    return [c, r]

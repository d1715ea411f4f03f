"""Shape the front Calc sheet for the derived-cells check of the apps smoke
test (runs in the guest as the session user, over the apps image's UNO pipe).
Variants (argv[1]):
  mixed     content of every kind, borders, a merged area, a bold cell, a
            shown row and column of another format, a note, a hidden row and
            column, a range selected
  scrolled  the view far from A1, the cursor left in A1 (not shown)
  frozen    frozen panes, the lower pane scrolled
  zoom      160 %, a range selected
  dense     every shown cell holds a number (no cell can be derived)
  unmodified  no change: the document marked unmodified, so that closing
            its window asks nothing
The dumper's tree of the sheet must then be the same whether blank cells are
derived (default) or every cell is read (--read-every-cell)."""
import sys
import uno
from com.sun.star.table import BorderLine2, CellAddress

local = uno.getComponentContext()
resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
ctx = resolver.resolve("uno:pipe,name=envmgr-a11y;urp;StarOffice.ComponentContext")
desktop = ctx.ServiceManager.createInstanceWithContext("com.sun.star.frame.Desktop", ctx)
doc = desktop.getCurrentComponent()
ctl = doc.getCurrentController()
sheet = ctl.getActiveSheet()
cell = sheet.getCellRangeByName
variant = sys.argv[1] if len(sys.argv) > 1 else "mixed"
if variant == "mixed":
    cell("B2").setString("Name")
    cell("C2").setString("Score")
    cell("B3").setString("alpha")
    cell("C3").setValue(12.5)
    cell("C4").setFormula("=C3*2")
    cell("D5").setFormula('=""')
    line = BorderLine2()
    line.OuterLineWidth = 35
    r = cell("B6:D8")
    r.TopBorder = line
    r.BottomBorder = line
    cell("F2:H3").merge(True)
    cell("F2").setString("merged")
    cell("J4").setString("bold")
    cell("J4").CharWeight = 150.0
    cell("A10:V10").CellBackColor = 0xFFFF00      # a whole shown row of another format
    cell("E1:E60").CellBackColor = 0xCCE5FF       # a whole shown column
    ann = sheet.getAnnotations()
    a = CellAddress()
    a.Sheet, a.Column, a.Row = 0, 11, 5
    ann.insertNew(a, "a note")                    # L6
    sheet.getRows().getByIndex(14).IsVisible = False      # row 15
    sheet.getColumns().getByIndex(8).IsVisible = False    # column I
    ctl.select(cell("M12:O14"))
elif variant == "scrolled":
    # the view moved away from A1, the cursor left behind (not shown)
    cell("Z80").setString("far")
    ctl.setFirstVisibleColumn(20)
    ctl.setFirstVisibleRow(70)
    ctl.select(cell("A1"))
    ctl.setFirstVisibleColumn(20)
    ctl.setFirstVisibleRow(70)
elif variant == "frozen":
    ctl.setFirstVisibleRow(0)
    ctl.setFirstVisibleColumn(0)
    ctl.freezeAtPosition(2, 3)
    cell("A2").setString("frozen")
    ctl.setFirstVisibleRow(30)
    ctl.select(cell("D40"))
elif variant == "zoom":
    ctl.freezeAtPosition(0, 0)
    ctl.ZoomValue = 160
    ctl.select(cell("B3:C9"))
elif variant == "dense":
    ctl.ZoomValue = 100
    rows = tuple(tuple(float(r * 100 + c) for c in range(30)) for r in range(60))
    sheet.getCellRangeByPosition(0, 0, 29, 59).setDataArray(rows)
    ctl.select(cell("A1"))
elif variant == "unmodified":
    doc.setModified(False)
print(ctl.getViewData())

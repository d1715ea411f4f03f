"""The desktop's icons (Trash, File System, Home, the files in ~/Desktop) as xfdesktop draws them.

Why: xfdesktop 4.18's icon view is one GTK widget that draws its icons itself and exports no
accessible child for them, so the accessibility tree has none, while OSWorld's Ubuntu desktop has
them and tree-only agents look for them. xfdesktop keeps each icon's grid cell in
~/.config/xfce4/desktop/icons.screen0-<W>x<H>.rc (the current one is icons.screen.latest.rc); the cell's
place on the screen follows from the work area and the icon size by xfdesktop's own grid rule
(xfdesktop_setup_grids in xfdesktop-icon-view.c, 4.18), which this module repeats. A file whose grid
was laid out for another work area, or any read that fails, gives no icons rather than wrong ones.
"""
import configparser
import os
import xml.etree.ElementTree as ET

from . import x11raw

MIN_MARGIN = 8              # xfdesktop's margin inside the work area
DEFAULT_ICON_SIZE = 48      # /desktop-icons/icon-size when unset
TEXT_WIDTH_PROPORTION = 1.9  # the GTK style properties' defaults (cell-text-width-proportion,
CELL_PADDING = 6             # cell-padding); the image's theme does not change them
SPECIAL = {"Trash": "Trash", "/": "File System"}


def _icon_size(home):
    path = os.path.join(home, ".config/xfce4/xfconf/xfce-perchannel-xml/xfce4-desktop.xml")
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return DEFAULT_ICON_SIZE
    for icons in root.iter("property"):
        if icons.get("name") != "desktop-icons":
            continue
        for p in icons.iter("property"):
            if p.get("name") == "icon-size":
                try:
                    return max(8, min(192, int(p.get("value"))))
                except (TypeError, ValueError):
                    return DEFAULT_ICON_SIZE
    return DEFAULT_ICON_SIZE


def grid(workarea, icon_size):
    """(x0, y0, cell, xstep, ystep, nrows, ncols) of xfdesktop's grid in a work area (x, y, w, h)."""
    x0, y0 = workarea[0] + MIN_MARGIN, workarea[1] + MIN_MARGIN
    width, height = workarea[2] - 2 * MIN_MARGIN, workarea[3] - 2 * MIN_MARGIN
    cell = TEXT_WIDTH_PROPORTION * icon_size + CELL_PADDING * 2
    nrows, ncols = max(int((height - MIN_MARGIN * 2) / cell), 0), max(int((width - MIN_MARGIN * 2) / cell), 0)

    def spacing(size, n):
        rest = int(size - n * cell)
        sp = (rest - MIN_MARGIN * 2) // (n - 1) if n > 1 else 1
        return sp, (rest - (n - 1) * sp) // 2

    xsp, xmargin = spacing(width, ncols)
    ysp, ymargin = spacing(height, nrows)
    return x0 + xmargin, y0 + ymargin, cell, cell + xsp, cell + ysp, nrows, ncols, (width, height)


def _label(key, home):
    if key in SPECIAL:
        return SPECIAL[key]
    if key == home:
        return "Home"
    if not key.startswith("/") or not os.path.lexists(key):
        return None  # a file gone since xfdesktop last saved its positions
    return os.path.basename(key)


def icons(home=None, display=None):
    """[(label, x, y, w, h)] of the desktop's icons in screen pixels, sorted by row and column;
    [] when they cannot be known."""
    home = home or os.path.expanduser("~")
    rc = os.path.join(home, ".config/xfce4/desktop/icons.screen.latest.rc")
    try:
        area = x11raw.workarea(display)
        real = os.path.realpath(rc)
        cp = configparser.ConfigParser(interpolation=None, strict=False)
        cp.optionxform = str
        with open(real, encoding="utf-8") as f:
            cp.read_file(f)
    except (OSError, x11raw.X11Error, configparser.Error, UnicodeDecodeError):
        return []
    if not area:
        return []
    x0, y0, cell, xstep, ystep, nrows, ncols, (w, h) = grid(area, _icon_size(home))
    if not os.path.basename(real).endswith("-%dx%d.rc" % (w, h)):
        return []  # positions laid out for another work area
    out = []
    for key in cp.sections():
        try:
            row, col = int(cp.get(key, "row")), int(cp.get(key, "col"))
        except (configparser.Error, ValueError):
            continue
        label = _label(key, home)
        if label is None or not (0 <= row < nrows and 0 <= col < ncols):
            continue
        out.append((row, col, label, int(x0 + col * xstep), int(y0 + row * ystep), int(cell), int(cell)))
    out.sort()
    return [o[2:] for o in out]

"""Spreadsheet metrics (family "tables"): OSWorld's table.py (compare_table and its rule types,
compare_csv, compare_conference_city_in_order) and general.py's check_csv.

Workbooks are read three ways, as OSWorld does: openpyxl for styles, charts, pivots, panes and
validations; pandas for sheet_data; the raw sheet XML (safe parser) for "the value a cell holds"
(sheet_fuzzy, check_cell value, conditional formatting). A result file that is absent scores 0;
one that is present but unreadable is an input error, not a score.
"""
import builtins
import csv
import functools
import io
import operator
import os
import re
import zipfile

from _common import (MetricInputError, check_file, check_office, fuzz_ratio, metric, result_missing,
                     zip_xml)
from _util import RuleTypeError, match_rule

NS_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
NS_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
NS_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
NS_X14 = "http://schemas.microsoft.com/office/spreadsheetml/2009/9/main"
NS_XM = "http://schemas.microsoft.com/office/excel/2006/main"

MAX_STYLE_CELLS = 2_000_000   # cells a `style` rule walks in one sheet
MAX_CSV_BYTES = 64 << 20


class _Zero(Exception):
    """The result lacks what a rule looks at (a sheet, a CSV export): OSWorld scores that 0."""


# ---------------------------------------------------------------------------------------------
# Reading a workbook
# ---------------------------------------------------------------------------------------------

def _split_result(value, what):
    """A file getter's value: one path, or a list whose first item is the workbook and whose
    other items are files exported next to it (OSWorld's multi vm_file)."""
    if isinstance(value, list):
        if not value:
            raise MetricInputError(f"{what}: empty list of files")
        return value[0], [p for p in value[1:] if isinstance(p, str)]
    return value, []


class Book:
    """One side (result or expected) of a comparison, loaded lazily."""

    def __init__(self, path, role, extras=()):
        self.path, self.role, self.extras = path, role, list(extras)
        check_office(path, role)
        self._xl = self._pd = self._raw = None

    # openpyxl: full (not read-only) load, since charts, pivots, panes and validations are only
    # read in that mode; check_office has already refused bombs and entity declarations.
    @property
    def xl(self):
        if self._xl is None:
            import openpyxl
            try:
                self._xl = openpyxl.load_workbook(self.path)
            except Exception as e:
                raise MetricInputError(f"{self.role}: not a readable xlsx workbook: {e}") from None
        return self._xl

    @property
    def pd(self):
        if self._pd is None:
            import pandas as pd
            try:
                self._pd = pd.ExcelFile(self.path, engine="openpyxl")
            except Exception as e:
                raise MetricInputError(f"{self.role}: not a readable xlsx workbook: {e}") from None
        return self._pd

    @property
    def raw(self):
        if self._raw is None:
            self._raw = RawBook(self.path, self.role)
        return self._raw

    def sheet_names(self):
        # pandas lists worksheets only (no chartsheets): OSWorld's indices count that list.
        return list(self.pd.sheet_names)

    def missing(self, what):
        if self.role == "result":
            raise _Zero(f"result: {what}")
        raise MetricInputError(f"expected: {what}")

    def worksheet(self, name):
        try:
            ws = self.xl[name]
        except KeyError:
            self.missing(f"no sheet {name!r}")
        if not hasattr(ws, "iter_cols"):
            self.missing(f"{name!r} is a chartsheet, not a worksheet")
        return ws

    def frame(self, name):
        import pandas as pd
        if name not in self.sheet_names():
            self.missing(f"no sheet {name!r}")
        try:
            return pd.read_excel(self.pd, name)
        except Exception as e:
            raise MetricInputError(f"{self.role}: sheet {name!r}: {e}") from None

    def csv_lines(self, name):
        """The sheet as LibreOffice exported it to <book>-<sheet>.csv beside the workbook:
        stripped lines, trailing blank lines dropped (OSWorld's sheet_print)."""
        want = f"{os.path.splitext(os.path.basename(self.path))[0]}-{name}.csv"
        cands = [p for p in self.extras if os.path.basename(p) == want]
        cands.append(os.path.join(os.path.dirname(self.path), want))
        for p in cands:
            if os.path.isfile(p):
                check_file(p, self.role)
                if os.path.getsize(p) > MAX_CSV_BYTES:
                    raise MetricInputError(f"{self.role}: {want}: over {MAX_CSV_BYTES} bytes")
                lines = [ln.strip() for ln in _read_text(p, self.role).splitlines()]
                while lines and not lines[-1]:
                    lines.pop()
                return lines
        self.missing(f"no CSV export {want} next to the workbook")


def _read_text(path, what):
    check_file(path, what)
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MetricInputError(f"{what}: {os.path.basename(path)} is not UTF-8 text: {e}") from None


class RawBook:
    """Cell values straight from the sheet XML, as OSWorld's read_cell_value reads them: a number
    (t absent or "n") as float, a shared string (t="s") or formula string (t="str") as str, and
    None for anything else (booleans, errors, absent cells). One difference: an inline string
    (t="inlineStr", which openpyxl writes; LibreOffice writes shared strings) is read as its
    text, where OSWorld reads None."""

    def __init__(self, path, role):
        self.role = role
        try:
            self.zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise MetricInputError(f"{role}: not a zip container: {e}") from None
        wb = zip_xml(self.zf, "xl/workbook.xml", role)
        rels = zip_xml(self.zf, "xl/_rels/workbook.xml.rels", role, required=False)
        targets = {}
        if rels is not None:
            for r in rels.iter(f"{{{NS_PKG_REL}}}Relationship"):
                targets[r.get("Id")] = r.get("Target") or ""
        self.sheet_paths = {}
        for sh in wb.iter(f"{{{NS_MAIN}}}sheet"):
            t = targets.get(sh.get(f"{{{NS_REL}}}id"))
            if t is None:   # no rels entry: the sheetId naming OSWorld assumes
                t = f"worksheets/sheet{sh.get('sheetId')}.xml"
            t = t.lstrip("/") if t.startswith("/") else "xl/" + t
            self.sheet_paths[sh.get("name")] = os.path.normpath(t).replace(os.sep, "/")
        self.shared = []
        sst = zip_xml(self.zf, "xl/sharedStrings.xml", role, required=False)
        if sst is not None:
            for si in sst.iter(f"{{{NS_MAIN}}}si"):
                self.shared.append("".join(t.text or "" for t in si.iter(f"{{{NS_MAIN}}}t")))
        self._sheets = {}

    def sheet_xml(self, name):
        if name not in self.sheet_paths:
            return None
        return zip_xml(self.zf, self.sheet_paths[name], self.role)

    def cells(self, name):
        if name not in self._sheets:
            root = self.sheet_xml(name)
            if root is None:
                raise _Zero(f"{self.role}: no sheet {name!r}") if self.role == "result" else \
                    MetricInputError(f"{self.role}: no sheet {name!r}")
            cells = {}
            for c in root.iter(f"{{{NS_MAIN}}}c"):
                if c.get("t") == "inlineStr":
                    is_ = c.find(f"{{{NS_MAIN}}}is")
                    text = None if is_ is None else "".join(t.text or "" for t in is_.iter(f"{{{NS_MAIN}}}t"))
                    cells[c.get("r")] = ("str", text)
                    continue
                v = c.find(f"{{{NS_MAIN}}}v")
                cells[c.get("r")] = (c.get("t"), None if v is None else v.text)
            self._sheets[name] = cells
        return self._sheets[name]

    def value(self, name, coord):
        t, v = self.cells(name).get(coord, (None, None))
        if v is None:
            return None
        try:
            if t is None or t == "n":
                return float(v)
            if t == "s":
                return self.shared[int(v)]
            if t == "str":
                return v
        except (ValueError, IndexError):
            return None
        return None


def _pick(idx, books, names):
    """OSWorld's sheet index: an int or "RI<n>" (n-th result sheet), "RN<name>", "EI<n>", "EN<name>"."""
    if isinstance(idx, bool) or not isinstance(idx, (int, str)):
        raise MetricInputError(f"sheet index {idx!r}: expected an int or RI/RN/EI/EN string")
    if isinstance(idx, int):
        side, how, arg = "result", "I", idx
    elif len(idx) >= 2 and idx[0] in "RE" and idx[1] in "IN":
        side, how, arg = ("result" if idx[0] == "R" else "expected"), idx[1], idx[2:]
    else:
        raise MetricInputError(f"sheet index {idx!r}: unrecognized")
    book = books.get(side)
    if book is None:
        raise MetricInputError(f"sheet index {idx!r} names the expected workbook, and there is none")
    if how == "N":
        return book, arg
    try:
        return book, names(book)[int(arg)]
    except (ValueError, IndexError):
        return book, ""   # OSWorld: an index past the end names no sheet


# ---------------------------------------------------------------------------------------------
# What each rule type reads from one sheet (the loaders of OSWorld's utils.py)
# ---------------------------------------------------------------------------------------------

def _text_of(title):
    try:
        return title.tx.rich.p[0].r[0].t
    except Exception:
        return None


def load_charts(book, name, props):
    """{series refs: {prop: value}} for each chart of the sheet, keyed as OSWorld keys them
    ("<val ref>,<cat ref>;..." over the series)."""
    ws = book.worksheet(name)
    out = {}
    for ch in getattr(ws, "_charts", []):
        series = []
        for ser in ch.series:
            refs = []
            for part in (ser.val, ser.cat):
                f = ""
                for kind in ("numRef", "strRef"):
                    r = getattr(part, kind, None)
                    if r is not None and getattr(r, "f", None) is not None:
                        f = r.f
                        break
                refs.append(f)
            series.append("{},{}".format(*refs))
        info = {}
        if "title" in props:
            info["title"] = _text_of(ch.title)
        if "legend" in props:
            info["legend"] = ch.legend.position if ch.legend is not None else None
        if "anchor" in props:
            a = ch.anchor
            fr, to = getattr(a, "_from", None), getattr(a, "to", None)
            # OSWorld's list repeats to.row where from.row belongs; kept so scores agree.
            info["anchor"] = [getattr(a, "editAs", None), getattr(fr, "col", None), getattr(to, "row", None),
                              getattr(to, "col", None), getattr(to, "row", None)]
        if "width" in props:
            info["width"] = ch.width
        if "height" in props:
            info["height"] = ch.height
        if "type" in props:
            info["type"] = ch.tagname
        if "direction" in props:
            info["direction"] = getattr(ch, "barDir", None)
        for p, axis in (("xtitle", "x_axis"), ("ytitle", "y_axis"), ("ztitle", "z_axis")):
            if p in props:
                ax = getattr(ch, axis, None)
                info[p] = _text_of(getattr(ax, "title", None))
        out[";".join(series)] = info
    return out


def load_pivots(book, name, props):
    from openpyxl.utils import coordinate_to_tuple
    ws = book.worksheet(name)
    out = {}
    for pvt in getattr(ws, "_pivots", []):
        raw = [[(it.h, it.x) for it in (f.items or []) if it.x is not None] for f in pvt.pivotFields]
        left = 0
        while left < len(raw) and not raw[left]:
            left += 1
        right = len(raw)
        while right > left and not raw[right - 1]:
            right -= 1
        selection = raw[left:right]
        right_bias = len(raw) - right
        try:
            src = pvt.cache.cacheSource
            a, b = src.worksheetSource.ref.split(":")
            a, b = coordinate_to_tuple(a), coordinate_to_tuple(b)
            source = "{};{}:{};{}".format(src.type, (a[0], a[1] + left), (b[0], b[1] - right_bias),
                                          src.worksheetSource.sheet)
        except Exception as e:
            raise MetricInputError(f"{book.role}: pivot table {pvt.name!r}: unreadable cache source: {e}") from None
        info = {}
        if "name" in props:
            info["name"] = pvt.name
        for p, attr in (("show_total", "visualTotals"), ("show_empty_row", "showEmptyRow"),
                        ("show_empty_col", "showEmptyCol"), ("show_headers", "showHeaders")):
            if p in props:
                info[p] = getattr(pvt, attr)
        if "location" in props:
            info["location"] = pvt.location
        if "filter" in props or "selection" in props:
            info["selection"] = selection if "ordered" in props else [set(r) for r in selection]
        if "filter" in props:
            info["filter_fields"] = set(f.fld for f in pvt.pageFields)
        if "col_fields" in props:
            info["col_fields"] = [f.x - left for f in pvt.colFields]
        if "row_fields" in props:
            info["row_fields"] = [f.x - left for f in pvt.rowFields]
        if "data_fields" in props:
            info["data_fields"] = ["{:d};{};{};{}".format(f.fld - left,
                                                          f.name if "data_fields_name" in props else "",
                                                          f.subtotal, f.showDataAs) for f in pvt.dataFields]
        out[source] = info
    return out


def load_sparklines(book, name):
    """{sqref: formula} of the sheet's x14 sparklines."""
    root = book.raw.sheet_xml(name)
    if root is None:
        book.missing(f"no sheet {name!r}")
    out = {}
    for sp in root.iter(f"{{{NS_X14}}}sparkline"):
        f, ref = sp.find(f"{{{NS_XM}}}f"), sp.find(f"{{{NS_XM}}}sqref")
        if ref is not None:
            out[ref.text] = f.text if f is not None else None
    return out


def load_dims(book, name, obj, props):
    ws = book.worksheet(name)
    dims = ws.row_dimensions if obj == "row" else ws.column_dimensions
    out = {}
    for key, d in dims.items():
        info = {}
        for p in props:
            if not hasattr(d, p):
                raise MetricInputError(f"{obj}_props: no {obj} property {p!r}")
            info[p] = getattr(d, p)
        out[key] = info
    return out


def load_filters(book, name):
    ws = book.worksheet(name)
    flt = ws.auto_filter
    out = {"ref": flt.ref}
    cols = []
    for fc in flt.filterColumn:
        c = {"col_id": fc.colId, "hidden_button": fc.hiddenButton, "show_button": fc.showButton}
        if fc.filters is not None:
            c["filters_blank"] = fc.filters.blank
            c["filters"] = set(fc.filters.filter)
        if fc.customFilters is not None:
            c["custom_filters_op"] = fc.customFilters._and
            c["custom_filters"] = set((x.operator, x.val) for x in fc.customFilters.customFilter)
        cols.append(c)
    out["filter_column"] = sorted(cols, key=lambda c: c["col_id"])
    ss = flt.sortState
    if ss is not None:
        out["sort_state"] = {
            "sort": ss.columnSort, "case": ss.caseSensitive, "method": ss.sortMethod, "ref": ss.ref,
            "condition": [{"descending": c.descending, "key": c.sortBy, "ref": c.ref,
                           "custom_list": c.customList, "dxf_id": c.dxfId, "icon": c.iconSet,
                           "iconid": c.iconId} for c in ss.sortCondition]}
    return out


def cell_style(prop, cell, dxf=None):
    """One style property of a cell (OSWorld's _read_cell_style); dxf: the differential style of
    a conditional-formatting rule that applies to the cell, read instead of the cell's own."""
    src = dxf if dxf is not None else cell
    if prop == "number_format":
        if cell.value is None or cell.data_type != "n":
            return None
        if dxf is None:
            return cell.number_format
        return dxf.numFmt.formatCode if dxf.numFmt is not None else None
    font_attr = {"font_name": "name", "font_family": "family", "font_bold": "b", "font_italic": "i",
                 "font_underline": "u", "font_size": "sz"}
    if prop in font_attr or prop == "font_color":
        if cell.value is None or src.font is None:
            return None
        if prop == "font_color":
            return src.font.color.rgb if src.font.color is not None else None
        return getattr(src.font, font_attr[prop])
    if prop in ("fill_type", "bgcolor", "fgcolor"):
        try:
            if prop == "fill_type":
                return src.fill.tagname
            return (src.fill.bgColor if prop == "bgcolor" else src.fill.fgColor).rgb
        except AttributeError:
            return None
    if prop == "hyperlink":
        return (cell.hyperlink or "") if cell.value is not None else None
    if prop == "value":
        raise MetricInputError("style property 'value' is only for check_cell")
    raise MetricInputError(f"unsupported style property {prop!r}")


def load_styles(book, name, props):
    """{coordinate: [props]} over every cell of the sheet's used range; cells a conditional
    formatting rule (type "expression") makes active get the rule's differential style."""
    from openpyxl.utils import get_column_letter
    ws = book.worksheet(name)
    if ws.max_row * ws.max_column > MAX_STYLE_CELLS:
        raise MetricInputError(f"{book.role}: sheet {name!r}: {ws.max_row}x{ws.max_column} cells, over {MAX_STYLE_CELLS}")
    out = {}
    for col in ws.iter_cols():
        for c in col:
            out[c.coordinate] = [cell_style(p, c) for p in props]
    for cf in ws.conditional_formatting:
        for rule in cf.rules:
            if rule.type != "expression":
                raise MetricInputError(f"{book.role}: conditional formatting of type {rule.type!r} is not "
                                       "evaluated (OSWorld evaluates only 'expression' rules)")
            if not rule.formula:
                raise MetricInputError(f"{book.role}: conditional formatting rule without a formula")
            expr = Formula(rule.formula[0])
            for rng in cf.cells:
                for (r, c) in rng.cells:
                    coord = f"{get_column_letter(c)}{r}"
                    here = book.raw.value(name, coord)
                    if truthy(expr.eval(here, lambda ref: book.raw.value(name, ref))):
                        out[coord] = [cell_style(p, ws.cell(row=r, column=c), rule.dxf) for p in props]
    return out


# ---------------------------------------------------------------------------------------------
# Conditional-formatting formulas. OSWorld compiles them with the `formulas` package (not in
# Debian) and calls the result with the current cell's value for the relative reference and the
# values of the $absolute$ references. This evaluates the same way for the operators and the
# functions listed in _FUNCS; anything else is an input error, not a guess.
# ---------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)
  | "(?P<str>(?:[^"]|"")*)"
  | (?P<ref>\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)(?![A-Za-z0-9_(])
  | (?P<name>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<op><>|<=|>=|[-+*/^&=<>(),%])
)""", re.X)


def truthy(v):
    if isinstance(v, str):
        return v.upper() == "TRUE"
    return bool(v)


def _num(v):
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(v)
    except ValueError:
        raise MetricInputError(f"conditional formatting: {v!r} is not a number") from None


def _flat(args):
    for a in args:
        if isinstance(a, list):
            yield from (x for x in a if isinstance(x, (int, float)) and not isinstance(x, bool))
        else:
            yield _num(a)


def _weekday(serial, kind=1):
    import datetime
    d = datetime.date(1899, 12, 30) + datetime.timedelta(days=int(_num(serial)))
    iso = d.isoweekday()   # Monday 1 .. Sunday 7
    kind = int(_num(kind))
    if kind == 1:
        return iso % 7 + 1
    if kind == 2:
        return iso
    if kind == 3:
        return iso - 1
    raise MetricInputError(f"conditional formatting: WEEKDAY type {kind} is not supported")


def _pick_nth(args, largest):
    vals = sorted(_flat(args[:-1]), reverse=largest)
    k = int(_num(args[-1]))
    if not 1 <= k <= len(vals):
        raise MetricInputError("conditional formatting: LARGE/SMALL index out of range")
    return vals[k - 1]


_FUNCS = {
    "MAX": lambda *a: max(_flat(a), default=0.0),
    "MIN": lambda *a: min(_flat(a), default=0.0),
    "SUM": lambda *a: sum(_flat(a)),
    "AVERAGE": lambda *a: (lambda v: sum(v) / len(v) if v else 0.0)(list(_flat(a))),
    "COUNT": lambda *a: float(len(list(_flat(a)))),
    "ABS": lambda x: abs(_num(x)),
    "MOD": lambda x, y: _num(x) % _num(y),
    "ROUND": lambda x, n=0: round(_num(x), int(_num(n))),
    "INT": lambda x: float(int(_num(x) // 1)),
    "AND": lambda *a: all(truthy(x) for x in a),
    "OR": lambda *a: any(truthy(x) for x in a),
    "NOT": lambda x: not truthy(x),
    "IF": lambda c, a=True, b=False: a if truthy(c) else b,
    "ISBLANK": lambda x: x is None,
    "WEEKDAY": _weekday,
    "LARGE": lambda *a: _pick_nth(a, True),
    "SMALL": lambda *a: _pick_nth(a, False),
    "TRUE": lambda: True,
    "FALSE": lambda: False,
}


def _compare(op, a, b):
    if a is None:
        a = "" if isinstance(b, str) else 0.0
    if b is None:
        b = "" if isinstance(a, str) else 0.0
    if isinstance(a, str) and isinstance(b, str):
        a, b = a.lower(), b.lower()
    elif isinstance(a, str) or isinstance(b, str):
        # Excel orders every number before every text
        a, b = (0, a) if not isinstance(a, str) else (1, 0), (0, b) if not isinstance(b, str) else (1, 0)
        if a[0] == b[0] == 1:
            return op in ("=", "<=", ">=")
    return {"=": operator.eq, "<>": operator.ne, "<": operator.lt, ">": operator.gt,
            "<=": operator.le, ">=": operator.ge}[op](a, b)


class Formula:
    def __init__(self, text):
        self.text = text
        self.toks = []
        pos = 0
        text = text.lstrip("=")
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise MetricInputError(f"conditional formatting formula {self.text!r}: cannot read at {text[pos:pos + 12]!r}")
            pos = m.end()
            kind = m.lastgroup
            self.toks.append((kind, m.group(kind)))

    def eval(self, here, lookup):
        self.i, self.here, self.lookup = 0, here, lookup
        v = self._expr(0)
        if self.i != len(self.toks):
            raise MetricInputError(f"conditional formatting formula {self.text!r}: trailing {self.toks[self.i][1]!r}")
        return v

    _PREC = {"=": 1, "<>": 1, "<": 1, ">": 1, "<=": 1, ">=": 1, "&": 2, "+": 3, "-": 3, "*": 4, "/": 4, "^": 5}

    def _peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def _expr(self, minp):
        left = self._unary()
        while True:
            kind, op = self._peek()
            if kind != "op" or op not in self._PREC or self._PREC[op] < minp:
                return left
            self.i += 1
            p = self._PREC[op]
            right = self._expr(p + (0 if op == "^" else 1))
            left = self._binary(op, left, right)

    def _binary(self, op, a, b):
        if op == "&":
            return ("" if a is None else str(a)) + ("" if b is None else str(b))
        if self._PREC[op] == 1:
            return _compare(op, a, b)
        a, b = _num(a), _num(b)
        if op == "/" and b == 0:
            raise MetricInputError(f"conditional formatting formula {self.text!r}: division by zero")
        return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
                "^": operator.pow}[op](a, b)

    def _unary(self):
        kind, tok = self._peek()
        if kind == "op" and tok in "+-":
            self.i += 1
            v = _num(self._unary())
            return -v if tok == "-" else v
        v = self._atom()
        if self._peek() == ("op", "%"):
            self.i += 1
            v = _num(v) / 100
        return v

    def _atom(self):
        from openpyxl.worksheet.cell_range import CellRange
        from openpyxl.utils import get_column_letter
        kind, tok = self._peek()
        self.i += 1
        if kind == "num":
            return float(tok)
        if kind == "str":
            return tok.replace('""', '"')
        if kind == "ref":
            parts = tok.split(":")
            absolute = all(p.count("$") == 2 and p.startswith("$") for p in parts)
            if not absolute:
                return self.here   # OSWorld feeds the current cell's value for a relative reference
            if len(parts) == 1:
                return self.lookup(tok.replace("$", "").upper())
            rng = CellRange(tok.replace("$", "").upper())
            if rng.size["rows"] * rng.size["columns"] > 1_000_000:
                raise MetricInputError(f"conditional formatting formula {self.text!r}: range too large")
            return [self.lookup(f"{get_column_letter(c)}{r}") for (r, c) in rng.cells]
        if kind == "name":
            name = tok.upper()
            if name in ("TRUE", "FALSE") and self._peek() != ("op", "("):
                return name == "TRUE"
            if self._peek() != ("op", "("):
                raise MetricInputError(f"conditional formatting formula {self.text!r}: unknown name {tok!r}")
            self.i += 1
            args = []
            if self._peek() != ("op", ")"):
                while True:
                    args.append(self._expr(0))
                    if self._peek() == ("op", ","):
                        self.i += 1
                        continue
                    break
            if self._peek() != ("op", ")"):
                raise MetricInputError(f"conditional formatting formula {self.text!r}: missing ')'")
            self.i += 1
            fn = _FUNCS.get(name)
            if fn is None:
                raise MetricInputError(f"conditional formatting formula {self.text!r}: function {name} is not supported")
            try:
                return fn(*args)
            except TypeError:
                raise MetricInputError(f"conditional formatting formula {self.text!r}: wrong arguments to {name}") from None
        if kind == "op" and tok == "(":
            v = self._expr(0)
            if self._peek() != ("op", ")"):
                raise MetricInputError(f"conditional formatting formula {self.text!r}: missing ')'")
            self.i += 1
            return v
        raise MetricInputError(f"conditional formatting formula {self.text!r}: unexpected {tok!r}")


# ---------------------------------------------------------------------------------------------
# compare_table
# ---------------------------------------------------------------------------------------------

def _fuzzy_cells(r, pick):
    from openpyxl.worksheet.cell_range import MultiCellRange
    from openpyxl.utils import get_column_letter
    b1, n1 = pick(r["sheet_idx0"])
    b2, n2 = pick(r["sheet_idx1"])
    for rl in r.get("rules", []):
        kind = rl.get("type")
        if kind not in ("includes", "included_by", "fuzzy_match", "exact_match"):
            raise MetricInputError(f"sheet_fuzzy: unknown match type {kind!r}")
        try:
            ranges = MultiCellRange(" ".join(rl["range"]) if isinstance(rl["range"], list) else rl["range"])
        except Exception:
            raise MetricInputError(f"sheet_fuzzy: bad range {rl.get('range')!r}") from None
        for rng in ranges:
            for (row, col) in rng.cells:
                coord = f"{get_column_letter(col)}{row}"
                v1, v2 = str(b1.raw.value(n1, coord)), str(b2.raw.value(n2, coord))
                for old, new in rl.get("normalization", []):
                    v1, v2 = v1.replace(old, new), v2.replace(old, new)
                if "trim_leadings" in rl:
                    v1, v2 = v1.lstrip(rl["trim_leadings"]), v2.lstrip(rl["trim_leadings"])
                if "trim_trailings" in rl:
                    v1, v2 = v1.rstrip(rl["trim_trailings"]), v2.rstrip(rl["trim_trailings"])
                if "ignore_chars" in rl:
                    drop = set(rl["ignore_chars"])
                    v1 = "".join(ch for ch in v1 if ch not in drop)
                    v2 = "".join(ch for ch in v2 if ch not in drop)
                if rl.get("ignore_case", False):
                    v1, v2 = v1.lower(), v2.lower()
                if kind == "includes":
                    ok = v2 in v1
                elif kind == "included_by":
                    ok = v1 in v2
                elif kind == "fuzzy_match":
                    ok = fuzz_ratio(v1, v2) >= rl.get("threshold", 85.0)
                else:
                    ok = v1 == v2
                if not ok:
                    return False
    return True


def _rule_passes(r, books, pick):
    kind = r.get("type")

    def both(load):
        b1, n1 = pick(r["sheet_idx0"])
        b2, n2 = pick(r["sheet_idx1"])
        return load(b1, n1) == load(b2, n2)

    if kind == "sheet_name":
        exp = books.get("expected")
        return books["result"].sheet_names() == (exp.sheet_names() if exp else None)
    if kind == "sheet_data":
        prec = r.get("precision", 4)
        return both(lambda b, n: _Rounded(b.frame(n), prec))
    if kind == "sheet_print":
        def lines(b, n):
            ls = b.csv_lines(n)
            return [x.lower() for x in ls] if r.get("ignore_case", False) else ls
        return both(lines)
    if kind == "sheet_fuzzy":
        return _fuzzy_cells(r, pick)
    if kind == "sparkline":
        return both(load_sparklines)
    if kind == "chart":
        props = set(r.get("chart_props", []))
        return both(lambda b, n: load_charts(b, n, props))
    if kind == "style":
        props = list(r.get("props", []))
        return both(lambda b, n: load_styles(b, n, props))
    if kind == "freeze":
        return both(lambda b, n: b.worksheet(n).freeze_panes)
    if kind == "zoom":
        b, n = pick(r["sheet_idx"])
        return match_rule(b.worksheet(n).sheet_view.zoomScale or 100.0, r)
    if kind == "data_validation":
        b, n = pick(r["sheet_idx"])
        dvs = b.worksheet(n).data_validations.dataValidation
        want = r.get("dv_props", [])
        if len(dvs) < len(want):
            return False
        for dv in dvs:
            for prop in want:
                for attr in prop:
                    if not hasattr(dv, attr):
                        raise MetricInputError(f"data_validation: no validation attribute {attr!r}")
            if not any(all(match_rule(getattr(dv, a), m) for a, m in prop.items()) for prop in want):
                return False
        return True
    if kind in ("row_props", "col_props"):
        obj = "row" if kind == "row_props" else "column"
        props = list(r.get("props", []))
        return both(lambda b, n: load_dims(b, n, obj, props))
    if kind == "filter":
        return both(load_filters)
    if kind == "pivot_table":
        props = set(r.get("pivot_props", []))
        return both(lambda b, n: load_pivots(b, n, props))
    if kind == "check_cell":
        b, n = pick(r["sheet_idx"])
        ws = b.worksheet(n)
        coord = r.get("coordinate")
        try:
            cell = ws[coord]
        except Exception:
            raise MetricInputError(f"check_cell: bad coordinate {coord!r}") from None
        if not hasattr(cell, "coordinate"):
            raise MetricInputError(f"check_cell: coordinate {coord!r} is not one cell")
        for prop, rule in r.get("props", {}).items():
            val = b.raw.value(n, coord) if prop == "value" else cell_style(prop, cell)
            try:
                if not match_rule(val, rule, f"check_cell {coord} {prop}"):
                    return False
            except RuleTypeError:
                return False  # OSWorld's check_cell catches what _match_value_to_rule raises: 0
        return True
    raise MetricInputError(f"unknown rule type {kind!r}")


class _Rounded:
    """A sheet as pandas reads it, rounded; == is DataFrame.equals (values and dtypes)."""

    def __init__(self, frame, prec):
        self.frame = frame.round(prec)

    def __eq__(self, other):
        return bool(self.frame.equals(other.frame))


@metric("compare_table", "tables", expected="optional",
        options={"rules": "list of {type: ...}, required: checked in order, all must pass. Types: sheet_name, "
                          "sheet_data (sheet_idx0, sheet_idx1, precision=4), sheet_print (ignore_case), "
                          "sheet_fuzzy (rules: [{range, type: includes|included_by|fuzzy_match|exact_match, "
                          "threshold, ignore_case, ignore_chars, trim_leadings, trim_trailings, normalization}]), "
                          "sparkline, chart (chart_props), style (props), freeze, zoom (sheet_idx, method, ref), "
                          "data_validation (sheet_idx, dv_props), row_props / col_props (props), filter, "
                          "pivot_table (pivot_props), check_cell (sheet_idx, coordinate, props). Sheet indices: "
                          "int or RI<n>/RN<name> (result), EI<n>/EN<name> (expected)"},
        summary="Compare an xlsx result with an expected xlsx (or check it alone) by a list of rules",
        osworld="table.compare_table with all its rule types. Differs: an unreadable workbook (result or expected) "
                "is an input error, not 0; a sheet the result lacks scores 0 for every rule (OSWorld: 0 for some "
                "rules, {}=={} for others) and one the expected lacks is an input error; raw cell values are "
                "found through the workbook rels (OSWorld assumes sheet<sheetId>.xml) and inline strings are read "
                "as text (OSWorld: None); sheet_print also accepts "
                "the CSV export as an extra file in a result list. sheet_data ignores ignore_case, as OSWorld does. "
                "style: conditional formatting is evaluated for 'expression' rules with a built-in evaluator "
                "(OSWorld uses the formulas package) covering comparisons, arithmetic, & and MAX MIN SUM AVERAGE "
                "COUNT ABS MOD ROUND INT AND OR NOT IF ISBLANK WEEKDAY LARGE SMALL; other functions and other rule "
                "types (OSWorld: NotImplementedError) are input errors. Comparisons with a blank cell that raise "
                "TypeError in OSWorld fail the rule instead. Reproduces OSWorld's chart anchor list (to.row twice).")
def compare_table(result, expected=None, rules=None, **_ignored):
    if result_missing(result if not isinstance(result, list) else (result[0] if result else None)):
        return 0.0
    if not isinstance(rules, list):
        raise MetricInputError("options.rules: expected a list of rules")
    rpath, rextra = _split_result(result, "result")
    books = {"result": Book(rpath, "result", rextra)}
    if expected is not None:
        epath, eextra = _split_result(expected, "expected")
        books["expected"] = Book(epath, "expected", eextra)
    # both workbooks must open, as in OSWorld (which loads them before any rule)
    for b in books.values():
        b.sheet_names()
        b.xl
    pick = functools.partial(_pick, books=books, names=lambda b: b.sheet_names())
    try:
        for r in rules:
            if not isinstance(r, dict):
                raise MetricInputError(f"rule {r!r}: expected an object")
            try:
                if not _rule_passes(r, books, pick):
                    return 0.0
            except KeyError as e:
                raise MetricInputError(f"rule {r.get('type')!r}: missing key {e}") from None
    except _Zero:
        return 0.0
    return 1.0


# ---------------------------------------------------------------------------------------------
# CSV and the two special-purpose metrics
# ---------------------------------------------------------------------------------------------

@metric("compare_csv", "tables",
        options={"strict": "bool, default true: false strips each line before comparing",
                 "ignore_case": "bool, default false"},
        summary="Two CSV (text) files are equal line by line",
        osworld="table.compare_csv: the same line comparison. Differs: a file that is not UTF-8 text is an input "
                "error (OSWorld: UnicodeDecodeError).")
def compare_csv(result, expected, strict=True, ignore_case=False, **_ignored):
    if result_missing(result):
        return 0.0
    a = _read_text(result, "result").splitlines()
    b = _read_text(expected, "expected").splitlines()
    if not strict:
        a, b = [x.strip() for x in a], [x.strip() for x in b]
    if ignore_case:
        a, b = [x.lower() for x in a], [x.lower() for x in b]
    return 1.0 if a == b else 0.0


@metric("compare_conference_city_in_order", "tables",
        options={},
        summary="Cells C2:C22 of the active sheet contain the expected cities, in order",
        osworld="table.compare_conference_city_in_order: expected is the rule {\"expected\": [city or [alternatives]]}; "
                "each of the 21 cells must contain its city (substring). Differs: an unreadable workbook is an "
                "input error (OSWorld raises too); a non-dict expected is an input error.")
def compare_conference_city_in_order(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not isinstance(expected, dict) or not isinstance(expected.get("expected"), list):
        raise MetricInputError("expected: a rule {\"expected\": [city, ...]}")
    cities = expected["expected"]
    book = Book(result, "result")
    ws = book.xl.active
    if ws is None or not hasattr(ws, "iter_rows"):
        return 0.0
    actual = [c.value for row in ws["C2:C22"] for c in row]
    for i, got in enumerate(actual):
        if i >= len(cities) or not isinstance(got, str):
            return 0.0   # OSWorld: IndexError / TypeError, caught, 0
        want = cities[i]
        if isinstance(want, str):
            ok = want in got
        elif isinstance(want, list):
            ok = any(isinstance(w, str) and w in got for w in want)
        else:
            return 0.0
        if not ok:
            return 0.0
    return 1.0



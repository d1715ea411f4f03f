"""tables.py: compare_table (rule by rule), compare_csv, compare_conference_city_in_order; and check_csv
(general.py) on CSV exports of tables.
Workbooks are written here by openpyxl; options are shaped as OSWorld's task files give them."""
import openpyxl
from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.formatting.rule import FormulaRule
from openpyxl.styles import Font, PatternFill
from openpyxl.worksheet.datavalidation import DataValidation

from dtd_fixture import xxe, with_dtd
from metric_testlib import MetricCase

SHEET_DATA = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}


class TablesCase(MetricCase):
    def book(self, name, rows, sheet="Sheet1", setup=None):
        wb = openpyxl.Workbook()
        ws = wb.active
        ws.title = sheet
        for r in rows:
            ws.append(r)
        if setup:
            setup(wb, ws)
        p = self.path(name)
        wb.save(p)
        return p


ROWS = [["Name", "Sales", "Rate"], ["Ann", 10, 0.123456], ["Bob", 20, 0.5]]


class CompareTableData(TablesCase):
    def test_sheet_data_equal(self):
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS), self.book("e.xlsx", ROWS), SHEET_DATA)

    def test_sheet_data_within_precision(self):
        near = [ROWS[0], ["Ann", 10, 0.1234561], ROWS[2]]
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", near), self.book("e.xlsx", ROWS), SHEET_DATA)

    def test_sheet_data_differs(self):
        other = [ROWS[0], ["Ann", 11, 0.123456], ROWS[2]]
        self.assertScore(0.0, "compare_table", self.book("r.xlsx", other), self.book("e.xlsx", ROWS), SHEET_DATA)

    def test_sheet_by_name_and_missing_sheet(self):
        opts = {"rules": [{"type": "sheet_data", "sheet_idx0": "RNData", "sheet_idx1": "ENData"}]}
        r = self.book("r.xlsx", ROWS, sheet="Data")
        e = self.book("e.xlsx", ROWS, sheet="Data")
        self.assertScore(1.0, "compare_table", r, e, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, sheet="Other"), e, opts)

    def test_missing_result_scores_zero(self):
        self.assertScore(0.0, "compare_table", self.path("absent.xlsx"), self.book("e.xlsx", ROWS), SHEET_DATA)
        self.assertScore(0.0, "compare_table", None, self.book("e.xlsx", ROWS), SHEET_DATA)

    def test_malformed_workbook_is_an_error(self):
        bad = self.write("r.xlsx", b"PK\x03\x04 not really a zip")
        self.assertError("compare_table", bad, self.book("e.xlsx", ROWS), SHEET_DATA)
        import zipfile
        z = self.path("z.xlsx")
        with zipfile.ZipFile(z, "w") as zf:
            zf.writestr("hello.txt", "no workbook here")
        self.assertError("compare_table", z, self.book("e.xlsx", ROWS), SHEET_DATA)
        # an external entity in a cell: refused before openpyxl (or the raw reader) parses the sheet
        e = self.book("e.xlsx", ROWS)
        r = with_dtd(e, self.path("xxe.xlsx"), "xl/worksheets/sheet1.xml", xxe("file:///etc/passwd"), "<v>10</v>", "xxe")
        self.assertIn("result: xl/worksheets/sheet1.xml: its DTD declares external entity 'xxe'",
                      self.assertError("compare_table", r, e, SHEET_DATA))

    def test_unknown_rule_is_an_error(self):
        p = self.book("r.xlsx", ROWS)
        self.assertError("compare_table", p, p, {"rules": [{"type": "sheet_colour"}]})
        self.assertError("compare_table", p, p, {"rules": [{"type": "sheet_data", "sheet_idx0": "XX0", "sheet_idx1": 0}]})

    def test_sheet_name(self):
        opts = {"rules": [{"type": "sheet_name"}]}
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, "A"), self.book("e.xlsx", ROWS, "A"), opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, "B"), self.book("e.xlsx", ROWS, "A"), opts)


class CompareTablePrint(TablesCase):
    OPTS = {"rules": [{"type": "sheet_print", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1"}]}

    def test_csv_exports_next_to_the_books(self):
        r, e = self.book("Cust.xlsx", ROWS), self.book("Cust_gold.xlsx", ROWS)
        self.write("Cust-Sheet1.csv", "Name,Id\nAnn,0000001\n\n")
        self.write("Cust_gold-Sheet1.csv", "Name,Id\nAnn,0000001\n")
        self.assertScore(1.0, "compare_table", r, e, self.OPTS)
        self.write("Cust-Sheet1.csv", "Name,Id\nAnn,1\n")
        self.assertScore(0.0, "compare_table", r, e, self.OPTS)

    def test_result_list_and_missing_export(self):
        r, e = self.book("Cust.xlsx", ROWS), self.book("Cust_gold.xlsx", ROWS)
        self.write("Cust_gold-Sheet1.csv", "a,b\n")
        self.assertScore(0.0, "compare_table", r, e, self.OPTS)   # the result has no export
        csvp = self.write("Cust-Sheet1.csv", "A,B\n")
        opts = {"rules": [dict(self.OPTS["rules"][0], ignore_case=True)]}
        self.assertScore(1.0, "compare_table", [r, csvp], [e], opts)


class CompareTableFuzzy(TablesCase):
    def test_rules_from_a_restaurant_task(self):
        opts = {"rules": [{"type": "sheet_fuzzy", "sheet_idx0": "RNSheet1", "sheet_idx1": "ENSheet1", "rules": [
            {"range": ["A1:A2"], "type": "exact_match"},
            {"range": ["B1:B2"], "type": "fuzzy_match", "threshold": 85,
             "normalization": [["Rd", "Road"], ["St", "Street"]], "ignore_case": True},
            {"range": ["C1:C2"], "type": "includes", "trim_leadings": "+ ", "ignore_chars": " ()-"}]}]}
        e = self.book("e.xlsx", [["Name", "Address", "Phone"], ["Tim Ho Wan", "9-11 Fuk Wing Street", "2332 2896"]])
        r = self.book("r.xlsx", [["Name", "Address", "Phone"], ["Tim Ho Wan", "9-11 fuk wing St", "+852 2332-2896"]])
        self.assertScore(1.0, "compare_table", r, e, opts)
        r2 = self.book("r2.xlsx", [["Name", "Address", "Phone"], ["Tim Ho Wan", "Mong Kok", "+852 2332-2896"]])
        self.assertScore(0.0, "compare_table", r2, e, opts)


class CompareTableChart(TablesCase):
    @staticmethod
    def chart(kind, title):
        def setup(wb, ws):
            ch = kind()
            ch.title = title
            ch.add_data(Reference(ws, min_col=2, min_row=1, max_row=3), titles_from_data=True)
            ch.set_categories(Reference(ws, min_col=1, min_row=2, max_row=3))
            ws.add_chart(ch, "E2")
        return setup

    OPTS = {"rules": [{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"},
                      {"type": "chart", "sheet_idx0": 0, "sheet_idx1": "EI0", "chart_props": ["type", "title", "legend"]}]}

    def test_same_chart(self):
        e = self.book("e.xlsx", ROWS, setup=self.chart(BarChart, "Sales"))
        r = self.book("r.xlsx", ROWS, setup=self.chart(BarChart, "Sales"))
        self.assertScore(1.0, "compare_table", r, e, self.OPTS)

    def test_other_type_title_or_none(self):
        e = self.book("e.xlsx", ROWS, setup=self.chart(BarChart, "Sales"))
        self.assertScore(0.0, "compare_table", self.book("r1.xlsx", ROWS, setup=self.chart(LineChart, "Sales")), e, self.OPTS)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, setup=self.chart(BarChart, "Cost")), e, self.OPTS)
        self.assertScore(0.0, "compare_table", self.book("r3.xlsx", ROWS), e, self.OPTS)


class CompareTableCells(TablesCase):
    def test_check_cell_value_and_style(self):
        def style(wb, ws):
            ws["A1"].font = Font(bold=True, color="FFFFFFFF")
            ws["A1"].fill = PatternFill("solid", fgColor="FF0000FF", bgColor="FF0000FF")
        opts = {"rules": [{"type": "check_cell", "sheet_idx": "RNSheet1", "coordinate": "A1", "props": {
            "bgcolor": {"method": "eq", "ref": "FF0000FF"}, "font_color": {"method": "eq", "ref": "FFFFFFFF"},
            "font_bold": {"method": "eq", "ref": True}, "value": {"method": "eq", "ref": "Name"}}},
            {"type": "check_cell", "sheet_idx": 0, "coordinate": "B3", "props": {"value": {"method": "approx:0.1", "ref": 20.05}}},
            {"type": "check_cell", "sheet_idx": 0, "coordinate": "A2", "props": {"value": {"method": "re.I", "ref": "^an"}}}]}
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=style), None, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS), None, opts)
        bad = {"rules": [{"type": "check_cell", "sheet_idx": 0, "coordinate": "A1", "props": {"value": {"method": "roughly", "ref": 1}}}]}
        self.assertError("compare_table", self.book("r3.xlsx", ROWS), None, bad)

    def test_style_font_color(self):
        def green(wb, ws):
            ws["B3"].font = Font(color="FF00FF00")
        opts = {"rules": [{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_color"]}]}
        e = self.book("e.xlsx", ROWS, setup=green)
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=green), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS), e, opts)

    def test_style_through_conditional_formatting(self):
        def direct(wb, ws):
            ws["B3"].font = Font(color="FF00FF00")

        def conditional(wb, ws):
            ws.conditional_formatting.add("B2:B3", FormulaRule(formula=["B2=MAX($B$2:$B$3)"], font=Font(color="FF00FF00")))
        opts = {"rules": [{"type": "style", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["font_color"]}]}
        e = self.book("e.xlsx", ROWS, setup=direct)
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=conditional), e, opts)

        def wrong(wb, ws):
            ws.conditional_formatting.add("B2:B3", FormulaRule(formula=["B2=MIN($B$2:$B$3)"], font=Font(color="FF00FF00")))
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, setup=wrong), e, opts)

        def unknown(wb, ws):
            ws.conditional_formatting.add("B2:B3", FormulaRule(formula=["B2=VLOOKUP(1,$B$2:$B$3,1)"], font=Font(color="FF00FF00")))
        self.assertError("compare_table", self.book("r3.xlsx", ROWS, setup=unknown), e, opts)


class CompareTableSheetProps(TablesCase):
    def test_freeze(self):
        def freeze(wb, ws):
            ws.freeze_panes = "B2"
        opts = {"rules": [{"type": "freeze", "sheet_idx0": 0, "sheet_idx1": "EI0"}, SHEET_DATA["rules"][0]]}
        e = self.book("e.xlsx", ROWS, setup=freeze)
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=freeze), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS), e, opts)

    def test_zoom(self):
        def zoom(scale):
            def setup(wb, ws):
                ws.sheet_view.zoomScale = scale
            return setup
        opts = {"rules": [{"type": "zoom", "sheet_idx": 0, "method": "lt", "ref": 260}]}
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=zoom(200)), None, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, setup=zoom(300)), None, opts)

    def test_data_validation(self):
        def dv(rng):
            def setup(wb, ws):
                v = DataValidation(type="list", formula1='"Pass,Fail,Held"')
                v.add(rng)
                ws.add_data_validation(v)
            return setup
        opts = {"rules": [{"type": "data_validation", "sheet_idx": 0, "dv_props": [{
            "ranges": {"method": "spreadsheet_range", "ref": ["D2:D29", "D2:D1048576"]},
            "type": {"method": "eq", "ref": "list"},
            "formula1": {"method": "str_set_eq", "ref": ["Pass", "Fail", "Held"]}}]}]}
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=dv("D2:D40")), None, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, setup=dv("D2:D10")), None, opts)
        self.assertScore(0.0, "compare_table", self.book("r3.xlsx", ROWS), None, opts)

    def test_row_props_hidden(self):
        def hide(wb, ws):
            ws.row_dimensions[3].hidden = True
        opts = {"rules": [{"type": "row_props", "sheet_idx0": 0, "sheet_idx1": "EI0", "props": ["hidden"]}]}
        e = self.book("e.xlsx", ROWS, setup=hide)
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=hide), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS), e, opts)

    def test_filter(self):
        def flt(ref):
            def setup(wb, ws):
                ws.auto_filter.ref = ref
            return setup
        opts = {"rules": [{"type": "filter", "sheet_idx0": 0, "sheet_idx1": "EI0"}]}
        e = self.book("e.xlsx", ROWS, setup=flt("A1:C3"))
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=flt("A1:C3")), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS), e, opts)

    @staticmethod
    def pivot(row_field=0, subtotal="sum"):
        """A pivot table on Sheet2 over Sheet1!A1:C3: one row field, Sales summed (or counted)."""
        from openpyxl.pivot.cache import CacheDefinition, CacheField, CacheSource, SharedItems, WorksheetSource
        from openpyxl.pivot.record import RecordList
        from openpyxl.pivot.table import DataField, FieldItem, Location, PivotField, RowColField, TableDefinition

        def setup(wb, ws):
            src = CacheSource(type="worksheet", worksheetSource=WorksheetSource(ref="A1:C3", sheet="Sheet1"))
            cache = CacheDefinition(cacheSource=src, cacheFields=[
                CacheField(name=n, sharedItems=SharedItems()) for n in ("Name", "Sales", "Rate")])
            cache.records = RecordList()
            fields = [PivotField(axis="axisRow" if i == row_field else None, dataField=(i == 1), showAll=False,
                                 items=[FieldItem(x=0), FieldItem(x=1), FieldItem(t="default")] if i == row_field else [])
                      for i in range(3)]
            t = TableDefinition(name="PivotTable1", cacheId=1, dataCaption="Values",
                                location=Location(ref="A1:B4", firstHeaderRow=1, firstDataRow=1, firstDataCol=1),
                                pivotFields=fields, rowFields=[RowColField(x=row_field)],
                                dataFields=[DataField(name="Sum - Sales", fld=1, subtotal=subtotal)])
            t.cache = cache
            wb.create_sheet("Sheet2")._pivots.append(t)
        return setup

    def test_pivot_table(self):
        opts = {"rules": [{"type": "pivot_table", "sheet_idx0": "RNSheet2", "sheet_idx1": "ENSheet2",
                           "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"]}]}
        e = self.book("e.xlsx", ROWS, setup=self.pivot())
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS, setup=self.pivot()), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r2.xlsx", ROWS, setup=self.pivot(subtotal="count")), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r3.xlsx", ROWS, setup=self.pivot(row_field=2)), e, opts)
        self.assertScore(0.0, "compare_table", self.book("r4.xlsx", ROWS), e, opts)   # no Sheet2 at all

    def test_pivot_rule_on_sheets_without_pivots(self):
        opts = {"rules": [{"type": "pivot_table", "sheet_idx0": 0, "sheet_idx1": "EI0",
                           "pivot_props": ["col_fields", "filter", "row_fields", "data_fields"]}]}
        self.assertScore(1.0, "compare_table", self.book("r.xlsx", ROWS), self.book("e.xlsx", ROWS), opts)


class CompareCsv(MetricCase):
    def test_equal_and_not(self):
        e = self.write("e.csv", "a,b\n1,2\n")
        self.assertScore(1.0, "compare_csv", self.write("r.csv", "a,b\n1,2\n"), e)
        self.assertScore(0.0, "compare_csv", self.write("r2.csv", "a,b\n1,3\n"), e)
        self.assertScore(1.0, "compare_csv", self.write("r3.csv", " A,B \n1,2"), e, {"strict": False, "ignore_case": True})
        self.assertScore(0.0, "compare_csv", self.path("nope.csv"), e)

    def test_not_text(self):
        self.assertError("compare_csv", self.write("r.csv", b"\xff\xfe\x00bad"), self.write("e.csv", "a\n"))


class ConferenceCities(TablesCase):
    RULE = {"expected": ["Scottsdale", ["Montreal", "Montr\u00e9al"]] + ["X"] * 19}

    def cities(self, name, first):
        rows = [["Year", "Conf", "City"], [2000, "c", first], [2001, "c", "Montr\u00e9al, QC"]]
        rows += [[2002 + i, "c", "X city"] for i in range(19)]
        return self.book(name, rows)

    def test_order(self):
        self.assertScore(1.0, "compare_conference_city_in_order", self.cities("r.xlsx", "Scottsdale, AZ"), self.RULE)
        self.assertScore(0.0, "compare_conference_city_in_order", self.cities("r2.xlsx", "Atlanta"), self.RULE)
        self.assertError("compare_conference_city_in_order", self.write("bad.xlsx", b"garbage"), self.RULE)


class CheckCsv(MetricCase):
    RULE = {"expect": [{"url": "imap://outlook.office365.com", "user": "a@b.c"}],
            "unexpect": [{"user": "intruder"}]}

    def test_records(self):
        ok = self.write("r.csv", "url,user,password\nimap://outlook.office365.com,a@b.c,pw\n")
        self.assertScore(1.0, "check_csv", ok, self.RULE)
        miss = self.write("r2.csv", "url,user,password\nsmtp://x,a@b.c,pw\n")
        self.assertScore(0.0, "check_csv", miss, self.RULE)
        bad = self.write("r3.csv", "url,user\nimap://outlook.office365.com,a@b.c\nx,intruder\n")
        self.assertScore(0.0, "check_csv", bad, self.RULE)
        self.assertError("check_csv", self.write("r4.csv", b"\xff\xfe\xfa"), self.RULE)

"""documents.py: the docx/odt/epub metrics, on documents python-docx and odfpy write here."""
import io
import os
import unittest
import zipfile

import docx
from docx.enum.text import WD_ALIGN_PARAGRAPH, WD_BREAK, WD_TAB_ALIGNMENT
from docx.shared import Pt, RGBColor
from PIL import Image, ImageDraw, ImageFont

from dtd_fixture import LAUGHS, with_dtd, xxe
from metric_testlib import MetricCase

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def png_bytes(color, size=(6, 6)):
    b = io.BytesIO()
    Image.new("RGB", size, color).save(b, "PNG")
    return b.getvalue()


class DocCase(MetricCase):
    def docx(self, name, paragraphs=(), build=None):
        d = docx.Document()
        for t in paragraphs:
            d.add_paragraph(t)
        if build:
            build(d)
        p = self.path(name)
        d.save(p)
        return p

    def bad(self, name="bad.docx"):
        return self.write(name, b"PK\x03\x04 truncated")


TEXT = ["Water is H2O.", "It covers  most of the planet."]


class CompareDocxFiles(DocCase):
    def test_same_text(self):
        e = self.docx("e.docx", TEXT)
        self.assertScore(1.0, "compare_docx_files", self.docx("r.docx", ["Water is H2O.", "It covers most of the planet."]), e)
        self.assertScore(0.0, "compare_docx_files", self.docx("r2.docx", ["Water is H3O.", TEXT[1]]), e)
        self.assertScore(0.0, "compare_docx_files", self.docx("r3.docx", ["Water is H2O.", "It covers most of the planet."]), e,
                         {"ignore_blanks": False})
        self.assertScore(1.0, "compare_docx_files", self.docx("r4.docx", [TEXT[1].upper(), TEXT[0]]), e,
                         {"ignore_blanks": True, "ignore_case": True, "ignore_order": True})

    def test_content_only_is_fuzzy(self):
        e = self.docx("e.docx", ["abcd"])
        self.assertScore(0.8, "compare_docx_files", self.docx("r.docx", ["abcdef"]), e, {"content_only": True})

    def test_odt(self):
        from odf.opendocument import OpenDocumentText
        from odf.text import P

        def odt(name, texts):
            d = OpenDocumentText()
            for t in texts:
                d.text.addElement(P(text=t))
            d.save(self.path(name))
            return self.path(name)
        self.assertScore(1.0, "compare_docx_files", odt("r.odt", TEXT), odt("e.odt", TEXT))
        self.assertScore(0.0, "compare_docx_files", odt("r2.odt", TEXT[:1]), odt("e.odt", TEXT))
        self.assertScore(0.0, "compare_docx_files", odt("r3.odt", TEXT), self.docx("e.docx", TEXT))

    def test_missing_and_malformed(self):
        e = self.docx("e.docx", TEXT)
        self.assertScore(0.0, "compare_docx_files", self.path("absent.docx"), e)
        self.assertError("compare_docx_files", self.bad(), e)

    def test_entities_are_refused(self):
        """A DTD that declares entities is an evaluator_error on either side, whether they are internal
        (billion laughs) or external (XXE: never read, and never scored on the text left without it)."""
        e = self.docx("e.docx", ["same text"])
        laughs = with_dtd(e, self.path("laughs.docx"), "word/document.xml", LAUGHS, "same text", "lol9")
        secret = self.write("secret.txt", "same text")  # what the entity names: scored 1 if it were read
        ext = with_dtd(e, self.path("xxe.docx"), "word/document.xml", xxe("file://" + secret), "same text", "xxe")
        for name in ("compare_docx_files", "compare_docx_lines"):
            err = self.assertError(name, ext, e)
            self.assertIn(f"result: word/document.xml: its DTD declares external entity 'xxe' (file://{secret})", err)
            self.assertIn("expected: word/document.xml: its DTD declares external entity",
                          self.assertError(name, e, ext))
            self.assertIn("result: word/document.xml: its DTD declares entity 'lol' and 9 more: refused",
                          self.assertError(name, laughs, e))
        rels = with_dtd(e, self.path("rels.docx"), "word/_rels/document.xml.rels", xxe("http://127.0.0.1:9/"),
                        "styles.xml", "xxe")  # in a part python-docx reads before any text
        self.assertIn("word/_rels/document.xml.rels: its DTD declares external entity",
                      self.assertError("compare_docx_files", rels, e))
        from odf.opendocument import OpenDocumentText
        from odf.text import P
        d = OpenDocumentText()
        d.text.addElement(P(text="same text"))
        d.save(self.path("e.odt"))
        odt = with_dtd(self.path("e.odt"), self.path("xxe.odt"), "content.xml", xxe("file://" + secret), "same text",
                       "xxe")
        self.assertIn("result: content.xml: its DTD declares external entity",
                      self.assertError("compare_docx_files", odt, self.path("e.odt")))

    def test_ignore_new_lines(self):
        e = self.docx("e.docx", ["a", "b"])
        opts = {"ignore_blanks": False}
        self.assertScore(1.0, "compare_docx_files_and_ignore_new_lines", self.docx("r.docx", ["a", "", "b"]), e, opts)
        self.assertScore(0.0, "compare_docx_files_and_ignore_new_lines", self.docx("r2.docx", ["a", "c"]), e, opts)
        self.assertError("compare_docx_files_and_ignore_new_lines", self.bad(), e, opts)


def with_table(cells):
    def build(d):
        t = d.add_table(rows=len(cells), cols=len(cells[0]))
        for i, row in enumerate(cells):
            for j, v in enumerate(row):
                t.cell(i, j).text = v
    return build


class Tables(DocCase):
    def test_tables(self):
        e = self.docx("e.docx", build=with_table([["Task", "Hours"], ["Write", "3"]]))
        self.assertScore(1.0, "compare_docx_tables", self.docx("r.docx", build=with_table([["Task", "Hours "], ["Write", "3"]])), e)
        self.assertScore(0.0, "compare_docx_tables", self.docx("r2.docx", build=with_table([["Task", "Hours"], ["Write", "4"]])), e)
        self.assertScore(0.0, "compare_docx_tables", self.docx("r3.docx", ["no table"]), e)
        self.assertError("compare_docx_tables", self.bad(), e)

    def test_colored_words(self):
        def colored(vowel_rgb):
            def build(d):
                t = d.add_table(rows=1, cols=2)
                for cell, word, rgb in ((t.cell(0, 0), "apple", vowel_rgb), (t.cell(0, 1), "tree", (0, 0, 255))):
                    r = cell.paragraphs[0].add_run(word)
                    r.font.color.rgb = RGBColor(*rgb)
            return build
        e = self.docx("e.docx", build=colored((255, 0, 0)))
        self.assertScore(1.0, "evaluate_colored_words_in_tables", self.docx("r.docx", build=colored((254, 0, 0))), e)
        self.assertScore(0.0, "evaluate_colored_words_in_tables", self.docx("r2.docx", build=colored((0, 128, 0))), e)
        self.assertError("evaluate_colored_words_in_tables", self.bad(), e)


class Formatting(DocCase):
    def test_line_spacing(self):
        def spaced(v):
            def build(d):
                for p in d.paragraphs:
                    p.paragraph_format.line_spacing = v
            return build
        e = self.docx("e.docx", TEXT, spaced(1.5))
        self.assertScore(1.0, "compare_line_spacing", self.docx("r.docx", TEXT, spaced(1.5)), e)
        self.assertScore(0.0, "compare_line_spacing", self.docx("r2.docx", TEXT, spaced(2.0)), e)
        self.assertError("compare_line_spacing", self.bad(), e)

    def test_tabstops(self):
        def tabs(pos):
            def build(d):
                for p in d.paragraphs:
                    p.paragraph_format.tab_stops.add_tab_stop(pos, WD_TAB_ALIGNMENT.LEFT)
            return build
        lines = ["Book One Title\t$10", "Second Book Title\t$12"]
        e = self.docx("e.docx", lines, tabs(Pt(300)))
        opts = {"index": 0, "word_number_split_by_tabstop": 3}
        self.assertScore(1.0, "check_tabstops", self.docx("r.docx", lines, tabs(Pt(300))), e, opts)
        self.assertScore(0.0, "check_tabstops", self.docx("r2.docx", lines), e, opts)
        self.assertScore(0.0, "check_tabstops", self.docx("r3.docx", ["Two words\t$1", "Second Book Title\t$12"], tabs(Pt(300))), e, opts)
        self.assertError("check_tabstops", self.bad(), e, opts)

    def test_subscript(self):
        def h2o(sub):
            def build(d):
                p = d.add_paragraph()
                p.add_run("H")
                p.add_run("2").font.subscript = sub
            return build
        e = self.docx("e.docx", build=h2o(True))
        self.assertScore(1.0, "compare_subscript_contains", self.docx("r.docx", build=h2o(True)), e)
        self.assertScore(0.0, "compare_subscript_contains", self.docx("r2.docx", build=h2o(False)), e)
        self.assertError("compare_subscript_contains", self.bad(), e)

    def test_font_names(self):
        def font(name):
            def build(d):
                d.add_paragraph().add_run("Dublin Zoo").font.name = name
            return build
        rule = {"font_name": "Times New Roman"}
        self.assertScore(1.0, "compare_font_names", self.docx("r.docx", build=font("Times New Roman")), rule)
        self.assertScore(0.0, "compare_font_names", self.docx("r2.docx", build=font("Arial")), rule)
        self.assertError("compare_font_names", self.bad(), rule)

    def test_first_line_centered(self):
        def centre(d):
            d.paragraphs[0].alignment = WD_ALIGN_PARAGRAPH.CENTER
        self.assertScore(1.0, "is_first_line_centered", self.docx("r.docx", TEXT, centre))
        self.assertScore(0.0, "is_first_line_centered", self.docx("r2.docx", TEXT))
        self.assertError("is_first_line_centered", self.bad())

    def test_strike_through_last_paragraph(self):
        def strike(on):
            def build(d):
                d.add_paragraph().add_run("obsolete").font.strike = on
            return build
        e = self.docx("e.docx", TEXT, strike(True))
        self.assertScore(1.0, "evaluate_strike_through_last_paragraph", self.docx("r.docx", TEXT, strike(True)), e)
        self.assertScore(0.0, "evaluate_strike_through_last_paragraph", self.docx("r2.docx", TEXT, strike(False)), e)
        self.assertError("evaluate_strike_through_last_paragraph", self.bad(), e)

    def test_italic_14(self):
        def italic(size):
            def build(d):
                r = d.add_paragraph().add_run("emphasis")
                r.italic = True
                r.font.size = Pt(size)
            return build
        e = self.docx("e.docx", build=italic(14))
        self.assertScore(1.0, "check_italic_font_size_14", self.docx("r.docx", build=italic(14)), e)
        self.assertScore(0.0, "check_italic_font_size_14", self.docx("r2.docx", build=italic(12)), e)
        self.assertError("check_italic_font_size_14", self.bad(), e)

    def test_page_break(self):
        def brk(d):
            d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
        self.assertScore(1.0, "contains_page_break", self.docx("r.docx", TEXT, brk))
        self.assertScore(0.0, "contains_page_break", self.docx("r2.docx", TEXT))
        self.assertError("contains_page_break", self.bad())

    def test_page_numbers_in_footers(self):
        def footer(text):
            def build(d):
                d.sections[0].footer.paragraphs[0].text = text
            return build
        self.assertScore(1.0, "has_page_numbers_in_footers", self.docx("r.docx", TEXT, footer("Page 1")))
        self.assertScore(0.0, "has_page_numbers_in_footers", self.docx("r2.docx", TEXT, footer("Page")))
        self.assertError("has_page_numbers_in_footers", self.bad())

    def test_lines_as_sets(self):
        e = self.docx("e.docx", ["10:00,T1,S1,P1", "10:05,T2,S2,P2"])
        self.assertScore(1.0, "compare_docx_lines", self.docx("r.docx", ["10:05,T2,S2,P2", "", "10:00,T1,S1,P1 "]), e)
        self.assertScore(0.0, "compare_docx_lines", self.docx("r2.docx", ["10:00,T1,S1,P1"]), e)
        self.assertError("compare_docx_lines", self.bad(), e)

    def test_unique_train_records(self):
        initial = self.docx("i.docx", ["10:00,T1,S1,P1", "10:01,T1,S1,P1", "10:05,T2,S2,P2"])
        gold = self.docx("g.docx", ["10:00,T1,S1,P1", "10:05,T2,S2,P2"])
        ok = self.docx("r.docx", ["10:00,T1,S1,P1", "10:05,T2,S2,P2"])
        self.assertScore(1.0, "compare_unique_train_records", ok, [gold, initial])
        dup = self.docx("r2.docx", ["10:00,T1,S1,P1", "10:01,T1,S1,P1", "10:05,T2,S2,P2"])
        self.assertScore(0.0, "compare_unique_train_records", dup, [gold, initial])
        self.assertError("compare_unique_train_records", self.bad(), [gold, initial])


class Images(DocCase):
    def with_image(self, color):
        def build(d):
            d.add_paragraph("figure:")
            d.add_picture(io.BytesIO(png_bytes(color)))
        return build

    def test_docx_images(self):
        e = self.docx("e.docx", build=self.with_image("red"))
        self.assertScore(1.0, "compare_docx_images", self.docx("r.docx", build=self.with_image("red")), e)
        self.assertScore(0.0, "compare_docx_images", self.docx("r2.docx", build=self.with_image("blue")), e)
        self.assertError("compare_docx_images", self.bad(), e)

    def test_contains_image(self):
        e = self.docx("e.docx", build=self.with_image("red"))
        self.assertScore(1.0, "compare_contains_image", self.docx("r.docx", build=self.with_image("blue")), e)
        self.assertScore(0.0, "compare_contains_image", self.docx("r2.docx", ["figure:", "no picture"]), e)
        self.assertError("compare_contains_image", self.bad(), e)

    @unittest.skipUnless(os.path.exists("/usr/bin/tesseract") and os.path.exists(FONT), "tesseract-ocr or a TTF font missing")
    def test_image_text_ocr(self):
        im = Image.new("RGB", (640, 120), "white")
        ImageDraw.Draw(im).text((20, 30), "Documents Music Pictures", fill="black", font=ImageFont.truetype(FONT, 40))
        p = self.path("ls.png")
        im.save(p)
        self.assertScore(1.0, "compare_image_text", p, {"type": "text", "text": "Music"})
        self.assertScore(0.0, "compare_image_text", p, {"type": "text", "text": "Videos"})
        self.assertError("compare_image_text", self.write("bad.png", b"\x89PNG broken"), {"type": "text", "text": "x"})


class Highlights(DocCase):
    def odt(self, name, highlight, text="Call the candidate"):
        from odf.opendocument import OpenDocumentText
        from odf.style import Style, TextProperties
        from odf.text import P, Span
        d = OpenDocumentText()
        st = Style(name="T1", family="text")
        st.addElement(TextProperties(backgroundcolor="#ffff00" if highlight else "#ffffff"))
        d.automaticstyles.addElement(st)
        p = P()
        p.addElement(Span(stylename=st, text=text))
        d.text.addElement(p)
        d.save(self.path(name))
        return self.path(name)

    def test_highlighted_words(self):
        e = self.odt("e.odt", False)
        self.assertScore(1.0, "check_highlighted_words", self.odt("r.odt", False), e)
        self.assertScore(0.0, "check_highlighted_words", self.odt("r2.odt", True), e)
        self.assertError("check_highlighted_words", self.write("bad.odt", b"PK\x03\x04 x"), e)


class References(DocCase):
    def test_references(self):
        refs = ["References", "Smith, J. (2020). A study. Journal 1.", "Doe, A. (2019). Another. Journal 2."]
        e = self.docx("e.docx", ["Body"] + refs)
        opts = {"content_only": True, "reference_base_result": 0.92}
        self.assertScore(1.0, "compare_references", self.docx("r.docx", ["Body text"] + refs), e, opts)
        self.assertScore(0.0, "compare_references", self.docx("r2.docx", ["Body", "References", "Totally different."]), e, opts)
        self.assertScore(0.0, "compare_references", self.docx("r3.docx", ["Body"]), e, opts)
        self.assertError("compare_references", self.bad(), e, opts)


XCU = """<?xml version="1.0" encoding="UTF-8"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">
<item oor:path="/org.openoffice.Office.Writer/DefaultFont"><prop oor:name="Standard" oor:op="fuse"><value>%s</value></prop></item>
</oor:items>"""


class DefaultFont(MetricCase):
    def test_default_font(self):
        rule = {"font_name": "Times New Roman"}
        self.assertScore(1.0, "find_default_font", self.write("a.xcu", XCU % "Times New Roman"), rule)
        self.assertScore(0.0, "find_default_font", self.write("b.xcu", XCU % "Liberation Serif"), rule)
        self.assertError("find_default_font", self.write("c.xcu", "<oor:items><item"), rule)


class Epub(MetricCase):
    def epub(self, name, chapter, ident="urn:uuid:1"):
        p = self.path(name)
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("mimetype", "application/epub+zip")
            z.writestr("toc.ncx", '<ncx>\n<navPoint id="n1">\n<text>Ch 1</text>\n</navPoint>\n</ncx>\n')
            z.writestr("content.opf", f"<package>\n<dc:identifier>{ident}</dc:identifier>\n<dc:title>Pass</dc:title>\n</package>\n")
            z.writestr("text/ch1.html", f"<html><body>\n<h1>One</h1>\n<p>{chapter}</p>\n</body></html>")
        return p

    def test_epub(self):
        e = self.epub("e.epub", "It begins.")
        self.assertScore(1.0, "compare_epub", self.epub("r.epub", "It begins.", ident="urn:uuid:2"), e)
        kind_val = self.epub("r2.epub", "It ends.")
        from metric_testlib import run_metric
        kind, val = run_metric("compare_epub", kind_val, e)
        self.assertEqual(kind, "score")
        self.assertLess(val, 1.0)
        self.assertScore(0.0, "compare_epub", self.path("absent.epub"), e)
        self.assertError("compare_epub", self.write("bad.epub", b"not a zip"), e)

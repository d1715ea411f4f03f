"""slides.py: compare_pptx_files and the single-purpose presentation metrics, on pptx packages
written by pptx_fixture (placeholders, text boxes, pictures, tables, notes, backgrounds)."""
import io

from PIL import Image

from dtd_fixture import xxe, with_dtd
from metric_testlib import MetricCase
from pptx_fixture import para, pic, run, solid_bg, sp, table, write_pptx


def png(color, size=(8, 8)):
    b = io.BytesIO()
    Image.new("RGB", size, color).save(b, "PNG")
    return b.getvalue()


def deck(title="Quarterly report", body=("Revenue", "Costs"), bold=None, pos=(914400, 1828800, 3000000, 900000),
         font="Arial", lvl=None, bullet="\u2022"):
    return [[sp(2, [para(run(title))], ph='type="title"'),
             sp(3, [para(run(t, sz=2400, b=bold, font=font) if bold is not None else run(t, sz=2400, font=font),
                         lvl=lvl, bullet=bullet) for t in body], ph='idx="1"'),
             sp(4, [para(run("note box", color="FF0000"))], pos=pos, txbox=True)]]


class ComparePptx(MetricCase):
    def pptx(self, name, slides, **kw):
        return write_pptx(self.path(name), slides, **kw)

    def test_identical(self):
        e = self.pptx("e.pptx", deck(), notes={0: "speak"})
        self.assertScore(1.0, "compare_pptx_files", self.pptx("r.pptx", deck(), notes={0: "speak "}), e, {})

    def test_text_font_position_and_slide_count_differ(self):
        e = self.pptx("e.pptx", deck())
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r1.pptx", deck(title="Quarterly Report")), e, {})
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r2.pptx", deck(bold="1")), e, {})
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r3.pptx", deck(font="Liberation Sans")), e, {})
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r4.pptx", deck(lvl=1)), e, {})
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r5.pptx", deck(bullet="-")), e, {})
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r6.pptx", deck() + deck()), e, {})
        moved = self.pptx("r7.pptx", deck(pos=(0, 0, 3000000, 900000)))
        self.assertScore(0.0, "compare_pptx_files", moved, e, {})
        self.assertScore(1.0, "compare_pptx_files", moved, e, {"examine_shape": False})

    def test_options_turn_checks_off(self):
        e = self.pptx("e.pptx", deck())
        self.assertScore(1.0, "compare_pptx_files", self.pptx("r.pptx", deck(bullet="-")), e,
                         {"examine_bullets": False, "examine_shape": False})
        self.assertScore(1.0, "compare_pptx_files", self.pptx("r2.pptx", deck(bold="1")), e, {"examine_font_bold": False})

    def test_notes(self):
        e = self.pptx("e.pptx", deck(), notes={0: "Thank the team"})
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r.pptx", deck()), e, {})
        self.assertScore(1.0, "compare_pptx_files", self.pptx("r2.pptx", deck()), e, {"examine_note": False})

    def test_placeholder_inherits_its_position(self):
        # a placeholder with its own xfrm equal to the master's matches one that inherits it
        own = [[sp(2, [para(run("T"))], pos=(457200, 274638, 8229600, 1143000), ph='type="title"')]]
        inherit = [[sp(2, [para(run("T"))], ph='type="title"')]]
        self.assertScore(1.0, "compare_pptx_files", self.pptx("r.pptx", own), self.pptx("e.pptx", inherit), {})
        elsewhere = [[sp(2, [para(run("T"))], pos=(0, 0, 8229600, 1143000), ph='type="title"')]]
        self.assertScore(0.0, "compare_pptx_files", self.pptx("r2.pptx", elsewhere), self.pptx("e.pptx", inherit), {})

    def test_image_size_and_table_bottom(self):
        img = {"a.png": png("red")}
        e = self.pptx("e.pptx", [[pic(5, "rIdImg0", (100, 100, 2000000, 1000000))]], images=img)
        big = self.pptx("r.pptx", [[pic(5, "rIdImg0", (100, 100, 4000000, 2000000))]], images=img)
        opts = {"examine_image_size": True, "examine_shape": False}
        self.assertScore(0.0, "compare_pptx_files", big, e, opts)
        same = self.pptx("r2.pptx", [[pic(5, "rIdImg0", (900, 900, 2000000, 1000000))]], images=img)
        self.assertScore(1.0, "compare_pptx_files", same, e, opts)
        # slide 3's table must have moved below its expected place and past 3600000 EMU
        slides_e = [[], [], [table(6, (100, 1000000, 500, 500))]]
        slides_r = [[], [], [table(6, (100, 4000000, 500, 500))]]
        opts = {"examine_table_bottom_position": True, "examine_shape": False}
        self.assertScore(1.0, "compare_pptx_files", self.pptx("t.pptx", slides_r), self.pptx("te.pptx", slides_e), opts)
        self.assertScore(0.0, "compare_pptx_files", self.pptx("t2.pptx", slides_e), self.pptx("te.pptx", slides_e), opts)

    def test_missing_and_malformed(self):
        e = self.pptx("e.pptx", deck())
        self.assertScore(0.0, "compare_pptx_files", self.path("nope.pptx"), e, {})
        self.assertError("compare_pptx_files", self.write("r.pptx", b"not a zip"), e, {})
        import zipfile
        with zipfile.ZipFile(self.path("r2.pptx"), "w") as z:
            z.writestr("ppt/presentation.xml", "<p:presentation")
        self.assertError("compare_pptx_files", self.path("r2.pptx"), e, {})
        # an external entity in a slide's text: refused, not scored on the text without it
        r3 = with_dtd(e, self.path("r3.pptx"), "ppt/slides/slide1.xml", xxe("file:///etc/passwd"), "Quarterly report",
                      "xxe")
        self.assertIn("result: ppt/slides/slide1.xml: its DTD declares external entity 'xxe' (file:///etc/passwd): "
                      "refused", self.assertError("compare_pptx_files", r3, e, {}))


class SlideChecks(MetricCase):
    def pptx(self, name, slides, **kw):
        return write_pptx(self.path(name), slides, **kw)

    def test_image_stretch_and_center(self):
        img = {"a.png": png("blue")}
        orig = self.pptx("o.pptx", [[pic(5, "rIdImg0", (100, 100, 2000000, 1000000))]], images=img)
        full = self.pptx("r.pptx", [[pic(5, "rIdImg0", (0, 0, 9144000, 6858000))]], images=img)
        self.assertScore(1.0, "check_image_stretch_and_center", full, orig)
        self.assertScore(0.0, "check_image_stretch_and_center", orig, orig)
        self.assertError("check_image_stretch_and_center", self.write("bad.pptx", b"x"), orig)

    def test_portrait(self):
        self.assertScore(1.0, "check_slide_orientation_Portrait", self.pptx("p.pptx", [[]], size=(6858000, 9144000)))
        self.assertScore(0.0, "check_slide_orientation_Portrait", self.pptx("l.pptx", [[]]))
        self.assertError("check_slide_orientation_Portrait", self.write("bad.pptx", b"x"))

    def test_fill_distance(self):
        rule = {"rgb": [0, 0, 255]}
        blue = self.pptx("b.pptx", [[("bg", solid_bg("0000FF"))], [("bg", solid_bg("0000FF"))]])
        self.assertScore(1.0, "evaluate_presentation_fill_to_rgb_distance", blue, rule)
        via_master = self.pptx("m.pptx", [[]], master_bg=solid_bg("0000FF"))
        self.assertScore(1.0, "evaluate_presentation_fill_to_rgb_distance", via_master, rule)
        none = self.pptx("n.pptx", [[]])
        self.assertScore(0.0, "evaluate_presentation_fill_to_rgb_distance", none, rule)
        red = self.pptx("r.pptx", [[("bg", solid_bg("FF0000"))]])
        self.assertScore(1 - (255 * 2 ** 0.5) / (3 * 255 ** 2) ** 0.5, "evaluate_presentation_fill_to_rgb_distance", red, rule)
        self.assertError("evaluate_presentation_fill_to_rgb_distance", self.write("bad.pptx", b"x"), rule)

    def test_transition(self):
        rule = {"slide_idx": 0, "transition_type": "dissolve"}
        tr = {0: '<p:transition spd="slow"><p:dissolve/></p:transition>'}
        self.assertScore(1.0, "check_transition", self.pptx("t.pptx", [[]], transitions=tr), rule)
        self.assertScore(0.0, "check_transition", self.pptx("n.pptx", [[]]), rule)
        self.assertScore(0.0, "check_transition", self.pptx("t2.pptx", [[]], transitions=tr), dict(rule, slide_idx=3))
        self.assertError("check_transition", self.write("bad.pptx", b"x"), rule)

    def test_page_number_colors(self):
        def master(rgb):
            # the slide-number colour is the second-to-last solid sRGB colour of the master
            return ('<p:txStyles><p:otherStyle><a:lvl1pPr><a:defRPr><a:solidFill><a:srgbClr val="%s"/>'
                    '</a:solidFill></a:defRPr></a:lvl1pPr><a:lvl2pPr><a:defRPr><a:solidFill><a:srgbClr val="000000"/>'
                    '</a:solidFill></a:defRPr></a:lvl2pPr></p:otherStyle></p:txStyles>') % rgb
        self.assertScore(1.0, "check_page_number_colors", self.pptx("r.pptx", [[]], master_extra=master("FF0000")), {"color": "red"})
        self.assertScore(0.0, "check_page_number_colors", self.pptx("b.pptx", [[]], master_extra=master("0000FF")), {"color": "red"})
        self.assertError("check_page_number_colors", self.write("bad.pptx", b"x"), {"color": "red"})


XCU = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Impress/Misc/Start"><prop oor:name="EnablePresenterScreen" oor:op="fuse"><value>%s</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSaveTimeIntervall" oor:op="fuse"><value>%s</value></prop></item>
</oor:items>"""


class RegistryChecks(MetricCase):
    def test_presenter_console(self):
        self.assertScore(1.0, "check_presenter_console_disable", self.write("a.xcu", XCU % ("false", 10)))
        self.assertScore(0.0, "check_presenter_console_disable", self.write("b.xcu", XCU % ("true", 10)))
        self.assertError("check_presenter_console_disable", self.write("c.xcu", "<oor:items"))

    def test_auto_saving_time(self):
        self.assertScore(1.0, "check_auto_saving_time", self.write("a.xcu", XCU % ("true", 3)), {"minutes": 3})
        self.assertScore(0.0, "check_auto_saving_time", self.write("b.xcu", XCU % ("true", 10)), {"minutes": 3})
        self.assertError("check_auto_saving_time", self.write("c.xcu", "<<<"), {"minutes": 3})

    def test_left_panel(self):
        tree = ('<desktop-frame xmlns:st="uri:deskat:state.at-spi.gnome.org" '
                'xmlns:cp="uri:deskat:component.at-spi.gnome.org"><root-pane><panel>'
                '<split-pane cp:parentcoord="%s" st:visible="true"/></panel></root-pane></desktop-frame>')
        self.assertScore(1.0, "check_left_panel", tree % "(0, 0)")
        self.assertScore(0.0, "check_left_panel", tree % "(250, 0)")
        self.assertError("check_left_panel", "<desktop-frame><root-pane>")
        # OSWorld-Verified's reading, on the tree shape its server (and envmgr-guest) writes
        verified = ('<desktop-frame xmlns:st="https://accessibility.ubuntu.example.org/ns/state">'
                    '<application name="soffice"><frame><document-frame name="%s" st:showing="true"/>'
                    '</frame></application></desktop-frame>')
        self.assertScore(1.0, "check_left_panel", verified % "Slides View")
        self.assertScore(0.0, "check_left_panel", verified % "Slide Sorter")

"""Presentation metrics (family "slides"): OSWorld's slides.py.

OSWorld reads pptx with python-pptx, which Debian does not package. This reads the package XML
itself (zipfile + the safe lxml parser) and reproduces what python-pptx reports for the things
OSWorld looks at: slide order (presentation.xml's sldIdLst), the shapes of a slide (the direct
p:sp/p:grpSp/p:graphicFrame/p:cxnSp/p:pic/p:contentPart children of its shape tree), their
position and size (placeholders inheriting from the layout, and the layout from the master, as
python-pptx does), shape_type codes, paragraph and run text and run fonts.
"""
import math
import posixpath
import zipfile

from lxml import etree

from _common import (MetricInputError, check_file, check_office, metric, result_missing, safe_xml_parser,
                     zip_xml)

NS = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main",
      "p": "http://schemas.openxmlformats.org/presentationml/2006/main",
      "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
      "rel": "http://schemas.openxmlformats.org/package/2006/relationships",
      "oor": "http://openoffice.org/2001/registry"}
A, P, R = "{%s}" % NS["a"], "{%s}" % NS["p"], "{%s}" % NS["r"]
SHAPE_TAGS = {P + t: t for t in ("sp", "grpSp", "graphicFrame", "cxnSp", "pic", "contentPart")}
MAX_SLIDES = 5000
EMU_HALF_INCH = 457200
_EMPTY_P = etree.Element(A + "p")   # the paragraph python-pptx gives a p:sp without a text body

# MSO_SHAPE_TYPE codes python-pptx reports
AUTO_SHAPE, CHART, FREEFORM, GROUP, EMBEDDED_OLE, LINE, LINKED_OLE, PICTURE, PLACEHOLDER, MEDIA, \
    TEXT_BOX, TABLE = 1, 3, 5, 6, 7, 9, 10, 13, 14, 16, 17, 19

# A layout placeholder inherits from the master placeholder of this type (python-pptx's table).
LAYOUT_TO_MASTER_TYPE = {"body": "body", "chart": "body", "clipArt": "body", "ctrTitle": "title",
                         "dgm": "body", "dt": "dt", "ftr": "ftr", "media": "body", "obj": "body",
                         "pic": "body", "sldNum": "sldNum", "subTitle": "body", "tbl": "body",
                         "title": "title"}


def _bool_attr(v):
    return None if v is None else v in ("1", "true")


class Package:
    """An OOXML presentation: parts parsed on demand, relationships resolved."""

    def __init__(self, path, role):
        self.role = role
        check_office(path, role)
        try:
            self.zf = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as e:
            raise MetricInputError(f"{role}: not a zip container: {e}") from None
        self._xml, self._rels = {}, {}
        main = self.related("", "officeDocument") or "ppt/presentation.xml"
        self.pres = self.xml(main)
        if self.pres.tag != P + "presentation":
            raise MetricInputError(f"{role}: {main} is not a presentation")
        rels = self.rels(main)
        self.slides = []
        lst = self.pres.find("p:sldIdLst", NS)
        for sid in (lst if lst is not None else []):
            target = rels.get(sid.get(R + "id"))
            if target is None:
                raise MetricInputError(f"{role}: slide id {sid.get('id')} has no relationship")
            self.slides.append(Slide(self, target[1]))
            if len(self.slides) > MAX_SLIDES:
                raise MetricInputError(f"{role}: over {MAX_SLIDES} slides")
        sz = self.pres.find("p:sldSz", NS)
        self.width = _int(sz.get("cx")) if sz is not None else None
        self.height = _int(sz.get("cy")) if sz is not None else None

    def xml(self, part):
        if part not in self._xml:
            self._xml[part] = zip_xml(self.zf, part, self.role)
        return self._xml[part]

    def blob(self, part):
        try:
            return self.zf.read(part)
        except KeyError:
            raise MetricInputError(f"{self.role}: no {part} in the package") from None
        except Exception as e:
            raise MetricInputError(f"{self.role}: {part}: unreadable: {e}") from None

    def rels(self, part):
        """{rId: (type, target part)} of a part (external targets left out)."""
        if part not in self._rels:
            d, base = posixpath.split(part)
            root = zip_xml(self.zf, posixpath.join(d, "_rels", base + ".rels"), self.role, required=False)
            out = {}
            for r in (root.iter("{%s}Relationship" % NS["rel"]) if root is not None else []):
                if r.get("TargetMode") == "External" or r.get("Target") is None:
                    continue
                t = r.get("Target")
                t = t.lstrip("/") if t.startswith("/") else posixpath.normpath(posixpath.join(d, t))
                out[r.get("Id")] = (r.get("Type", "").rsplit("/", 1)[-1], t)
            self._rels[part] = out
        return self._rels[part]

    def related(self, part, kind):
        for typ, target in self.rels(part).values():
            if typ == kind:
                return target
        return None


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _xfrm(el, kind):
    path = {"graphicFrame": "p:xfrm", "contentPart": "p:xfrm", "grpSp": "p:grpSpPr/a:xfrm"}.get(kind, "p:spPr/a:xfrm")
    x = el.find(path, NS)
    off = x.find("a:off", NS) if x is not None else None
    ext = x.find("a:ext", NS) if x is not None else None
    return {"left": _int(off.get("x")) if off is not None else None,
            "top": _int(off.get("y")) if off is not None else None,
            "width": _int(ext.get("cx")) if ext is not None else None,
            "height": _int(ext.get("cy")) if ext is not None else None}


def _ph(el):
    """The p:ph element of a shape, if it is a placeholder."""
    for nv in el:
        if nv.tag.startswith(P + "nv"):
            return nv.find("p:nvPr/p:ph", NS)
    return None


def _placeholders(pkg, part):
    root = pkg.xml(part)
    tree = root.find("p:cSld/p:spTree", NS)
    return [e for e in (tree if tree is not None else []) if e.tag in SHAPE_TAGS and _ph(e) is not None]


def _layout_dims(pkg, layout_part, el):
    """Position/size of a layout placeholder: its own, else its master placeholder's."""
    own = _xfrm(el, SHAPE_TAGS[el.tag])
    if el.tag != P + "sp" or all(v is not None for v in own.values()):
        return own
    base = None
    mtype = LAYOUT_TO_MASTER_TYPE.get(_ph(el).get("type", "obj"))
    master = pkg.related(layout_part, "slideMaster")
    if mtype is not None and master is not None:
        for m in _placeholders(pkg, master):
            if _ph(m).get("type", "obj") == mtype:
                base = _xfrm(m, SHAPE_TAGS[m.tag])
                break
    return {k: (v if v is not None else (base or {}).get(k)) for k, v in own.items()}


class Run:
    def __init__(self, r):
        rpr = r.find("a:rPr", NS)
        a = rpr.attrib if rpr is not None else {}
        self.text = "".join(t.text or "" for t in r.findall("a:t", NS))
        latin = rpr.find("a:latin", NS) if rpr is not None else None
        self.name = latin.get("typeface") if latin is not None else None
        self.size = _int(a.get("sz"))
        self.bold, self.italic = _bool_attr(a.get("b")), _bool_attr(a.get("i"))
        u = a.get("u")
        self.underline = None if u is None else (False if u == "none" else True if u == "sng" else u)
        self.strike = a.get("strike", "noStrike")
        # python-pptx's font.color has an .rgb only for an sRGB solid fill
        clr = rpr.find("a:solidFill/a:srgbClr", NS) if rpr is not None else None
        self.rgb = clr.get("val").upper() if clr is not None and clr.get("val") else None


class Paragraph:
    def __init__(self, p):
        ppr = p.find("a:pPr", NS)
        self.alignment = ppr.get("algn") if ppr is not None else None
        self.level = (_int(ppr.get("lvl")) or 0) if ppr is not None else 0
        parts = []
        for c in p:
            if c.tag in (A + "r", A + "fld"):
                parts.append("".join(t.text or "" for t in c.findall("a:t", NS)))
            elif c.tag == A + "br":
                parts.append("\v")
        self.text = "".join(parts)
        self.runs = [Run(r) for r in p.findall("a:r", NS)]


class Shape:
    def __init__(self, slide, el):
        self.el, self.kind = el, SHAPE_TAGS[el.tag]
        ph = _ph(el)
        self.is_placeholder = ph is not None
        dims = _xfrm(el, self.kind)
        if self.is_placeholder and self.kind in ("sp", "pic") and any(v is None for v in dims.values()):
            base = slide.layout_placeholder(_int(ph.get("idx")) or 0)
            if base is not None:
                dims = {k: (v if v is not None else base.get(k)) for k, v in dims.items()}
        self.left, self.top, self.width, self.height = dims["left"], dims["top"], dims["width"], dims["height"]
        # python-pptx gives every p:sp a text frame (adding an empty one when absent)
        self.has_text = self.kind == "sp"
        if self.has_text:
            body = el.find("p:txBody", NS)
            ps = body.findall("a:p", NS) if body is not None else []
            self.paragraphs = [Paragraph(p) for p in ps] if body is not None else [Paragraph(_EMPTY_P)]
            self.text = "\n".join(p.text for p in self.paragraphs)
        self.shape_type = self._type()

    def _type(self):
        nv = self.el.find("p:nvPicPr/p:nvPr", NS) if self.kind == "pic" else None
        if self.kind == "sp":
            if self.is_placeholder:
                return PLACEHOLDER
            if self.el.find("p:spPr/a:custGeom", NS) is not None:
                return FREEFORM
            txbox = self.el.find("p:nvSpPr/p:cNvSpPr", NS)
            txbox = txbox is not None and txbox.get("txBox") in ("1", "true")
            if self.el.find("p:spPr/a:prstGeom", NS) is not None and not txbox:
                return AUTO_SHAPE
            return TEXT_BOX if txbox else None   # python-pptx raises NotImplementedError for the rest
        if self.kind == "pic":
            if self.is_placeholder:
                return PLACEHOLDER
            return MEDIA if nv is not None and nv.find("a:videoFile", NS) is not None else PICTURE
        if self.kind == "graphicFrame":
            gd = self.el.find("a:graphic/a:graphicData", NS)
            uri = gd.get("uri", "") if gd is not None else ""
            if uri.endswith("/chart"):
                return CHART
            if uri.endswith("/table"):
                return TABLE
            if uri.endswith("/ole"):
                return EMBEDDED_OLE if gd.find(".//p:oleObj/p:embed", NS) is not None else LINKED_OLE
            return None
        return {"grpSp": GROUP, "cxnSp": LINE}.get(self.kind)

    def pos(self):
        return (self.left, self.top, self.width, self.height)

    def image_part(self, slide):
        blip = self.el.find("p:blipFill/a:blip", NS)
        rid = blip.get(R + "embed") if blip is not None else None
        target = slide.pkg.rels(slide.part).get(rid)
        return target[1] if target else None


class Slide:
    def __init__(self, pkg, part):
        self.pkg, self.part = pkg, part
        self._shapes = None

    @property
    def xml(self):
        return self.pkg.xml(self.part)

    @property
    def shapes(self):
        if self._shapes is None:
            tree = self.xml.find("p:cSld/p:spTree", NS)
            if tree is None:
                raise MetricInputError(f"{self.pkg.role}: {self.part} has no shape tree")
            self._shapes = [Shape(self, e) for e in tree if e.tag in SHAPE_TAGS]
        return self._shapes

    def layout_placeholder(self, idx):
        layout = self.pkg.related(self.part, "slideLayout")
        if layout is None:
            return None
        for e in _placeholders(self.pkg, layout):
            if (_int(_ph(e).get("idx")) or 0) == idx:
                return _layout_dims(self.pkg, layout, e)
        return None

    def notes_text(self):
        """The notes body text; "" without a notes slide (python-pptx makes an empty one)."""
        notes = self.pkg.related(self.part, "notesSlide")
        if notes is None:
            return ""
        for e in _placeholders(self.pkg, notes):
            if _ph(e).get("type", "obj") == "body" and e.tag == P + "sp":
                return Shape(self, e).text
        return ""

    def bullets(self):
        """(level, bullet char, text, bullet colour) of every paragraph of the slide's XML."""
        out = []
        for p in self.xml.iter(A + "p"):
            ppr = p.find("a:pPr", NS)
            if ppr is not None:
                bu = ppr.find("a:buChar", NS)
                clr = ppr.find("a:buClr/a:srgbClr", NS)
                item = (ppr.get("lvl"), bu.get("char") if bu is not None else "No Bullet",
                        clr.get("val") if clr is not None else "No Color")
            else:
                item = ("No Level", "No Bullet", "No Color")
            out.append((item[0], item[1], "".join(t.text or "" for t in p.iter(A + "t")), item[2]))
        return out


# ---------------------------------------------------------------------------------------------
# compare_pptx_files
# ---------------------------------------------------------------------------------------------

EXAMINE = {
    "examine_number_of_slides": True, "examine_shape": True, "examine_text": True, "examine_indent": True,
    "examine_font_name": True, "examine_font_size": True, "examine_font_bold": True,
    "examine_font_italic": True, "examine_color_rgb": True, "examine_font_underline": True,
    "examine_strike_through": True, "examine_alignment": True, "examine_title_bottom_position": False,
    "examine_table_bottom_position": False, "examine_right_position": False, "examine_top_position": False,
    "examine_shape_for_shift_size": False, "examine_image_size": False, "examine_modify_height": False,
    "examine_bullets": True, "examine_background_color": True, "examine_note": True,
}


def _le(a, b):
    """a <= b, and True (the check fails) when either is unknown: OSWorld raises TypeError there."""
    return a is None or b is None or a <= b


def _lt(a, b):
    return a is None or b is None or a < b


def _shapes_differ(s1, s2, idx, o):
    """True when a shape pair fails one of the enabled position/size checks."""
    moved = s1.pos() != s2.pos()
    both_text = s1.has_text and s2.has_text
    if o["examine_title_bottom_position"]:
        if both_text and s1.text == s2.text:
            if s1.text == "Product Comparison" and (_le(s1.top, s2.top) or _lt(s1.top, 3600000)):
                return True
        elif moved:
            return True
    if o["examine_table_bottom_position"]:
        if idx == 3 and s1.shape_type == TABLE and s2.shape_type == TABLE:
            if _le(s1.top, s2.top) or _lt(s1.top, 3600000):
                return True
        elif moved:
            return True
    if o["examine_right_position"]:
        if idx == 2 and not s1.has_text and not s2.has_text:
            if _le(s1.left, s2.left) or _lt(s1.left, 4320000):
                return True
    if o["examine_top_position"]:
        if idx == 2 and s1.shape_type == PICTURE and s2.shape_type == PICTURE:
            if _le(s2.top, s1.top) or _lt(1980000, s1.top):
                return True
        elif moved:
            return True
    if o["examine_shape_for_shift_size"] and moved:
        if not (both_text and s1.text == s2.text and s1.text == "Elaborate on what you want to discuss."):
            return True
    if o["examine_shape"] and moved:
        return True
    if o["examine_image_size"]:
        if s1.shape_type == PICTURE and s2.shape_type == PICTURE:
            if (s1.width, s1.height) != (s2.width, s2.height):
                return True
        elif moved:
            return True
    if o["examine_modify_height"]:
        if (not s1.has_text and not s2.has_text) or (s1.shape_type == FREEFORM and s2.shape_type == FREEFORM):
            if s1.height != s2.height:
                return True
        elif moved:
            return True
    return False


def _runs_differ(r1, r2, o):
    return ((o["examine_font_name"] and r1.name != r2.name) or
            (o["examine_font_size"] and r1.size != r2.size) or
            (o["examine_font_bold"] and r1.bold != r2.bold) or
            (o["examine_font_italic"] and r1.italic != r2.italic) or
            (o["examine_color_rgb"] and r1.rgb is not None and r2.rgb is not None and r1.rgb != r2.rgb) or
            (o["examine_font_underline"] and r1.underline != r2.underline) or
            (o["examine_strike_through"] and r1.strike != r2.strike))


def _texts_differ(s1, s2, o):
    """True when two text shapes fail a text check; also tells whether any run pair was seen
    (OSWorld compares the slides' bullets only from inside its run loop)."""
    saw_runs = False
    if o["examine_text"] and s1.text.strip() != s2.text.strip():
        return True, saw_runs
    for p1, p2 in zip(s1.paragraphs, s2.paragraphs):
        if (o["examine_alignment"] and p1.alignment != p2.alignment) or \
                (o["examine_text"] and p1.text != p2.text) or \
                (o["examine_indent"] and p1.level != p2.level):
            return True, saw_runs
        for r1, r2 in zip(p1.runs, p2.runs):
            saw_runs = True
            if _runs_differ(r1, r2, o):
                return True, saw_runs
    return False, saw_runs


def pptx_files_match(path1, path2, role1="result", role2="expected", **options):
    o = dict(EXAMINE)
    for k in EXAMINE:
        if k in options:
            o[k] = bool(options[k])
    p1, p2 = Package(path1, role1), Package(path2, role2)
    if o["examine_number_of_slides"] and len(p1.slides) != len(p2.slides):
        return False
    for idx, (sl1, sl2) in enumerate(zip(p1.slides, p2.slides), start=1):
        # OSWorld's background check never compares anything: python-pptx's fill.background()
        # returns None (it sets the fill to none), so both sides read None. Nothing to do here.
        if o["examine_note"] and sl1.notes_text().strip() != sl2.notes_text().strip():
            return False
        bullets_due = False
        for s1, s2 in zip(sl1.shapes, sl2.shapes):
            if _shapes_differ(s1, s2, idx, o):
                return False
            if s1.has_text and s2.has_text:
                differ, saw_runs = _texts_differ(s1, s2, o)
                if differ:
                    return False
                bullets_due = bullets_due or saw_runs
        if o["examine_bullets"] and bullets_due and sl1.bullets() != sl2.bullets():
            return False
    return True


@metric("compare_pptx_files", "slides",
        options=dict({k: f"bool, default {str(v).lower()}" for k, v in EXAMINE.items()},
                     examine_background_color="bool, default true: accepted and, as in OSWorld, compares nothing"),
        summary="Two pptx presentations match slide by slide: shapes, positions, text, fonts, bullets, notes",
        osworld="slides.compare_pptx_files with every examine_* option, shapes paired in order as python-pptx lists "
                "them, placeholders inheriting position from layout and master. Reproduces OSWorld's quirks: "
                "examine_background_color compares nothing (python-pptx's fill.background() returns None), a colour "
                "is compared only when both runs have an sRGB colour, bullets are compared over the whole slide "
                "XML once a text shape pair has a run pair, the slide-specific checks (Product Comparison title, "
                "slide 3 table, slide 2 picture/right position) keep their hard-coded values, unknown options "
                "(e.g. a task's 'examine_aligment') are ignored. Differs: unreadable pptx (either side) is an input "
                "error, not an exception or 0; a position comparison with an unknown coordinate fails the check "
                "instead of raising TypeError; a p:sp without geometry has shape_type None instead of raising; "
                "python-pptx's side effect of adding an empty paragraph to a text-less p:sp is not reproduced.")
def compare_pptx_files(result, expected, **options):
    if result_missing(result):
        return 0.0
    return 1.0 if pptx_files_match(result, expected, **options) else 0.0


# ---------------------------------------------------------------------------------------------
# The single-purpose slide metrics
# ---------------------------------------------------------------------------------------------

@metric("check_image_stretch_and_center", "slides",
        summary="The first slide's picture fills the slide and is centred (within half an inch)",
        osworld="slides.check_image_stretch_and_center(result, original): the original's first picture on slide 1 "
                "is found in the result's slide 1 by identical image bytes (the last such picture), then its size "
                "must be the original slide size and its position centred, each within 0.5 in. Differs: no such "
                "picture in the result scores 0 (OSWorld: UnboundLocalError); an original without a picture is "
                "an input error.")
def check_image_stretch_and_center(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    mod, orig = Package(result, "result"), Package(expected, "expected")
    if not orig.slides:
        raise MetricInputError("expected: no slides")
    opics = [s for s in orig.slides[0].shapes if s.shape_type == PICTURE]
    if not opics:
        raise MetricInputError("expected: no picture on the first slide")
    opart = opics[0].image_part(orig.slides[0])
    if opart is None:
        raise MetricInputError("expected: the first picture has no embedded image")
    want = orig.blob(opart)
    if not mod.slides:
        return 0.0
    found = None
    for s in mod.slides[0].shapes:
        if s.shape_type == PICTURE:
            part = s.image_part(mod.slides[0])
            if part is not None and mod.blob(part) == want:
                found = s
    if found is None or None in found.pos() or orig.width is None or orig.height is None:
        return 0.0
    w, h = orig.width, orig.height
    if abs(found.width - w) > EMU_HALF_INCH or abs(found.height - h) > EMU_HALF_INCH or \
            abs(found.left - (w - found.width) / 2) > EMU_HALF_INCH or \
            abs(found.top - (h - found.height) / 2) > EMU_HALF_INCH:
        return 0.0
    return 1.0


@metric("check_slide_orientation_Portrait", "slides", expected=False,
        summary="The presentation's slides are portrait (narrower than tall)",
        osworld="slides.check_slide_orientation_Portrait: slide width < slide height. Differs: unreadable pptx is an "
                "input error.")
def check_slide_orientation_Portrait(result, **_ignored):
    if result_missing(result):
        return 0.0
    p = Package(result, "result")
    if p.width is None or p.height is None:
        raise MetricInputError("result: presentation.xml has no slide size")
    return 1.0 if p.width < p.height else 0.0


def _solid_rgb(csld_parent):
    """(fill kind, (r, g, b) or None) of a slide's or master's background as python-pptx sees
    it: "solid" with an sRGB colour, "none" (no p:bgPr: python-pptx replaces p:bgRef or a missing
    p:bg with noFill), or another fill kind."""
    bgpr = csld_parent.find("p:cSld/p:bg/p:bgPr", NS)
    if bgpr is None:
        return "none", None
    for child in bgpr:
        tag = child.tag[len(A):] if child.tag.startswith(A) else None
        if tag == "noFill":
            return "none", None
        if tag == "solidFill":
            c = child.find("a:srgbClr", NS)
            v = c.get("val", "") if c is not None else ""
            if len(v) == 6:
                try:
                    return "solid", tuple(int(v[i:i + 2], 16) for i in (0, 2, 4))
                except ValueError:
                    pass
            return "solid", None
        if tag in ("gradFill", "blipFill", "pattFill", "grpFill"):
            return tag, None
    return "none", None


@metric("evaluate_presentation_fill_to_rgb_distance", "slides",
        options={},
        summary="1 minus the mean distance (normalized RGB) of each slide's background colour to the wanted one",
        osworld="slides.evaluate_presentation_fill_to_rgb_distance: expected is the rule {\"rgb\": [r, g, b]}; a slide "
                "with a solid background is measured, one with no fill of its own falls back to its master's solid "
                "background, anything else counts distance 1. Differs: a solid fill that is not an sRGB colour (a "
                "theme colour) counts distance 1 where OSWorld raises; a presentation without slides scores 0 "
                "(OSWorld: ZeroDivisionError).")
def evaluate_presentation_fill_to_rgb_distance(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    want = expected.get("rgb") if isinstance(expected, dict) else None
    if not isinstance(want, list) or len(want) != 3 or not all(isinstance(x, (int, float)) for x in want):
        raise MetricInputError("expected: a rule {\"rgb\": [r, g, b]}")
    p = Package(result, "result")
    if not p.slides:
        return 0.0
    norm = math.sqrt(3 * 255 ** 2)
    total = 0.0
    for sl in p.slides:
        kind, rgb = _solid_rgb(sl.xml)
        if kind == "none":
            layout = p.related(sl.part, "slideLayout")
            master = p.related(layout, "slideMaster") if layout else None
            kind, rgb = _solid_rgb(p.xml(master)) if master else ("none", None)
        if kind == "solid" and rgb is not None:
            total += math.sqrt(sum((a - b) ** 2 for a, b in zip(rgb, want))) / norm
        else:
            total += 1.0
    return max(0.0, min(1.0, 1.0 - total / len(p.slides)))


@metric("check_transition", "slides",
        options={},
        summary="A slide has a transition of the wanted kind",
        osworld="slides.check_transition: expected is the rule {\"slide_idx\": n, \"transition_type\": name}; the "
                "slide is the part ppt/slides/slide<n+1>.xml (by part name, as OSWorld), its first p:transition must "
                "contain a p:<name> element. Differs: malformed slide XML is an input error.")
def check_transition(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not isinstance(expected, dict) or not isinstance(expected.get("slide_idx"), int) or \
            not isinstance(expected.get("transition_type"), str):
        raise MetricInputError("expected: a rule {\"slide_idx\": int, \"transition_type\": str}")
    check_office(result)
    try:
        zf = zipfile.ZipFile(result)
    except (zipfile.BadZipFile, OSError) as e:
        raise MetricInputError(f"result: not a zip container: {e}") from None
    root = zip_xml(zf, f"ppt/slides/slide{expected['slide_idx'] + 1}.xml", "result", required=False)
    if root is None:
        return 0.0
    tr = root.find(".//p:transition", NS)
    if tr is None:
        return 0.0
    return 1.0 if tr.find(".//{%s}%s" % (NS["p"], expected["transition_type"])) is not None else 0.0


def _hexpair(s, i, j):
    try:
        return int(s[i:j], 16)
    except ValueError:
        return None


@metric("check_page_number_colors", "slides",
        options={},
        summary="The slide-number colour on the first slide master is the wanted colour (red, blue, green or black)",
        osworld="slides.check_page_number_colors: expected is the rule {\"color\": name}; the colour is the "
                "second-to-last a:srgbClr under an a:solidFill of ppt/slideMasters/slideMaster1.xml. Reproduces "
                "OSWorld's channel slicing ([1:3], [3:5], [5:7] of the 6-digit value, as if it began with '#') so "
                "scores agree. Differs: fewer than two such colours scores 0 (OSWorld: IndexError).")
def check_page_number_colors(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    color = expected.get("color") if isinstance(expected, dict) else None
    if not isinstance(color, str):   # OSWorld scores 1 for a name other than these four; so does this
        raise MetricInputError("expected: a rule {\"color\": \"red\"|\"blue\"|\"green\"|\"black\"}")
    check_office(result)
    try:
        zf = zipfile.ZipFile(result)
    except (zipfile.BadZipFile, OSError) as e:
        raise MetricInputError(f"result: not a zip container: {e}") from None
    root = zip_xml(zf, "ppt/slideMasters/slideMaster1.xml", "result")
    vals = [c.get("val") for c in root.findall(".//a:solidFill//a:srgbClr", NS)]
    if len(vals) < 2 or not vals[-2]:
        return 0.0
    v = vals[-2]
    r, g, b = _hexpair(v, 1, 3), _hexpair(v, 3, 5), _hexpair(v, 5, 7)
    if None in (r, g, b):
        return 0.0
    t = 50
    ok = {"red": r > g + t and r > b + t, "blue": b > g + t and b > r + t,
          "green": g > r + t and g > b + t, "black": r < t and g < t and b < t}.get(color, True)
    return 1.0 if ok else 0.0


def registry_prop(path, item_path, prop_name, what="result"):
    """The text of <value> of one prop of one item of LibreOffice's registrymodifications.xcu,
    or None when the item/prop is not there."""
    from lxml import etree
    check_file(path, what)
    try:
        root = etree.parse(path, safe_xml_parser()).getroot()
    except etree.XMLSyntaxError as e:
        raise MetricInputError(f"{what}: malformed XML: {e}") from None
    oor = "{%s}" % NS["oor"]
    for item in root.iter("item"):
        if item.get(oor + "path") != item_path:
            continue
        for prop in item.iter("prop"):
            if prop.get(oor + "name") == prop_name:
                v = prop.find("value")
                if v is not None:
                    return v.text
    return None


@metric("check_presenter_console_disable", "slides", expected=False,
        summary="LibreOffice's registrymodifications.xcu turns the Impress presenter console off",
        osworld="slides.check_presenter_console_disable: /org.openoffice.Office.Impress/Misc/Start "
                "EnablePresenterScreen must be 'false'. Differs: malformed XML is an input error (OSWorld: 0).")
def check_presenter_console_disable(result, **_ignored):
    if result_missing(result):
        return 0.0
    v = registry_prop(result, "/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen")
    return 1.0 if v is not None and v.lower() == "false" else 0.0


@metric("check_auto_saving_time", "slides",
        options={},
        summary="LibreOffice's registrymodifications.xcu sets the autosave interval to the wanted minutes",
        osworld="slides.check_auto_saving_time: expected is the rule {\"minutes\": n}; "
                "/org.openoffice.Office.Common/Save/Document AutoSaveTimeIntervall must equal n. Differs: malformed "
                "XML is an input error (OSWorld returns None); a non-integer value scores 0 (OSWorld: ValueError).")
def check_auto_saving_time(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not isinstance(expected, dict) or not isinstance(expected.get("minutes"), int):
        raise MetricInputError("expected: a rule {\"minutes\": int}")
    v = registry_prop(result, "/org.openoffice.Office.Common/Save/Document", "AutoSaveTimeIntervall")
    try:
        return 1.0 if v is not None and int(v) == expected["minutes"] else 0.0
    except ValueError:
        return 0.0


@metric("check_left_panel", "slides", expected=False,
        summary="Impress's slide pane (left panel) is shown, judged from the accessibility tree",
        osworld="slides.check_left_panel (OSWorld-Verified): some document-frame is named \"Slides View\" (the "
                "slide pane's view; LibreOffice has it only while the pane is open). The result is the "
                "accessibility tree XML as a string. Differs: OSWorld's older reading (a root-pane/panel/"
                "split-pane at cp:parentcoord (0, 0), in the uri:deskat namespaces) also scores 1: no "
                "Verified-era tree has parentcoord (docs/osworld.md). A tree that is not XML is an input error "
                "(OSWorld raises too).")
def check_left_panel(result, **_ignored):
    from lxml import etree
    if result is None:
        return 0.0
    if not isinstance(result, str):
        raise MetricInputError(f"result: expected the accessibility tree as a string, got {type(result).__name__}")
    try:
        root = etree.fromstring(result.encode("utf-8"), safe_xml_parser())
    except etree.XMLSyntaxError as e:
        raise MetricInputError(f"result: accessibility tree is not XML: {e}") from None
    if any(f.get("name") == "Slides View" for f in root.iter("document-frame")):
        return 1.0
    st = "{uri:deskat:state.at-spi.gnome.org}visible"
    cp = "{uri:deskat:component.at-spi.gnome.org}parentcoord"
    for rp in root.iter("root-pane"):
        for panel in rp.iter("panel"):
            for sp in panel.iter("split-pane"):
                if sp.get(cp) == "(0, 0)" and sp.get(st):
                    return 1.0
    return 0.0

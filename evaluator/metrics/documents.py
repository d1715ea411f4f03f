"""Word-processor metrics (family "documents"): OSWorld's docs.py metrics that its tasks use, its
others.compare_epub and the newer docs.compare_unique_train_records.

docx files are read with python-docx (Debian's python3-docx, the library OSWorld uses), odt
files with odfpy (python3-odf). OSWorld returns 0 when a file fails to open; here a result that
is absent scores 0 but a file that is present and unreadable is an input error (evaluator_error),
so a broken fixture or a corrupt save is reported rather than scored; so is one whose XML declares
entities in a DTD (check_office: billion laughs and XXE alike).
"""
import difflib
import os
import re
import subprocess
import zipfile

from _common import (MAX_IMAGE_PIXELS, MetricInputError, check_file, check_office, check_zip, fuzz_ratio,
                     metric, result_missing, safe_xml_parser)

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
MAX_PARAGRAPHS = 200_000


def open_docx(path, what):
    check_office(path, what)
    import docx
    try:
        return docx.Document(path)
    except Exception as e:
        raise MetricInputError(f"{what}: not a readable docx: {type(e).__name__}: {e}") from None


def open_odt(path, what):
    check_office(path, what)
    from odf.opendocument import load
    try:
        return load(path)
    except Exception as e:
        raise MetricInputError(f"{what}: not a readable odt: {type(e).__name__}: {e}") from None


def _paragraphs(doc, what):
    ps = doc.paragraphs
    if len(ps) > MAX_PARAGRAPHS:
        raise MetricInputError(f"{what}: over {MAX_PARAGRAPHS} paragraphs")
    return ps


def _odt_paragraph_texts(doc):
    """Each text:p's direct text plus the direct text of its text:span children (OSWorld's
    reading: nested spans, links and tabs inside a paragraph are not read)."""
    from odf.text import P
    out = []
    for p in doc.getElementsByType(P):
        parts = []
        for node in p.childNodes:
            if node.nodeType == node.TEXT_NODE:
                parts.append(node.data)
            elif node.nodeType == node.ELEMENT_NODE and node.tagName == "text:span":
                parts.extend(c.data for c in node.childNodes if c.nodeType == c.TEXT_NODE)
        out.append("".join(parts))
    return out


def paragraph_texts(result, expected):
    """The paragraph texts of two documents of the same kind (.docx or .odt, by name), or None
    when the names are not both .docx or both .odt (OSWorld scores that 0)."""
    if result.endswith(".docx") and expected.endswith(".docx"):
        return ([p.text for p in _paragraphs(open_docx(result, "result"), "result")],
                [p.text for p in _paragraphs(open_docx(expected, "expected"), "expected")])
    if result.endswith(".odt") and expected.endswith(".odt"):
        return _odt_paragraph_texts(open_odt(result, "result")), _odt_paragraph_texts(open_odt(expected, "expected"))
    check_file(result, "result")
    check_file(expected, "expected")
    return None


def _squash(paragraphs):
    return re.sub(r"\s+", " ", "\n".join(paragraphs)).strip()


def docx_files_score(result, expected, ignore_blanks=True, ignore_case=False, ignore_order=False,
                     content_only=False):
    texts = paragraph_texts(result, expected)
    if texts is None:
        return 0.0
    a, b = texts
    if ignore_order:
        a, b = sorted(a), sorted(b)
    if content_only:
        t1, t2 = _squash(a), _squash(b)
        if ignore_case:
            t1, t2 = t1.lower(), t2.lower()
        return fuzz_ratio(t1, t2) / 100.0
    if ignore_blanks:
        t1, t2 = _squash(a), _squash(b)
        if ignore_case:
            t1, t2 = t1.lower(), t2.lower()
        return 1.0 if t1 == t2 else 0.0
    if len(a) != len(b):
        return 0.0
    for p1, p2 in zip(a, b):
        if ignore_case:
            p1, p2 = p1.lower(), p2.lower()
        if p1 != p2:
            return 0.0
    return 1.0


NOTE_OPEN = ("Differs: a present but unreadable file (either side) is an input error, not 0; an absent "
             "result scores 0 as in OSWorld.")


@metric("compare_docx_files", "documents",
        options={"ignore_blanks": "bool, default true: compare the whole text with whitespace runs squashed",
                 "ignore_case": "bool, default false", "ignore_order": "bool, default false: sort paragraphs first",
                 "content_only": "bool, default false: score the fuzzy ratio (0..1) of the squashed texts"},
        summary="Two .docx (or two .odt) documents have the same paragraph text",
        osworld="docs.compare_docx_files: same options and order of checks; .odt read as OSWorld reads it (direct "
                "text and direct span text of each paragraph); mismatched or other extensions score 0. "
                "content_only uses rapidfuzz's ratio, reimplemented. " + NOTE_OPEN)
def compare_docx_files(result, expected, ignore_blanks=True, ignore_case=False, ignore_order=False,
                       content_only=False, **_ignored):
    if result_missing(result):
        return 0.0
    return docx_files_score(result, expected, ignore_blanks, ignore_case, ignore_order, content_only)


@metric("compare_docx_files_and_ignore_new_lines", "documents",
        options={"ignore_blanks": "bool, default true"},
        summary="Two .docx documents have the same text once empty paragraphs are dropped",
        osworld="docs.compare_docx_files_and_ignore_new_lines. " + NOTE_OPEN)
def compare_docx_files_and_ignore_new_lines(result, expected, ignore_blanks=True, **_ignored):
    if result_missing(result):
        return 0.0
    if not (result.endswith(".docx") and expected.endswith(".docx")):
        check_file(expected, "expected")
        return 0.0
    a = [p.text for p in _paragraphs(open_docx(result, "result"), "result") if p.text != ""]
    b = [p.text for p in _paragraphs(open_docx(expected, "expected"), "expected") if p.text != ""]
    if ignore_blanks:
        return 1.0 if _squash(a) == _squash(b) else 0.0
    return 1.0 if a == b else 0.0


def _two_docx(result, expected):
    return open_docx(result, "result"), open_docx(expected, "expected")


@metric("compare_docx_tables", "documents",
        summary="Two .docx documents have tables of the same shape and cell text",
        osworld="docs.compare_docx_tables: same table count, rows, columns and stripped cell text. " + NOTE_OPEN)
def compare_docx_tables(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    d1, d2 = _two_docx(result, expected)
    t1, t2 = d1.tables, d2.tables
    if len(t1) != len(t2):
        return 0.0
    for a, b in zip(t1, t2):
        if len(a.rows) != len(b.rows) or len(a.columns) != len(b.columns):
            return 0.0
        for i in range(len(a.rows)):
            for j in range(len(a.columns)):
                try:
                    same = a.cell(i, j).text.strip() == b.cell(i, j).text.strip()
                except IndexError:
                    raise MetricInputError("a table has a row with fewer cells than its grid") from None
                if not same:
                    return 0.0
    return 1.0


@metric("compare_line_spacing", "documents",
        summary="Two .docx documents have the same text and the same line spacing paragraph by paragraph",
        osworld="docs.compare_line_spacing: compare_docx_files (defaults) first, then paragraph count and each "
                "paragraph_format.line_spacing. " + NOTE_OPEN)
def compare_line_spacing(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not docx_files_score(result, expected):
        return 0.0
    d1, d2 = _two_docx(result, expected)
    p1, p2 = d1.paragraphs, d2.paragraphs
    if len(p1) != len(p2):
        return 0.0
    return 1.0 if all(a.paragraph_format.line_spacing == b.paragraph_format.line_spacing
                      for a, b in zip(p1, p2)) else 0.0


@metric("check_tabstops", "documents",
        options={"word_number_split_by_tabstop": "int, optional: the text before tab number `index` of each "
                                                  "non-empty result paragraph must have this many words",
                 "index": "int, default 0"},
        summary="Non-empty paragraphs have the expected tab stops; score 1 minus the mean position error",
        osworld="docs.check_tabstops: clear tabs and left tabs at 0 are ignored, alignments must agree, the score "
                "is 1 - mean(sum |position difference| / text width of the expected's first section). Differs: "
                "an index past the tab-separated parts scores 0 (OSWorld: IndexError). " + NOTE_OPEN)
def check_tabstops(result, expected, word_number_split_by_tabstop=None, index=0, **_ignored):
    from docx.enum.text import WD_TAB_ALIGNMENT
    if result_missing(result):
        return 0.0
    d1, d2 = _two_docx(result, expected)
    p1 = [p for p in d1.paragraphs if p.text.strip()]
    p2 = [p for p in d2.paragraphs if p.text.strip()]
    if len(p1) != len(p2):
        return 0.0
    if word_number_split_by_tabstop is not None:
        for p in p1:
            parts = p.text.split("\t")
            if index >= len(parts) or index < -len(parts):
                return 0.0
            if len([w for w in re.split(r"\s", parts[index]) if w.strip()]) != word_number_split_by_tabstop:
                return 0.0
    sec = d2.sections[0]
    try:
        width = sec.page_width - sec.left_margin - sec.right_margin
    except TypeError:
        raise MetricInputError("expected: the first section has no page width or margins") from None
    if not width:
        raise MetricInputError("expected: the first section has no text width")

    def kept(tabs):
        return [t for t in tabs if not (t.alignment == WD_TAB_ALIGNMENT.CLEAR or
                                        (t.alignment == WD_TAB_ALIGNMENT.LEFT and t.position == 0))]
    minus = 0.0
    for a, b in zip(p1, p2):
        t1, t2 = kept(a.paragraph_format.tab_stops), kept(b.paragraph_format.tab_stops)
        if len(t1) != len(t2):
            return 0.0
        diff = 0.0
        for x, y in zip(t1, t2):
            if x.alignment != y.alignment:
                return 0.0
            diff += abs(x.position - y.position)
        minus += diff / width
    if not p1:
        raise MetricInputError("no non-empty paragraphs to compare (OSWorld divides by zero)")
    return max(0.0, min(1.0, 1 - minus / len(p1)))


def _run_pairs(d1, d2):
    for a, b in zip(d1.paragraphs, d2.paragraphs):
        yield from zip(a.runs, b.runs)


@metric("compare_subscript_contains", "documents",
        summary="Some run pair (paragraphs and runs paired in order) is subscript in both documents",
        osworld="docs.compare_subscript_contains. " + NOTE_OPEN)
def compare_subscript_contains(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    return 1.0 if any(r1.font.subscript and r2.font.subscript for r1, r2 in _run_pairs(*_two_docx(result, expected))) else 0.0


@metric("compare_contains_image", "documents",
        summary="Run by run, the result has a drawing exactly where the expected does",
        osworld="docs.compare_contains_image: paragraphs and runs paired in order; a run 'has an image' when its XML "
                "contains graphicData. " + NOTE_OPEN)
def compare_contains_image(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    for r1, r2 in _run_pairs(*_two_docx(result, expected)):
        if (_has_graphic(r1)) != (_has_graphic(r2)):
            return 0.0
    return 1.0


def _has_graphic(run):
    from lxml import etree
    return "graphicData" in etree.tostring(run._element, encoding="unicode")


@metric("has_page_numbers_in_footers", "documents", expected=False,
        summary="Every section's footer has a digit in its first paragraph",
        osworld="docs.has_page_numbers_in_footers, with python-docx's footer reading (a field's cached result "
                "inside w:fldSimple is not paragraph text). " + NOTE_OPEN)
def has_page_numbers_in_footers(result, **_ignored):
    if result_missing(result):
        return 0.0
    for sec in open_docx(result, "result").sections:
        ps = sec.footer.paragraphs
        text = ps[0].text if ps else ""
        if not any(ch.isdigit() for ch in text):
            return 0.0
    return 1.0


@metric("compare_font_names", "documents",
        options={},
        summary="Every run of the document has the wanted font name",
        osworld="docs.compare_font_names: expected is the rule {\"font_name\": name}; a run without an explicit font "
                "(None) fails, as in OSWorld. " + NOTE_OPEN)
def compare_font_names(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    want = expected.get("font_name") if isinstance(expected, dict) else None
    if not isinstance(want, str):
        raise MetricInputError("expected: a rule {\"font_name\": str}")
    for p in open_docx(result, "result").paragraphs:
        for r in p.runs:
            if r.font.name != want:
                return 0.0
    return 1.0


@metric("is_first_line_centered", "documents", expected=False,
        summary="The document's first paragraph is centred",
        osworld="docs.is_first_line_centered (the paragraph's own alignment, not its style's). Differs: a "
                "document without paragraphs scores 0 (OSWorld: IndexError). " + NOTE_OPEN)
def is_first_line_centered(result, **_ignored):
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT
    if result_missing(result):
        return 0.0
    ps = open_docx(result, "result").paragraphs
    return 1.0 if ps and ps[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER else 0.0


@metric("contains_page_break", "documents", expected=False,
        summary="Some run of the document has a page break",
        osworld="docs.contains_page_break (w:br w:type=\"page\" inside a body paragraph's run). " + NOTE_OPEN)
def contains_page_break(result, **_ignored):
    if result_missing(result):
        return 0.0
    for p in open_docx(result, "result").paragraphs:
        for r in p.runs:
            for br in r.element.iter(W + "br"):
                if br.get(W + "type") == "page":
                    return 1.0
    return 0.0


@metric("compare_docx_lines", "documents",
        summary="The two documents have the same set of non-empty stripped paragraphs",
        osworld="docs.compare_docx_lines. " + NOTE_OPEN)
def compare_docx_lines(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    d1, d2 = _two_docx(result, expected)
    s1 = {p.text.strip() for p in d1.paragraphs if p.text.strip()}
    s2 = {p.text.strip() for p in d2.paragraphs if p.text.strip()}
    return 1.0 if s1 == s2 else 0.0


@metric("evaluate_strike_through_last_paragraph", "documents",
        summary="Same text as expected, and every run of the last paragraph is struck through",
        osworld="docs.evaluate_strike_through_last_paragraph: compare_docx_files (defaults) first. Differs: a "
                "document without paragraphs scores 0 (OSWorld: IndexError). " + NOTE_OPEN)
def evaluate_strike_through_last_paragraph(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not docx_files_score(result, expected):
        return 0.0
    ps = open_docx(result, "result").paragraphs
    if not ps:
        return 0.0
    return 1.0 if all(r.font.strike for r in ps[-1].runs) else 0.0


def _delta_e(rgb1, rgb2):
    import numpy as np
    from skimage.color import deltaE_ciede2000, rgb2lab
    a = rgb2lab(np.array([[list(rgb1)]], dtype=float) / 255.0)
    b = rgb2lab(np.array([[list(rgb2)]], dtype=float) / 255.0)
    return float(deltaE_ciede2000(a, b)[0, 0])


@metric("evaluate_colored_words_in_tables", "documents",
        options={"threshold": "number, default 3.5: largest CIEDE2000 distance still counted as the colour"},
        summary="Same text as expected, and in every table words starting with a vowel are red, the others blue",
        osworld="docs.evaluate_colored_words_in_tables: compare_docx_files (defaults) first, then each non-empty run "
                "in table cells is coloured by its first letter within the CIEDE2000 threshold. Differs: a run "
                "without an RGB colour scores 0 (OSWorld: TypeError; newer OSWorld also 0). " + NOTE_OPEN)
def evaluate_colored_words_in_tables(result, expected, threshold=3.5, **_ignored):
    if result_missing(result):
        return 0.0
    if not docx_files_score(result, expected):
        return 0.0
    for table in open_docx(result, "result").tables:
        for row in table.rows:
            for cell in row.cells:
                for p in cell.paragraphs:
                    for r in p.runs:
                        if not r.text:
                            continue
                        try:
                            rgb = r.font.color.rgb
                        except Exception:
                            rgb = None
                        if rgb is None:
                            return 0.0
                        want = (255, 0, 0) if r.text[0].lower() in "aeiou" else (0, 0, 255)
                        if _delta_e((rgb[0], rgb[1], rgb[2]), want) > threshold:
                            return 0.0
    return 1.0


@metric("check_italic_font_size_14", "documents",
        summary="Same text as expected, and every italic run is 14 pt",
        osworld="docs.check_italic_font_size_14: compare_docx_files (defaults) first; run.italic (direct "
                "formatting) and run.font.size. " + NOTE_OPEN)
def check_italic_font_size_14(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not docx_files_score(result, expected):
        return 0.0
    for p in open_docx(result, "result").paragraphs:
        for r in p.runs:
            if r.italic and (r.font.size is None or r.font.size.pt != 14):
                return 0.0
    return 1.0


@metric("check_highlighted_words", "documents",
        summary="Same text as expected, and no span of the (odt) result has a yellow (#ffff00) background",
        osworld="docs.check_highlighted_words: compare_docx_files (defaults) first, then the result is read as odt "
                "and scores 0 if a text:span's automatic style has background colour #ffff00. " + NOTE_OPEN)
def check_highlighted_words(result, expected, **_ignored):
    from odf.text import Span
    if result_missing(result):
        return 0.0
    if not docx_files_score(result, expected):
        return 0.0
    doc = open_odt(result, "result")
    styles = {}
    for st in doc.automaticstyles.childNodes:
        if st.nodeType == st.ELEMENT_NODE:
            styles.setdefault(st.getAttribute("name"), st)
    for span in doc.getElementsByType(Span):
        name = span.getAttribute("stylename")
        st = styles.get(name) if name else None
        if st is None:
            continue
        for prop in st.childNodes:
            if prop.nodeType == prop.ELEMENT_NODE and _odf_attr(prop, "backgroundcolor") == "#ffff00":
                return 0.0
    return 1.0


def _odf_attr(node, name):
    try:
        return node.getAttribute(name)
    except ValueError:   # odfpy refuses attributes an element cannot have
        return None


@metric("compare_references", "documents",
        options={"reference_indicator": "str, default 'References': the paragraph that starts the list",
                 "reference_base_result": "number, default 0.5: mean similarity that scores 0"},
        summary="The reference lists after the indicator paragraph match item by item (fuzzy), rescaled above a base",
        osworld="docs.compare_references: mean rapidfuzz ratio of paired non-empty paragraphs after the first "
                "indicator paragraph, rescaled as (r - base) / (1 - base); both without references score 1, one "
                "without scores 0. Other options a task passes (content_only) are ignored, as in OSWorld. Differs: "
                "two empty reference lists score 1 (OSWorld divides by zero). " + NOTE_OPEN)
def compare_references(result, expected, reference_indicator="References", reference_base_result=0.5, **_ignored):
    if result_missing(result):
        return 0.0
    if not (result.endswith(".docx") and expected.endswith(".docx")):
        check_file(expected, "expected")
        return 0.0
    d1, d2 = _two_docx(result, expected)
    a, b = [p.text for p in d1.paragraphs], [p.text for p in d2.paragraphs]
    i1 = a.index(reference_indicator) if reference_indicator in a else -1
    i2 = b.index(reference_indicator) if reference_indicator in b else -1
    if i1 == -1 and i2 == -1:
        return 1.0
    if i1 == -1 or i2 == -1:
        return 0.0
    r1 = [p for p in a[i1 + 1:] if p.strip()]
    r2 = [p for p in b[i2 + 1:] if p.strip()]
    if len(r1) != len(r2):
        return 0.0
    if not r1:
        return 1.0
    sim = sum(fuzz_ratio(x, y) / 100.0 for x, y in zip(r1, r2)) / len(r1)
    base = float(reference_base_result)
    if base >= 1:
        return 1.0 if sim >= 1 else 0.0
    return (sim - base) / (1 - base) if sim >= base else 0.0


@metric("compare_docx_images", "documents",
        summary="The two documents embed the same images (decoded pixels), in relationship order",
        osworld="docs.compare_docx_images: the images related from the main document part, compared by PIL's "
                "decoded bytes. Differs: an image PIL cannot decode, or one over the pixel cap, is an input "
                "error. " + NOTE_OPEN)
def compare_docx_images(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    d1, d2 = _two_docx(result, expected)

    def images(doc, what):
        return [(what, rel.target_part.blob) for rel in doc.part.rels.values()
                if "image" in rel.reltype and not rel.is_external]
    i1, i2 = images(d1, "result"), images(d2, "expected")
    if len(i1) != len(i2):
        return 0.0
    for a, b in zip(i1, i2):
        if decoded_pixels(*a) != decoded_pixels(*b):
            return 0.0
    return 1.0


def decoded_pixels(what, data):
    import io
    from PIL import Image
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.width * im.height > MAX_IMAGE_PIXELS:
                raise MetricInputError(f"{what}: image of {im.width}x{im.height} pixels, over the cap")
            return im.mode, im.size, im.tobytes()
    except MetricInputError:
        raise
    except Exception as e:
        raise MetricInputError(f"{what}: an embedded image does not decode: {type(e).__name__}: {e}") from None


@metric("find_default_font", "documents",
        options={},
        summary="LibreOffice's registrymodifications.xcu sets Writer's default (Standard) font to the wanted one",
        osworld="docs.find_default_font: expected is the rule {\"font_name\": name}; the last <value> of prop "
                "Standard under item /org.openoffice.Office.Writer/DefaultFont. Differs: malformed XML is an input "
                "error (OSWorld: 0).")
def find_default_font(result, expected, **_ignored):
    from lxml import etree
    if result_missing(result):
        return 0.0
    want = expected.get("font_name") if isinstance(expected, dict) else None
    if not isinstance(want, str):
        raise MetricInputError("expected: a rule {\"font_name\": str}")
    check_file(result, "result")
    try:
        root = etree.parse(result, safe_xml_parser()).getroot()
    except etree.XMLSyntaxError as e:
        raise MetricInputError(f"result: malformed XML: {e}") from None
    oor = "{http://openoffice.org/2001/registry}"
    found = None
    for item in root.iter("item"):
        if item.get(oor + "path") != "/org.openoffice.Office.Writer/DefaultFont":
            continue
        for prop in item.iter("prop"):
            if prop.get(oor + "name") == "Standard":
                for v in prop.findall("value"):
                    found = v.text
    return 1.0 if found == want else 0.0


@metric("compare_image_text", "documents",
        options={},
        summary="OCR of an image (tesseract) contains the wanted text",
        osworld="docs.compare_image_text: expected is the rule {\"type\": \"text\", \"text\": s}; 1 if s is in the "
                "OCR text (lines joined by spaces). Differs: OCR is Debian's tesseract (eng), run as a subprocess, "
                "where OSWorld uses EasyOCR; the two read differently (case, spacing), so rules tuned to EasyOCR's "
                "output (e.g. a leading space) may not match. An image that does not decode is an input error.")
def compare_image_text(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not isinstance(expected, dict) or expected.get("type") != "text" or not isinstance(expected.get("text"), str):
        raise MetricInputError("expected: a rule {\"type\": \"text\", \"text\": str}")
    check_file(result, "result")
    with open(result, "rb") as f:
        decoded_pixels("result", f.read())
    text = ocr_text(result)
    return 1.0 if expected["text"] in text else 0.0


def ocr_text(path):
    """Words tesseract reads in an image, lines joined with single spaces (EasyOCR's entries are
    joined the same way in OSWorld)."""
    try:
        # one thread: the sandbox's process limit must not meet OpenMP's worker pool
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_THREAD_LIMIT": "1"}
        p = subprocess.run(["tesseract", path, "stdout", "-l", "eng"], capture_output=True, timeout=120,
                           stdin=subprocess.DEVNULL, env=env)
    except FileNotFoundError:
        raise MetricInputError("OCR: the tesseract program is not installed (Debian package tesseract-ocr)") from None
    except subprocess.TimeoutExpired:
        raise MetricInputError("OCR: tesseract took over 120 s") from None
    if p.returncode != 0:
        raise MetricInputError(f"OCR: tesseract failed: {p.stderr.decode('utf-8', 'replace').strip()[-300:]}")
    lines = [ln.strip() for ln in p.stdout.decode("utf-8", "replace").splitlines()]
    return " ".join(ln for ln in lines if ln)


# ---------------------------------------------------------------------------------------------
# EPUB and train records
# ---------------------------------------------------------------------------------------------

def _epub_texts(path, what):
    """OSWorld's process_epub, in memory: toc.ncx without navPoint lines, content.opf without
    dc:identifier lines, and every .html member re-serialized (newlines dropped, pretty printed);
    as (member name, lines), sorted by name."""
    import lxml.html
    check_zip(path, what)
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise MetricInputError(f"{what}: not a zip container: {e}") from None

    def text(member):
        try:
            return zf.read(member).decode("utf-8")
        except KeyError:
            raise MetricInputError(f"{what}: no {member} in the epub") from None
        except UnicodeDecodeError as e:
            raise MetricInputError(f"{what}: {member} is not UTF-8: {e}") from None
    out = [("toc.ncx", [ln for ln in text("toc.ncx").splitlines() if "navPoint" not in ln]),
           ("content.opf", [ln for ln in text("content.opf").splitlines() if "dc:identifier" not in ln])]
    parser = lxml.html.HTMLParser(no_network=True)
    for name in zf.namelist():
        if name.endswith(".html"):
            raw = "".join(ch for ch in text(name) if ch not in "\r\n")
            try:
                html = lxml.html.fromstring(raw.encode(), parser=parser)
            except Exception as e:
                raise MetricInputError(f"{what}: {name}: not HTML: {e}") from None
            out.append((name, lxml.html.tostring(html, pretty_print=True, encoding="unicode").splitlines()))
    return sorted(out)


@metric("compare_epub", "documents",
        summary="Product of line-diff ratios of an epub's toc.ncx, content.opf and HTML files against the expected",
        osworld="others.compare_epub: the same normalization (navPoint and dc:identifier lines dropped, HTML "
                "re-serialized) and difflib ratio per paired file, multiplied; files paired in sorted order. "
                "Differs: done in memory (OSWorld writes <epub>.dir beside the file); a result that is not a zip "
                "or lacks toc.ncx/content.opf is an input error (OSWorld: 1.0 for a non-zip, KeyError for a "
                "missing member).")
def compare_epub(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    score = 1.0
    for (_n1, a), (_n2, b) in zip(_epub_texts(result, "result"), _epub_texts(expected, "expected")):
        score *= difflib.SequenceMatcher(a=a, b=b).ratio()
    return score


def _train_lines(path, what):
    lines = [p.text.strip() for p in _paragraphs(open_docx(path, what), what) if p.text.strip()]
    ids = [ln.split(",")[1].strip() for ln in lines if len(ln.split(",")) == 4]
    return lines, ids


@metric("compare_unique_train_records", "documents",
        summary="A de-duplicated train record list: lines all from the initial file, no repeated train id, the "
                "gold's ids and line count",
        osworld="docs.compare_unique_train_records (newer OSWorld): expected is a list [gold docx, initial docx]. "
                "Differs: an expected that is not such a list, or an unreadable file, is an input error (OSWorld: 0).")
def compare_unique_train_records(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    if not isinstance(expected, list) or len(expected) < 2 or not all(isinstance(x, str) for x in expected[:2]):
        raise MetricInputError("expected: a list [gold docx, initial docx]")
    proc, proc_ids = _train_lines(result, "result")
    gold, gold_ids = _train_lines(expected[0], "expected gold")
    initial, _ = _train_lines(expected[1], "expected initial")
    if not set(proc) <= set(initial):
        return 0.0
    if len(proc_ids) != len(set(proc_ids)):
        return 0.0
    if set(proc_ids) != set(gold_ids):
        return 0.0
    return 1.0 if len(proc) == len(gold) else 0.0


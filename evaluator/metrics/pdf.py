"""PDF metrics (family "pdf"): OSWorld's compare_pdfs and compare_pdf_images (chrome.py) and
check_pdf_pages (pdf.py). OSWorld reads PDFs with PyMuPDF; this uses pypdf (Debian's
python3-pypdf), pure Python, so no renderer parses untrusted PDFs."""
import io
import operator

from _common import MAX_IMAGE_PIXELS, MetricInputError, check_file, fuzz_ratio, metric, result_missing

MAX_PAGES = 2000
MAX_TEXT = 2_000_000   # characters of extracted text per document


def open_pdf(path, what):
    """A pypdf reader over a PDF read whole, or MetricInputError."""
    check_file(path, what)
    with open(path, "rb") as f:
        data = f.read()
    return pdf_reader(data, what)


def pdf_reader(data, what):
    from pypdf import PdfReader
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                reader.decrypt("")
            except Exception:
                raise MetricInputError(f"{what}: encrypted PDF") from None
        n = len(reader.pages)
    except MetricInputError:
        raise
    except Exception as e:
        raise MetricInputError(f"{what}: not a readable PDF: {type(e).__name__}: {e}") from None
    if n > MAX_PAGES:
        raise MetricInputError(f"{what}: {n} pages, over {MAX_PAGES}")
    return reader


def pdf_text(reader, what):
    """All pages' text, concatenated and stripped (as OSWorld builds it from PyMuPDF)."""
    parts, size = [], 0
    for i, page in enumerate(reader.pages):
        try:
            t = page.extract_text() or ""
        except Exception as e:
            raise MetricInputError(f"{what}: page {i + 1}: text unreadable: {type(e).__name__}: {e}") from None
        size += len(t)
        if size > MAX_TEXT:
            raise MetricInputError(f"{what}: over {MAX_TEXT} characters of text")
        parts.append(t)
    return "".join(parts).strip()


@metric("compare_pdfs", "pdf",
        summary="Mean fuzzy ratio (0..1) of the text of result and expected PDFs, pairwise",
        osworld="chrome.compare_pdfs: one path or lists of paths, paired in order, score = sum of rapidfuzz ratios / "
                "number of expected files; an absent result file adds 0. Differs: text is extracted by pypdf, not "
                "PyMuPDF, so line breaks and spacing can differ and two different PDFs can score a little "
                "differently (identical text still scores 1); an unreadable PDF is an input error where OSWorld "
                "adds 0 for the pair.")
def compare_pdfs(result, expected, **_ignored):
    if not isinstance(expected, list):
        result, expected = [result], [expected]
    if not isinstance(result, list):
        result = [result]
    if not expected:
        raise MetricInputError("expected: empty list of PDFs")
    score = 0.0
    for r, e in zip(result, expected):
        if not isinstance(e, str):
            raise MetricInputError(f"expected: {e!r} is not a file path")
        if result_missing(r):
            continue
        score += fuzz_ratio(pdf_text(open_pdf(r, "result"), "result"),
                            pdf_text(open_pdf(e, "expected"), "expected")) / 100.0
    return score / len(expected)


def page_signature(reader, what):
    """What a page looks like without a renderer: its size and rotation, its text, and the
    decoded pixels of the images it draws, in order."""
    from PIL import Image
    Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS
    out = []
    for i, page in enumerate(reader.pages):
        box = page.mediabox
        try:
            images = []
            for img in page.images:
                im = img.image if hasattr(img, "image") and img.image is not None else Image.open(io.BytesIO(img.data))
                if im.width * im.height > MAX_IMAGE_PIXELS:
                    raise MetricInputError(f"{what}: page {i + 1}: image over the pixel cap")
                images.append((im.mode, im.size, im.tobytes()))
            text = page.extract_text() or ""
        except MetricInputError:
            raise
        except Exception as e:
            raise MetricInputError(f"{what}: page {i + 1}: unreadable: {type(e).__name__}: {e}") from None
        out.append((round(float(box.width), 2), round(float(box.height), 2), page.get("/Rotate", 0) or 0,
                    text, images))
    return out


@metric("compare_pdf_images", "pdf",
        summary="Two PDFs look the same page by page (size, text and the decoded pixels of their images)",
        osworld="chrome.compare_pdf_images renders every page with PyMuPDF and compares the pixels exactly. "
                "Differs: no renderer here (pure Python, pypdf + PIL): pages are compared by size, rotation, "
                "extracted text and the decoded pixels of each drawn image, in order. For the task that uses it "
                "(an image saved as a PDF) that is the same test; vector drawings and fonts are not compared. An "
                "unreadable PDF is an input error.")
def compare_pdf_images(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    a = page_signature(open_pdf(result, "result"), "result")
    b = page_signature(open_pdf(expected, "expected"), "expected")
    return 1.0 if a == b else 0.0


_RELATIONS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
              "gt": operator.gt, "ge": operator.ge}


@metric("check_pdf_pages", "pdf",
        options={},
        summary="The PDF's page count compares to a number as the rule says",
        osworld="pdf.check_pdf_pages: expected is the rule {\"relation\": eq|ne|lt|le|gt|ge, \"ref_value\": n}, read "
                "with pypdf as in OSWorld. Differs: an unreadable PDF is an input error (OSWorld raises too).")
def check_pdf_pages(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    rel = expected.get("relation") if isinstance(expected, dict) else None
    if rel not in _RELATIONS or not isinstance(expected.get("ref_value"), (int, float)):
        raise MetricInputError("expected: a rule {\"relation\": eq|ne|lt|le|gt|ge, \"ref_value\": number}")
    n = len(open_pdf(result, "result").pages)
    return 1.0 if _RELATIONS[rel](n, expected["ref_value"]) else 0.0

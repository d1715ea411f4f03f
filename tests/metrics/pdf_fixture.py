"""Hand-written PDFs for the pdf and archive tests: one Helvetica text line per page."""


def text_pdf(pages):
    """bytes of a PDF with one page per string, each drawing that string."""
    objs = []

    def add(s):
        objs.append(s)
        return len(objs)
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    pages_id = 2 * len(pages) + 2
    kids = []
    for text in pages:
        stream = "BT /F1 24 Tf 72 720 Td (%s) Tj ET" % text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        c = add("<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        kids.append(add("<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 %d 0 R >> >> "
                        "/Contents %d 0 R >>" % (pages_id, font, c)))
    add("<< /Type /Pages /Kids [%s] /Count %d >>" % (" ".join("%d 0 R" % k for k in kids), len(kids)))
    root = add("<< /Type /Catalog /Pages %d 0 R >>" % pages_id)
    out, offsets = b"%PDF-1.4\n", []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + o.encode("latin-1") + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1) + b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, root, xref)
    return out

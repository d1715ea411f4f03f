"""Writes the documents the evaluator-sandbox test and the sandbox benchmark score, into OUTDIR
(nothing binary is committed): a pair of matching and one differing file per format, and the
hostile inputs.

    /usr/bin/python3 tests/tools/metric_fixtures.py OUTDIR [--hostile]

ok.xlsx/same.xlsx/other.xlsx, ok.docx/same.docx/other.docx, ok.pptx/same.pptx/other.pptx,
ok.pdf/same.pdf/other.pdf; with --hostile also bomb.xlsx (a member inflating 1000x),
laughs.docx (billion laughs in word/document.xml), xxe.docx (an external entity naming
/etc/passwd there), huge.png (a 30000x30000 IHDR, 74 bytes) and small.png.
"""
import os
import struct
import sys
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "metrics"))
from dtd_fixture import LAUGHS, with_dtd, xxe  # noqa: E402
from pdf_fixture import text_pdf  # noqa: E402
from pptx_fixture import para, run, sp, write_pptx  # noqa: E402


def xlsx(path, value):
    import openpyxl
    wb = openpyxl.Workbook()
    wb.active["A1"] = "total"
    wb.active["B1"] = value
    wb.save(path)


def docx(path, text):
    import docx as pydocx
    d = pydocx.Document()
    d.add_paragraph(text)
    d.save(path)


def pptx(path, text):
    write_pptx(path, [[sp(2, [para(run(text))], pos=(457200, 274638, 8229600, 1143000))]])


def bomb(src, path, mib=32):
    """The workbook plus one member that inflates mib MiB of zeros (about 1000x)."""
    with zipfile.ZipFile(src) as s, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as d:
        for i in s.infolist():
            d.writestr(i, s.read(i.filename))
        with d.open("xl/media/bomb.bin", "w", force_zip64=True) as f:
            zero = bytes(1 << 20)
            for _ in range(mib):
                f.write(zero)


def huge_png(path, side=30000):
    """A PNG header claiming side x side RGB pixels, one tiny IDAT: 74 bytes."""
    def chunk(t, b):
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xFFFFFFFF)
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    p = lambda name: os.path.join(out, name)  # noqa: E731
    xlsx(p("ok.xlsx"), 42)
    xlsx(p("same.xlsx"), 42)
    xlsx(p("other.xlsx"), 43)
    docx(p("ok.docx"), "same text")
    docx(p("same.docx"), "same text")
    docx(p("other.docx"), "another text entirely")
    pptx(p("ok.pptx"), "Quarterly report")
    pptx(p("same.pptx"), "Quarterly report")
    pptx(p("other.pptx"), "Something else")
    for name, text in (("ok.pdf", "Hello PDF"), ("same.pdf", "Hello PDF"), ("other.pdf", "Goodbye")):
        with open(p(name), "wb") as f:
            f.write(text_pdf([text]))
    if "--hostile" in sys.argv[2:]:
        bomb(p("ok.xlsx"), p("bomb.xlsx"))
        with_dtd(p("ok.docx"), p("laughs.docx"), "word/document.xml", LAUGHS, "same text", "lol9")
        with_dtd(p("ok.docx"), p("xxe.docx"), "word/document.xml", xxe("file:///etc/passwd"), "same text", "xxe")
        huge_png(p("huge.png"))
        from PIL import Image
        Image.new("RGB", (64, 64), "white").save(p("small.png"))


if __name__ == "__main__":
    main()

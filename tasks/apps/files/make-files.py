#!/usr/bin/python3
"""Writes the files the apps tasks upload (tasks/apps/*.json) and the expected results they are
compared with: minimal OpenDocument files (the mimetype, a manifest, content.xml), small PNGs and
two HTML pages. Run it from anywhere; it writes next to itself. Deterministic: the same bytes every
run (zip entries carry a fixed date)."""
import os
import zipfile

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
      'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
      'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
      'xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" '
      'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" office:version="1.3"')


def odf(name, mime, body):
    manifest = ('<?xml version="1.0" encoding="UTF-8"?>\n<manifest:manifest '
                'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">'
                '<manifest:file-entry manifest:full-path="/" manifest:media-type="%s"/>'
                '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
                '</manifest:manifest>' % mime)
    content = ('<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content %s><office:body>%s'
               '</office:body></office:document-content>' % (NS, body))
    with zipfile.ZipFile(os.path.join(HERE, name), "w") as z:
        for member, data, kind in (("mimetype", mime, zipfile.ZIP_STORED),
                                   ("META-INF/manifest.xml", manifest, zipfile.ZIP_DEFLATED),
                                   ("content.xml", content, zipfile.ZIP_DEFLATED)):
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = kind
            z.writestr(info, data)


def cell(v):
    if isinstance(v, (int, float)):
        return ('<table:table-cell office:value-type="float" office:value="%s"><text:p>%s</text:p>'
                '</table:table-cell>' % (v, v))
    return '<table:table-cell office:value-type="string"><text:p>%s</text:p></table:table-cell>' % v


def sheet(rows):
    return ('<office:spreadsheet><table:table table:name="Sheet1">%s</table:table></office:spreadsheet>'
            % "".join("<table:table-row>%s</table:table-row>" % "".join(cell(v) for v in r) for r in rows))


def slide(n, title):
    return ('<draw:page draw:name="page%d" presentation:presentation-page-layout-name="AL1T0">'
            '<draw:frame presentation:class="title" svg:x="2cm" svg:y="1cm" svg:width="24cm" svg:height="3cm">'
            '<draw:text-box><text:p>%s</text:p></draw:text-box></draw:frame></draw:page>' % (n, title))


def xlsx(name, rows):
    """A minimal Office Open XML workbook: one sheet of inline strings and numbers."""
    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    pkg = "http://schemas.openxmlformats.org/package/2006/relationships"

    def c(ref, v):
        if isinstance(v, (int, float)):
            return '<c r="%s"><v>%s</v></c>' % (ref, v)
        return '<c r="%s" t="inlineStr"><is><t>%s</t></is></c>' % (ref, v)
    data = "".join('<row r="%d">%s</row>' % (i + 1, "".join(c("%s%d" % ("ABCDEFGH"[j], i + 1), v)
                                                           for j, v in enumerate(r))) for i, r in enumerate(rows))
    parts = (
        ("[Content_Types].xml", '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.'
         'org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-'
         'package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName='
         '"/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
         '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.'
         'spreadsheetml.worksheet+xml"/></Types>'),
        ("_rels/.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="%s"><Relationship Id="rId1" '
         'Type="%s/officeDocument" Target="xl/workbook.xml"/></Relationships>' % (pkg, rel)),
        ("xl/workbook.xml", '<?xml version="1.0" encoding="UTF-8"?><workbook %s xmlns:r="%s"><sheets><sheet name='
         '"Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>' % (ns, rel)),
        ("xl/_rels/workbook.xml.rels", '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="%s"><Relationship '
         'Id="rId1" Type="%s/worksheet" Target="worksheets/sheet1.xml"/></Relationships>' % (pkg, rel)),
        ("xl/worksheets/sheet1.xml", '<?xml version="1.0" encoding="UTF-8"?><worksheet %s><sheetData>%s</sheetData>'
         '</worksheet>' % (ns, data)),
    )
    with zipfile.ZipFile(os.path.join(HERE, name), "w") as z:
        for member, text in parts:
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)


def image(name, flip=None):
    im = Image.new("RGB", (64, 48), (240, 240, 240))
    px = im.load()
    for y in range(48):         # an L shape and a dot: no symmetry, so a flip shows
        for x in range(64):
            if (8 <= x < 16 and 6 <= y < 40) or (8 <= x < 40 and 32 <= y < 40) or (48 <= x < 56 and 6 <= y < 14):
                px[x, y] = (200, 30, 30)
    if flip == "h":
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    elif flip == "v":
        im = im.transpose(Image.FLIP_TOP_BOTTOM)
    im.save(os.path.join(HERE, name), optimize=False)


# A form whose button writes tomorrow's date as the page's own clock (the guest's) sees it, in the
# format of OSWorld's flight tasks: chrome-book-tomorrow compares it with rule_relativeTime's.
BOOKING = """<!doctype html>
<html><head><meta charset="utf-8"><title>Booking</title>
<style>body{font:20px sans-serif;margin:40px} input,button{font:20px sans-serif;margin:8px}</style></head>
<body><h1>Book a visit</h1>
<form onsubmit="return false"><label>Name <input id="name" autofocus></label>
<button id="book" type="button">Book for tomorrow</button></form>
<p>Booked: <span class="booked-date">nothing yet</span></p>
<script>
document.getElementById('book').onclick = () => {
  const d = new Date(); d.setDate(d.getDate() + 1);
  const dow = ['Sun','Mon','Tue','Wed','Thu','Fri','Sat'][d.getDay()];
  const mon = ['Jan','Feb','Mar','Apr','May','Jun','Jul','Aug','Sep','Oct','Nov','Dec'][d.getMonth()];
  document.querySelector('.booked-date').textContent =
    dow + ', ' + mon + ' ' + String(d.getDate()).padStart(2, '0') + ', ' + d.getFullYear();
};
window.onload = () => document.getElementById('name').focus();
</script></body></html>
"""


# A profile page and the paper it links to, read by info_from_website in calc-append-researcher (the
# shape of OSWorld's Google Scholar task, offline).
PROFILE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Profile</title></head>
<body><h1 id="name">Ada Lovelace</h1>
<table><tr><td>Papers</td><td id="papers">3</td></tr></table>
<p>First paper: <a id="first-paper" href="paper.html">open</a></p></body></html>
"""
PAPER = """<!doctype html>
<html><head><meta charset="utf-8"><title>Paper</title></head>
<body><h1>Sketch of the Analytical Engine</h1><p>Notes by the translator.</p></body></html>
"""


def main():
    odf("budget.ods", "application/vnd.oasis.opendocument.spreadsheet", sheet([["Item", "Cost"], ["Rent", 800], ["Food", 250]]))
    odf("numbers.ods", "application/vnd.oasis.opendocument.spreadsheet", sheet([[10, 32]]))
    odf("letter.odt", "application/vnd.oasis.opendocument.text",
        "<office:text><text:p>Dear team,</text:p><text:p>the review moves to Tuesday.</text:p></office:text>")
    odf("deck.odp", "application/vnd.oasis.opendocument.presentation",
        "<office:presentation>%s</office:presentation>" % slide(1, "Quarterly review"))
    image("logo.png")
    image("logo-flipped-h.png", "h")
    image("logo-flipped-v.png", "v")
    for page, other in (("a", "b"), ("b", "a")):
        with open(os.path.join(HERE, "page-%s.html" % page), "w") as f:
            f.write("<!doctype html><title>Page %s</title><h1>Page %s</h1><p>See also page %s.</p>\n"
                    % (page.upper(), page.upper(), other.upper()))
    for name, text in (("booking.html", BOOKING), ("profile.html", PROFILE), ("paper.html", PAPER)):
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)
    xlsx("researchers.xlsx", [["Name", "Papers", "First paper"], ["Alan Turing", 2, "On Computable Numbers"]])


if __name__ == "__main__":
    main()

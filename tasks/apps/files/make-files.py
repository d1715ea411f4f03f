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


def wav(name, seconds=1.0, rate=22050):
    """A mono 16-bit tone that rises from 330 to 660 Hz (no silent frame: MFCCs stay defined)."""
    import math
    import struct
    import wave
    frames = bytearray()
    phase = 0.0
    for i in range(int(seconds * rate)):
        phase += 2 * math.pi * (330 + 330 * i / (seconds * rate)) / rate
        frames += struct.pack("<h", int(12000 * math.sin(phase)))
    with wave.open(os.path.join(HERE, name), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(frames))


def pptx(name, audio, background, icon):
    """Two slides; the second has a picture background and an embedded audio clip (the parts and
    relationships PowerPoint and LibreOffice write: a:audioFile plus p14:media, both to the media)."""
    ns = ('xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
          'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
          'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
    rt = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
    pkg = "http://schemas.openxmlformats.org/package/2006/relationships"

    def rels(*items):
        return ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="%s">%s</Relationships>'
                % (pkg, "".join('<Relationship Id="%s" Type="%s" Target="%s"/>' % i for i in items)))

    def title(text):
        return ('<p:sp><p:nvSpPr><p:cNvPr id="2" name="Title"/><p:cNvSpPr><a:spLocks noGrp="1"/></p:cNvSpPr>'
                '<p:nvPr><p:ph type="title"/></p:nvPr></p:nvSpPr><p:spPr><a:xfrm><a:off x="457200" y="274638"/>'
                '<a:ext cx="8229600" cy="1143000"/></a:xfrm></p:spPr><p:txBody><a:bodyPr/><a:lstStyle/><a:p><a:r>'
                '<a:rPr lang="en-US"/><a:t>%s</a:t></a:r></a:p></p:txBody></p:sp>' % text)

    def sld(body, bg=""):
        return ('<?xml version="1.0" encoding="UTF-8"?><p:sld %s><p:cSld>%s<p:spTree><p:nvGrpSpPr><p:cNvPr id="1" '
                'name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>%s</p:spTree></p:cSld></p:sld>'
                % (ns, bg, body))
    tree = ('<p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr>'
            '<p:grpSpPr/></p:spTree></p:cSld>')
    audio_pic = ('<p:pic><p:nvPicPr><p:cNvPr id="3" name="%s"><a:hlinkClick r:id="" action="ppaction://media"/>'
                 '</p:cNvPr><p:cNvPicPr><a:picLocks noChangeAspect="1"/></p:cNvPicPr><p:nvPr><a:audioFile '
                 'r:link="rId3"/><p:extLst><p:ext uri="{DAA4B4D4-6D71-4841-9C94-3DA1BDD3A1DE}"><p14:media '
                 'xmlns:p14="http://schemas.microsoft.com/office/powerpoint/2010/main" r:embed="rId4"/></p:ext>'
                 '</p:extLst></p:nvPr></p:nvPicPr><p:blipFill><a:blip r:embed="rId5"/><a:stretch><a:fillRect/>'
                 '</a:stretch></p:blipFill><p:spPr><a:xfrm><a:off x="4114800" y="3429000"/><a:ext cx="914400" '
                 'cy="685800"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>' % "chime.wav")
    bg = ('<p:bg><p:bgPr><a:blipFill><a:blip r:embed="rId2"/><a:stretch><a:fillRect/></a:stretch></a:blipFill>'
          '<a:effectLst/></p:bgPr></p:bg>')
    ct = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
          'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
          'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Default Extension="png" '
          'ContentType="image/png"/><Default Extension="wav" ContentType="audio/wav"/>'
          '<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.'
          'presentationml.presentation.main+xml"/><Override PartName="/ppt/slideMasters/slideMaster1.xml" '
          'ContentType="application/vnd.openxmlformats-officedocument.presentationml.slideMaster+xml"/><Override '
          'PartName="/ppt/slideLayouts/slideLayout1.xml" ContentType="application/vnd.openxmlformats-'
          'officedocument.presentationml.slideLayout+xml"/><Override PartName="/ppt/slides/slide1.xml" '
          'ContentType="application/vnd.openxmlformats-officedocument.presentationml.slide+xml"/><Override '
          'PartName="/ppt/slides/slide2.xml" ContentType="application/vnd.openxmlformats-officedocument.'
          'presentationml.slide+xml"/><Override PartName="/ppt/theme/theme1.xml" ContentType="application/vnd.'
          'openxmlformats-officedocument.theme+xml"/></Types>')
    theme = ('<?xml version="1.0" encoding="UTF-8"?><a:theme xmlns:a="http://schemas.openxmlformats.org/drawingml/'
             '2006/main" name="Plain"><a:themeElements><a:clrScheme name="Plain"><a:dk1><a:srgbClr val="000000"/>'
             '</a:dk1><a:lt1><a:srgbClr val="FFFFFF"/></a:lt1><a:dk2><a:srgbClr val="1F497D"/></a:dk2><a:lt2>'
             '<a:srgbClr val="EEECE1"/></a:lt2><a:accent1><a:srgbClr val="4F81BD"/></a:accent1><a:accent2>'
             '<a:srgbClr val="C0504D"/></a:accent2><a:accent3><a:srgbClr val="9BBB59"/></a:accent3><a:accent4>'
             '<a:srgbClr val="8064A2"/></a:accent4><a:accent5><a:srgbClr val="4BACC6"/></a:accent5><a:accent6>'
             '<a:srgbClr val="F79646"/></a:accent6><a:hlink><a:srgbClr val="0000FF"/></a:hlink><a:folHlink>'
             '<a:srgbClr val="800080"/></a:folHlink></a:clrScheme><a:fontScheme name="Plain"><a:majorFont>'
             '<a:latin typeface="Liberation Sans"/><a:ea typeface=""/><a:cs typeface=""/></a:majorFont><a:minorFont>'
             '<a:latin typeface="Liberation Sans"/><a:ea typeface=""/><a:cs typeface=""/></a:minorFont></a:fontScheme>'
             '<a:fmtScheme name="Plain"><a:fillStyleLst><a:solidFill><a:schemeClr val="phClr"/></a:solidFill>'
             '<a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/>'
             '</a:solidFill></a:fillStyleLst><a:lnStyleLst><a:ln w="9525"><a:solidFill><a:schemeClr val="phClr"/>'
             '</a:solidFill></a:ln><a:ln w="25400"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln>'
             '<a:ln w="38100"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln></a:lnStyleLst>'
             '<a:effectStyleLst><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/>'
             '</a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle></a:effectStyleLst><a:bgFillStyleLst>'
             '<a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/>'
             '</a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:bgFillStyleLst></a:fmtScheme>'
             '</a:themeElements></a:theme>')
    parts = (
        ("[Content_Types].xml", ct),
        ("_rels/.rels", rels(("rId1", rt + "officeDocument", "ppt/presentation.xml"))),
        ("ppt/presentation.xml", '<?xml version="1.0" encoding="UTF-8"?><p:presentation %s><p:sldMasterIdLst>'
         '<p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst><p:sldIdLst><p:sldId id="256" r:id='
         '"rId2"/><p:sldId id="257" r:id="rId3"/></p:sldIdLst><p:sldSz cx="9144000" cy="6858000"/><p:notesSz '
         'cx="6858000" cy="9144000"/></p:presentation>' % ns),
        ("ppt/_rels/presentation.xml.rels", rels(("rId1", rt + "slideMaster", "slideMasters/slideMaster1.xml"),
                                                 ("rId2", rt + "slide", "slides/slide1.xml"),
                                                 ("rId3", rt + "slide", "slides/slide2.xml"),
                                                 ("rId4", rt + "theme", "theme/theme1.xml"))),
        ("ppt/theme/theme1.xml", theme),
        ("ppt/slideMasters/slideMaster1.xml", '<?xml version="1.0" encoding="UTF-8"?><p:sldMaster %s>%s<p:clrMap '
         'bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" '
         'accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/>'
         '<p:sldLayoutIdLst><p:sldLayoutId id="2147483649" r:id="rId1"/></p:sldLayoutIdLst></p:sldMaster>'
         % (ns, tree)),
        ("ppt/slideMasters/_rels/slideMaster1.xml.rels", rels(("rId1", rt + "slideLayout",
                                                               "../slideLayouts/slideLayout1.xml"),
                                                              ("rId2", rt + "theme", "../theme/theme1.xml"))),
        ("ppt/slideLayouts/slideLayout1.xml", '<?xml version="1.0" encoding="UTF-8"?><p:sldLayout %s type="title">'
         '%s</p:sldLayout>' % (ns, tree)),
        ("ppt/slideLayouts/_rels/slideLayout1.xml.rels", rels(("rId1", rt + "slideMaster",
                                                               "../slideMasters/slideMaster1.xml"))),
        ("ppt/slides/slide1.xml", sld(title("Welcome"))),
        ("ppt/slides/_rels/slide1.xml.rels", rels(("rId1", rt + "slideLayout", "../slideLayouts/slideLayout1.xml"))),
        ("ppt/slides/slide2.xml", sld(title("Listen") + audio_pic, bg)),
        ("ppt/slides/_rels/slide2.xml.rels", rels(
            ("rId1", rt + "slideLayout", "../slideLayouts/slideLayout1.xml"),
            ("rId2", rt + "image", "../media/image1.png"),
            ("rId3", rt + "audio", "../media/media1.wav"),
            ("rId4", "http://schemas.microsoft.com/office/2007/relationships/media", "../media/media1.wav"),
            ("rId5", rt + "image", "../media/image2.png"))),
    )
    with zipfile.ZipFile(os.path.join(HERE, name), "w") as z:
        for member, data in parts + (("ppt/media/image1.png", background), ("ppt/media/media1.wav", audio),
                                     ("ppt/media/image2.png", icon)):
            info = zipfile.ZipInfo(member, date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


def backdrop(name):
    """A 320x240 landscape: sky, a sun, hills (structure for compare_images' SSIM)."""
    im = Image.new("RGB", (320, 240), (135, 190, 235))
    px = im.load()
    for y in range(240):
        for x in range(320):
            if (x - 250) ** 2 + (y - 60) ** 2 < 900:
                px[x, y] = (250, 210, 60)
            if y > 150 + 30 * ((x // 40) % 2) - (x % 40) * 0.5:
                px[x, y] = (60, 140, 70)
    im.save(os.path.join(HERE, name), optimize=False)


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
    wav("chime.wav")
    backdrop("backdrop.png")
    with open(os.path.join(HERE, "chime.wav"), "rb") as a, open(os.path.join(HERE, "backdrop.png"), "rb") as b, \
            open(os.path.join(HERE, "logo.png"), "rb") as c:
        pptx("talk.pptx", a.read(), b.read(), c.read())


if __name__ == "__main__":
    main()

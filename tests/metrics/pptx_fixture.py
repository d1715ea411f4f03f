"""Writes small pptx packages for the slides tests (python-pptx is not in Debian): a master, one
layout with a title and a body placeholder, and the slides given as shape-tree XML snippets."""
import zipfile

NSDECL = ('xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
          'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main" '
          'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"')
RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"


def rels(*items):
    body = "".join(f'<Relationship Id="{i}" Type="{RT}{t}" Target="{tg}"/>' for i, t, tg in items)
    return f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{RELS}">{body}</Relationships>'


def xfrm(x, y, cx, cy, tag="a:xfrm"):
    return f'<{tag}><a:off x="{x}" y="{y}"/><a:ext cx="{cx}" cy="{cy}"/></{tag}>'


def sp(sid, paras, pos=None, ph=None, geom='<a:prstGeom prst="rect"><a:avLst/></a:prstGeom>', txbox=False):
    """A p:sp. paras: list of paragraph XML strings (see para()); pos: (x, y, cx, cy) or None."""
    nvpr = f'<p:nvPr><p:ph {ph}/></p:nvPr>' if ph else "<p:nvPr/>"
    cnv = '<p:cNvSpPr txBox="1"/>' if txbox else "<p:cNvSpPr/>"
    sppr = (xfrm(*pos) if pos else "") + (geom if not ph else "")
    body = f'<p:txBody><a:bodyPr/><a:lstStyle/>{"".join(paras)}</p:txBody>' if paras is not None else ""
    return (f'<p:sp><p:nvSpPr><p:cNvPr id="{sid}" name="Shape {sid}"/>{cnv}{nvpr}</p:nvSpPr>'
            f'<p:spPr>{sppr}</p:spPr>{body}</p:sp>')


def para(*runs, algn=None, lvl=None, bullet=None):
    attrs = (f' algn="{algn}"' if algn else "") + (f' lvl="{lvl}"' if lvl is not None else "")
    bu = f'<a:buChar char="{bullet}"/>' if bullet else ""
    ppr = f"<a:pPr{attrs}>{bu}</a:pPr>" if attrs or bu else ""
    return f"<a:p>{ppr}{''.join(runs)}</a:p>"


def run(text, **rpr):
    """rpr: sz, b, i, u, strike as attributes; font= typeface; color= RRGGBB."""
    font, color = rpr.pop("font", None), rpr.pop("color", None)
    attrs = "".join(f' {k}="{v}"' for k, v in rpr.items())
    inner = (f'<a:solidFill><a:srgbClr val="{color}"/></a:solidFill>' if color else "") + \
        (f'<a:latin typeface="{font}"/>' if font else "")
    return f'<a:r><a:rPr lang="en-US"{attrs}>{inner}</a:rPr><a:t>{text}</a:t></a:r>'


def pic(sid, rid, pos):
    return (f'<p:pic><p:nvPicPr><p:cNvPr id="{sid}" name="Picture {sid}"/><p:cNvPicPr/><p:nvPr/></p:nvPicPr>'
            f'<p:blipFill><a:blip r:embed="{rid}"/><a:stretch><a:fillRect/></a:stretch></p:blipFill>'
            f'<p:spPr>{xfrm(*pos)}<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr></p:pic>')


def table(sid, pos):
    return (f'<p:graphicFrame><p:nvGraphicFramePr><p:cNvPr id="{sid}" name="Table {sid}"/><p:cNvGraphicFramePr/>'
            f'<p:nvPr/></p:nvGraphicFramePr>{xfrm(*pos, tag="p:xfrm")}<a:graphic><a:graphicData '
            f'uri="http://schemas.openxmlformats.org/drawingml/2006/table"><a:tbl/></a:graphicData></a:graphic>'
            f'</p:graphicFrame>')


def tree(shapes, bg=""):
    return (f'<p:cSld>{bg}<p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr>'
            f'<p:grpSpPr/>{"".join(shapes)}</p:spTree></p:cSld>')


def solid_bg(rgb):
    return f'<p:bg><p:bgPr><a:solidFill><a:srgbClr val="{rgb}"/></a:solidFill><a:effectLst/></p:bgPr></p:bg>'


TITLE_PH_POS = (457200, 274638, 8229600, 1143000)


def write_pptx(path, slides, size=(9144000, 6858000), notes=None, images=None, master_bg="",
               master_extra="", transitions=None, media=None, extra_rels=None):
    """slides: list of lists of shape XML; notes: {slide index: text}; images: {name: bytes}
    (each slide relates rIdImg<n> to media/<name> in order); transitions: {index: xml}; media:
    {name: bytes} put in ppt/media with no relationship; extra_rels: {slide index: [(id, type,
    target)]} added to the slide's relationships."""
    notes, images, transitions = notes or {}, images or {}, transitions or {}
    media, extra_rels = media or {}, extra_rels or {}
    z = zipfile.ZipFile(path, "w")
    z.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')
    z.writestr("_rels/.rels", rels(("rId1", "officeDocument", "ppt/presentation.xml")))
    ids = "".join(f'<p:sldId id="{256 + i}" r:id="rId{10 + i}"/>' for i in range(len(slides)))
    z.writestr("ppt/presentation.xml",
               f'<p:presentation {NSDECL}><p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/>'
               f'</p:sldMasterIdLst><p:sldIdLst>{ids}</p:sldIdLst>'
               f'<p:sldSz cx="{size[0]}" cy="{size[1]}"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>')
    z.writestr("ppt/_rels/presentation.xml.rels",
               rels(("rId1", "slideMaster", "slideMasters/slideMaster1.xml"),
                    *[(f"rId{10 + i}", "slide", f"slides/slide{i + 1}.xml") for i in range(len(slides))]))
    master_shapes = [sp(2, [para(run("Title"))], pos=TITLE_PH_POS, ph='type="title"'),
                     sp(3, [para(run("Body"))], pos=(457200, 1600200, 8229600, 4525963), ph='type="body" idx="1"'),
                     sp(4, [para(run("&lt;number&gt;"))], pos=(6553200, 6245225, 2133600, 365125), ph='type="sldNum" idx="12"')]
    z.writestr("ppt/slideMasters/slideMaster1.xml",
               f'<p:sldMaster {NSDECL}>{tree(master_shapes, master_bg)}{master_extra}</p:sldMaster>')
    z.writestr("ppt/slideMasters/_rels/slideMaster1.xml.rels",
               rels(("rId1", "slideLayout", "../slideLayouts/slideLayout1.xml")))
    layout_shapes = [sp(2, [para()], ph='type="title"'), sp(3, [para()], ph='idx="1"')]
    z.writestr("ppt/slideLayouts/slideLayout1.xml", f'<p:sldLayout {NSDECL}>{tree(layout_shapes)}</p:sldLayout>')
    z.writestr("ppt/slideLayouts/_rels/slideLayout1.xml.rels",
               rels(("rId1", "slideMaster", "../slideMasters/slideMaster1.xml")))
    for name, data in list(images.items()) + list(media.items()):
        z.writestr(f"ppt/media/{name}", data)
    for i, shapes in enumerate(slides):
        bg = ""
        if shapes and isinstance(shapes[0], tuple):   # ("bg", xml) first: a background
            bg, shapes = shapes[0][1], shapes[1:]
        z.writestr(f"ppt/slides/slide{i + 1}.xml",
                   f'<p:sld {NSDECL}>{tree(shapes, bg)}{transitions.get(i, "")}</p:sld>')
        rs = [("rId1", "slideLayout", "../slideLayouts/slideLayout1.xml")]
        rs += [(f"rIdImg{k}", "image", f"../media/{n}") for k, n in enumerate(images)]
        rs += extra_rels.get(i, [])
        if i in notes:
            rs.append(("rId2", "notesSlide", f"../notesSlides/notesSlide{i + 1}.xml"))
            body = sp(2, [para(run(notes[i]))], ph='type="body" idx="1"')
            z.writestr(f"ppt/notesSlides/notesSlide{i + 1}.xml", f'<p:notes {NSDECL}>{tree([body])}</p:notes>')
        z.writestr(f"ppt/slides/_rels/slide{i + 1}.xml.rels", rels(*rs))
    z.close()
    return path

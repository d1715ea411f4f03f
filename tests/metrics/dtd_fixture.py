"""Hostile DTDs in office containers (docx, pptx, xlsx, odt), for the evaluator-script tests and
tests/tools/metric_fixtures.py: one member's XML declaration replaced by a DTD, and a piece of its
text by an entity reference."""
import zipfile

LAUGHS = "<!DOCTYPE lolz [<!ENTITY lol \"lol\">%s]>" % "".join(
    '<!ENTITY lol%d "%s">' % (i, ("&lol%s;" % ("" if i == 1 else i - 1)) * 10) for i in range(1, 10))


def xxe(target):
    """A DTD declaring the external entity `xxe`, which names target (a file or URL)."""
    return '<!DOCTYPE x [<!ENTITY xxe SYSTEM "%s">]>' % target


def with_dtd(src, path, member, dtd, text, entity):
    """Copy the container src to path with member's first `text` replaced by &entity; under dtd."""
    with zipfile.ZipFile(src) as s, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as d:
        for i in s.infolist():
            data = s.read(i.filename)
            if i.filename == member:
                body = data.split(b"?>", 1)[1] if data.startswith(b"<?xml") else data
                if text.encode() not in body:
                    raise ValueError(f"{member}: no {text!r} to replace")
                data = ('<?xml version="1.0"?>\n' + dtd + "\n").encode() + body.replace(
                    text.encode(), b"&" + entity.encode() + b";", 1)
            d.writestr(i, data)
    return path

"""Runs one getter that has to read a guest document: envmgr fetches the file from the guest, then
starts this program inside its evaluator sandbox, so the document is parsed here and never by envmgr.

    python3 -I getter_run.py          request on stdin, one JSON line on stdout

Request (stdin, at most 1 MiB): {"getter": NAME, "file": PATH, "options": {...}} where PATH is the
fetched file inside the sandbox. Answers (exit 0):
    audio_in_slide, background_image_in_slide:
        {"found": false}                                  no such media (OSWorld's None)
        {"member": "ppt/media/x.mp3", "data": BASE64}     embedded in the package
        {"external": "/home/user/x.mp3"}                  linked: a guest file envmgr fetches next
    content_from_vm_file:
        {"value": [...]}
or {"error": "one line"} and exit 3.
"""
import base64
import json
import os
import posixpath
import sys
import urllib.parse
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import MetricInputError, answer, check_file, check_zip, one_line, zip_xml  # noqa: E402

REQUEST_MAX = 1 << 20
MEDIA_MAX = 16 << 20          # envmgr's cap on a fetched guest file (GETTER_FILE_CAP)
NS_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
NS_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
NS_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
NS_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"


def slide_index(options):
    i = options.get("slide_index")
    if isinstance(i, str) and i.strip().lstrip("-").isdigit():
        i = int(i)
    if not isinstance(i, int) or isinstance(i, bool) or i < 0:
        raise MetricInputError("slide_index: expected an integer >= 0")
    return i


def relationships(zf, slide):
    """The slide's relationships in document order: [(Id, Type, Target)]; [] without a rels part."""
    root = zip_xml(zf, f"ppt/slides/_rels/slide{slide}.xml.rels", required=False)
    if root is None:
        return []
    return [(r.get("Id"), r.get("Type") or "", r.get("Target") or "")
            for r in root.iter(f"{{{NS_PKG}}}Relationship")]


def media(zf, target):
    """A relationship target as OSWorld resolves it: a package part relative to ppt/slides (read
    here), or a file:// link (a guest path, percent-decoded; OSWorld keeps the escapes)."""
    if target.startswith("file://"):
        return {"external": urllib.parse.unquote(target[len("file://"):])}
    if "://" in target:
        raise MetricInputError(f"the media is linked to {target[:200]!r}, not a guest file")
    member = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join("ppt/slides", target))
    try:
        info = zf.getinfo(member)
    except KeyError:
        raise MetricInputError(f"the media part {member[:200]!r} is not in the package") from None
    if info.file_size > MEDIA_MAX:
        raise MetricInputError(f"the media part {member[:200]!r} is {info.file_size} bytes, over {MEDIA_MAX}")
    return {"member": member, "data": base64.b64encode(zf.read(member)).decode("ascii")}


def audio_in_slide(path, options):
    """OSWorld's get_audio_in_slide: the first relationship of the slide whose type names audio."""
    slide = slide_index(options) + 1
    check_zip(path, "ppt_file_path")
    with zipfile.ZipFile(path) as zf:
        for _rid, rtype, target in relationships(zf, slide):
            if "audio" in rtype:
                return media(zf, target)
    return {"found": False}


def background_image_in_slide(path, options):
    """OSWorld's get_background_image_in_slide: the first a:blip under a p:bgPr of the slide, then
    the image relationship with its r:embed id."""
    slide = slide_index(options) + 1
    check_zip(path, "ppt_file_path")
    with zipfile.ZipFile(path) as zf:
        root = zip_xml(zf, f"ppt/slides/slide{slide}.xml", "ppt_file_path", required=False)
        if root is None:
            return {"found": False}
        rid = None
        for bg in root.iter(f"{{{NS_P}}}bgPr"):
            blip = next(bg.iter(f"{{{NS_A}}}blip"), None)
            rid = blip.get(f"{{{NS_R}}}embed") if blip is not None else None
            if rid is not None:
                break
        if rid is None:
            return {"found": False}
        for rel_id, rtype, target in relationships(zf, slide):
            if "image" in rtype and rel_id == rid:
                return media(zf, target)
    return {"found": False}


def content_from_vm_file(path, options):
    """OSWorld's get_content_from_vm_file for xlsx / last_row: pandas.read_excel (first sheet, first
    row as header), the last row, each value as str()."""
    import pandas as pd
    if options.get("file_type") != "xlsx" or options.get("file_content") != "last_row":
        raise MetricInputError("only file_type xlsx with file_content last_row (as OSWorld)")
    check_zip(path, "path")
    df = pd.read_excel(path)
    if df.empty:
        raise MetricInputError("the sheet has no rows below its header")
    return {"value": df.iloc[-1].astype(str).tolist()}


GETTERS = {"audio_in_slide": audio_in_slide, "background_image_in_slide": background_image_in_slide,
           "content_from_vm_file": content_from_vm_file}


def main():
    raw = sys.stdin.buffer.read(REQUEST_MAX + 1)
    try:
        req = json.loads(raw) if len(raw) <= REQUEST_MAX else None
    except ValueError:
        req = None
    if not isinstance(req, dict) or req.get("getter") not in GETTERS:
        answer({"error": "request: expected {\"getter\": one of %s, \"file\", \"options\"}" % sorted(GETTERS)}, 3)
    name = req["getter"]
    options = req.get("options") or {}
    try:
        if not isinstance(options, dict):
            raise MetricInputError("options: expected an object")
        check_file(req.get("file"), "file")
        out = GETTERS[name](req["file"], options)
    except MetricInputError as e:
        answer({"error": f"{name}: {one_line(e)}"}, 3)
    except MemoryError:
        answer({"error": f"{name}: out of memory"}, 3)
    except Exception as e:
        answer({"error": f"{name}: {type(e).__name__}: {one_line(e)}"}, 3)
    answer(out, 0)


if __name__ == "__main__":
    sys.exit(main())

"""What every evaluator-script family shares: the registry decorator and the input error.

A family module (tables.py, documents.py, ...) declares its metrics with @metric; run.py imports
every family, finds the metric by name and calls it with OSWorld's calling convention:
    func(result, expected, **options)   when the metric takes an expected value
    func(result, **options)             when it does not
`result` and `expected` are what OSWorld's getters return: a path string for a file (inside the
sandbox, read-only), a list of those, a string for command output, a dict for `rule` getters.
A metric returns a number in 0..1 (or a bool). Input it cannot read raises MetricInputError (or
any exception): envmgr reports that as evaluator_error naming the metric, never as a score.
"""
import json
import os
import sys

FAMILIES = ("tables", "documents", "slides", "pdf", "images", "media", "archives", "browser",
            "app_settings", "general")

REGISTRY = {}

# Limits every family applies before handing untrusted bytes to a parser library; the sandbox's
# rlimits are the hard stop, these make the common hostile inputs fail fast with a clear message.
MAX_INPUT_BYTES = 256 << 20        # one input file
MAX_ZIP_UNCOMPRESSED = 512 << 20   # all members of an OOXML/ODF/zip container together
MAX_ZIP_MEMBERS = 20000
MAX_ZIP_RATIO = 200                # a member's uncompressed/compressed size
MAX_IMAGE_PIXELS = 64_000_000


class MetricInputError(Exception):
    """The metric's input is missing, malformed or over a limit."""


def metric(name, family, expected=True, options=None, summary="", osworld=""):
    """Register a metric. expected: True (needs one), False (takes none), "optional".
    options: {"option": "type, default: what it does"}. osworld: which OSWorld behaviour this
    reproduces, and where it differs (say so; never diverge silently)."""
    if family not in FAMILIES:
        raise ValueError(f"{name}: unknown family {family}")
    if expected not in (True, False, "optional"):
        raise ValueError(f"{name}: expected must be True, False or 'optional'")

    def register(func):
        if name in REGISTRY:
            raise ValueError(f"metric {name} registered twice")
        REGISTRY[name] = {"func": func, "family": family, "expected": expected,
                          "options": dict(options or {}), "summary": summary, "osworld": osworld}
        return func
    return register


def check_file(path, what="result"):
    """A readable regular file under the size cap, else MetricInputError."""
    if not isinstance(path, str) or not path:
        raise MetricInputError(f"{what}: expected a file path, got {type(path).__name__}")
    try:
        st = os.stat(path)
    except OSError as e:
        raise MetricInputError(f"{what}: {e.strerror}: {os.path.basename(path)}") from None
    if not os.path.isfile(path):
        raise MetricInputError(f"{what}: not a regular file")
    if st.st_size > MAX_INPUT_BYTES:
        raise MetricInputError(f"{what}: {st.st_size} bytes, over the {MAX_INPUT_BYTES} byte cap")
    return path


def check_zip(path, what="result"):
    """Refuse zip bombs before a library inflates the container (xlsx, docx, pptx, odt, zip)."""
    import zipfile
    check_file(path, what)
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise MetricInputError(f"{what}: not a zip container: {e}") from None
    if len(infos) > MAX_ZIP_MEMBERS:
        raise MetricInputError(f"{what}: {len(infos)} zip members, over {MAX_ZIP_MEMBERS}")
    total = 0
    for i in infos:
        total += i.file_size
        if i.compress_size and i.file_size / max(i.compress_size, 1) > MAX_ZIP_RATIO and i.file_size > (1 << 20):
            raise MetricInputError(f"{what}: zip member {i.filename!r} inflates {i.file_size // max(i.compress_size, 1)}x")
    if total > MAX_ZIP_UNCOMPRESSED:
        raise MetricInputError(f"{what}: {total} bytes uncompressed, over {MAX_ZIP_UNCOMPRESSED}")
    return path


def check_office(path, what="result"):
    """check_zip for an office container (docx, pptx, xlsx, odt), then every member's XML prolog,
    read up to its root element: a DTD declaring entities is refused (refuse_entities) before any
    library parses the container, whichever parser that library uses."""
    import zipfile
    from lxml import etree
    check_zip(path, what)
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                with z.open(info) as f:
                    try:
                        for _event, el in etree.iterparse(f, events=("start",), resolve_entities=False,
                                                          load_dtd=False, no_network=True, huge_tree=False):
                            refuse_entities(el.getroottree(), what, info.filename)
                            break
                    except etree.XMLSyntaxError:
                        pass  # not XML (media), or malformed: the library reading it says so
    except MetricInputError:
        raise
    except Exception as e:  # zlib/CRC errors in a damaged container
        raise MetricInputError(f"{what}: unreadable container: {e}") from None
    return path


def refuse_entities(tree, what, member):
    """MetricInputError when the document's DTD declares entities. No parser here expands them, but
    internal ones can expand without bound (billion laughs) and external ones name host files or
    URLs (XXE): a document that declares them is refused, never scored on its unexpanded text."""
    dtd = tree.docinfo.internalDTD
    ents = list(dtd.iterentities()) if dtd is not None else []
    if ents:
        e = ents[0]
        first = f"external entity {e.name!r} ({e.system_url})" if e.system_url else f"entity {e.name!r}"
        more = f" and {len(ents) - 1} more" if len(ents) > 1 else ""
        raise MetricInputError(f"{what}: {member}: its DTD declares {first}{more}: refused")


def safe_xml_parser():
    """An lxml parser that never resolves entities, reads no DTD and fetches nothing."""
    from lxml import etree
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def result_missing(path):
    """OSWorld's getters hand a metric None when the file was not on the guest; its metrics then
    score 0. True for that case (None, "" or a path that does not exist), so the metric can too."""
    return path is None or path == "" or (isinstance(path, str) and not os.path.lexists(path))


def zip_xml(zf, member, what="result", required=True):
    """Parse one member of an already check_office'd container with safe_xml_parser. A member that
    is absent gives None (or MetricInputError when required); one that does not parse, or whose
    DTD declares entities, always raises MetricInputError."""
    from lxml import etree
    try:
        data = zf.read(member)
    except KeyError:
        if required:
            raise MetricInputError(f"{what}: no {member} in the container") from None
        return None
    except Exception as e:  # zlib/CRC errors in a damaged container
        raise MetricInputError(f"{what}: {member}: unreadable: {e}") from None
    try:
        root = etree.fromstring(data, safe_xml_parser())
    except etree.XMLSyntaxError as e:
        raise MetricInputError(f"{what}: {member}: malformed XML: {e}") from None
    refuse_entities(root.getroottree(), what, member)
    return root


def lcs_length(a, b):
    """Length of the longest common subsequence of two sequences (bit-parallel, so long texts
    such as whole PDFs stay fast: one big-int step per element of the longer one)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks = {}
    for i, x in enumerate(b):
        masks[x] = masks.get(x, 0) | (1 << i)
    full = (1 << len(b)) - 1
    v = full
    for x in a:
        u = v & masks.get(x, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - bin(v).count("1")


def fuzz_ratio(a, b, max_chars=None):
    """rapidfuzz.fuzz.ratio (which OSWorld uses, no preprocessing): the normalized Indel
    similarity of two strings, 0..100; 100 for two empty strings, 0 when either is None (as
    rapidfuzz); other values are compared as str(). The one Python implementation; the built-in
    fuzzy_match (evaluator/metrics_builtin.c, metric_fuzzy_ratio) computes the same over code points, and
    tests/metrics/test_fuzzy.py holds the two to the same answers. max_chars: a cap on the two
    lengths together (a MetricInputError past it)."""
    if a is None or b is None:
        return 0.0
    a, b = str(a), str(b)
    total = len(a) + len(b)
    if total == 0:
        return 100.0
    if max_chars is not None and total > max_chars:
        raise MetricInputError(f"fuzzy comparison of {total} characters, over {max_chars}")
    return 100.0 * 2 * lcs_length(a, b) / total


def answer(obj, code):
    """The program's one JSON line on stdout, then exit (run.py, getter_run.py)."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def one_line(s, cap=400):
    s = " ".join(str(s).split())
    return s if len(s) <= cap else s[:cap] + "..."

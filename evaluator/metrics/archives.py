"""Archive metrics (family "archives"): OSWorld's chrome.compare_archive and vscode.compare_zip_files.

Archives are unpacked member by member into a private temporary directory: only regular files
and directories, no absolute or '..' names, no links, and the zip limits of _common applied to
tar archives too."""
import difflib
import importlib
import os
import re
import tarfile
import tempfile
import zipfile

from _common import (MAX_ZIP_MEMBERS, MAX_ZIP_UNCOMPRESSED, REGISTRY, MetricInputError, check_file, check_zip,
                     metric, result_missing)


def _safe_name(name, what):
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts or not parts:
        raise MetricInputError(f"{what}: archive member {name!r} escapes the archive")
    return os.path.join(*parts)


def unpack(path, dest, what):
    """Unpack a zip or tar (plain, gz, bz2, xz: told by content) archive into dest."""
    check_file(path, what)
    total = 0

    def put(name, data_iter, is_dir):
        nonlocal total
        target = os.path.join(dest, _safe_name(name, what))
        if is_dir:
            os.makedirs(target, exist_ok=True)
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as out:
            for chunk in data_iter:
                total += len(chunk)
                if total > MAX_ZIP_UNCOMPRESSED:
                    raise MetricInputError(f"{what}: over {MAX_ZIP_UNCOMPRESSED} bytes unpacked")
                out.write(chunk)

    def chunks(f):
        while True:
            b = f.read(1 << 20)
            if not b:
                return
            yield b

    if zipfile.is_zipfile(path):
        check_zip(path, what)
        try:
            with zipfile.ZipFile(path) as z:
                for info in z.infolist():
                    if (info.external_attr >> 16) & 0o170000 == 0o120000:
                        raise MetricInputError(f"{what}: archive member {info.filename!r} is a link")
                    with z.open(info) as f:
                        put(info.filename, chunks(f), info.is_dir())
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise MetricInputError(f"{what}: damaged zip: {e}") from None
        return
    try:
        with tarfile.open(path) as t:
            n = 0
            for m in t:
                n += 1
                if n > MAX_ZIP_MEMBERS:
                    raise MetricInputError(f"{what}: over {MAX_ZIP_MEMBERS} archive members")
                if m.isdir():
                    put(m.name, (), True)
                elif m.isfile():
                    f = t.extractfile(m)
                    put(m.name, chunks(f), False)
                else:
                    raise MetricInputError(f"{what}: archive member {m.name!r} is not a file or directory")
    except tarfile.TarError as e:
        raise MetricInputError(f"{what}: not a zip or tar archive: {e}") from None
    except (OSError, EOFError) as e:
        raise MetricInputError(f"{what}: damaged archive: {e}") from None


def text_files_equal(result, expected, ignore_blanks=False, ignore_case=False, **_ignored):
    """vscode.compare_text_file, which OSWorld's compare_archive uses for file_type text."""
    def read(p, what):
        check_file(p, what)
        with open(p, "rb") as f:
            try:
                return f.read().decode("utf-8")
            except UnicodeDecodeError as e:
                raise MetricInputError(f"{what}: {os.path.basename(p)} is not UTF-8 text: {e}") from None
    a, b = read(result, "result"), read(expected, "expected")
    if ignore_blanks:
        a = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", a).strip())
        b = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", b).strip())
    if ignore_case:
        a, b = a.lower(), b.lower()
    return 1.0 if a == b else 0.0


# file_type -> (family module, metric name); "text" is compared here
FILE_TYPES = {"pdf": ("pdf", "compare_pdfs"), "docx": ("documents", "compare_docx_files"),
              "ppt": ("slides", "compare_pptx_files"), "csv": ("tables", "compare_csv"),
              "table": ("tables", "compare_table"), "image": ("images", "compare_images"),
              "audio": ("media", "compare_audios"), "video": ("media", "compare_videos")}


def _comparer(file_type):
    if file_type == "text":
        return text_files_equal
    if file_type not in FILE_TYPES:
        raise MetricInputError(f"file_type {file_type!r}: not one of text, {', '.join(FILE_TYPES)}")
    family, name = FILE_TYPES[file_type]
    try:
        importlib.import_module(family)
    except ModuleNotFoundError as e:
        if e.name != family:
            raise
    m = REGISTRY.get(name)
    if m is None:
        raise MetricInputError(f"file_type {file_type!r}: metric {name} is not an evaluator script here")
    return m["func"]


@metric("compare_archive", "archives",
        options={"file_path": "str, default '': folder inside both archives to compare",
                 "file_type": "str, default 'text': text|pdf|docx|ppt|image|csv|table|audio|video, how files are compared",
                 "...": "any other option is passed to the per-file metric"},
        summary="Two archives hold the same file names (in a folder) and the files match; mean of per-file scores",
        osworld="chrome.compare_archive: unpack both, the sorted names of the entries of file_path must be equal, "
                "then each pair is scored by the file_type's metric (the evaluator-script metric of that name, "
                "text compared as vscode.compare_text_file) and averaged. Differs: the archive kind is told by "
                "content, not extension; unsafe members (absolute, '..', links, devices) and damaged archives are "
                "input errors; a missing file_path folder scores 0 in the result and is an input error in the "
                "expected; an expected folder with nothing in it is an input error (OSWorld divides by zero); "
                "unpacking happens in a private temporary directory, never beside the files.")
def compare_archive(result, expected, file_path="", file_type="text", **options):
    if result_missing(result):
        return 0.0
    compare = _comparer(file_type)
    with tempfile.TemporaryDirectory(prefix="envmgr-archive-") as tmp:
        rdir, edir = os.path.join(tmp, "pred"), os.path.join(tmp, "gold")
        os.makedirs(rdir)
        os.makedirs(edir)
        unpack(result, rdir, "result")
        unpack(expected, edir, "expected")
        sub = _safe_name(file_path, "options.file_path") if file_path else ""
        rsub, esub = os.path.join(rdir, sub), os.path.join(edir, sub)
        if not os.path.isdir(esub):
            raise MetricInputError(f"expected: no folder {file_path!r} in the archive")
        if not os.path.isdir(rsub):
            return 0.0
        rnames, enames = sorted(os.listdir(rsub)), sorted(os.listdir(esub))
        if rnames != enames:
            return 0.0
        if not enames:
            raise MetricInputError(f"expected: nothing in {file_path or 'the archive'}")
        score = 0.0
        for n in rnames:
            a, b = os.path.join(rsub, n), os.path.join(esub, n)
            if os.path.isdir(a) or os.path.isdir(b):
                raise MetricInputError(f"{n!r} is a folder; compare_archive compares files (set file_path)")
            score += float(compare(a, b, **options))
        return score / len(rnames)


def _pdf_texts_close(a, b):
    """vscode.compare_pdf_content: the text of two PDFs (bytes) has a difflib ratio >= 0.95."""
    from pdf import pdf_reader, pdf_text
    t1 = pdf_text(pdf_reader(a, "result"), "result")
    t2 = pdf_text(pdf_reader(b, "expected"), "expected")
    return difflib.SequenceMatcher(None, t1, t2).ratio() >= 0.95


@metric("compare_zip_files", "archives",
        summary="Two zip files hold the same member names; PDFs have nearly the same text, other members equal bytes",
        osworld="vscode.compare_zip_files: equal name sets, then each .pdf member's extracted text must have a "
                "difflib ratio >= 0.95 (OSWorld: PyPDF2, here pypdf) and every other member identical bytes. "
                "Differs: damaged zips and unreadable PDFs are input errors; nothing is written to the working "
                "directory (OSWorld writes temp.pdf).")
def compare_zip_files(result, expected, **_ignored):
    if result_missing(result):
        return 0.0
    check_zip(result, "result")
    check_zip(expected, "expected")
    try:
        with zipfile.ZipFile(result) as z1, zipfile.ZipFile(expected) as z2:
            names = set(z1.namelist())
            if names != set(z2.namelist()):
                return 0.0
            for n in sorted(names):
                a, b = z1.read(n), z2.read(n)
                if n.lower().endswith(".pdf"):
                    if not _pdf_texts_close(a, b):
                        return 0.0
                elif a != b:
                    return 0.0
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise MetricInputError(f"damaged zip: {e}") from None
    return 1.0


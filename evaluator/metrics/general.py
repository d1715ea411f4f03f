"""General metrics: OSWorld's general.py checks on text files, JSON/YAML, CSV, SQLite and the
accessibility tree, and vscode.py's file comparisons and test-suite runner.

OSWorld's fuzzy comparisons use rapidfuzz's fuzz.ratio, which Debian does not package;
_common.fuzz_ratio computes the same measure (normalised InDel similarity, 2*LCS/(len a + len b)).
"""
import csv
import datetime
import difflib
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile

from _common import MetricInputError, check_file, check_office, fuzz_ratio, metric, safe_xml_parser
from _util import RuleTypeError, key, lines, match_rule, need, open_sqlite, read_json, read_text, record_rules, records_match, regex

FUZZY_MAX_CHARS = 200_000  # characters of the two texts together, for the a11y tree and words


@metric("check_list", "general",
        summary="1 when every rules.expect regex matches some line and no rules.unexpect regex matches any line",
        osworld="general.py check_list: re.search line by line over the file (a cache_file of command output).")
def check_list(result, expected):
    need(expected, dict, "expected")
    expect = [regex(p) for p in need(expected.get("expect", []), list, "expected.expect")]
    unexpect = [regex(p) for p in need(expected.get("unexpect", []), list, "expected.unexpect")]
    if result is None:
        return 0.0
    text = lines(read_text(result))
    found = all(any(p.search(line) for line in text) for p in expect)
    return 1.0 if found and not any(p.search(line) for p in unexpect for line in text) else 0.0


def lookup(value, path):
    """value[k1][k2]... or KeyError when a step is missing (or the step does not apply to the value)."""
    for k in path:
        try:
            value = value[k]
        except (KeyError, IndexError, TypeError):
            raise KeyError(k) from None
    return value


@metric("check_json", "general",
        options={"is_yaml": "bool, default false: read the file as YAML"},
        summary="1 when every rules.expect {key: [path], method, ref} matches the JSON/YAML file and no "
                "rules.unexpect one does",
        osworld="general.py check_json: each expect rule's key path must exist and its value match "
                "(_match_value_to_rule); an unexpect rule must not match (a missing path is None). "
                "Differs: YAML is read with yaml.safe_load (OSWorld's yaml.Loader can build Python objects); "
                "a path step into a list or a scalar counts as missing (OSWorld raises); an unexpect rule on "
                "a missing path is not matched even for regex methods (OSWorld raises).")
def check_json(result, expected, is_yaml=False):
    need(expected, dict, "expected")
    rules = {k: [need(r, dict, f"expected.{k} rule") for r in need(expected.get(k, []), list, f"expected.{k}")]
             for k in ("expect", "unexpect")}
    if not isinstance(is_yaml, bool):
        raise MetricInputError("options.is_yaml: expected true or false")
    if result is None:
        return 0.0
    if is_yaml:
        import yaml
        try:
            data = yaml.safe_load(read_text(result))
        except yaml.YAMLError as e:
            raise MetricInputError(f"result: not YAML: {' '.join(str(e).split())}") from None
    else:
        data = read_json(result)
    try:  # OSWorld's check_json catches what _match_value_to_rule raises: 0
        for r in rules["expect"]:
            try:
                value = lookup(data, need(key(r, "key"), list, "expected.expect key"))
            except KeyError:
                return 0.0
            if not match_rule(value, r):
                return 0.0
        for r in rules["unexpect"]:
            try:
                value = lookup(data, need(key(r, "key"), list, "expected.unexpect key"))
            except KeyError:
                continue
            if match_rule(value, r):
                return 0.0
    except RuleTypeError:
        return 0.0
    return 1.0


@metric("check_csv", "general",
        summary="1 when some CSV row matches each rules.expect record and no row matches a rules.unexpect record",
        osworld="general.py check_csv: csv.DictReader rows compared with _match_record (every key of the "
                "record present with an equal string value).")
def check_csv(result, expected):
    expect, unexpect = record_rules(expected)
    if result is None:
        return 0.0
    try:
        rows = list(csv.DictReader(io.StringIO(read_text(result))))
    except csv.Error as e:
        raise MetricInputError(f"result: not CSV: {e}") from None
    return 1.0 if records_match(expect, unexpect, rows) else 0.0


@metric("diff_text_file", "general",
        summary="difflib's similarity ratio of the two files' lines (a score in 0..1)",
        osworld="general.py diff_text_file: difflib.SequenceMatcher(result lines, expected lines).ratio(). "
                "A missing result scores 0.")
def diff_text_file(result, expected):
    if result is None:
        return 0.0
    a, b = read_text(result).splitlines(), read_text(expected, "expected").splitlines()
    return difflib.SequenceMatcher(a=a, b=b).ratio()


# OSWorld-Verified's server writes these (desktop_env/server/main.py, "ubuntu"), and its
# check_accessibility_tree reads them (osname="ubuntu"); the uri:deskat ones are an older server's.
_NS = "https://accessibility.ubuntu.example.org/ns/"
AT_SPI_NS = {"st": _NS + "state", "attr": _NS + "attributes", "cp": _NS + "component", "doc": _NS + "document",
             "docattr": _NS + "document/attributes", "txt": _NS + "text", "val": _NS + "value",
             "act": _NS + "action"}


@metric("check_accessibility_tree", "general",
        summary="Product over rules of how well the accessibility tree has the element (CSS selectors or XPath) "
                "and its text (exact, or fuzzy ratio)",
        osworld="general.py check_accessibility_tree: the XML (a string) parsed, here with a hardened parser; "
                "each rule selects by xpath (preferred) or by selectors joined with ', ' (lxml.cssselect), with "
                "OSWorld-Verified's namespace prefixes (https://accessibility.ubuntu.example.org/ns/...); no element scores 0; with \"text\" the best element "
                "text match counts (exact equality, or rapidfuzz ratio computed here as _common.fuzz_ratio); the "
                "scores multiply. A missing tree scores 0.")
def check_accessibility_tree(result, expected):
    from lxml import etree
    rules = [need(r, dict, "expected rule") for r in need(expected, list, "expected")]
    if result is None:
        return 0.0
    try:
        tree = etree.fromstring(need(result, str, "result").encode("utf-8"), safe_xml_parser())
    except etree.XMLSyntaxError as e:
        raise MetricInputError(f"result: not XML: {e}") from None
    score = 1.0
    for r in rules:
        try:
            if "xpath" in r:
                elements = tree.xpath(need(r["xpath"], str, "expected.xpath"), namespaces=AT_SPI_NS)
            elif "selectors" in r:
                from lxml.cssselect import CSSSelector
                selectors = need(r["selectors"], list, "expected.selectors")
                elements = CSSSelector(", ".join(selectors), namespaces=AT_SPI_NS)(tree)
            else:
                raise MetricInputError("expected: a rule needs xpath or selectors")
        except (etree.XPathError, ValueError, SyntaxError) as e:
            raise MetricInputError(f"expected: bad selector: {' '.join(str(e).split())}") from None
        if not isinstance(elements, list) or not elements:
            return 0.0
        if "text" in r:
            want = r["text"]
            exact = key(r, "exact", "expected rule")
            elems = [e for e in elements if isinstance(e, etree._Element)]
            texts = [e.text or None for e in elems]
            score *= max((float(t == want) if exact else fuzz_ratio(want, t, FUZZY_MAX_CHARS) / 100 for t in texts), default=0.0)
    return score


TIME_OF_DAY = re.compile(r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d")


@metric("check_line_number", "general",
        summary="1 when the number of lines holding a HH:MM:SS time equals rules.expected",
        osworld="general.py check_line_number: lines matching ([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d are counted and "
                "compared with int(rules[\"expected\"]). A missing file scores 0. Differs: a file that is "
                "not UTF-8 text is an error (OSWorld scores 0).")
def check_line_number(result, expected):
    try:
        want = int(key(expected, "expected"))
    except (TypeError, ValueError):
        raise MetricInputError("expected.expected: not an integer") from None
    if result is None or not isinstance(result, str) or not os.path.isfile(result):
        return 0.0
    count = sum(1 for line in lines(read_text(result)) if TIME_OF_DAY.search(line))
    return 1.0 if count == want else 0.0


@metric("fuzzy_place_math", "general",
        summary="Mean best fuzzy match of the docx's words against rules.expected, when it has exactly 3 words",
        osworld="general.py fuzzy_place_math: all paragraphs' words (whitespace split) of the .docx, each "
                "scored by its best rapidfuzz ratio (_common.fuzz_ratio here) against the expected answers; exactly 3 "
                "words are required (else 0); the score is their mean.")
def fuzzy_place_math(result, expected):
    answers = [need(a, str, "expected.expected item") for a in need(key(expected, "expected"), list, "expected.expected")]
    if result is None:
        return 0.0
    check_office(result)
    import docx
    try:
        document = docx.Document(result)
    except Exception as e:  # python-docx raises several kinds on a zip that is not a document
        raise MetricInputError(f"result: not a .docx: {type(e).__name__}: {e}") from None
    words = [w for p in document.paragraphs for w in p.text.split()]
    if len(words) != 3:
        return 0.0
    return sum(max((fuzz_ratio(w, a, FUZZY_MAX_CHARS) / 100 for a in answers), default=0.0) for w in words) / 3


@metric("compare_python_pure_text", "general",
        summary="1 when the two files are equal once all whitespace is removed",
        osworld="general.py compare_python_pure_text: equality with every whitespace character removed.")
def compare_python_pure_text(result, expected):
    if not result or not expected:
        return 0.0
    a, b = ("".join(read_text(p, w).split()) for p, w in ((result, "result"), (expected, "expected")))
    return 1.0 if a == b else 0.0


@metric("run_sqlite3", "general",
        summary="The first column of the first row of rules.sql run on the SQLite file (read-only)",
        osworld="general.py run_sqlite3: float(first value or 0). Differs: the database is opened read-only "
                "and immutable with a 30 s statement budget; a query that returns no row scores 0 (OSWorld "
                "raises); a value outside 0..1 is an error.")
def run_sqlite3(result, expected):
    sql = need(key(expected, "sql"), str, "expected.sql")
    if result is None:
        return 0.0
    db = open_sqlite(result)
    try:
        row = db.execute(sql).fetchone()
    except sqlite3.Error as e:
        raise MetricInputError(f"expected.sql: {e}") from None
    finally:
        db.close()
    try:
        return float((row[0] if row else 0) or 0)
    except (TypeError, ValueError):
        raise MetricInputError(f"expected.sql: returned {row[0]!r}, not a number") from None


@metric("file_contains", "general",
        summary="1 when the file contains every string of rules.expected",
        osworld="general.py file_contains: substring test of each expected string on the file's text. A missing "
                "file scores 0. Differs: a file that is not UTF-8 is an error (OSWorld scores 0).")
def file_contains(result, expected):
    want = [need(s, str, "expected.expected item") for s in need(key(expected, "expected"), list, "expected.expected")]
    if not result:
        return 0.0
    text = read_text(result)
    return 1.0 if all(s in text for s in want) else 0.0


TEST_RUNNER = r"""
import importlib.util, json, os, sys
test_file, func_name, out = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:0] = json.loads(sys.argv[4])
os.chdir(json.loads(sys.argv[4])[0])
def answer(obj):
    with open(out, "w") as f:
        json.dump(obj, f)
try:
    spec = importlib.util.spec_from_file_location("dynamic_module", test_file)
    module = importlib.util.module_from_spec(spec)
    sys.modules["dynamic_module"] = module
    spec.loader.exec_module(module)
    func = getattr(module, func_name)
except BaseException as e:
    answer({"load_error": f"{type(e).__name__}: {e}"})
    sys.exit(0)
try:
    answer({"passed": bool(func())})
except BaseException as e:
    answer({"passed": False, "error": f"{type(e).__name__}: {e}"})
"""


@metric("check_python_file_by_test_suite", "general",
        options={"test_function_name": "string, default \"test\": the function of the test file to call",
                 "timeout_s": "number, default 120: wall-clock budget for loading and running the test"},
        summary="1 when the task's test file's test function returns a true value against the agent's files",
        osworld="vscode.py check_python_file_by_test_suite: the expected file is loaded as a module and its "
                "test function called; truthy scores 1, an exception in it 0. Runs here in a child Python "
                "(its output kept off the answer channel) with the test file's and the result files' "
                "folders on sys.path and the first result's folder as working directory. Differs: a test "
                "module that fails to load (e.g. the agent's code does not import) scores 0 (OSWorld "
                "raises); over timeout_s scores 0.")
def check_python_file_by_test_suite(result, expected, test_function_name="test", timeout_s=120):
    need(test_function_name, str, "options.test_function_name")
    timeout_s = need(timeout_s, (int, float), "options.timeout_s")
    if result is None:
        return 0.0
    check_file(expected, "expected")
    files = result if isinstance(result, list) else [result]
    dirs = []
    for f in files:
        d = os.path.dirname(os.path.abspath(need(f, str, "result path")))
        if d not in dirs:
            dirs.append(d)
    test_dir = os.path.dirname(os.path.abspath(expected))
    if test_dir not in dirs:
        dirs.append(test_dir)
    with tempfile.TemporaryDirectory(prefix="envmgr-testsuite-") as tmp:
        out = os.path.join(tmp, "answer.json")
        child = subprocess.Popen([sys.executable, "-I", "-B", "-c", TEST_RUNNER, os.path.abspath(expected),
                                  test_function_name, out, json.dumps(dirs)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 cwd=tmp, start_new_session=True)
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return 0.0
        finally:
            try:
                os.killpg(child.pid, signal.SIGKILL)   # whatever the test left running in its group
            except ProcessLookupError:
                pass
            child.wait()
        try:
            with open(out) as f:
                answer = json.load(f)
        except (OSError, ValueError):
            return 0.0   # the child died (a crash, an exit from the agent's code)
    return 1.0 if answer.get("passed") else 0.0


@metric("compare_result_files", "general",
        summary="1 when the result file's content equals the expected one (as numbers within 1e-4, or the "
                "expected number appearing in the result text)",
        osworld="vscode.py compare_result_files: both stripped; when the expected content is a number, 1 if "
                "it appears in the result text or the result is a number within 1e-4; otherwise string "
                "equality.")
def compare_result_files(result, expected):
    if not result or not expected:
        return 0.0
    src, tgt = read_text(result).strip(), read_text(expected, "expected").strip()
    try:
        want = float(tgt)
    except ValueError:
        return 1.0 if src == tgt else 0.0
    if tgt in src:
        return 1.0
    try:
        return 1.0 if abs(float(src) - want) < 1e-4 else 0.0
    except ValueError:
        return 1.0 if src == tgt else 0.0


@metric("compare_time_in_speedtest_results", "general",
        summary="1 when the speedtest CSV's first data row was taken within `expected` minutes of now (time of day)",
        osworld="general.py compare_time_in_speedtest_results: the second line's second CSV field ends in "
                "HH:MM, compared by time of day only (no date, no wrap at midnight) with the evaluator's "
                "clock, within int(expected) minutes (the time_diff_range getter's value). The evaluator's "
                "clock and time zone must match the guest's for this to mean anything, as in OSWorld. "
                "Differs: a file without that field is an error (OSWorld scores 0).")
def compare_time_in_speedtest_results(result, expected):
    try:
        minutes = int(expected)
    except (TypeError, ValueError):
        raise MetricInputError(f"expected: minutes as an integer, got {expected!r}") from None
    if not result:
        return 0.0
    rows = lines(read_text(result))
    fields = rows[1].split(",") if len(rows) > 1 else []
    if len(fields) < 2:
        raise MetricInputError("result: no second field on the second line")
    try:
        then = datetime.datetime.strptime(fields[1][-5:], "%H:%M")
    except ValueError:
        raise MetricInputError(f"result: {fields[1][-5:]!r} is not HH:MM") from None
    now = datetime.datetime.strptime(datetime.datetime.now().strftime("%H:%M"), "%H:%M")
    return 1.0 if abs((then - now).total_seconds()) / 60 < minutes else 0.0


@metric("check_html_background_image", "general",
        summary="1 when a <style> of the HTML file sets background-image: url('<rules.value>')",
        osworld="vscode.py check_html_background_image: BeautifulSoup html.parser, substring "
                "\"background-image: url('VALUE')\" in a <style> element's text.")
def check_html_background_image(result, expected):
    from bs4 import BeautifulSoup
    value = need(key(expected, "value"), str, "expected.value")
    if not result:
        return 0.0
    soup = BeautifulSoup(read_text(result), "html.parser")
    needle = f"background-image: url('{value}')"
    return 1.0 if any(needle in s.text for s in soup.find_all("style")) else 0.0

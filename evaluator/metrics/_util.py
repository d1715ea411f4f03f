"""Helpers shared by the images, media, browser, app_settings and general families (private: run.py
imports only the family modules). Input shape checks, bounded text/JSON reading, and OSWorld's
rule vocabulary ({"method": "eq"|"re.S"|"approx:0.1"|"range.te"|..., "ref": ...}) that check_json,
check_thunderbird_prefs, check_mp3_meta and compare_table all speak (match_rule: its one home)."""
import builtins
import io
import json
import operator
import re
import sqlite3
import time
from urllib.parse import quote

from _common import MetricInputError, check_file

MAX_ITEMS = 100_000      # list/dict entries a metric iterates (tabs, bookmarks, rows, rules)
MAX_REGEX_TEXT = 1 << 20  # characters a task regex is run against at once


def need(value, kind, what):
    """value if it is of the JSON kind (dict, list, str, number), else a one-line MetricInputError."""
    kinds = {dict: "an object", list: "a list", str: "a string", (int, float): "a number"}
    ok = isinstance(value, kind) and not (kind == (int, float) and isinstance(value, bool))
    if not ok:
        raise MetricInputError(f"{what}: expected {kinds.get(kind, kind)}, got {type(value).__name__}")
    if isinstance(value, (dict, list)) and len(value) > MAX_ITEMS:
        raise MetricInputError(f"{what}: {len(value)} entries, over {MAX_ITEMS}")
    return value


def key(rule, name, what="expected"):
    """rule[name] of a rules object, or a MetricInputError naming the missing key."""
    need(rule, dict, what)
    if name not in rule:
        raise MetricInputError(f"{what}: missing `{name}`")
    return rule[name]


def rule_type(rule, *known):
    """rule["type"] when it is one of `known`; another type is a task error, not a silent 0."""
    kind = key(rule, "type")
    if kind not in known:
        raise MetricInputError(f"expected: rule type {kind!r} not supported (known: {', '.join(known)})")
    return kind


def read_text(path, what="result", universal=True):
    """A file's text as OSWorld's open(path) reads it on its Linux hosts: UTF-8, and with universal
    newlines (\r\n and \r read as \n); universal=False is OSWorld's open(path, "rb").decode()."""
    check_file(path, what)
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MetricInputError(f"{what}: not UTF-8 text (byte {e.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if universal else text


def lines(text):
    """The lines of a text, each with its \n, as iterating over a text-mode file yields them."""
    return io.StringIO(text).readlines()


def read_json(path, what="result", text=None):
    """A JSON file (or text) parsed; invalid JSON is a MetricInputError."""
    if text is None:
        text = read_text(path, what)
    try:
        return json.loads(text)
    except ValueError as e:
        raise MetricInputError(f"{what}: not JSON: {e}") from None
    except RecursionError:
        raise MetricInputError(f"{what}: JSON nested too deeply") from None


def regex(pattern, what="expected", flags=0):
    """A task-supplied regular expression compiled, or a MetricInputError."""
    if not isinstance(pattern, str):
        raise MetricInputError(f"{what}: regex must be a string, got {type(pattern).__name__}")
    try:
        return re.compile(pattern, flags)
    except re.error as e:
        raise MetricInputError(f"{what}: bad regex {pattern!r}: {e}") from None


def match_record(pattern, item):
    """OSWorld's _match_record: every key of pattern is in item with an equal value."""
    return all(k in item and item[k] == v for k, v in pattern.items())


def record_rules(expected):
    """The {"expect": [record], "unexpect": [record]} rules of check_csv / check_thunderbird_filter."""
    need(expected, dict, "expected")
    return tuple([need(r, dict, f"expected.{k} record") for r in need(expected.get(k, []), list, f"expected.{k}")]
                 for k in ("expect", "unexpect"))


def records_match(expect, unexpect, items):
    """Every expect record matches some item and no unexpect record matches any item."""
    return (all(any(match_record(r, i) for i in items) for r in expect)
            and not any(match_record(r, i) for r in unexpect for i in items))


_COMPARE = {"eq", "ne", "le", "lt", "ge", "gt"}


class RuleTypeError(MetricInputError):
    """A value whose type the rule cannot take: a regex or str_list_eq on a non-string, an order
    between incompatible types. OSWorld's _match_value_to_rule raises (TypeError, AttributeError)
    there, and so does match_rule: where OSWorld's caller catches it and scores 0 (check_json,
    compare_table's check_cell), ours does too; elsewhere (zoom, data_validation, check_mp3_meta,
    the Thunderbird prefs) it is an evaluator error, as OSWorld's exception ends the evaluation."""


def match_rule(value, rule, what="expected"):
    """OSWorld's _match_value_to_rule(value, {"method", "ref"}), the one implementation (the
    tables, general, media and app_settings families all call it):
    re[.FLAG...]  re.search(ref, value, flags)      eq/ne/le/lt/ge/gt   operator(value, ref)
    approx:T      |float(value) - ref| <= T (a value float() refuses: False, as OSWorld)
    range.XY [a, b]     a <X value <Y b (X,Y: e or t)
    str_list_eq / str_set_eq   value.strip("\"'").split(",") as list/set == ref
    spreadsheet_range [inner, outer]   inner's cells within value, value's within outer
    A value of the wrong type is a RuleTypeError; a malformed rule (unknown method or flag, bad
    pattern, a ref of the wrong shape) a MetricInputError: a task error, never a silent 0."""
    need(rule, dict, what)
    method = key(rule, "method", what)
    ref = rule.get("ref")
    if not isinstance(method, str):
        raise MetricInputError(f"{what}: method must be a string")
    try:
        if method.startswith("re"):
            flags = 0
            for name in method.split(".")[1:]:
                flag = getattr(re, name, None)
                if not isinstance(flag, re.RegexFlag):
                    raise MetricInputError(f"{what}: unknown regex flag {name!r}")
                flags |= flag
            if not isinstance(value, str):
                raise RuleTypeError(f"{what}: regex rule on a {type(value).__name__} value")
            return regex(ref, what, flags).search(value[:MAX_REGEX_TEXT]) is not None
        if method in _COMPARE:
            return bool(getattr(operator, method)(value, ref))
        if method.startswith("approx:"):
            threshold = float(method.split(":", 1)[1])
            ref = float(ref)
            try:
                value = float(value)
            except (TypeError, ValueError):
                return False
            return abs(value - ref) <= threshold
        if method == "spreadsheet_range":
            return _in_ranges(value, ref, what)
        if method.startswith("range.") and len(method) == 8 and set(method[6:]) <= {"e", "t"}:
            lo, hi = need(ref, list, f"{what}: ref")[:2]
            return getattr(operator, "l" + method[6])(lo, value) and getattr(operator, "l" + method[7])(value, hi)
        if method in ("str_list_eq", "str_set_eq"):
            kind = getattr(builtins, method[4:-3])
            if not isinstance(value, str):
                raise RuleTypeError(f"{what}: {method} on a {type(value).__name__} value")
            return kind(value.strip("\"'").split(",")) == kind(need(ref, list, f"{what}: ref"))
    except TypeError as e:
        raise RuleTypeError(f"{what}: cannot compare {type(value).__name__} with rule {method}: {e}") from None
    except ValueError as e:
        raise MetricInputError(f"{what}: rule {method}: {e}") from None
    raise MetricInputError(f"{what}: unknown rule method {method!r}")


def _in_ranges(value, ref, what):
    """spreadsheet_range: value (a MultiCellRange) holds every cell of ref[0] and lies in ref[1]."""
    from openpyxl.worksheet.cell_range import MultiCellRange
    try:
        inner, outer = MultiCellRange(ref[0]), MultiCellRange(ref[1])
    except Exception:
        raise MetricInputError(f"{what}: spreadsheet_range: bad ref {ref!r}") from None
    return all(r in value for r in inner) and all(r in outer for r in value)


def open_sqlite(path, what="result", seconds=30.0):
    """A SQLite file opened read-only and immutable (no -wal/-shm files are touched, so a read-only
    sandbox works), with statements aborted after `seconds`."""
    check_file(path, what)
    try:
        db = sqlite3.connect(f"file:{quote(path)}?mode=ro&immutable=1", uri=True)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as e:
        raise MetricInputError(f"{what}: not a SQLite database: {e}") from None
    deadline = time.monotonic() + seconds
    db.set_progress_handler(lambda: time.monotonic() > deadline, 10000)
    return db

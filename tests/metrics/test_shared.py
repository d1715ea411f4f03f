"""The pieces the metric families share, each written once: the fuzzy ratio (_common.fuzz_ratio,
and the C built-in fuzzy_match must give the same numbers) and OSWorld's rule vocabulary
(_util.match_rule, which tables.py and the others call), with OSWorld's answer where a value's
type does not fit the rule."""
import json
import os
import random
import subprocess
import sys
import unittest

import openpyxl
from openpyxl.worksheet.datavalidation import DataValidation

from metric_testlib import ROOT, MetricCase

sys.path.insert(0, os.path.join(ROOT, "evaluator", "metrics"))
import _common  # noqa: E402
import _util  # noqa: E402

ENVMGR = os.environ.get("ENVMGR_BIN") or os.path.join(ROOT, "bin", "envmgr")


def c_ratio(a, b):
    """The built-in fuzzy_match's score (metric_fuzzy_ratio) of two texts."""
    p = subprocess.run([ENVMGR, "metric", "run", "fuzzy_match", "--result-text", a, "--expected-text", b],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout.decode().strip().splitlines()[-1])["score"]


class FuzzyRatio(unittest.TestCase):
    def test_rapidfuzz_values(self):
        # values rapidfuzz.fuzz.ratio gives (rapidfuzz 3.x)
        for a, b, want in [("", "", 100.0), ("", "a", 0.0), ("abc", "abc", 100.0),
                           ("kitten", "sitting", 61.53846153846154), ("this is a test", "this is a test!", 96.55172413793103)]:
            self.assertAlmostEqual(_common.fuzz_ratio(a, b), want, places=9, msg=(a, b))
        self.assertEqual(_common.fuzz_ratio(None, "x"), 0.0)
        self.assertEqual(_common.fuzz_ratio(None, None), 0.0)
        with self.assertRaises(_common.MetricInputError):
            _common.fuzz_ratio("a" * 10, "b" * 10, max_chars=15)

    @unittest.skipUnless(os.access(ENVMGR, os.X_OK), "needs bin/envmgr (make all)")
    def test_c_and_python_agree(self):
        rng = random.Random(28)
        cases = [("", ""), ("", "abc"), ("abc", ""), ("kitten", "sitting"), ("Hello World", "hello world"),
                 ("héllo wörld", "hello world"), ("😀a😀", "a😀"), ("東京都", "京都"), ("a\tb\nc", "a b c"),
                 ("Downloading message", "Downloading messages 3 of 7")]
        for n in (40, 300):
            for _ in range(4):
                cases.append(("".join(rng.choice("abcé😀 ") for _ in range(n)),
                              "".join(rng.choice("abcé😀 ") for _ in range(rng.randint(1, n)))))
        for a, b in cases:
            self.assertAlmostEqual(c_ratio(a, b), _common.fuzz_ratio(a, b) / 100, places=12, msg=(a, b))


class RuleVocabulary(unittest.TestCase):
    def test_methods(self):
        m = _util.match_rule
        self.assertTrue(m("abc", {"method": "re", "ref": "^a"}))
        self.assertTrue(m("ABC", {"method": "re.I", "ref": "^a"}))
        self.assertTrue(m(3, {"method": "lt", "ref": 4}))
        self.assertTrue(m("2.05", {"method": "approx:0.1", "ref": 2}))
        self.assertFalse(m("n/a", {"method": "approx:0.1", "ref": 2}))  # float() refuses: False, as OSWorld
        self.assertTrue(m(2, {"method": "range.te", "ref": [1, 2]}))
        self.assertFalse(m(1, {"method": "range.te", "ref": [1, 2]}))
        self.assertTrue(m('"a,b"', {"method": "str_set_eq", "ref": ["b", "a"]}))
        with self.assertRaises(_common.MetricInputError):
            m("x", {"method": "roughly", "ref": 1})

    def test_a_value_of_the_wrong_type(self):
        # OSWorld's _match_value_to_rule raises on these (TypeError / AttributeError); so does ours
        for value, rule in [(None, {"method": "re", "ref": "x"}), (12, {"method": "re", "ref": "1"}),
                            (None, {"method": "lt", "ref": 3}), (5, {"method": "str_list_eq", "ref": ["5"]}),
                            ("a", {"method": "range.ee", "ref": [1, 2]})]:
            with self.assertRaises(_util.RuleTypeError, msg=(value, rule)):
                _util.match_rule(value, rule)


class RuleCallers(MetricCase):
    """Where OSWorld's caller catches the exception the score is 0; where it does not, an error."""

    def test_check_json_scores_zero(self):
        p = self.write("s.json", json.dumps({"size": 12}))
        self.assertScore(0.0, "check_json", p, {"expect": [{"key": ["size"], "method": "re", "ref": "1"}]})

    def test_check_cell_scores_zero(self):
        wb = openpyxl.Workbook()
        wb.active.append([12])
        p = self.path("r.xlsx")
        wb.save(p)
        opts = {"rules": [{"type": "check_cell", "sheet_idx": 0, "coordinate": "A1",
                           "props": {"value": {"method": "re", "ref": "1"}}}]}
        self.assertScore(0.0, "compare_table", p, None, opts)

    def test_data_validation_is_an_error(self):
        wb = openpyxl.Workbook()
        dv = DataValidation(type="list", formula1='"a,b"')
        wb.active.add_data_validation(dv)
        dv.add("A1")
        p = self.path("r.xlsx")
        wb.save(p)
        opts = {"rules": [{"type": "data_validation", "sheet_idx": 0,
                           "dv_props": [{"formula2": {"method": "re", "ref": "x"}}]}]}
        self.assertError("compare_table", p, None, opts)


if __name__ == "__main__":
    unittest.main()

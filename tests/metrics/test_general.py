"""general.py: each metric on text, JSON/YAML, CSV, SQLite, docx, accessibility-tree XML and Python
files written here, with rules from OSWorld's task files."""
import datetime
import json
import os
import sqlite3

from metric_testlib import MetricCase

AT_XML = '''<desktop-frame xmlns:attr="https://accessibility.ubuntu.example.org/ns/attributes" xmlns:st="https://accessibility.ubuntu.example.org/ns/state">
<application name="Thunderbird">
<page-tab-list attr:id="tabmail-tabs"><page-tab name="Inbox"/><page-tab name="About Profiles"/></page-tab-list>
<tool-bar attr:id="MsgHeadersToolbar"><label name="To">To</label>
<section attr:class="address-pill"><label attr:class="pill-label" name="fox@someuniversity.edu">Fox</label></section>
</tool-bar>
<label name="status">Downloading messages</label>
</application></desktop-frame>'''


class GeneralTest(MetricCase):
    def test_check_list(self):
        name = "check_list"
        out = self.write("wmctrl.out", "0x01 0 org.gnome.Nautilus.Org.gnome.Nautilus  host OSWorld\n"
                                       "0x02 0 gnome-terminal-server.Gnome-terminal host ~/Documents/Projects/OSWorld\n")
        rule = {"expect": ["\\borg\\.gnome\\.Nautilus\\.Org\\.gnome\\.Nautilus\\b.*\\bOSWorld\\b",
                           "gnome-terminal-server\\.Gnome-terminal\\b.*~/Documents/Projects/OSWorld\\b"]}
        self.assertScore(1.0, name, out, rule)
        self.assertScore(0.0, name, out, {"expect": ["firefox"]})
        self.assertScore(0.0, name, out, {"unexpect": [".+"]})
        self.assertScore(1.0, name, self.write("diff.out", ""), {"unexpect": [".+"]})
        # read as OSWorld's text-mode open() does: \r\n is a newline, so `$` matches before it
        self.assertScore(1.0, name, self.write("crlf.out", b"apt: openjdk-17-jre\r\n"), {"expect": ["jre$"]})
        self.assertError(name, out, {"expect": ["(unclosed"]})
        self.assertError(name, out, {"expect": "OSWorld"})

    def test_check_json(self):
        name = "check_json"
        manifest = {"name": "happy-extension", "version": "0.0.1", "background": {"scripts": ["background_script.js"]},
                    "browser_action": {"default_icon": {"64": "icons/icon.png"}}}
        m = self.write("manifest.json", json.dumps(manifest))
        rule = {"expect": [{"key": ["name"], "method": "eq", "ref": "happy-extension"},
                           {"key": ["background", "scripts"], "method": "eq", "ref": ["background_script.js"]},
                           {"key": ["browser_action", "default_icon"], "method": "eq", "ref": {"64": "icons/icon.png"}}]}
        self.assertScore(1.0, name, m, rule)
        self.assertScore(0.0, name, m, {"expect": [{"key": ["version"], "method": "eq", "ref": "0.0.2"}]})
        self.assertScore(0.0, name, m, {"expect": [{"key": ["author"], "method": "eq", "ref": "x"}]})
        self.assertScore(0.0, name, m, {"unexpect": [{"key": ["name"], "method": "re", "ref": "happy"}]})
        xul = self.write("xulstore.json", json.dumps({"chrome://messenger/content/messenger.xhtml": {
            "folderTree": {"mode": "smart"}}}))
        self.assertScore(1.0, name, xul, {"expect": [{"key": ["chrome://messenger/content/messenger.xhtml",
                                                              "folderTree", "mode"], "method": "re", "ref": "\\bsmart\\b"}]})
        yml = self.write("_config.yml", "name: Test Account\nauthor:\n  name: Test Account\n  email: Test@gmail.com\n")
        yrule = {"expect": [{"key": ["author", "email"], "method": "eq", "ref": "Test@gmail.com"}]}
        self.assertScore(1.0, name, yml, yrule, {"is_yaml": True})
        self.assertScore(0.0, name, yml, {"expect": [{"key": ["author", "email"], "method": "eq", "ref": "x@y"}]},
                         {"is_yaml": True})
        self.assertError(name, yml, yrule)   # YAML read as JSON
        self.assertError(name, self.write("bad.yml", "a: [1, 2\n"), yrule, {"is_yaml": True})
        self.assertError(name, self.write("py.yml", "!!python/object/apply:os.system ['true']\n"), yrule,
                         {"is_yaml": True})

    def test_check_csv(self):
        name = "check_csv"
        f = self.write("accounts.csv", "url,user,password\nimap://outlook.office365.com,anonym@outlook.com,pw1\n"
                                       "smtp://smtp.office365.com,anonym@outlook.com,pw1\n")
        self.assertScore(1.0, name, f, {"expect": [{"url": "imap://outlook.office365.com", "user": "anonym@outlook.com"}]})
        self.assertScore(0.0, name, f, {"unexpect": [{"url": "imap://outlook.office365.com"}]})
        self.assertScore(0.0, name, f, {"expect": [{"url": "pop3://x"}]})
        self.assertError(name, f, {"expect": {"url": "x"}})

    def test_diff_text_file(self):
        name = "diff_text_file"
        gold = self.write("gold.js", "a\nb\nc\nd\n")
        self.assertScore(1.0, name, self.write("same.js", "a\nb\nc\nd"), gold)
        self.assertScore(0.75, name, self.write("near.js", "a\nb\nc\nx\n"), gold)
        self.assertScore(0.0, name, self.write("other.js", "w\nx\ny\nz\n"), gold)
        self.assertScore(0.0, name, None, gold)
        self.assertError(name, self.write("bin.js", b"\xff\xfe\x00"), gold)

    def test_check_accessibility_tree(self):
        name = "check_accessibility_tree"
        pill = ['tool-bar[attr|id=MsgHeadersToolbar] label[name=To]~[attr|class="address-pill"]>'
                'label[attr|class="pill-label"][name*="fox@someuniversity.edu"]']
        self.assertScore(1.0, name, AT_XML, [{"selectors": pill}])
        self.assertScore(1.0, name, AT_XML, [{"selectors": [
            'application[name=Thunderbird] page-tab-list[attr|id="tabmail-tabs"]>page-tab[name="About Profiles"]']}])
        self.assertScore(0.0, name, AT_XML, [{"selectors": [pill[0].replace("fox@", "iron@")]}])
        self.assertScore(1.0, name, AT_XML, [{"xpath": "//label[@name='status']", "text": "Downloading messages",
                                              "exact": True}])
        fuzzy = [{"xpath": "//label[@name='status']", "text": "Downloading message", "exact": False}]
        kind_score = __import__("metric_testlib").run_metric(name, AT_XML, fuzzy)
        self.assertAlmostEqual(kind_score[1], 2 * 19 / 39)
        self.assertScore(0.0, name, AT_XML, [{"xpath": "//label[@name='status']", "text": "Done", "exact": True}])
        self.assertError(name, AT_XML[:-20], [{"selectors": pill}])
        self.assertError(name, AT_XML, [{"selectors": ["label[[["]}])
        # an external entity is never expanded: the element's text stays empty
        self.assertScore(0.0, name, "<!DOCTYPE d [<!ENTITY e SYSTEM 'file:///etc/passwd'>]><d>&e;</d>",
                         [{"xpath": "//d", "text": "root:x:0:0:root:/root:/bin/bash", "exact": False}])

    def test_check_line_number(self):
        name = "check_line_number"
        report = "".join(f"12:{m:02d}:01 AM all 1.0 0.0\n" for m in range(31)) + "Average: all 1.0\n"
        f = self.write("System_Resources_Report.txt", report)
        self.assertScore(1.0, name, f, {"expected": "31"})
        self.assertScore(0.0, name, f, {"expected": "30"})
        self.assertScore(0.0, name, self.path("absent.txt"), {"expected": "31"})
        self.assertError(name, f, {"expected": "thirty-one"})

    def test_fuzzy_place_math(self):
        import docx
        name = "fuzzy_place_math"
        answers = {"expected": ["深圳市福田区正义街1号", "福田区莲科路18号莲花一村警务室", "深圳市福田区福华三路111号"]}

        def document(lines):
            d = docx.Document()
            for line in lines:
                d.add_paragraph(line)
            p = self.path(f"doc{len(lines)}{lines[0][:2]}.docx")
            d.save(p)
            return p
        self.assertScore(1.0, name, document(answers["expected"]), answers)
        self.assertScore(0.0, name, document(["深圳市福田区正义街1号"]), answers)
        partial = __import__("metric_testlib").run_metric(name, document(["深圳市福田区正义街1号", "广州", "北京"]), answers)
        self.assertLess(partial[1], 0.5)
        self.assertError(name, self.write("not.docx", "plain text"), answers)

    def test_compare_python_pure_text(self):
        name = "compare_python_pure_text"
        gold = self.write("gold.py", "def f(x):\n    return x + 1\n")
        self.assertScore(1.0, name, self.write("a.py", "def f(x):\n\treturn x+1"), gold)
        self.assertScore(0.0, name, self.write("b.py", "def f(x):\n    return x + 2\n"), gold)
        self.assertError(name, self.path("absent.py"), gold)

    def test_run_sqlite3(self):
        name = "run_sqlite3"
        db = self.path("global-messages-db.sqlite")
        with sqlite3.connect(db) as c:
            c.execute("CREATE TABLE messages (id INTEGER, folderID INTEGER)")
            c.execute("CREATE TABLE messageAttributes (attributeID INTEGER, value INTEGER, messageID INTEGER)")
            c.executemany("INSERT INTO messages VALUES (?, ?)", [(1, 13), (2, 7)])
            c.executemany("INSERT INTO messageAttributes VALUES (?, ?, ?)", [(58, 1, 1), (58, 0, 2)])
        sql = ("select sum(1) > 0 from messageAttributes where attributeID = 58 and value = 1 and messageID in "
               "(select id from messages where folderID = {});")
        self.assertScore(1.0, name, db, {"sql": sql.format(13)})
        self.assertScore(0.0, name, db, {"sql": sql.format(7)})
        self.assertError(name, db, {"sql": "DELETE FROM messages"})
        self.assertError(name, db, {"sql": "select * from nosuchtable"})
        self.assertError(name, self.write("text.sqlite", "hello" * 100), {"sql": sql.format(13)})
        with sqlite3.connect(db) as c:
            self.assertEqual(c.execute("select count(*) from messages").fetchone()[0], 2)

    def test_file_contains(self):
        name = "file_contains"
        rule = {"expected": ["CPU", "%user", "%idle"]}
        self.assertScore(1.0, name, self.write("r.txt", "CPU %user %nice %idle\nall 1 2 3\n"), rule)
        self.assertScore(0.0, name, self.write("s.txt", "CPU %user\n"), rule)
        self.assertScore(0.0, name, None, rule)
        self.assertError(name, self.write("t.txt", "CPU"), {"expected": "CPU"})

    def test_check_python_file_by_test_suite(self):
        name = "check_python_file_by_test_suite"
        game = os.path.join(self.dir, "snake")
        os.mkdir(game)
        food = self.write("snake/food.py", "class Food:\n    def __init__(self):\n        self.pos = (5, 5)\n")
        suite = self.write("test_suite.py", "print('noise on stdout')\nfrom food import Food\n"
                                            "def test():\n    return Food().pos == (5, 5)\n")
        self.assertScore(1.0, name, [food], suite)
        self.write("snake/food.py", "class Food:\n    def __init__(self):\n        self.pos = (0, 0)\n")
        self.assertScore(0.0, name, [food], suite)
        self.write("snake/food.py", "class Food(:\n")
        self.assertScore(0.0, name, [food], suite)
        slow = self.write("slow_suite.py", "import subprocess, time\ndef test():\n"
                                           "    subprocess.Popen(['sleep', '300'])\n    time.sleep(30)\n    return True\n")
        started = __import__("time").monotonic()
        self.assertScore(0.0, name, [food], slow, {"timeout_s": 1})
        self.assertLess(__import__("time").monotonic() - started, 10)
        self.assertError(name, [food], self.path("absent_suite.py"))
        self.assertError(name, [food], suite, {"timeout_s": "long"})

    def test_compare_result_files(self):
        name = "compare_result_files"
        gold = self.write("gold.txt", "42.5\n")
        self.assertScore(1.0, name, self.write("a.txt", "The answer is 42.5"), gold)
        self.assertScore(1.0, name, self.write("b.txt", "42.50001"), gold)
        self.assertScore(0.0, name, self.write("c.txt", "43"), gold)
        self.assertScore(0.0, name, self.write("d.txt", "about forty"), gold)
        self.assertError(name, self.write("e.txt", b"\xff"), gold)

    def test_compare_time_in_speedtest_results(self):
        name = "compare_time_in_speedtest_results"
        now = datetime.datetime.now()
        row = "Date,Time,Download\n2024-01-01,{},95.1\n"
        self.assertScore(1.0, name, self.write("now.csv", row.format(now.strftime("%m/%d %H:%M"))), "60")
        far = (now + datetime.timedelta(hours=3)).strftime("%m/%d %H:%M")
        self.assertScore(0.0, name, self.write("far.csv", row.format(far)), "60")
        self.assertError(name, self.write("bad.csv", "Date\n"), "60")

    def test_check_html_background_image(self):
        name = "check_html_background_image"
        html = "<html><head><style>body { background-image: url('anmi_sharper.png'); }</style></head></html>"
        f = self.write("index.html", html)
        self.assertScore(1.0, name, f, {"type:": "value", "value": "anmi_sharper.png"})
        self.assertScore(0.0, name, f, {"type:": "value", "value": "anmi.png"})
        self.assertError(name, f, {"type:": "value"})

"""app_settings.py: VS Code, GIMP, Thunderbird, VLC and GNOME settings checks on files and command
output written here, with rules from OSWorld's task files."""
import json

from metric_testlib import MetricCase

KEYBINDINGS_HEADER = "// Place your key bindings in this file to override the defaults\n"

PREFS = '''// Mozilla User Preferences
user_pref("mail.identity.id1.auto_quote", false);
user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");
user_pref("extensions.activeThemeID", "thunderbird-compact-dark@mozilla.org");
user_pref("mail.server.default.applyIncomingFilters", true);
user_pref("mail.imap.use_status_for_biff", false);
'''

FILTERS = '''version="9"
logging="no"
name="Promotions"
enabled="yes"
type="17"
action="Move to folder"
actionValue="mailbox://nobody@Local%20Folders/Promotions"
condition="AND (subject,contains,discount)"
name="Forward all"
enabled="yes"
type="17"
action="Forward"
actionValue="anonym-x2024@gmail.com"
condition="ALL"
'''

MBOX = '''From - Mon Jan 01 00:00:00 2024
X-Mozilla-Status: 0001
X-Mozilla-Status2: 00000000
Subject: Invoice
From: a@example.com

Your invoice.

From - Tue Jan 02 00:00:00 2024
X-Mozilla-Status: 0001
Subject: Receipt

Your receipt.
'''

VLCRC = '''###
### vlc 3.0.18
###
# Show background cone (boolean)
#qt-bgcone=1
qt-bgcone=0
# Maximum volume displayed (integer)
qt-max-volume=200
# Minimal view (boolean)
#qt-minimal-view=0
# Record directory
input-record-path=/home/user/Desktop
# Play/Pause (string)
global-key-play-pause=Ctrl+Space
# Define the colors of the volume slider
qt-slider-colours=10;20;30;40;50;60;70;80;90;15;25;35
#one-instance-when-started-from-file=1
one-instance-when-started-from-file=0
play-and-exit=1
'''

STATUS = '''<?xml version="1.0" encoding="utf-8" standalone="yes" ?>
<root><fullscreen>false</fullscreen><state>{state}</state>
<information><category name="meta">
<info name='filename'>Rick Astley - Never Gonna Give You Up (Official Music Video).mp4</info>
<info name='url'>https://www.youtube.com/watch?v=pgBsyTKAwLw</info>
</category></information></root>
'''

TIMEDATECTL = '''               Local time: Thu 2024-01-25 12:56:06 UTC
           Universal time: Thu 2024-01-25 12:56:06 UTC
                 RTC time: Thu 2024-01-25 12:56:05
                Time zone: {zone}
System clock synchronized: yes
'''


class AppSettingsTest(MetricCase):
    def test_check_json_settings(self):
        name = "check_json_settings"
        s = self.write("settings.json", json.dumps({"files.autoSave": "afterDelay", "files.autoSaveDelay": 500,
                                                    "editor.fontSize": 14}))
        self.assertScore(1.0, name, s, {"expected": {"files.autoSave": "afterDelay", "files.autoSaveDelay": 500}})
        self.assertScore(1.0, name, s, {"expected": {}})
        self.assertScore(0.0, name, s, {"expected": {"files.autoSaveDelay": 1000}})
        self.assertScore(0.0, name, s, {"expected": {"files.exclude": {"**/__pycache__": True}}})
        self.assertScore(0.0, name, None, {"expected": {}})
        self.assertError(name, self.write("bad.json", '{"a": 1,'), {"expected": {}})
        self.assertError(name, self.write("list.json", "[1]"), {"expected": {}})

    def test_check_json_keybindings(self):
        name = "check_json_keybindings"
        entry = {"key": "ctrl+j", "command": "workbench.action.focusActiveEditorGroup", "when": "terminalFocus"}
        k = self.write("keybindings.json", KEYBINDINGS_HEADER + json.dumps([entry], indent=4))
        self.assertScore(1.0, name, k, {"expected": entry})
        self.assertScore(1.0, name, self.write("plain.json", json.dumps([entry])), {"expected": entry})
        self.assertScore(0.0, name, k, {"expected": dict(entry, key="ctrl+k")})
        self.assertError(name, self.write("bad.json", KEYBINDINGS_HEADER + "[{"), {"expected": entry})

    def test_compare_config(self):
        name = "compare_config"
        want = {"expected": "{\"workbench.colorTheme\": \"Visual Studio Dark\"}\n"}
        self.assertScore(1.0, name, self.write("s.json", want["expected"]), want)
        self.assertScore(0.0, name, self.write("t.json", "{\"workbench.colorTheme\": \"Default Dark+\"}\n"), want)
        self.assertScore(0.0, name, None, want)
        self.assertError(name, self.path("absent.txt"), want)
        self.assertError(name, self.write("u.txt", "project"), {"expected": 3})

    def test_check_config_status(self):
        name = "check_config_status"
        gimprc = self.write("gimprc", '# GIMP gimprc\n\n(undo-levels 100)\n(theme "Light")\n(layer-new-name "Square")\n')
        history = self.write("action-history", '(history-item "filters-vignette" 1)\n(history-item "edit-copy" 3)\n')
        self.assertScore(1.0, name, gimprc, {"type:": "key-value", "key": "theme", "value": "\"Light\""})
        self.assertScore(1.0, name, gimprc, {"type:": "key-value", "key": "undo-levels", "value": "100"})
        self.assertScore(1.0, name, history, {"key": ["history-item", "\"filters-vignette\""], "value": "1"})
        self.assertScore(0.0, name, gimprc, {"key": "theme", "value": "\"Dark\""})
        self.assertScore(0.0, name, history, {"key": ["history-item", "\"edit-copy\""], "value": "1"})
        self.assertError(name, gimprc, {"key": ["a", "b", "c"], "value": "1"})
        self.assertError(name, self.write("bin", b"\xff\xfe(theme)"), {"key": "theme", "value": "x"})

    def test_check_thunderbird_prefs(self):
        name = "check_thunderbird_prefs"
        p = self.write("prefs.js", PREFS)
        self.assertScore(1.0, name, p, {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}})
        self.assertScore(1.0, name, p, {"expect": {"mail.identity.id1.htmlSigText": {"method": "re.S",
                                                                                     "ref": "Anonym.+XYZ Lab"}}})
        self.assertScore(0.0, name, p, {"expect": {"mail.identity.id1.htmlSigText": {"method": "re",
                                                                                     "ref": "Anonym.+XYZ Lab"}}})
        self.assertScore(1.0, name, p, {"expect": {"extensions.activeThemeID": {"method": "re", "ref": "dark"}}})
        rule = {"expect": {"mail.server.default.applyIncomingFilters": {"method": "eq", "ref": True},
                           "mail.imap.use_status_for_biff": {"method": "eq", "ref": False}},
                "unexpect": {"mail.server.default.autosync_offline_stores": {"method": "eq", "ref": False}}}
        self.assertScore(1.0, name, p, rule)
        bad = self.write("prefs2.js", PREFS + 'user_pref("mail.server.default.autosync_offline_stores", false);\n')
        self.assertScore(0.0, name, bad, rule)
        self.assertScore(0.0, name, p, {"expect": {"mail.absent.pref": {"method": "eq", "ref": 1}}})
        self.assertError(name, self.write("p3.js", 'user_pref("mail.imap.use_status_for_biff", nope);\n'), rule)
        self.assertError(name, p, {"expect": {"mail.identity.id1.auto_quote": {"method": "fuzzy", "ref": 1}}})

    def test_check_thunderbird_filter(self):
        name = "check_thunderbird_filter"
        f = self.write("msgFilterRules.dat", FILTERS)
        move = {"enabled": "yes", "action": "Move to folder",
                "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
                "condition": ["AND (subject,contains,discount)"]}
        self.assertScore(1.0, name, f, {"expect": [move]})
        self.assertScore(1.0, name, f, {"expect": [{"enabled": "yes", "action": "Forward",
                                                    "actionValue": "anonym-x2024@gmail.com", "condition": ["ALL"]}]})
        self.assertScore(0.0, name, f, {"expect": [dict(move, condition=["AND (subject,contains,sale)"])]})
        self.assertScore(0.0, name, f, {"unexpect": [{"action": "Forward"}]})
        self.assertError(name, f, {"expect": {"enabled": "yes"}})
        self.assertError(name, self.write("bad.dat", 'enabled="yes"\ncondition="ALL"\n'), {"expect": [move]})

    def test_check_thunderbird_folder(self):
        name = "check_thunderbird_folder"
        gold = self.write("gold", MBOX)
        same = self.write("same", MBOX)
        empty = self.write("empty", "")
        one = self.write("one", MBOX.split("\n\nFrom - ")[0] + "\n")
        # OSWorld's behaviour (default): only emptiness is compared
        self.assertScore(1.0, name, [same, one], [gold, gold])
        self.assertScore(0.0, name, [same, empty], [gold, gold])
        # compare_messages: the messages themselves
        self.assertScore(1.0, name, same, gold, {"compare_messages": True})
        self.assertScore(0.0, name, one, gold, {"compare_messages": True})
        self.assertScore(1.0, name, self.write("st", MBOX.replace("0001", "0005")), gold,
                         {"compare_messages": True, "ignore_status": True})
        self.assertScore(0.0, name, None, gold)
        self.assertError(name, self.write("bin", b"\xff\xfeFrom - x"), gold)
        self.assertError(name, same, gold, {"compare_messages": "yes"})

    def test_is_vlc_playing(self):
        name = "is_vlc_playing"
        playing = self.write("status.xml", STATUS.format(state="playing"))
        rule = {"type": "file_name", "file_name": "Rick Astley - Never Gonna Give You Up (Official Music Video).mp4"}
        self.assertScore(1.0, name, playing, rule)
        self.assertScore(1.0, name, playing, {"type": "url", "url": "https://www.youtube.com/watch?v=pgBsyTKAwLw"})
        self.assertScore(0.0, name, self.write("paused.xml", STATUS.format(state="paused")), rule)
        self.assertScore(0.0, name, playing, {"type": "file_name", "file_name": "other.mp4"})
        self.assertError(name, self.write("bad.xml", "<root><state>playing"), rule)
        self.assertError(name, playing, {"type": "title", "title": "x"})

    def test_is_vlc_recordings_folder(self):
        name = "is_vlc_recordings_folder"
        rc = self.write("vlcrc", VLCRC)
        self.assertScore(1.0, name, rc, {"recording_file_path": "/home/user/Desktop"})
        self.assertScore(0.0, name, rc, {"recording_file_path": "/home/user/Videos"})
        self.assertScore(0.0, name, self.write("empty", "#input-record-path=\n"), {"recording_file_path": "/x"})
        self.assertError(name, rc, {"path": "/home/user/Desktop"})

    def test_is_vlc_fullscreen(self):
        name = "is_vlc_fullscreen"
        screen = {"width": 1920, "height": 1080}
        self.assertScore(1.0, name, screen, {"width": 1920, "height": 1080})
        self.assertScore(0.0, name, screen, {"width": 1280, "height": 720})
        self.assertError(name, screen, {"w": 1920})

    def test_vlcrc_settings(self):
        rc = self.write("vlcrc", VLCRC)
        cases = [("check_qt_bgcone", "expected_qt_bgcone", 0, 1),
                 ("check_qt_max_volume", "expected_qt_max_volume", 200, 125),
                 ("check_qt_minimal_view", "expected_qt_minimal_view", 0, 1),
                 ("check_one_instance_when_started_from_file", "expected_one_instance_when_started_from_file", 0, 1),
                 ("check_play_and_exit", "expected_play_and_exit", 1, 0),
                 ("check_global_key_play_pause", "expected_global_key_play_pause", 1, 0)]
        for name, rule_key, good, bad in cases:
            with self.subTest(name):
                self.assertScore(1.0, name, rc, {rule_key: good})
                self.assertScore(0.0, name, rc, {rule_key: bad})
                self.assertError(name, rc, {rule_key: [good]})
                self.assertError(name, self.path("absent"), {rule_key: good})
        # defaults when a setting has no line
        empty = self.write("vlcrc.empty", "###\n")
        self.assertScore(1.0, "check_qt_max_volume", empty, {"expected_qt_max_volume": 125})
        self.assertScore(1.0, "check_global_key_play_pause", empty, {"expected_global_key_play_pause": 0})

    def test_check_qt_slider_colours(self):
        name = "check_qt_slider_colours"
        rc = self.write("vlcrc", VLCRC)
        self.assertScore(1.0, name, rc, {"type": "blackish"})
        self.assertScore(0.0, name, self.write("default", "#qt-slider-colours=\n".replace("=", "=153;210;153")),
                         {"type": "blackish"})
        self.assertScore(0.0, name, self.write("none", "###\n"), {"type": "blackish"})
        self.assertScore(1.0, name, rc, {"type": "match", "expected_qt_slider_colours": "10;20;30;40;50;60;70;80;90;15;25;35"})
        self.assertError(name, self.write("bad", "qt-slider-colours=dark\n"), {"type": "blackish"})

    def test_check_gnome_favorite_apps(self):
        name = "check_gnome_favorite_apps"
        rule = {"expected": ["google-chrome.desktop", "thunderbird.desktop"]}
        self.assertScore(1.0, name, "['thunderbird.desktop', 'google-chrome.desktop']\n", rule)
        self.assertScore(0.0, name, "['thunderbird.desktop', 'google-chrome.desktop', 'vim.desktop']\n", rule)
        self.assertScore(0.0, name, "@as []\n", rule)
        self.assertError(name, "__import__('os').system('true')", rule)

    def test_is_utc_0(self):
        name = "is_utc_0"
        self.assertScore(1.0, name, TIMEDATECTL.format(zone="Etc/UTC (UTC, +0000)"))
        self.assertScore(1.0, name, TIMEDATECTL.format(zone="Atlantic/Faroe (WET, +0000)"))
        self.assertScore(0.0, name, TIMEDATECTL.format(zone="Asia/Shanghai (CST, +0800)"))
        self.assertError(name, "Time zone: UTC")

    def test_check_text_enlarged(self):
        name = "check_text_enlarged"
        self.assertScore(1.0, name, "1.25\n")
        self.assertScore(0.0, name, "1.0\n")
        self.assertError(name, "No such key 'text-scaling-factor'\n")

    def test_is_in_vm_clickboard(self):
        name = "is_in_vm_clickboard"
        self.assertScore(1.0, name, {"expected": "/home/user/Data3/List3/secret.docx"}, "/home/user/Data3/List3/secret.docx")
        self.assertScore(1.0, name, {"expected": ["None", "Data3"]}, "None of Data3")
        self.assertScore(0.0, name, {"expected": ["None"]}, "something else")
        self.assertError(name, "None", "None")

    def test_check_moved_jpgs(self):
        name = "check_moved_jpgs"
        rule = {"expected": ["emnlp2023.jpg", "hk_group_photo.jpg"]}
        tree = {"name": "cpjpg", "type": "directory",
                "children": [{"name": "hk_group_photo.jpg", "type": "file"}, {"name": "emnlp2023.jpg", "type": "file"}]}
        self.assertScore(1.0, name, tree, rule)
        self.assertScore(1.0, name, ["emnlp2023.jpg", "hk_group_photo.jpg"], rule)
        self.assertScore(0.0, name, ["emnlp2023.jpg"], rule)
        self.assertError(name, {"name": "cpjpg"}, rule)

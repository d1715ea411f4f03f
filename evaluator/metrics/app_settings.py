"""Application-settings metrics: VS Code settings/keybindings, GIMP's config files, Thunderbird's
prefs.js, filter rules and mail folders, VLC's vlcrc and HTTP status, and the GNOME/OS checks of
OSWorld's basic_os.py. Inputs are the files OSWorld's getters fetch (paths) or their command output.

A missing result (None) scores 0 as in OSWorld. A file that does not parse (JSON that is not JSON,
a prefs.js value that is not JSON, XML that is not XML) is an evaluator_error, also where OSWorld
would have swallowed the exception and scored 0; each metric's note says where that differs.
"""
import ast
import re

from _common import MetricInputError, metric, safe_xml_parser
from _util import MAX_ITEMS, key, lines, match_rule, need, read_json, read_text, record_rules, records_match, rule_type


# ---- VS Code ----

@metric("check_json_settings", "app_settings",
        summary="1 when the JSON settings file has every key of rules.expected with an equal value",
        osworld="vscode.py check_json_settings: the file (settings.json, a .code-workspace) updated with "
                "rules[\"expected\"] must be unchanged, i.e. every expected top-level key is present with an "
                "equal value (nested objects compared whole). Differs: a file that is not a JSON object is an "
                "error (OSWorld raises too; newer OSWorld scores 0).")
def check_json_settings(result, expected):
    want = need(key(expected, "expected"), dict, "expected.expected")
    if not result:
        return 0.0
    data = need(read_json(result), dict, "result")
    return 1.0 if all(k in data and data[k] == v for k, v in want.items()) else 0.0


@metric("check_json_keybindings", "app_settings",
        summary="1 when keybindings.json holds an entry equal to rules.expected",
        osworld="vscode.py check_json_keybindings: the file is read as JSON, or else as JSON after its first "
                "line (VS Code's comment header); it must be a list containing rules[\"expected\"] (dict "
                "equality). Differs: a file that parses neither way, or is not a list, is an error (OSWorld "
                "scores 0).")
def check_json_keybindings(result, expected):
    want = key(expected, "expected")
    if result is None:
        return 0.0
    text = read_text(result)
    try:
        data = read_json(None, "result", text)
    except MetricInputError:
        data = read_json(None, "result (after its first line)", text.split("\n", 1)[1] if "\n" in text else "")
    return 1.0 if want in need(data, list, "result") else 0.0


@metric("compare_config", "app_settings",
        summary="1 when the file's text is exactly rules.expected",
        osworld="vscode.py compare_config: whole-file string equality with rules[\"expected\"].")
def compare_config(result, expected):
    want = need(key(expected, "expected"), str, "expected.expected")
    if not result:
        return 0.0
    return 1.0 if read_text(result) == want else 0.0


# ---- GIMP ----

@metric("check_config_status", "app_settings",
        summary="1 when a GIMP config line (gimprc, sessionrc, action-history) has rules.key and ends with rules.value",
        osworld="gimp.py check_config_status: lines not starting with '#' and not empty, outer parentheses "
                "stripped, split on blanks; with a string key the first word must be the key, with a "
                "[k1, k2] key the first two words, and the last word must be rules.value (quotes included, "
                "e.g. \"\\\"Light\\\"\"). Differs: a key that is neither a string nor a 2-list is an error "
                "(OSWorld scores 0); blank lines of spaces are skipped (OSWorld raises).")
def check_config_status(result, expected):
    k, value = key(expected, "key"), key(expected, "value")
    if isinstance(k, str):
        k = [k]
    elif not (isinstance(k, list) and len(k) == 2 and all(isinstance(x, str) for x in k)):
        raise MetricInputError("expected.key: a string or a list of two strings")
    if result is None:
        return 0.0
    for line in lines(read_text(result)):
        if line.startswith("#") or line == "\n":
            continue
        words = line.strip().lstrip("(").rstrip(")\n").split()
        if words and words[:len(k)] == k and words[-1] == value:
            return 1.0
    return 0.0


# ---- Thunderbird ----

PREF_LINE = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)", (?P<val>.+)\);$')


@metric("check_thunderbird_prefs", "app_settings",
        summary="1 when prefs.js sets every rules.expect pref to a matching value and no rules.unexpect pref matches",
        osworld="thunderbird.py check_thunderbird_prefs: user_pref(\"key\", value); lines, value read as JSON "
                "(the last line for a key wins); each expect {key: {method, ref}} must be present and match "
                "(_match_value_to_rule), no unexpect rule may match a present key. Same behaviour; a value "
                "that is not JSON is an error as in OSWorld.")
def check_thunderbird_prefs(result, expected):
    need(expected, dict, "expected")
    expect = need(expected.get("expect", {}), dict, "expected.expect")
    unexpect = need(expected.get("unexpect", {}), dict, "expected.unexpect")
    if result is None:
        return 0.0
    found = {k: False for k in expect}
    clean = True
    for line in lines(read_text(result)):
        m = PREF_LINE.match(line.strip())
        if not m:
            continue
        name = m.group("key")
        if name not in expect and name not in unexpect:
            continue
        value = read_json(None, f"result: pref {name}", m.group("val"))
        if name in expect:
            found[name] = match_rule(value, expect[name], f"expected.expect.{name}")
        else:
            clean = clean and not match_rule(value, unexpect[name], f"expected.unexpect.{name}")
    return 1.0 if all(found.values()) and clean else 0.0


FILTER_FIELDS = {"name", "enabled", "type", "action", "actionValue", "condition"}
FILTER_LINE = re.compile(r'^(\w+)="(.*)"$')
CONDITION = re.compile(r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w \']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')


def filter_rules(text):
    """msgFilterRules.dat as OSWorld reads it: a filter starts at name=, is complete at condition=."""
    filters, current = [], None
    for line in lines(text):
        m = FILTER_LINE.match(line.rstrip("\n"))
        if not m or m.group(1) not in FILTER_FIELDS:
            continue
        field, value = m.group(1), m.group(2).replace('\\"', '"').replace("\\\\", "\\")
        if field == "name":
            current = {}
        if current is None:
            raise MetricInputError(f"result: filter field {field} before any name=")
        current[field] = CONDITION.findall(value) if field == "condition" else value
        if field == "condition":
            filters.append(current)
            if len(filters) > MAX_ITEMS:
                raise MetricInputError(f"result: over {MAX_ITEMS} filters")
    return filters


@metric("check_thunderbird_filter", "app_settings",
        summary="1 when some filter matches each rules.expect record and none matches a rules.unexpect record",
        osworld="thunderbird.py check_thunderbird_filter: msgFilterRules.dat parsed into {name, enabled, type, "
                "action, actionValue, condition: [\"AND (subject,contains,x)\" | \"ALL\", ...]}; records "
                "compared with _match_record. Differs: values are read between the quotes instead of by "
                "OSWorld's fixed slice, which cut the last character of a final line without a newline.")
def check_thunderbird_filter(result, expected):
    expect, unexpect = record_rules(expected)
    if result is None:
        return 0.0
    return 1.0 if records_match(expect, unexpect, filter_rules(read_text(result))) else 0.0


def mail_folder(path, what, opts):
    """The set (or list) of messages of an mbox folder file, normalised as OSWorld's options say."""
    text = read_text(path, what).strip()
    messages = []
    for mail in re.split(r"(?m)^From - ", text):
        if not mail.strip():
            continue
        if opts["remove_deleted"] and re.search(r"X-Mozilla-Status: 000[89]", mail):
            continue
        if opts["ignore_status"]:
            mail = re.sub(r"X-Mozilla-Status\d?:[\s\d]+", "", mail)
        if opts["ignore_keys"]:
            mail = re.sub(r"(X-Mozilla-Keys:[^\n]*?)\n(MIME-Version)", r"\2", mail)
        messages.append("From - " + mail.strip())
    return "\n".join(sorted(set(messages) if opts["remove_duplicate"] else messages))


@metric("check_thunderbird_folder", "app_settings",
        options={"compare_messages": "bool, default false: compare the messages (see osworld note); false "
                                     "reproduces OSWorld",
                 "ignore_status": "bool, default false: drop X-Mozilla-Status headers (compare_messages only)",
                 "ignore_keys": "bool, default false: drop X-Mozilla-Keys headers (compare_messages only)",
                 "remove_deleted": "bool, default true: skip messages with status 0008/0009 (compare_messages only)",
                 "remove_duplicate": "bool, default true: compare as sets (compare_messages only)"},
        summary="Each result mail folder holds the same messages as its expected folder",
        osworld="thunderbird.py check_thunderbird_folder. OSWorld's reader has a bug: it keeps only the EMPTY "
                "chunks between 'FROM - ' separators (upper case, which Thunderbird's 'From - ' lines never "
                "match), so a folder reads as nothing when it has text and as one empty message when it is "
                "empty: a pair scores 1 exactly when both files are empty or both are not. That is the "
                "default here. With compare_messages true the messages (split at '^From - ') are compared "
                "after the ignore_status / ignore_keys / remove_deleted / remove_duplicate options, as "
                "OSWorld intended. A path or a list of paths each side; a missing result scores 0.")
def check_thunderbird_folder(result, expected, compare_messages=False, ignore_status=False, ignore_keys=False,
                             remove_deleted=True, remove_duplicate=True):
    opts = {"ignore_status": ignore_status, "ignore_keys": ignore_keys, "remove_deleted": remove_deleted,
            "remove_duplicate": remove_duplicate}
    for name, v in dict(opts, compare_messages=compare_messages).items():
        if not isinstance(v, bool):
            raise MetricInputError(f"options.{name}: expected true or false")
    if not isinstance(expected, list):
        result, expected = [result], [expected]
    need(result, list, "result")
    for pred, gold in zip(result, expected):
        if pred is None:
            return 0.0
        if compare_messages:
            same = mail_folder(pred, "result", opts) == mail_folder(gold, "expected", opts)
        else:
            same = bool(read_text(pred).strip()) == bool(read_text(gold, "expected").strip())
        if not same:
            return 0.0
    return 1.0


# ---- VLC ----

@metric("is_vlc_playing", "app_settings",
        summary="1 when VLC's status.xml says playing and the file name (or URL) ends with the rule's",
        osworld="vlc.py is_vlc_playing: state must be 'playing'; {type: file_name, file_name} tests the meta "
                "'filename' info, {type: url, url} the meta 'url' info, with endswith. Parsed with a "
                "hardened lxml parser. Differs: a playing status without that info scores 0 (OSWorld "
                "raises); an unknown rule type is an error (OSWorld scores 0).")
def is_vlc_playing(result, expected):
    kind = rule_type(expected, "file_name", "url")
    want = need(key(expected, kind), str, f"expected.{kind}")
    if result is None:
        return 0.0
    from lxml import etree
    try:
        tree = etree.fromstring(read_text(result, universal=False).encode(), safe_xml_parser())
    except etree.XMLSyntaxError as e:
        raise MetricInputError(f"result: not XML: {e}") from None
    if tree.findtext("state") != "playing":
        return 0.0
    info = tree.find(f'information/category[@name="meta"]/info[@name="{"filename" if kind == "file_name" else "url"}"]')
    return 1.0 if info is not None and info.text and info.text.endswith(want) else 0.0


@metric("is_vlc_recordings_folder", "app_settings",
        summary="1 when vlcrc's input-record-path is rules.recording_file_path",
        osworld="vlc.py is_vlc_recordings_folder: the first non-comment line mentioning input-record-path "
                "decides; its value after the last '=' must equal the rule's path.")
def is_vlc_recordings_folder(result, expected):
    want = need(key(expected, "recording_file_path"), str, "expected.recording_file_path")
    if result is None:
        return 0.0
    for line in read_text(result, universal=False).split("\n"):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return 1.0 if line.split("=")[-1].strip() == want else 0.0
    return 0.0


@metric("is_vlc_fullscreen", "app_settings",
        summary="1 when the window size equals the screen size",
        osworld="vlc.py is_vlc_fullscreen: {width, height} of the window and the screen must be equal "
                "(OSWorld's tasks pass the screen as result and the window as expected; it is symmetric).")
def is_vlc_fullscreen(result, expected):
    if result is None or expected is None:
        return 0.0
    a, b = need(result, dict, "result"), need(expected, dict, "expected")
    return 1.0 if all(key(a, k, "result") == key(b, k) for k in ("width", "height")) else 0.0


def vlcrc_value(path, name, default):
    """The value of the last vlcrc line containing `name` (commented lines too, as OSWorld reads it)."""
    value = default
    for line in read_text(path, universal=False).split("\n"):
        if name in line:
            value = line.split("=")[-1].strip()
    return value


def vlc_setting(metric_name, setting, default, rule_key, meaning):
    @metric(metric_name, "app_settings",
            summary=f"1 when vlcrc's {setting} is rules.{rule_key} ({meaning})",
            osworld=f"vlc.py {metric_name}: the last line containing '{setting}=' (a commented '#{setting}=' "
                    f"default line counts too, as in OSWorld) gives the value, {default!r} when none; it must "
                    f"equal str(rules.{rule_key}).")
    def check(result, expected):
        want = key(expected, rule_key)
        if not isinstance(want, (str, int)):
            raise MetricInputError(f"expected.{rule_key}: a string or an integer")
        if result is None:
            return 0.0
        return 1.0 if vlcrc_value(result, setting + "=", default) == str(want) else 0.0
    return check


vlc_setting("check_qt_bgcone", "qt-bgcone", "1", "expected_qt_bgcone", "the cone behind the video")
vlc_setting("check_qt_max_volume", "qt-max-volume", "125", "expected_qt_max_volume", "the volume ceiling")
vlc_setting("check_qt_minimal_view", "qt-minimal-view", "0", "expected_qt_minimal_view", "minimal interface")
vlc_setting("check_one_instance_when_started_from_file", "one-instance-when-started-from-file", "1",
            "expected_one_instance_when_started_from_file", "one VLC for files opened from the desktop")
vlc_setting("check_play_and_exit", "play-and-exit", "0", "expected_play_and_exit",
            "quit at the end of the playlist; newer OSWorld")


@metric("check_global_key_play_pause", "app_settings",
        summary="1 when a global play/pause hotkey is set (rules value 1) or unset (0) as expected",
        osworld="vlc.py check_global_key_play_pause: the last line containing 'global-key-play-pause=' "
                "(commented lines too) gives \"0\" when its value is empty, else \"1\"; \"0\" when no line; "
                "it must equal str(rules.expected_global_key_play_pause).")
def check_global_key_play_pause(result, expected):
    want = key(expected, "expected_global_key_play_pause")
    if not isinstance(want, (str, int)):
        raise MetricInputError("expected.expected_global_key_play_pause: a string or an integer")
    if result is None:
        return 0.0
    value = vlcrc_value(result, "global-key-play-pause=", None)
    state = "0" if not value else "1"
    return 1.0 if state == str(want) else 0.0


@metric("check_qt_slider_colours", "app_settings",
        summary="vlcrc's qt-slider-colours equals rules.expected_qt_slider_colours (type match) or is all "
                "dark (type blackish: every R, G, B < 100)",
        osworld="vlc.py check_qt_slider_colours: the last line mentioning qt-slider-colours (commented lines "
                "too) gives the ';'-separated value, VLC's default when none. Differs: a value that is not "
                "integers is an error (OSWorld scores 0); an unknown type is an error (OSWorld returns None).")
def check_qt_slider_colours(result, expected):
    kind = rule_type(expected, "match", "blackish")
    if result is None:
        return 0.0
    value = vlcrc_value(result, "qt-slider-colours", "153;210;153;20;210;20;255;199;15;245;39;29")
    if kind == "match":
        return 1.0 if value == key(expected, "expected_qt_slider_colours") else 0.0
    try:
        numbers = [int(x) for x in value.split(";")]
    except ValueError:
        raise MetricInputError(f"result: qt-slider-colours {value[:60]!r} is not ';'-separated integers") from None
    colours = zip(numbers[0::3], numbers[1::3], numbers[2::3])
    return 1.0 if all(v < 100 for c in colours for v in c) else 0.0


# ---- GNOME / OS (basic_os.py) ----

@metric("check_gnome_favorite_apps", "app_settings",
        summary="1 when the dock's favourite apps are exactly rules.expected (any order)",
        osworld="basic_os.py check_gnome_favorite_apps on `gsettings get org.gnome.shell favorite-apps`: same "
                "count and same set. Differs: the output is read with ast.literal_eval, never eval, and "
                "GSettings' empty-list form '@as []' is an empty list (OSWorld's eval raises on it).")
def check_gnome_favorite_apps(result, expected):
    want = need(key(expected, "expected"), list, "expected.expected")
    if result is None:
        return 0.0
    text = need(result, str, "result").strip()
    if text.startswith("@as "):
        text = text[4:]
    try:
        apps = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise MetricInputError(f"result: not a GSettings string list: {text[:80]!r}") from None
    apps = need(apps, list, "result")
    return 1.0 if len(apps) == len(want) and set(apps) == set(want) else 0.0


@metric("is_utc_0", "app_settings", expected=False,
        summary="1 when timedatectl's time-zone line ends with +0000)",
        osworld="basic_os.py is_utc_0: the 4th line of `timedatectl status` output must end with '+0000)'. "
                "Output with fewer lines is an error (OSWorld raises).")
def is_utc_0(result):
    if result is None:
        return 0.0
    lines = need(result, str, "result").split("\n")
    if len(lines) < 4:
        raise MetricInputError(f"result: {len(lines)} lines of timedatectl output, need 4")
    return 1.0 if lines[3].endswith("+0000)") else 0.0


@metric("check_text_enlarged", "app_settings", expected=False,
        summary="1 when GNOME's text-scaling-factor is above 1",
        osworld="basic_os.py check_text_enlarged: float(output) > 1.0; output that is not a number is an "
                "error (OSWorld raises).")
def check_text_enlarged(result):
    if result is None:
        return 0.0
    try:
        factor = float(need(result, str, "result"))
    except ValueError:
        raise MetricInputError(f"result: not a number: {result[:40]!r}") from None
    return 1.0 if factor > 1.0 else 0.0


@metric("is_in_vm_clickboard", "app_settings",
        summary="1 when the clipboard text (expected: xsel output) contains rules.expected (a string, or all of a list)",
        osworld="basic_os.py is_in_vm_clickboard: OSWorld's tasks pass the rule as result and the clipboard "
                "command output as expected; substring test. Missing clipboard output scores 0.")
def is_in_vm_clickboard(result, expected):
    want = key(result, "expected", "result")
    if expected is None:
        return 0.0
    text = need(expected, str, "expected")
    items = want if isinstance(want, list) else [want]
    return 1.0 if all(need(i, str, "result.expected item") in text for i in items) else 0.0


@metric("check_moved_jpgs", "app_settings",
        summary="1 when the directory holds exactly the files of rules.expected (any order)",
        osworld="basic_os.py check_moved_jpgs: the names of the directory tree's children (OSWorld's "
                "list_directory shape {\"children\": [{\"name\"}]}; envmgr's list of names is accepted too) "
                "must have the expected count and set.")
def check_moved_jpgs(result, expected):
    want = need(key(expected, "expected"), list, "expected.expected")
    if result is None:
        return 0.0
    if isinstance(result, dict):
        names = [key(need(c, dict, "result child"), "name", "result child")
                 for c in need(key(result, "children", "result"), list, "result.children")]
    else:
        names = need(result, list, "result")
    return 1.0 if len(names) == len(want) and set(names) == set(want) else 0.0

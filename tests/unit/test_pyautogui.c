/* pyautogui subset → computer_13 actions: every supported call, the
 * argument forms, and refusal of everything else (with exact messages). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/pyautogui.h"
#include "envmgr/base/util.h"
#include "tests/unit/helpers/cunit_main.h"

/* code must translate to exactly the actions in `want` (JSON). */
static void check_ok(const char *code, const char *want)
{
    em_err err = {0};
    json_t *got = NULL;
    int rc = pyautogui_parse(code, &got, &err);
    if (rc < 0)
        fprintf(stderr, "\n  code: %s\n  error: %s\n", code, err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    json_error_t je;
    json_t *exp = json_loads(want, 0, &je);
    CU_ASSERT_PTR_NOT_NULL_FATAL(exp);
    if (!json_equal(got, exp)) {
        char *s = json_dumps(got, JSON_COMPACT);
        fprintf(stderr, "\n  code: %s\n  got:  %s\n  want: %s\n", code, s, want);
        free(s);
    }
    CU_ASSERT_TRUE(json_equal(got, exp));
    json_decref(got);
    json_decref(exp);
}

/* code must be refused with exactly this message (or, when prefix_only, a message starting with it). */
static void check_err_msg(const char *code, const char *msg, bool prefix_only)
{
    em_err err = {0};
    json_t *got = (json_t *)0x1;
    int rc = pyautogui_parse(code, &got, &err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_PTR_NULL(got);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    bool ok = prefix_only ? !strncmp(err.msg, msg, strlen(msg)) : !strcmp(err.msg, msg);
    if (!ok)
        fprintf(stderr, "\n  code: %s\n  got:  %s\n  want: %s%s\n", code, err.msg, msg, prefix_only ? "..." : "");
    CU_ASSERT_TRUE(ok);
    if (rc == 0)
        json_decref(got);
}

static void check_err(const char *code, const char *msg)
{
    check_err_msg(code, msg, false);
}

/* Refused as outside the subset, whatever the exact excerpt. */
static void check_unsafe(const char *code)
{
    em_err err = {0};
    json_t *got = NULL;
    CU_ASSERT_EQUAL(pyautogui_parse(code, &got, &err), -1);
    CU_ASSERT_PTR_NULL(got);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    if (!strstr(err.msg, "pyautogui: line "))
        fprintf(stderr, "\n  code: %s\n  got: %s\n", code, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pyautogui: line "));
}

static void test_click(void)
{
    check_ok("pyautogui.click(100, 200)", "[{\"action_type\":\"CLICK\",\"x\":100,\"y\":200,\"button\":\"left\","
                                          "\"num_clicks\":1}]");
    check_ok("pyautogui.click()", "[{\"action_type\":\"CLICK\",\"button\":\"left\",\"num_clicks\":1}]");
    check_ok("pyautogui.click(None, None)", "[{\"action_type\":\"CLICK\",\"button\":\"left\",\"num_clicks\":1}]");
    check_ok("pyautogui.click((10, 20))",
             "[{\"action_type\":\"CLICK\",\"x\":10,\"y\":20,\"button\":\"left\",\"num_clicks\":1}]");
    check_ok("pyautogui.click(x=1, y=2, clicks=2, interval=0.25, button='right', duration=0.1)",
             "[{\"action_type\":\"CLICK\",\"x\":1,\"y\":2,\"button\":\"right\",\"num_clicks\":2}]");
    check_ok("pyautogui.click(button='middle')", "[{\"action_type\":\"CLICK\",\"button\":\"middle\",\"num_clicks\":1}]");
    check_ok("pyautogui.click(1, 2, 3, 0.1, 'primary')",
             "[{\"action_type\":\"CLICK\",\"x\":1,\"y\":2,\"button\":\"left\",\"num_clicks\":3}]");
    /* floats round half away from zero; negative signs are literals */
    check_ok("pyautogui.click(100.4, 200.5)",
             "[{\"action_type\":\"CLICK\",\"x\":100,\"y\":201,\"button\":\"left\",\"num_clicks\":1}]");
    check_ok("pyautogui.click(-0.6, +3.5)",
             "[{\"action_type\":\"CLICK\",\"x\":-1,\"y\":4,\"button\":\"left\",\"num_clicks\":1}]");
    check_ok("pyautogui.click(5, 6, clicks=0)", "[{\"action_type\":\"MOVE_TO\",\"x\":5,\"y\":6}]");
    check_ok("pyautogui.click(clicks=0)", "[]");
}

static void test_other_clicks(void)
{
    check_ok("pyautogui.doubleClick(3, 4)", "[{\"action_type\":\"DOUBLE_CLICK\",\"x\":3,\"y\":4}]");
    check_ok("pyautogui.doubleClick()", "[{\"action_type\":\"DOUBLE_CLICK\"}]");
    check_ok("pyautogui.doubleClick(3, 4, button='right')",
             "[{\"action_type\":\"CLICK\",\"x\":3,\"y\":4,\"button\":\"right\",\"num_clicks\":2}]");
    check_ok("pyautogui.tripleClick(7, 8)",
             "[{\"action_type\":\"CLICK\",\"x\":7,\"y\":8,\"button\":\"left\",\"num_clicks\":3}]");
    check_ok("pyautogui.rightClick(5, 6)", "[{\"action_type\":\"RIGHT_CLICK\",\"x\":5,\"y\":6}]");
    check_ok("pyautogui.rightClick()", "[{\"action_type\":\"RIGHT_CLICK\"}]");
    check_ok("pyautogui.middleClick(1, 1)",
             "[{\"action_type\":\"CLICK\",\"x\":1,\"y\":1,\"button\":\"middle\",\"num_clicks\":1}]");
}

static void test_move_and_drag(void)
{
    check_ok("pyautogui.moveTo(10, 20)", "[{\"action_type\":\"MOVE_TO\",\"x\":10,\"y\":20}]");
    check_ok("pyautogui.moveTo((10, 20), duration=0.5)", "[{\"action_type\":\"MOVE_TO\",\"x\":10,\"y\":20}]");
    check_ok("pyautogui.moveTo(x=1.5, y=2.49)", "[{\"action_type\":\"MOVE_TO\",\"x\":2,\"y\":2}]");
    check_ok("pyautogui.dragTo(30, 40, duration=1.0, button='left')",
             "[{\"action_type\":\"DRAG_TO\",\"x\":30,\"y\":40}]");
    check_ok("pyautogui.dragTo(30, 40, button='right')",
             "[{\"action_type\":\"MOUSE_DOWN\",\"button\":\"right\"},{\"action_type\":\"MOVE_TO\",\"x\":30,\"y\":40},"
             "{\"action_type\":\"MOUSE_UP\",\"button\":\"right\"}]");
    check_ok("pyautogui.dragTo(30, 40, mouseDownUp=False)", "[{\"action_type\":\"MOVE_TO\",\"x\":30,\"y\":40}]");
}

static void test_mouse_down_up(void)
{
    check_ok("pyautogui.mouseDown()", "[{\"action_type\":\"MOUSE_DOWN\",\"button\":\"left\"}]");
    check_ok("pyautogui.mouseDown(5, 6, button='middle')",
             "[{\"action_type\":\"MOVE_TO\",\"x\":5,\"y\":6},{\"action_type\":\"MOUSE_DOWN\",\"button\":\"middle\"}]");
    check_ok("pyautogui.mouseUp(button='right')", "[{\"action_type\":\"MOUSE_UP\",\"button\":\"right\"}]");
    check_ok("pyautogui.mouseUp(7, 8)",
             "[{\"action_type\":\"MOVE_TO\",\"x\":7,\"y\":8},{\"action_type\":\"MOUSE_UP\",\"button\":\"left\"}]");
}

static void test_scroll(void)
{
    check_ok("pyautogui.scroll(5)", "[{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":5}]");
    check_ok("pyautogui.scroll(-3)", "[{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":-3}]");
    check_ok("pyautogui.vscroll(clicks=2)", "[{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":2}]");
    check_ok("pyautogui.hscroll(4)", "[{\"action_type\":\"SCROLL\",\"dx\":4,\"dy\":0}]");
    check_ok("pyautogui.scroll(2, x=10, y=20)",
             "[{\"action_type\":\"MOVE_TO\",\"x\":10,\"y\":20},{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":2}]");
    /* the core takes at most 50 clicks per SCROLL: bigger scrolls are split */
    check_ok("pyautogui.scroll(-120)", "[{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":-50},"
                                       "{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":-50},"
                                       "{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":-20}]");
    check_ok("pyautogui.scroll(0)", "[]");
}

static void test_typing(void)
{
    check_ok("pyautogui.typewrite('hello')", "[{\"action_type\":\"TYPING\",\"text\":\"hello\"}]");
    check_ok("pyautogui.write(\"a b\", interval=0.05)", "[{\"action_type\":\"TYPING\",\"text\":\"a b\"}]");
    check_ok("pyautogui.typewrite(message='x')", "[{\"action_type\":\"TYPING\",\"text\":\"x\"}]");
    check_ok("pyautogui.typewrite('')", "[]");
    /* escapes */
    check_ok("pyautogui.typewrite('a\\nb\\tc\\\\d\\'e\\\"f\\x41\\r')",
             "[{\"action_type\":\"TYPING\",\"text\":\"a\\nb\\tc\\\\d'e\\\"fA\\r\"}]");
    check_ok("pyautogui.typewrite('caf\\xe9')", "[{\"action_type\":\"TYPING\",\"text\":\"caf\\u00e9\"}]");
    check_ok("pyautogui.typewrite(r'C:\\new')", "[{\"action_type\":\"TYPING\",\"text\":\"C:\\\\new\"}]");
    check_ok("pyautogui.typewrite(u'x')", "[{\"action_type\":\"TYPING\",\"text\":\"x\"}]");
    check_ok("pyautogui.typewrite('''two\nlines''')", "[{\"action_type\":\"TYPING\",\"text\":\"two\\nlines\"}]");
    check_ok("pyautogui.typewrite('ab' \"cd\")", "[{\"action_type\":\"TYPING\",\"text\":\"abcd\"}]");
    check_ok("pyautogui.typewrite('# not a comment; nor a separator')",
             "[{\"action_type\":\"TYPING\",\"text\":\"# not a comment; nor a separator\"}]");
    /* a list of keys presses each of them */
    check_ok("pyautogui.typewrite(['Enter', 'a', 'A'])",
             "[{\"action_type\":\"PRESS\",\"key\":\"enter\"},{\"action_type\":\"PRESS\",\"key\":\"a\"},"
             "{\"action_type\":\"PRESS\",\"key\":\"A\"}]");

    /* text longer than the core's 8192-byte limit is split */
    size_t n = 9000;
    char *code = xmalloc(n + 64);
    strcpy(code, "pyautogui.typewrite('");
    size_t o = strlen(code);
    memset(code + o, 'z', n);
    strcpy(code + o + n, "')");
    em_err err = {0};
    json_t *a = NULL;
    CU_ASSERT_EQUAL_FATAL(pyautogui_parse(code, &a, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(a), 2);
    CU_ASSERT_EQUAL(json_string_length(json_object_get(json_array_get(a, 0), "text")), 8192);
    CU_ASSERT_EQUAL(json_string_length(json_object_get(json_array_get(a, 1), "text")), 9000 - 8192);
    json_decref(a);
    free(code);
}

static void test_keys(void)
{
    check_ok("pyautogui.press('Enter')", "[{\"action_type\":\"PRESS\",\"key\":\"enter\"}]");
    check_ok("pyautogui.press('A')", "[{\"action_type\":\"PRESS\",\"key\":\"A\"}]");
    check_ok("pyautogui.press('tab', presses=3, interval=0.1)",
             "[{\"action_type\":\"PRESS\",\"key\":\"tab\"},{\"action_type\":\"PRESS\",\"key\":\"tab\"},"
             "{\"action_type\":\"PRESS\",\"key\":\"tab\"}]");
    check_ok("pyautogui.press(['a', 'b'], 2)",
             "[{\"action_type\":\"PRESS\",\"key\":\"a\"},{\"action_type\":\"PRESS\",\"key\":\"b\"},"
             "{\"action_type\":\"PRESS\",\"key\":\"a\"},{\"action_type\":\"PRESS\",\"key\":\"b\"}]");
    check_ok("pyautogui.press('x', presses=0)", "[]");
    check_ok("pyautogui.keyDown('Shift'); pyautogui.keyUp(key='shift')",
             "[{\"action_type\":\"KEY_DOWN\",\"key\":\"shift\"},{\"action_type\":\"KEY_UP\",\"key\":\"shift\"}]");
    check_ok("pyautogui.hotkey('ctrl', 'c')", "[{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"c\"]}]");
    check_ok("pyautogui.hotkey('Ctrl', 'Alt', 'T', interval=0.1)",
             "[{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"alt\",\"T\"]}]");
    check_ok("pyautogui.hotkey(['ctrl', 'shift', 'esc'])",
             "[{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"shift\",\"esc\"]}]");
}

static void test_sleep(void)
{
    check_ok("time.sleep(0.5)", "[{\"action_type\":\"WAIT\",\"seconds\":0.5}]");
    check_ok("time.sleep(2)", "[{\"action_type\":\"WAIT\",\"seconds\":2.0}]");
    check_ok("pyautogui.sleep(1)", "[{\"action_type\":\"WAIT\",\"seconds\":1.0}]");
    check_ok("time.sleep(0)", "[]");
    /* the core waits at most 60 s per WAIT: longer sleeps are split */
    check_ok("time.sleep(130)", "[{\"action_type\":\"WAIT\",\"seconds\":60.0},{\"action_type\":\"WAIT\",\"seconds\":"
                                "60.0},{\"action_type\":\"WAIT\",\"seconds\":10.0}]");
}

static void test_statements(void)
{
    /* what OSWorld agents actually print: imports, comments (indented too), ';', blank lines, CRLF */
    check_ok("import pyautogui\nimport time\n\n# open the menu\npyautogui.click(10, 10)  # there\r\n  \n"
             "    # then\ntime.sleep(0.5); pyautogui.press('down');\npyautogui.press('enter')\n",
             "[{\"action_type\":\"CLICK\",\"x\":10,\"y\":10,\"button\":\"left\",\"num_clicks\":1},"
             "{\"action_type\":\"WAIT\",\"seconds\":0.5},{\"action_type\":\"PRESS\",\"key\":\"down\"},"
             "{\"action_type\":\"PRESS\",\"key\":\"enter\"}]");
    /* an indented statement is Python's IndentationError, as OSWorld's guest python says: not translated */
    check_err("pyautogui.click(10, 10)\n    pyautogui.press('enter')",
              "pyautogui: line 2: unexpected indent (Python's IndentationError)");
    check_err(" pyautogui.press('enter')", "pyautogui: line 1: unexpected indent (Python's IndentationError)");
    check_ok("import pyautogui, time", "[]");
    check_ok("", "[]");
    check_ok(";;\n;", "[]");
    /* a call may span lines inside its parentheses, with a trailing comma */
    check_ok("pyautogui.hotkey(\n    'ctrl',\n    'v',\n)", "[{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"v\"]}]");
    check_ok("pyautogui . click ( 1 , 2 )",
             "[{\"action_type\":\"CLICK\",\"x\":1,\"y\":2,\"button\":\"left\",\"num_clicks\":1}]");
}

static void test_rejects_unsafe(void)
{
    check_err("__import__('os').system('x')",
              "pyautogui: line 1: `__import__('os').system('x')` is not in the supported subset");
    check_err("import pyautogui\npyautogui.click(os.getpid())",
              "pyautogui: line 2: `pyautogui.click(os.getpid())` is not in the supported subset");
    check_err("pyautogui.click(1, 2); eval('1+1')", "pyautogui: line 1: `eval('1+1')` is not in the supported subset");
    check_err("open('/etc/passwd').read()",
              "pyautogui: line 1: `open('/etc/passwd').read()` is not in the supported subset");
    check_unsafe("exec('import os')");
    check_unsafe("import os");
    check_unsafe("import subprocess; subprocess.run('ls')");
    check_unsafe("from pyautogui import click");
    check_unsafe("pyautogui.FAILSAFE = False");
    check_unsafe("x = 5");
    check_unsafe("pyautogui.typewrite(f'{x}')");
    check_unsafe("pyautogui.typewrite(b'x')");
    check_unsafe("pyautogui.typewrite('x'.upper())");
    check_unsafe("pyautogui.typewrite('%s' % 'x')");
    check_unsafe("pyautogui.click(1 + 2, 3)");
    check_unsafe("pyautogui.click(*[1, 2])");
    check_unsafe("pyautogui.click(**{'x': 1})");
    check_unsafe("pyautogui.click(x=lambda: 1)");
    check_unsafe("pyautogui.click(1, 2).x");
    check_unsafe("pyautogui.click");
    check_unsafe("pyautogui.__dict__");
    check_unsafe("getattr(pyautogui, 'click')(1, 2)");
    check_unsafe("pyautogui.locateOnScreen('button.png')");
    check_unsafe("pyautogui.os.system('x')");
    check_unsafe("time.time()");
    check_unsafe("pyautogui.click(0x10, 5)");
    check_unsafe("pyautogui.click(1_000, 5)");
    check_unsafe("pyautogui.press([['a']])");
    check_unsafe("for i in range(3): pyautogui.press('a')");
    check_unsafe("def f(): pass");
    check_unsafe("if True: pyautogui.click()");
    check_unsafe("pyautogui.click(True and 1, 2)");
    check_unsafe("pyautogui.click(--1, 2)");
    check_unsafe("@decorator");
    /* found by fuzzing: a list item whose string is followed by a refused prefixed string leaked */
    check_unsafe("pyautogui.press(['a'x'])");
    check_unsafe("pyautogui.press(('a' f'b'))");
}

static void test_argument_errors(void)
{
    check_err("pyautogui.click(1)", "pyautogui: line 1: click(): y: missing (x and y go together)");
    check_err("pyautogui.click('submit.png')",
              "pyautogui: line 1: click(): x: expected a number, got string (locating images on screen is not "
              "supported)");
    check_err("pyautogui.click(1, 2, foo=3)", "pyautogui: line 1: click(): unexpected keyword argument `foo`");
    check_err("pyautogui.click(x=1, x=2)", "pyautogui: line 1: click(): got multiple values for `x`");
    check_err("pyautogui.click(x=1, 2)", "pyautogui: line 1: click(): a positional argument follows a keyword argument");
    check_err("pyautogui.click(1, 2, 3, 4, 'left', 0, 7)", "pyautogui: line 1: click(): takes at most 6 positional "
                                                           "arguments");
    check_err("pyautogui.click(1, 2, button='top')",
              "pyautogui: line 1: click(): button: expected 'left', 'right' or 'middle', got 'top'");
    check_err("pyautogui.click(1, 2, clicks=1.5)", "pyautogui: line 1: click(): clicks: expected an integer, got float");
    check_err("pyautogui.click(1e7, 2)", "pyautogui: line 1: click(): x: 1e+07 is out of range");
    check_err("pyautogui.moveTo()", "pyautogui: line 1: moveTo(): x and y are required");
    check_err("pyautogui.moveTo((1, 2, 3))", "pyautogui: line 1: moveTo(): x: expected an (x, y) pair, got 3 items");
    check_err("pyautogui.dragTo(1, 2, mouseDownUp='no')",
              "pyautogui: line 1: dragTo(): mouseDownUp: expected True or False, got string");
    check_err("pyautogui.scroll()", "pyautogui: line 1: scroll(): clicks: missing");
    check_err("pyautogui.scroll('up')", "pyautogui: line 1: scroll(): clicks: expected an integer, got string");
    check_err("pyautogui.typewrite(5)",
              "pyautogui: line 1: typewrite(): message: expected a string or a list of keys, got integer");
    check_err("pyautogui.press()", "pyautogui: line 1: press(): keys: missing");
    check_err("pyautogui.press('')", "pyautogui: line 1: press(): keys: key names are 1 to 64 characters");
    check_err("pyautogui.press([1])", "pyautogui: line 1: press(): keys: expected a key name, got integer");
    check_err("pyautogui.hotkey()", "pyautogui: line 1: hotkey(): keys: missing");
    check_err("pyautogui.hotkey(['ctrl'], 'c')",
              "pyautogui: line 1: hotkey(): keys: a list of keys must be the only argument");
    check_err("time.sleep(-1)", "pyautogui: line 1: sleep(): secs: -1 is out of range (0..3600)");
    check_err("time.sleep('1')", "pyautogui: line 1: sleep(): secs: expected a number, got string");
    /* string literals */
    check_err("pyautogui.typewrite('\\d')",
              "pyautogui: line 1: unsupported escape `\\d` in a string (supported: \\n \\t \\r \\\\ \\' \\\" \\xNN)");
    check_err("pyautogui.typewrite('\\u00e9')",
              "pyautogui: line 1: unsupported escape `\\u` in a string (supported: \\n \\t \\r \\\\ \\' \\\" \\xNN)");
    check_err("pyautogui.typewrite('\\x4')", "pyautogui: line 1: \\x must be followed by two hex digits");
    check_err("pyautogui.typewrite('\\x00')", "pyautogui: line 1: NUL characters (\\x00) are not supported in strings");
    check_err("pyautogui.typewrite('abc", "pyautogui: line 1: unterminated string");
    check_err("pyautogui.typewrite('abc\n')", "pyautogui: line 1: unterminated string");
    check_err("pyautogui.typewrite('\xff\xfe')", "pyautogui: line 1: typewrite(): message: text is not valid UTF-8");
    /* line numbers count physical lines, including those inside a call */
    check_err("import pyautogui\npyautogui.hotkey(\n 'ctrl',\n 'c')\n\nos.remove('x')",
              "pyautogui: line 6: `os.remove('x')` is not in the supported subset");
    check_err("pyautogui.click(1, 2) # fine\npyautogui.rightClick(3)",
              "pyautogui: line 2: rightClick(): y: missing (x and y go together)");
    check_err(NULL, "pyautogui: no code");
}

static void test_limits(void)
{
    /* code size */
    size_t n = PYAUTOGUI_CODE_MAX + 1;
    char *big = xmalloc(n + 1);
    memset(big, '\n', n);
    big[n] = '\0';
    check_err(big, "pyautogui: code is 65537 bytes, more than the limit of 65536");
    big[n - 1] = '\0'; /* exactly the limit: fine */
    check_ok(big, "[]");
    free(big);

    /* actions */
    em_err err = {0};
    json_t *a = NULL;
    CU_ASSERT_EQUAL(pyautogui_parse("pyautogui.press('a', presses=1000)", &a, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(a), 1000);
    json_decref(a);
    check_err("pyautogui.press('a', presses=1000); pyautogui.press('b')",
              "pyautogui: the code expands to more than 1000 actions");
    check_err("pyautogui.press('a', presses=1001)",
              "pyautogui: line 1: press(): presses: 1001 is out of range (0..1000)");
    check_err("pyautogui.scroll(-50001)", "pyautogui: line 1: scroll(): clicks: -50001 is out of range (-50000..50000)");

    /* list length */
    char *list = xmalloc(1002 * 4 + 64);
    strcpy(list, "pyautogui.press([");
    for (int i = 0; i < 1001; i++)
        strcat(list, "'a',");
    strcat(list, "])");
    check_err(list, "pyautogui: line 1: a list has more than 1000 items");
    free(list);
    check_err("pyautogui.click(99999999999, 1)", "pyautogui: line 1: number `99999999999` is out of range");
}

/* tests/data/pyautogui_corpus: every agent string is taken (translated or run in the guest), and
 * a string OSWorld's python refuses is never translated into actions that would silently run. */
static void test_corpus(void)
{
    FILE *f = fopen(ENVMGR_SOURCE_DIR "/tests/data/pyautogui_corpus/corpus.jsonl", "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char *line = NULL;
    size_t cap = 0, n = 0, guest = 0, som = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(o);
        const char *code = json_string_value(json_object_get(o, "code"));
        const char *outcome = json_string_value(json_object_get(o, "osworld"));
        const char *style = json_string_value(json_object_get(o, "style"));
        em_err err = {0};
        json_t *acts = NULL;
        int rc = pyautogui_actions(code, 1280, 800, &acts, &err);
        if (rc < 0)
            fprintf(stderr, "\n  corpus line %zu refused: %s\n", n + 1, err.msg);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        size_t i;
        json_t *a;
        bool run_in_guest = false;
        json_array_foreach(acts, i, a)
        {
            action parsed;
            if (action_parse(a, 1280, 800, &parsed, &err) < 0)
                fprintf(stderr, "\n  corpus line %zu: %s\n", n + 1, err.msg);
            else
                run_in_guest |= parsed.type == ACT_PYAUTOGUI, action_free(&parsed);
            CU_ASSERT_EQUAL(err.msg[0], '\0');
        }
        if (strcmp(outcome, "ok") && !run_in_guest)
            fprintf(stderr, "\n  corpus line %zu: OSWorld says %s, envmgr translated it\n", n + 1, outcome);
        CU_ASSERT_TRUE(!strcmp(outcome, "ok") || run_in_guest);
        guest += run_in_guest;
        som += !strcmp(style, "som") && run_in_guest;
        json_decref(acts);
        json_decref(o);
        n++;
    }
    free(line);
    fclose(f);
    CU_ASSERT_TRUE(n >= 200);
    CU_ASSERT_EQUAL(som, 50); /* set-of-marks code names its tags: always run in the guest */
    CU_ASSERT_TRUE(guest > 0 && guest < n);
}

static CU_TestInfo tests[] = {
    {"click", test_click},
    {"double, triple, right and middle clicks", test_other_clicks},
    {"moveTo and dragTo", test_move_and_drag},
    {"mouseDown and mouseUp", test_mouse_down_up},
    {"scroll, vscroll, hscroll", test_scroll},
    {"typewrite and write", test_typing},
    {"press, keyDown, keyUp, hotkey", test_keys},
    {"time.sleep", test_sleep},
    {"statements, imports, comments", test_statements},
    {"unsafe code is refused", test_rejects_unsafe},
    {"argument errors", test_argument_errors},
    {"size limits", test_limits},
    {"the agents' corpus: every string is taken", test_corpus},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("pyautogui", tests);
}

/* UI-TARS action text -> computer_13 actions: every action kind, the point forms, both coordinate
 * modes with scaling, multi-action answers, the end of an episode, and each kind of refusal (with
 * exact messages). Every translated action must also pass action_parse on the screen. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/uitars.h"
#include "envmgr/base/util.h"
#include "tests/unit/helpers/cunit_main.h"

#define ABS UITARS_COORDS_ABSOLUTE
#define REL UITARS_COORDS_RELATIVE_1000

/* Identity: 1120x700 is a multiple of 28 on each side, so the model's image is the display, which is
 * the screen; absolute coordinates are screen pixels. */
static const cu_geometry G_ID = {1120, 700, 1120, 700};
/* A 1280x800 screen shown at 1024x640, which Qwen2.5-VL's processor makes 1036x644. */
static const cu_geometry G_S = {1280, 800, 1024, 640};
/* Unscaled 1280x800: the model still sees it as 1288x812. */
static const cu_geometry G_U = {1280, 800, 1280, 800};

/* want: JSON with ' for " (none of these expectations has an apostrophe of its own). */
static json_t *load_want(const char *want)
{
    char *s = xstrdup(want);
    for (char *q = s; *q; q++)
        if (*q == '\'')
            *q = '"';
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    if (!j)
        fprintf(stderr, "\n  bad expectation: %s (%s)\n", want, je.text);
    free(s);
    return j;
}

/* Each action must be one action_parse takes on the screen: what envmgr will execute. */
static void check_valid(json_t *actions, const cu_geometry *g)
{
    size_t i;
    json_t *a;
    json_array_foreach(actions, i, a)
    {
        action parsed;
        em_err err = {0};
        int rc = action_parse(a, g->screen_w, g->screen_h, &parsed, &err);
        if (rc < 0)
            fprintf(stderr, "\n  action %zu refused: %s\n", i, err.msg);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc == 0)
            action_free(&parsed);
    }
}

static void check_json(const char *text, const cu_geometry *g, uitars_coords m, json_t *want, bool terminal)
{
    cu_result r;
    cu_result_init(&r);
    em_err err = {0};
    int rc = uitars_actions(text, g, m, &r, &err);
    if (rc < 0)
        fprintf(stderr, "\n  text: %s\n  error: %s\n", text, err.msg);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    if (rc == 0 && !json_equal(r.actions, want)) {
        char *got = json_dumps(r.actions, JSON_COMPACT), *exp = json_dumps(want, JSON_COMPACT);
        fprintf(stderr, "\n  text: %s\n  got:  %s\n  want: %s\n", text, got, exp);
        free(got);
        free(exp);
    }
    CU_ASSERT_TRUE(rc == 0 && json_equal(r.actions, want));
    CU_ASSERT_EQUAL(r.terminal, terminal);
    check_valid(r.actions, g);
    json_decref(want);
    cu_result_clear(&r);
}

static void ok_in(const char *text, const cu_geometry *g, uitars_coords m, const char *want)
{
    check_json(text, g, m, load_want(want), false);
}

static void ok(const char *text, const char *want)
{
    ok_in(text, &G_ID, ABS, want);
}

static void ok_end(const char *text, const char *want)
{
    check_json(text, &G_ID, ABS, load_want(want), true);
}

/* want is literal JSON (for texts with quotes of their own). */
static void ok_raw(const char *text, const char *want)
{
    check_json(text, &G_ID, ABS, json_loads(want, 0, NULL), false);
}

/* Refused with exactly msg (or a message starting with it), leaving r as it was. */
static void err_msg(const char *text, const cu_geometry *g, uitars_coords m, const char *msg, bool prefix_only)
{
    cu_result r;
    cu_result_init(&r);
    json_array_append_new(r.actions, json_pack("{s:s}", "action_type", "WAIT")); /* the caller's own */
    em_err err = {0};
    CU_ASSERT_EQUAL(uitars_actions(text, g, m, &r, &err), -1);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    bool same = prefix_only ? !strncmp(err.msg, msg, strlen(msg)) : !strcmp(err.msg, msg);
    if (!same)
        fprintf(stderr, "\n  text: %.200s\n  got:  %s\n  want: %s%s\n", text, err.msg, msg, prefix_only ? "..." : "");
    CU_ASSERT_TRUE(same);
    CU_ASSERT_PTR_NULL(strchr(err.msg, '\n'));
    CU_ASSERT_EQUAL(json_array_size(r.actions), 1);
    CU_ASSERT_FALSE(r.terminal);
    cu_result_clear(&r);
}

static void bad(const char *text, const char *msg)
{
    err_msg(text, &G_ID, ABS, msg, false);
}

static void bad_prefix(const char *text, const char *msg)
{
    err_msg(text, &G_ID, ABS, msg, true);
}

#define CLICK_100_200 "[{'action_type':'CLICK','x':100,'y':200,'button':'left','num_clicks':1}]"

static void test_click_forms(void)
{
    ok("click(start_box='(100,200)')", CLICK_100_200);
    ok("left_single(start_box='(100,200)')", CLICK_100_200);
    ok("click(start_box=\"(100,200)\")", CLICK_100_200);
    ok("click( start_box = '( 100 , 200 )' )", CLICK_100_200);
    ok("click(start_box='<|box_start|>(100,200)<|box_end|>')", CLICK_100_200);
    ok("click(start_box='[90,190,110,210]')", CLICK_100_200);      /* a box: its centre */
    ok("click(start_box='(90,190,110,210)')", CLICK_100_200);
    ok("click(start_box='(90,190),(110,210)')", CLICK_100_200);
    ok("click(start_box='<bbox>90 190 110 210</bbox>')", CLICK_100_200);
    ok("click(point='<point>100 200</point>')", CLICK_100_200);    /* UI-TARS-1.5 */
    ok("click(start_point='<point>100 200</point>')", CLICK_100_200);
    ok("click(start_box='(100.7,200.2)')", CLICK_100_200);         /* the pixel the point is in */
    ok("click(start_box='[100,200,101,201]')", CLICK_100_200);
    ok("click(start_box='(100,200)',)", CLICK_100_200);
    ok("click(start_box='(0,0)')", "[{'action_type':'CLICK','x':0,'y':0,'button':'left','num_clicks':1}]");
    ok("click(start_box='(1119,699)')", "[{'action_type':'CLICK','x':1119,'y':699,'button':'left','num_clicks':1}]");
}

static void test_other_pointer_actions(void)
{
    ok("left_double(start_box='(10,20)')", "[{'action_type':'DOUBLE_CLICK','x':10,'y':20}]");
    ok("right_single(point='<point>10 20</point>')", "[{'action_type':'RIGHT_CLICK','x':10,'y':20}]");
    ok("hover(start_box='(10,20)')", "[{'action_type':'MOVE_TO','x':10,'y':20}]");
    ok("drag(start_box='(10,20)', end_box='(300,400)')",
       "[{'action_type':'MOVE_TO','x':10,'y':20},{'action_type':'DRAG_TO','x':300,'y':400}]");
    ok("drag(start_point='<point>10 20</point>', end_point='<point>300 400</point>')",
       "[{'action_type':'MOVE_TO','x':10,'y':20},{'action_type':'DRAG_TO','x':300,'y':400}]");
    ok("select(start_box='[0,10,20,30]', end_box='[290,390,310,410]')",
       "[{'action_type':'MOVE_TO','x':10,'y':20},{'action_type':'DRAG_TO','x':300,'y':400}]");
}

static void test_scroll(void)
{
    ok("scroll(start_box='(10,20)', direction='down')",
       "[{'action_type':'MOVE_TO','x':10,'y':20},{'action_type':'SCROLL','dx':0,'dy':-5}]");
    ok("scroll(direction='up', point='<point>10 20</point>')",
       "[{'action_type':'MOVE_TO','x':10,'y':20},{'action_type':'SCROLL','dx':0,'dy':5}]");
    ok("scroll(start_box='(10,20)', direction=' Left ')",
       "[{'action_type':'MOVE_TO','x':10,'y':20},{'action_type':'SCROLL','dx':-5,'dy':0}]");
    ok("scroll(direction='right')", "[{'action_type':'SCROLL','dx':5,'dy':0}]"); /* where the pointer is */
    ok("scroll(start_box='', direction='DOWN')", "[{'action_type':'SCROLL','dx':0,'dy':-5}]");
    bad("scroll(start_box='(10,20)', direction='down or up')",
        "uitars: line 1: scroll: direction: `down or up` is not up, down, left or right");
    bad("scroll(start_box='(10,20)')", "uitars: line 1: scroll: direction: missing");
}

static void test_keys(void)
{
    ok("hotkey(key='ctrl c')", "[{'action_type':'HOTKEY','keys':['ctrl','c']}]");
    ok("hotkey(key='  ctrl   shift t ')", "[{'action_type':'HOTKEY','keys':['ctrl','shift','t']}]");
    ok("hotkey(key='ctrl+shift+t')", "[{'action_type':'HOTKEY','keys':['ctrl','shift','t']}]");
    ok("hotkey(key='ctrl +')", "[{'action_type':'HOTKEY','keys':['ctrl','+']}]");
    ok("hotkey(key='arrowleft')", "[{'action_type':'HOTKEY','keys':['left']}]");
    ok("hotkey(key='Ctrl A')", "[{'action_type':'HOTKEY','keys':['ctrl','A']}]"); /* "A" is shift+a */
    ok("hotkey(key='cmd space')", "[{'action_type':'HOTKEY','keys':['win','space']}]");
    ok("hotkey(key='pagedown')", "[{'action_type':'HOTKEY','keys':['pagedown']}]");
    ok("hotkey(hotkey='enter')", "[{'action_type':'HOTKEY','keys':['enter']}]");
    ok("press(key='enter')", "[{'action_type':'PRESS','key':'enter'}]");
    ok("press(press='esc')", "[{'action_type':'PRESS','key':'esc'}]");
    ok("keydown(key='shift')", "[{'action_type':'KEY_DOWN','key':'shift'}]");
    ok("keyup(key='shift')", "[{'action_type':'KEY_UP','key':'shift'}]");
    ok("release(key='ctrl alt')", "[{'action_type':'KEY_UP','key':'ctrl'},{'action_type':'KEY_UP','key':'alt'}]");
    bad("hotkey(key='')", "uitars: line 1: hotkey: key: no key given");
    bad("hotkey()", "uitars: line 1: hotkey: key: missing");
    bad("hotkey(key='ctrl+')",
        "uitars: line 1: hotkey: key: `ctrl+` is not a key combination (keys are separated by spaces)");
    bad("hotkey(key='ctrl foo')", "uitars: line 1: hotkey: key: unknown key `foo`");
    bad("hotkey(key='ctrl \xc3\xa9')", "uitars: line 1: hotkey: key: `??` is not a key name");
    bad("hotkey(key='a b c d e f g h i')", "uitars: line 1: hotkey: key: more than 8 keys");
}

static void test_type(void)
{
    ok("type(content='hello world')", "[{'action_type':'TYPING','text':'hello world'}]");
    /* a trailing \n submits: typed without it, then Enter */
    ok("type(content='hello\\n')", "[{'action_type':'TYPING','text':'hello'},{'action_type':'PRESS','key':'enter'}]");
    ok("type(content='hello\\\\n')", /* double-escaped, as the reference executors also take it */
       "[{'action_type':'TYPING','text':'hello'},{'action_type':'PRESS','key':'enter'}]");
    ok("type(content='\\n')", "[{'action_type':'PRESS','key':'enter'}]");
    ok("type(content='a\\nb\\tc')", "[{'action_type':'TYPING','text':'a\\nb\\tc'}]");
    ok("type(content='')", "[]");
    /* a string ends on its line, so a lost quote cannot take the next action along as text */
    bad("type(content='one\ntwo')",
        "uitars: line 1: type: content: unterminated string (no closing ' on its line; write a line break as \\n)");
    bad("type(content='hello\n')",
        "uitars: line 1: type: content: unterminated string (no closing ' on its line; write a line break as \\n)");
    bad("type(content='abc)\n\ntap(start_box='(1,2)')",
        "uitars: line 1: type: content: unterminated string (no closing ' on its line; write a line break as \\n)");
    ok("type(content='one\\\ntwo')", "[{'action_type':'TYPING','text':'onetwo'}]"); /* a continued line */
    ok("type(content='one\\\r\ntwo')", "[{'action_type':'TYPING','text':'onetwo'}]");
    ok("type(content='a\r')\r\nwait()\r\n",
       "[{'action_type':'TYPING','text':'a'},{'action_type':'WAIT','seconds':5.0}]"); /* CRLF answers */
    ok_raw("type(content='it\\'s \\\"x\\\"')", "[{\"action_type\":\"TYPING\",\"text\":\"it's \\\"x\\\"\"}]");
    ok_raw("type(content=\"say 'hi'\")", "[{\"action_type\":\"TYPING\",\"text\":\"say 'hi'\"}]");
    /* apostrophes models leave unescaped: a quote ends the string only before ',' or ')' */
    ok_raw("type(content='it's done')", "[{\"action_type\":\"TYPING\",\"text\":\"it's done\"}]");
    ok_raw("type(content='don't (yet)')", "[{\"action_type\":\"TYPING\",\"text\":\"don't (yet)\"}]");
    /* backslashes: Python's escapes decode, others stay */
    ok_raw("type(content='C:\\\\dir\\\\x')", "[{\"action_type\":\"TYPING\",\"text\":\"C:\\\\dir\\\\x\"}]");
    ok_raw("type(content='C:\\dir')", "[{\"action_type\":\"TYPING\",\"text\":\"C:\\\\dir\"}]");
    bad("type(content='\\x41')",
        "uitars: line 1: type: content: unsupported escape `\\x` (the format's: \\n \\t \\' \\\" \\\\)");
    bad("type(content='caf\xc3\xa9')",
        "uitars: line 1: type: content: byte 3 (0xc3) cannot be typed on a US keyboard (printable ASCII, \\n, \\t)");
    bad("type(content='a\\rb')",
        "uitars: line 1: type: content: byte 1 (0x0d) cannot be typed on a US keyboard (printable ASCII, \\n, \\t)");
    bad("type()", "uitars: line 1: type: content: missing");

    /* text past the core's 8192-byte limit goes out in pieces */
    size_t n = 9000;
    char *text = xmalloc(n + 64);
    strcpy(text, "type(content='");
    size_t o = strlen(text);
    memset(text + o, 'z', n);
    strcpy(text + o + n, "\\n')");
    cu_result r;
    cu_result_init(&r);
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(uitars_actions(text, &G_ID, ABS, &r, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(r.actions), 3);
    CU_ASSERT_EQUAL(json_string_length(json_object_get(json_array_get(r.actions, 0), "text")), 8192);
    CU_ASSERT_EQUAL(json_string_length(json_object_get(json_array_get(r.actions, 1), "text")), 9000 - 8192);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(r.actions, 2), "key")), "enter");
    check_valid(r.actions, &G_ID);
    cu_result_clear(&r);
    free(text);
}

static void test_wait_and_end(void)
{
    ok("wait()", "[{'action_type':'WAIT','seconds':5.0}]");
    ok_end("finished()", "[{'action_type':'DONE'}]");
    ok_end("finished(content='The file is saved. It\\'s done.')", "[{'action_type':'DONE'}]");
    ok_end("finished(content='it's done')", "[{'action_type':'DONE'}]");
    ok_end("finished(content='Totals:\n1. it's 4\n\n2. 5')", "[{'action_type':'DONE'}]"); /* dropped: may span lines */
    ok_end("call_user()", "[{'action_type':'FAIL'}]");
    ok_end("error_env()", "[{'action_type':'FAIL'}]");
    ok_end("Action: hotkey(key='ctrl s')\n\nfinished()",
           "[{'action_type':'HOTKEY','keys':['ctrl','s']},{'action_type':'DONE'}]");
    bad("finished()\n\nclick(start_box='(1,2)')", "uitars: line 3: click: comes after finished(), which ends the episode");
    bad("call_user()\nwait()", "uitars: line 2: wait: comes after call_user(), which ends the episode");
    bad("wait(seconds='5')", "uitars: line 1: wait: takes no arguments, got `seconds`");
}

static void test_answers(void)
{
    /* the prose before Action: is skipped, whatever it holds */
    ok("Thought: The button (labelled 'OK') is at the bottom. Action: click() would be wrong.\n"
       "Action: click(start_box='(100,200)')",
       CLICK_100_200);
    ok("Reflection: the menu did not open.\nAction_Summary: click the menu again.\nAction: click(start_box='(100,200)')",
       CLICK_100_200);
    ok("Action_Summary: click it\nAction:\nclick(start_box='(100,200)')", CLICK_100_200);
    ok("Thought: x\nAction\xef\xbc\x9a click(start_box='(100,200)')", CLICK_100_200); /* a full-width colon */
    ok("```\nThought: fenced, as the prompt shows the format\nAction: click(start_box='(100,200)')\n```",
       CLICK_100_200);
    ok("```python\nclick(start_box='(100,200)')\n```", CLICK_100_200);
    ok("  click(start_box='(100,200)')  # the OK button\n", CLICK_100_200);
    /* several actions: a blank line between them, as the format writes them, or one newline */
    ok("Thought: select all, then copy\nAction: hotkey(key='ctrl a')\n\nhotkey(key='ctrl c')\n\n\nwait()",
       "[{'action_type':'HOTKEY','keys':['ctrl','a']},{'action_type':'HOTKEY','keys':['ctrl','c']},"
       "{'action_type':'WAIT','seconds':5.0}]");
    ok("Action: click(start_box='(100,200)')\nAction: type(content='x')",
       "[{'action_type':'CLICK','x':100,'y':200,'button':'left','num_clicks':1},{'action_type':'TYPING','text':'x'}]");
    ok("click(\n  start_box='(100,200)'\n)", CLICK_100_200);
    bad("Thought: I am done thinking.", "uitars: the answer has no `Action:` line after its thought");
    bad("", "uitars: no action in the answer (expected e.g. `Action: click(start_box='(x,y)')`)");
    bad("Thought: x\nAction:  \n", "uitars: no action in the answer (expected e.g. `Action: click(start_box='(x,y)')`)");
    bad("click(start_box='(1,2)') click(start_box='(1,2)')",
        "uitars: line 1: click: expected a new line after `)`, got `click(start_box='(1,2)')`");
    bad("Thought: x\nAction: click(start_box='(1,2)')\n\nthen I click", "uitars: line 4: unknown action `then` (known: "
        "click, left_single, left_double, right_single, hover, drag, select, scroll, hotkey, press, keydown, keyup, "
        "release, type, wait, finished, call_user, error_env)");
    bad("```\nclick(start_box='(1,2)')\n``` and more", "uitars: line 3: expected a new line after ```, got `and more`");
}

static void test_coordinate_modes(void)
{
    /* absolute on a scaled display: the model's 1036x644 -> the 1024x640 display -> the 1280x800 screen */
    ok_in("click(start_box='(518,322)')", &G_S, ABS,
          "[{'action_type':'CLICK','x':640,'y':400,'button':'left','num_clicks':1}]");
    ok_in("click(start_box='(0,0)')", &G_S, ABS, "[{'action_type':'CLICK','x':0,'y':0,'button':'left','num_clicks':1}]");
    ok_in("click(start_box='(1035,643)')", &G_S, ABS,
          "[{'action_type':'CLICK','x':1279,'y':799,'button':'left','num_clicks':1}]");
    ok_in("drag(start_point='<point>0 0</point>', end_point='<point>518 322</point>')", &G_S, ABS,
          "[{'action_type':'MOVE_TO','x':0,'y':0},{'action_type':'DRAG_TO','x':640,'y':400}]");
    /* unscaled, the model still sees 1288x812 */
    ok_in("click(start_box='(644,406)')", &G_U, ABS,
          "[{'action_type':'CLICK','x':640,'y':400,'button':'left','num_clicks':1}]");
    ok_in("click(start_box='(1287,811)')", &G_U, ABS,
          "[{'action_type':'CLICK','x':1279,'y':799,'button':'left','num_clicks':1}]");
    /* small displays are scaled up to 100 x 28^2 pixels: 320x200 is seen as 364x224 */
    static const cu_geometry g_small = {1280, 800, 320, 200};
    ok_in("click(start_box='(182,112)')", &g_small, ABS,
          "[{'action_type':'CLICK','x':642,'y':402,'button':'left','num_clicks':1}]");
    err_msg("click(start_box='(364,0)')", &g_small, ABS,
            "uitars: line 1: click: start_box `(364,0)` is off the display (320x200, which the model sees as 364x224)",
            false);
    /* Python's round() halves to even: 1246 = 44.5 x 28 becomes 1232, not 1260 */
    static const cu_geometry g_tie = {1246, 700, 1246, 700};
    ok_in("click(start_box='(1231,0)')", &g_tie, ABS,
          "[{'action_type':'CLICK','x':1244,'y':0,'button':'left','num_clicks':1}]");
    err_msg("click(start_box='(1232,0)')", &g_tie, ABS,
            "uitars: line 1: click: start_box `(1232,0)` is off the display (1246x700, which the model sees as 1232x700)",
            false);

    /* relative: 0..1000 of the display, either way up */
    ok_in("click(start_box='(500,500)')", &G_S, REL,
          "[{'action_type':'CLICK','x':640,'y':400,'button':'left','num_clicks':1}]");
    ok_in("click(start_box='<|box_start|>(400,400)<|box_end|>')", &G_S, REL, /* 409.6, 256 on the display */
          "[{'action_type':'CLICK','x':511,'y':320,'button':'left','num_clicks':1}]");
    ok_in("click(start_box='[400,400,600,600]')", &G_S, REL,
          "[{'action_type':'CLICK','x':640,'y':400,'button':'left','num_clicks':1}]");
    ok_in("click(start_box='(1000,1000)')", &G_S, REL,
          "[{'action_type':'CLICK','x':1279,'y':799,'button':'left','num_clicks':1}]");
    ok_in("scroll(start_box='(0,0)', direction='down')", &G_U, REL,
          "[{'action_type':'MOVE_TO','x':0,'y':0},{'action_type':'SCROLL','dx':0,'dy':-5}]");
    ok_in("click(start_box='(500,500)')", &G_U, REL,
          "[{'action_type':'CLICK','x':640,'y':400,'button':'left','num_clicks':1}]");
}

static void test_off_display(void)
{
    err_msg("click(start_box='(1400,3)')", &G_S, ABS,
            "uitars: line 1: click: start_box `(1400,3)` is off the display (1024x640, which the model sees as 1036x644)",
            false);
    bad("click(start_box='(1400,3)')", "uitars: line 1: click: start_box `(1400,3)` is off the display (1120x700)");
    bad("click(start_box='(1120,3)')", "uitars: line 1: click: start_box `(1120,3)` is off the display (1120x700)");
    bad("click(start_box='(-1,3)')", "uitars: line 1: click: start_box `(-1,3)` is off the display (1120x700)");
    bad("click(point='<point>3 700</point>')", "uitars: line 1: click: point `3 700` is off the display (1120x700)");
    err_msg("click(start_box='(1001,3)')", &G_S, REL,
            "uitars: line 1: click: start_box `(1001,3)` is off the display (coordinates are 0..1000)", false);
    /* the line is the answer's */
    bad("Thought: far right\nAction: click(start_box='(1,2)')\n\ndrag(start_box='(1,2)', end_box='(9999,2)')",
        "uitars: line 4: drag: end_box `(9999,2)` is off the display (1120x700)");
}

static void test_syntax_errors(void)
{
    bad("tap(start_box='(1,2)')", "uitars: line 1: unknown action `tap` (known: click, left_single, left_double, "
                                  "right_single, hover, drag, select, scroll, hotkey, press, keydown, keyup, release, "
                                  "type, wait, finished, call_user, error_env)");
    bad_prefix("Click(start_box='(1,2)')", "uitars: line 1: unknown action `Click` (known: ");
    bad_prefix("long_press(start_box='(1,2)')", "uitars: line 1: unknown action `long_press` (known: ");
    bad("click", "uitars: line 1: click: expected `(` after the action's name");
    bad("click(start_box='(1,2)', button='left')",
        "uitars: line 1: click: unexpected argument `button` (takes: start_box)");
    bad("drag(start_box='(1,2)', x='1')", "uitars: line 1: drag: unexpected argument `x` (takes: start_box end_box)");
    bad("click()", "uitars: line 1: click: start_box: missing");
    bad("click(start_box='')", "uitars: line 1: click: start_box: missing");
    bad("drag(start_box='(1,2)')", "uitars: line 1: drag: end_box: missing");
    bad("click(point='(1,2)', start_box='(1,2)')", "uitars: line 1: click: start_box is given twice (as point and start_box)");
    bad("click('(1,2)')", "uitars: line 1: click: expected name='value' (e.g. start_box='(x,y)'), got `'(1,2)')`");
    /* quoting */
    bad("click(start_box=(1,2))", "uitars: line 1: click: start_box: expected a quoted value, got `(1,2))`");
    bad("type(content='abc)", "uitars: line 1: type: content: unterminated string (no closing ')");
    bad("type(content=\"abc')", "uitars: line 1: type: content: unterminated string (no closing \")");
    bad("type(content='abc\\", "uitars: line 1: type: content: unterminated string (no closing ')");
    bad("type(content='a', b')", "uitars: line 1: type: unexpected argument `b` (takes: content)");
    /* a quote closes only before ',' or ')', so a call cut short leaves its string open */
    bad("click(start_box='(1,2)'", "uitars: line 1: click: start_box: unterminated string (no closing ')");
    bad("click(start_box='(1,2)' x", "uitars: line 1: click: start_box: unterminated string (no closing ')");
    bad("click(start_box='(1,2)',", "uitars: line 1: click: expected name='value' (e.g. start_box='(x,y)'), got `the "
                                    "end of the answer`");
    bad("click(start_box='(1,2)', end_box='(1,2)' x)",
        "uitars: line 1: click: unexpected argument `end_box` (takes: start_box)");
    bad_prefix("drag(start_box='(1,2)' end_box='(1,2)')", /* the message shows what was taken as the value */
               "uitars: line 1: drag: start_box: `(1,2)' end_box='(1,2)` is not a point");
    bad("drag(start_box=\"(1,2)\" end_box='(1,2)')", "uitars: line 1: drag: start_box: unterminated string (no closing \")");
    bad("click(start_box = )", "uitars: line 1: click: start_box: expected a quoted value, got `)`");
    bad("click(start_box)", "uitars: line 1: click: expected `=` after `start_box`, got `)`");
    /* points */
    bad("click(start_box='(1,2,3)')",
        "uitars: line 1: click: start_box: `(1,2,3)` is not a point (expected '(x,y)', '[x1,y1,x2,y2]' or '<point>x y</point>')");
    bad_prefix("click(start_box='the OK button')", "uitars: line 1: click: start_box: `the OK button` is not a point");
    bad_prefix("click(start_box='((1,2))')", "uitars: line 1: click: start_box: `((1,2))` is not a point");
    bad_prefix("click(start_box='(1,2]')", "uitars: line 1: click: start_box: `(1,2]` is not a point");
    bad_prefix("click(start_box='(1,2')", "uitars: line 1: click: start_box: `(1,2` is not a point");
    bad_prefix("click(start_box='(1..2,3)')", "uitars: line 1: click: start_box: `(1..2,3)` is not a point");
    bad_prefix("click(start_box='(1e3,3)')", "uitars: line 1: click: start_box: `(1e3,3)` is not a point");
    /* what a message quotes is one printable line */
    bad("\x01" "click()", "uitars: line 1: expected an action such as click(start_box='(x,y)'), got `?click()`");
    bad_prefix("click(start_box='\x7f\x80')", "uitars: line 1: click: start_box: `??` is not a point");
}

static void test_limits(void)
{
    /* oversize */
    char *big = xmalloc(UITARS_TEXT_MAX + 2);
    memset(big, ' ', UITARS_TEXT_MAX + 1);
    big[UITARS_TEXT_MAX + 1] = '\0';
    bad(big, "uitars: the answer is 65537 bytes, more than the limit of 65536");
    memcpy(big, "wait()", 6); /* exactly the limit is fine */
    big[UITARS_TEXT_MAX] = '\0';
    ok(big, "[{'action_type':'WAIT','seconds':5.0}]");
    free(big);

    /* at most CU_ACTIONS_MAX actions: 128 drags are 256, one more wait is too many */
    const char *drag = "drag(start_box='(1,2)', end_box='(3,4)')\n";
    char *text = xmalloc(129 * strlen(drag) + 16);
    text[0] = '\0';
    for (int i = 0; i < 128; i++)
        strcat(text, drag);
    cu_result r;
    cu_result_init(&r);
    em_err err = {0};
    CU_ASSERT_EQUAL(uitars_actions(text, &G_ID, ABS, &r, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(r.actions), CU_ACTIONS_MAX);
    cu_result_clear(&r);
    strcat(text, "wait()");
    cu_result_init(&r);
    CU_ASSERT_EQUAL(uitars_actions(text, &G_ID, ABS, &r, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "uitars: line 129: wait: the reply expands to more than 256 actions");
    CU_ASSERT_EQUAL(json_array_size(r.actions), 0); /* all or nothing */
    cu_result_clear(&r);
    /* the limit counts what the result already held */
    text[strlen(text) - strlen("wait()")] = '\0';
    bad(text, "uitars: line 128: drag: the reply expands to more than 256 actions");
    free(text);

    /* more arguments than any action takes */
    bad("click(start_box='1', start_box='2', start_box='3', start_box='4', start_box='5', start_box='6', "
        "start_box='7', start_box='8', start_box='9')",
        "uitars: line 1: click: start_box is given twice (as start_box and start_box)");
    bad("click(a1='', a2='')", "uitars: line 1: click: unexpected argument `a1` (takes: start_box)");

    /* no answer, no geometry */
    em_err e2 = {0};
    cu_result r2;
    cu_result_init(&r2);
    CU_ASSERT_EQUAL(uitars_actions(NULL, &G_ID, ABS, &r2, &e2), -1);
    CU_ASSERT_STRING_EQUAL(e2.msg, "uitars: no answer");
    CU_ASSERT_EQUAL(uitars_actions("wait()", NULL, ABS, &r2, &e2), -1);
    CU_ASSERT_EQUAL(json_array_size(r2.actions), 0);
    cu_result_clear(&r2);
}

static CU_TestInfo tests[] = {
    {"click and its point forms", test_click_forms},
    {"double, right, hover, drag", test_other_pointer_actions},
    {"scroll", test_scroll},
    {"hotkey, press, keydown, keyup", test_keys},
    {"type: escapes, Enter, quotes", test_type},
    {"wait, finished, call_user", test_wait_and_end},
    {"answers: thought, markers, several actions", test_answers},
    {"absolute and relative coordinates, scaled", test_coordinate_modes},
    {"points off the display", test_off_display},
    {"syntax errors", test_syntax_errors},
    {"limits", test_limits},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("uitars", tests);
}

/* computer_13 parsing and validation, key names → keysyms and scancodes. */
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/vm/keys.h"
#include "envmgr/vm/pointer_axis.h"
#include "helpers/cunit_main.h"

#define W 1280
#define H 800

static int parse(const char *text, action *a, em_err *err)
{
    memset(err, 0, sizeof *err);
    return action_parse_text(text, W, H, a, err);
}

/* Every bad action names its field and exits with the usage code. */
static void expect_error(const char *text, const char *needle)
{
    action a;
    em_err err;
    int rc = parse(text, &a, &err);
    CU_ASSERT_EQUAL(rc, -1);
    if (rc == 0) {
        fprintf(stderr, "accepted: %s\n", text);
        action_free(&a);
        return;
    }
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    CU_ASSERT_PTR_NULL(strchr(err.msg, '\n'));
    if (!strstr(err.msg, needle))
        fprintf(stderr, "for %s: expected `%s` in `%s`\n", text, needle, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
}

static void test_every_type_parses(void)
{
    const char *ok[] = {
        "{\"action_type\":\"MOVE_TO\",\"x\":0,\"y\":0}",
        "{\"action_type\":\"CLICK\"}",
        "{\"action_type\":\"CLICK\",\"x\":1279,\"y\":799,\"button\":\"right\",\"num_clicks\":2}",
        "{\"action_type\":\"CLICK\",\"x\":10.0,\"y\":20.4}",
        "{\"action_type\":\"MOUSE_DOWN\"}",
        "{\"action_type\":\"MOUSE_UP\",\"button\":\"middle\"}",
        "{\"action_type\":\"RIGHT_CLICK\",\"x\":5,\"y\":5}",
        "{\"action_type\":\"DOUBLE_CLICK\"}",
        "{\"action_type\":\"DRAG_TO\",\"x\":100,\"y\":200}",
        "{\"action_type\":\"SCROLL\",\"dx\":0,\"dy\":-3}",
        "{\"action_type\":\"TYPING\",\"text\":\"Hello, World! ~`|\\\\{}<>?\\n\\t\"}",
        "{\"action_type\":\"PRESS\",\"key\":\"enter\"}",
        "{\"action_type\":\"KEY_DOWN\",\"key\":\"shift\"}",
        "{\"action_type\":\"KEY_UP\",\"key\":\"shift\"}",
        "{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"alt\",\"t\"]}",
        "{\"action_type\":\"WAIT\"}",
        "{\"action_type\":\"WAIT\",\"seconds\":0.5}",
        "{\"action_type\":\"FAIL\"}",
        "{\"action_type\":\"DONE\"}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        action a;
        em_err err;
        int rc = parse(ok[i], &a, &err);
        if (rc)
            fprintf(stderr, "rejected %s: %s\n", ok[i], err.msg);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc == 0) {
            /* The canonical form parses again to the same thing. */
            json_t *j = action_to_json(&a);
            action b;
            CU_ASSERT_EQUAL(action_parse(j, W, H, &b, &err), 0);
            CU_ASSERT_EQUAL(a.type, b.type);
            CU_ASSERT_EQUAL(a.x, b.x);
            action_free(&b);
            json_decref(j);
            action_free(&a);
        }
    }
}

static void test_field_values(void)
{
    action a;
    em_err err;
    CU_ASSERT_EQUAL_FATAL(parse("{\"action_type\":\"CLICK\",\"x\":10.0,\"y\":20.4}", &a, &err), 0);
    CU_ASSERT(a.has_xy);
    CU_ASSERT_EQUAL(a.x, 10);
    CU_ASSERT_EQUAL(a.y, 20);
    CU_ASSERT_EQUAL(a.num_clicks, 1);
    CU_ASSERT_EQUAL(a.button, BUTTON_LEFT);
    action_free(&a);
    CU_ASSERT_EQUAL_FATAL(parse("{\"action_type\":\"DOUBLE_CLICK\",\"x\":1,\"y\":2}", &a, &err), 0);
    CU_ASSERT_EQUAL(a.num_clicks, 2);
    action_free(&a);
    CU_ASSERT_EQUAL_FATAL(parse("{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"shift\",\"esc\"]}", &a, &err), 0);
    CU_ASSERT_EQUAL(a.nkeys, 3);
    CU_ASSERT_EQUAL(a.keys[0].keysym, 0xffe3u);
    CU_ASSERT_EQUAL(a.keys[2].keysym, 0xff1bu);
    CU_ASSERT(action_is_terminal(&a) == false);
    action_free(&a);
    CU_ASSERT_EQUAL_FATAL(parse("{\"action_type\":\"DONE\"}", &a, &err), 0);
    CU_ASSERT(action_is_terminal(&a));
    action_free(&a);
}

static void test_errors_name_the_field(void)
{
    expect_error("not json", "action: invalid JSON");
    expect_error("[1]", "action: expected a JSON object");
    expect_error("{}", "action.action_type: missing");
    expect_error("{\"action_type\":7}", "action.action_type: expected a string");
    expect_error("{\"action_type\":\"JUMP\"}", "action.action_type: unknown action type `JUMP`");
    expect_error("{\"action_type\":\"MOVE_TO\",\"x\":1}", "action.y: missing");
    expect_error("{\"action_type\":\"MOVE_TO\"}", "action.x: missing");
    expect_error("{\"action_type\":\"CLICK\",\"x\":1280,\"y\":5}", "action.x: 1280 is off-screen (0..1279)");
    expect_error("{\"action_type\":\"CLICK\",\"x\":5,\"y\":-1}", "action.y: -1 is off-screen");
    expect_error("{\"action_type\":\"CLICK\",\"x\":\"5\",\"y\":5}", "action.x: expected a number, got string");
    expect_error("{\"action_type\":\"CLICK\",\"button\":\"fourth\"}", "action.button: unknown button");
    expect_error("{\"action_type\":\"CLICK\",\"num_clicks\":9}", "action.num_clicks: 9 is out of range");
    expect_error("{\"action_type\":\"CLICK\",\"colour\":1}", "action.colour: unknown field");
    expect_error("{\"action_type\":\"DONE\",\"x\":1}", "action.x: unknown field");
    expect_error("{\"action_type\":\"TYPING\"}", "action.text: missing");
    expect_error("{\"action_type\":\"TYPING\",\"text\":\"caf\\u00e9\"}", "action.text: character 0xc3 at offset 3");
    expect_error("{\"action_type\":\"PRESS\",\"key\":\"hyper\"}", "action.key: unknown key `hyper`");
    expect_error("{\"action_type\":\"HOTKEY\",\"keys\":[]}", "action.keys: empty");
    expect_error("{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",3]}", "action.keys[1]: expected a string");
    expect_error("{\"action_type\":\"HOTKEY\",\"keys\":\"ctrl+c\"}", "action.keys: expected an array");
    expect_error("{\"action_type\":\"SCROLL\"}", "SCROLL needs dx or dy");
    expect_error("{\"action_type\":\"SCROLL\",\"dy\":1.5}", "action.dy: expected a whole number");
    expect_error("{\"action_type\":\"WAIT\",\"seconds\":600}", "action.seconds: 600 is out of range");
    expect_error("{\"action_type\":\"CLICK\",\"x\":1,\"x\":2,\"y\":1}", "invalid JSON");
}

static void test_text_limit(void)
{
    size_t n = ACTION_TEXT_MAX + 1;
    char *big = malloc(n + 64);
    strcpy(big, "{\"action_type\":\"TYPING\",\"text\":\"");
    size_t off = strlen(big);
    memset(big + off, 'a', n);
    strcpy(big + off + n, "\"}");
    expect_error(big, "more than the limit");
    free(big);
}

static void test_keys(void)
{
    key_code k;
    CU_ASSERT_EQUAL(key_lookup("enter", &k), 0);
    CU_ASSERT_EQUAL(k.keysym, 0xff0du);
    CU_ASSERT_EQUAL(k.scancode, 0x1c);
    CU_ASSERT_EQUAL(key_lookup("Return", &k), 0); /* case-insensitive names */
    CU_ASSERT_EQUAL(key_lookup("ESC", &k), 0);
    CU_ASSERT_EQUAL(k.keysym, 0xff1bu);
    for (int i = 1; i <= 12; i++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", i);
        CU_ASSERT_EQUAL(key_lookup(name, &k), 0);
        CU_ASSERT_EQUAL(k.keysym, 0xffbeu + (unsigned)i - 1);
    }
    const char *names[] = {"ctrl", "alt", "shift", "tab", "backspace", "up", "down", "left", "right", "home",
                           "end", "pageup", "pagedown", "delete", "insert", "space", "win", "capslock"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        CU_ASSERT_EQUAL(key_lookup(names[i], &k), 0);
        CU_ASSERT(k.scancode != 0);
    }
    CU_ASSERT_EQUAL(key_lookup("a", &k), 0);
    CU_ASSERT_EQUAL(k.keysym, 'a');
    CU_ASSERT_EQUAL(k.scancode, 0x1e);
    CU_ASSERT_FALSE(k.shift);
    CU_ASSERT_EQUAL(key_lookup("A", &k), 0); /* a single character keeps its case */
    CU_ASSERT_EQUAL(k.keysym, 'A');
    CU_ASSERT(k.shift);
    CU_ASSERT_EQUAL(key_lookup("nosuchkey", &k), -1);
    CU_ASSERT_EQUAL(key_lookup("", &k), -1);
    CU_ASSERT(key_is_modifier(0xffe3));
    CU_ASSERT_FALSE(key_is_modifier('a'));
}

/* Every printable ASCII character types on a US layout, shifted ones with Shift. */
static void test_every_printable_char(void)
{
    const char *shifted = "~!@#$%^&*()_+{}|:\"<>?ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    for (int c = 0x20; c < 0x7f; c++) {
        key_code k;
        CU_ASSERT_EQUAL(key_for_char((unsigned char)c, &k), 0);
        CU_ASSERT_EQUAL(k.keysym, (unsigned)c);
        CU_ASSERT(k.scancode != 0);
        CU_ASSERT_EQUAL(k.shift, strchr(shifted, c) != NULL);
    }
    key_code k;
    CU_ASSERT_EQUAL(key_for_char('\n', &k), 0);
    CU_ASSERT_EQUAL(k.keysym, 0xff0du);
    CU_ASSERT_EQUAL(key_for_char(0x7f, &k), -1);
    CU_ASSERT_EQUAL(key_for_char(0xe9, &k), -1);
    /* '1' and '!' share a key; so do '/' and '?'. */
    key_code one, bang;
    key_for_char('1', &one);
    key_for_char('!', &bang);
    CU_ASSERT_EQUAL(one.scancode, bang.scancode);
}

/* Every pixel but the last of each axis is reached exactly through QEMU's tablet scaling, for the
 * screen sizes guests have; the wire position stays on the screen. */
static void test_pointer_axis(void)
{
    const int sizes[] = {640, 800, 1024, 1080, 1280, 1920, 2560, 3840};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s], exact = 0;
        for (int pos = 0; pos < n; pos++) {
            int wire = pointer_axis_wire(pos, n);
            CU_ASSERT(wire >= 0 && wire < n);
            exact += pointer_axis_landing(wire, n) == pos;
        }
        CU_ASSERT_EQUAL(exact, n - 1);
        CU_ASSERT_EQUAL(pointer_axis_landing(pointer_axis_wire(n - 1, n), n), n - 2);
    }
    /* as measured on the guest (1280x800) before the fix: a position sent as is lands one short */
    CU_ASSERT_EQUAL(pointer_axis_landing(325, 1280), 324);
    CU_ASSERT_EQUAL(pointer_axis_landing(pointer_axis_wire(325, 1280), 1280), 325);
    CU_ASSERT_EQUAL(pointer_axis_wire(-5, 1280), 0);
    CU_ASSERT_EQUAL(pointer_axis_wire(5000, 1280), 1279);
}

static CU_TestInfo tests[] = {
    {"every action type parses and round-trips", test_every_type_parses},
    {"parsed field values", test_field_values},
    {"errors name the field (exit 2)", test_errors_name_the_field},
    {"TYPING text limit", test_text_limit},
    {"key names", test_keys},
    {"every printable character", test_every_printable_char},
    {"pointer positions land on the pixel named", test_pointer_axis},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("actions", tests);
}

/* Today's model action formats → computer_13 actions, through the one decoder every way in uses
 * (action_reply_decode): Anthropic's computer tool, OpenAI's computer-use tool, with the screen scaling
 * each model sees; their refusals (exact messages); and the answers the tools expect back. Fixtures
 * follow the vendors' docs: Anthropic's "Computer use tool" page (computer_20250124 / computer_20251124
 * actions and fields) and OpenAI's "Computer use" guide (computer_call items, their action types). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/action_reply.h"
#include "envmgr/base/base64.h"
#include "envmgr/base/png.h"
#include "envmgr/base/util.h"
#include "tests/unit/helpers/cunit_main.h"

#define W 1280
#define H 800

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fprintf(stderr, "\n  bad fixture: %s: %s\n", text, je.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    return j;
}

/* reply must decode to exactly the actions in `want`. */
static void check_ok(const char *reply, const char *want)
{
    json_t *r = parse(reply), *exp = parse(want);
    action_reply out;
    em_err err = {0};
    int rc = action_reply_decode(r, W, H, &out, &err);
    if (rc < 0)
        fprintf(stderr, "\n  reply: %s\n  error: %s\n", reply, err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    if (!json_equal(out.actions, exp)) {
        char *s = json_dumps(out.actions, JSON_COMPACT);
        fprintf(stderr, "\n  reply: %s\n  got:  %s\n  want: %s\n", reply, s, want);
        free(s);
    }
    CU_ASSERT_TRUE(json_equal(out.actions, exp));
    action_reply_free(&out);
    json_decref(r);
    json_decref(exp);
}

static void check_err(const char *reply, const char *msg)
{
    json_t *r = parse(reply);
    action_reply out;
    em_err err = {0};
    int rc = action_reply_decode(r, W, H, &out, &err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    if (strcmp(err.msg, msg))
        fprintf(stderr, "\n  reply: %s\n  got:  %s\n  want: %s\n", reply, err.msg, msg);
    CU_ASSERT_STRING_EQUAL(err.msg, msg);
    CU_ASSERT_PTR_NULL(out.actions);
    json_decref(r);
}

static void test_anthropic_clicks(void)
{
    /* display 1024x640 of a 1280x800 screen: the centre of display pixel (512, 320) is screen (640, 400) */
    check_ok("{\"anthropic\": {\"action\": \"left_click\", \"coordinate\": [512, 320]}, \"display\": [1024, 640]}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 640, \"y\": 400},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 1}]");
    check_ok("{\"anthropic\": {\"action\": \"right_click\", \"coordinate\": [0, 0]}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 0, \"y\": 0},"
             " {\"action_type\": \"CLICK\", \"button\": \"right\", \"num_clicks\": 1}]");
    check_ok("{\"anthropic\": {\"action\": \"middle_click\"}}",
             "[{\"action_type\": \"CLICK\", \"button\": \"middle\", \"num_clicks\": 1}]");
    check_ok("{\"anthropic\": {\"action\": \"double_click\", \"coordinate\": [1279, 799]}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 1279, \"y\": 799},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 2}]");
    /* a click with modifier keys held: pressed before, released after, in reverse */
    check_ok("{\"anthropic\": {\"action\": \"triple_click\", \"coordinate\": [10, 20], \"text\": \"ctrl+shift\"}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 10, \"y\": 20},"
             " {\"action_type\": \"KEY_DOWN\", \"key\": \"ctrl\"}, {\"action_type\": \"KEY_DOWN\", \"key\": \"shift\"},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 3},"
             " {\"action_type\": \"KEY_UP\", \"key\": \"shift\"}, {\"action_type\": \"KEY_UP\", \"key\": \"ctrl\"}]");
    check_ok("{\"anthropic\": {\"action\": \"mouse_move\", \"coordinate\": [300, 200]}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 300, \"y\": 200}]");
    check_ok("{\"anthropic\": {\"action\": \"left_mouse_down\"}}", "[{\"action_type\": \"MOUSE_DOWN\"}]");
    check_ok("{\"anthropic\": {\"action\": \"left_mouse_up\", \"coordinate\": [5, 6]}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 5, \"y\": 6}, {\"action_type\": \"MOUSE_UP\"}]");
    check_ok("{\"anthropic\": {\"action\": \"left_click_drag\", \"start_coordinate\": [10, 10], \"coordinate\": [200, 300]}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 10, \"y\": 10}, {\"action_type\": \"DRAG_TO\", \"x\": 200, \"y\": 300}]");
    /* the tool_use block as the Messages API returns it, not only its input */
    check_ok("{\"anthropic\": {\"type\": \"tool_use\", \"id\": \"toolu_01A\", \"name\": \"computer\","
             " \"input\": {\"action\": \"left_click\", \"coordinate\": [100, 50]}}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 100, \"y\": 50},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 1}]");
}

static void test_anthropic_keys_and_time(void)
{
    check_ok("{\"anthropic\": {\"action\": \"key\", \"text\": \"ctrl+s\"}}",
             "[{\"action_type\": \"HOTKEY\", \"keys\": [\"ctrl\", \"s\"]}]");
    /* xdotool's names; several combos in one text go one after another */
    check_ok("{\"anthropic\": {\"action\": \"key\", \"text\": \"Return\"}}",
             "[{\"action_type\": \"PRESS\", \"key\": \"return\"}]");
    check_ok("{\"anthropic\": {\"action\": \"key\", \"text\": \"alt+Tab Page_Down KP_5 super\"}}",
             "[{\"action_type\": \"HOTKEY\", \"keys\": [\"alt\", \"tab\"]}, {\"action_type\": \"PRESS\", \"key\": \"pagedown\"},"
             " {\"action_type\": \"PRESS\", \"key\": \"num5\"}, {\"action_type\": \"PRESS\", \"key\": \"super\"}]");
    check_ok("{\"anthropic\": {\"action\": \"key\", \"text\": \"ctrl+plus\"}}",
             "[{\"action_type\": \"HOTKEY\", \"keys\": [\"ctrl\", \"+\"]}]");
    check_ok("{\"anthropic\": {\"action\": \"hold_key\", \"text\": \"shift\", \"duration\": 1.5}}",
             "[{\"action_type\": \"KEY_DOWN\", \"key\": \"shift\"}, {\"action_type\": \"WAIT\", \"seconds\": 1.5},"
             " {\"action_type\": \"KEY_UP\", \"key\": \"shift\"}]");
    check_ok("{\"anthropic\": {\"action\": \"type\", \"text\": \"Hello, world!\\n\"}}",
             "[{\"action_type\": \"TYPING\", \"text\": \"Hello, world!\\n\"}]");
    check_ok("{\"anthropic\": {\"action\": \"wait\", \"duration\": 90}}",
             "[{\"action_type\": \"WAIT\", \"seconds\": 60.0}, {\"action_type\": \"WAIT\", \"seconds\": 30.0}]");
    check_ok("{\"anthropic\": {\"action\": \"scroll\", \"coordinate\": [640, 400], \"scroll_direction\": \"down\","
             " \"scroll_amount\": 3}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 640, \"y\": 400}, {\"action_type\": \"SCROLL\", \"dy\": -3}]");
    check_ok("{\"anthropic\": {\"action\": \"scroll\", \"scroll_direction\": \"left\", \"scroll_amount\": 2,"
             " \"text\": \"shift\"}}",
             "[{\"action_type\": \"KEY_DOWN\", \"key\": \"shift\"}, {\"action_type\": \"SCROLL\", \"dx\": -2},"
             " {\"action_type\": \"KEY_UP\", \"key\": \"shift\"}]");
}

/* A look (screenshot, cursor_position, zoom) is one WAIT of 0 s, and says which answer it wants. */
static void test_anthropic_looks(void)
{
    check_ok("{\"anthropic\": {\"action\": \"screenshot\"}}", "[{\"action_type\": \"WAIT\", \"seconds\": 0.0}]");
    const char *looks[] = {"{\"anthropic\": {\"action\": \"cursor_position\"}}",
                           "{\"anthropic\": {\"action\": \"zoom\", \"region\": [0, 0, 512, 320]}, \"display\": [1024, 640]}"};
    action_reply out;
    em_err err = {0};
    json_t *r = parse(looks[0]);
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL(out.answer, CU_ANSWER_CURSOR);
    action_reply_free(&out);
    json_decref(r);
    r = parse(looks[1]);
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL(out.answer, CU_ANSWER_ZOOM);
    CU_ASSERT(out.zoom[0] == 0 && out.zoom[1] == 0 && out.zoom[2] == 640 && out.zoom[3] == 400);
    action_reply_free(&out);
    json_decref(r);
}

static void test_anthropic_refusals(void)
{
    check_err("{\"anthropic\": {\"action\": \"left_click\", \"coordinate\": [1024, 0]}, \"display\": [1024, 640]}",
              "input.coordinate: [1024, 0] is off the display (1024x640)");
    check_err("{\"anthropic\": {\"action\": \"fly\"}}", "input.action: unknown action `fly`");
    check_err("{\"anthropic\": {\"action\": \"left_click\", \"speed\": 3}}", "input.speed: unknown field");
    check_err("{\"anthropic\": {\"action\": \"key\", \"text\": \"ctrl+hyper\"}}", "input.text: unknown key `hyper`");
    check_err("{\"anthropic\": {\"action\": \"type\", \"text\": \"caf\\u00e9\"}}",
              "input.text: byte 3 (0xc3) cannot be typed on a US keyboard (printable ASCII, \\n, \\t)");
    check_err("{\"anthropic\": {\"action\": \"scroll\", \"scroll_direction\": \"sideways\", \"scroll_amount\": 1}}",
              "input.scroll_direction: `sideways` is not up, down, left or right");
    check_err("{\"anthropic\": {\"action\": \"wait\", \"duration\": 1000}}",
              "input.duration: 1000 is out of range (0..100 seconds)");
    check_err("{\"anthropic\": {\"action\": \"zoom\", \"region\": [10, 10, 5, 20]}}",
              "input.region: [10, 10, 5, 20] is empty (x0 < x1 and y0 < y1)");
    check_err("{\"anthropic\": {\"action\": \"left_click_drag\"}}", "input.coordinate: missing");
    check_err("{\"anthropic\": {\"action\": \"screenshot\"}, \"display\": [5000, 5000]}",
              "display: [5000, 5000] must be between a quarter and twice the screen's size (1280x800)");
    check_err("{\"anthropic\": {\"action\": \"screenshot\"}, \"shots\": 2}", "shots: unknown field");
    check_err("{\"anthropic\": \"left_click\"}", "input: expected the tool_use block or its input (an object), got string");
}

static void test_openai(void)
{
    check_ok("{\"openai\": {\"type\": \"click\", \"button\": \"left\", \"x\": 156, \"y\": 50}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 156, \"y\": 50},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 1}]");
    check_ok("{\"openai\": {\"type\": \"click\", \"button\": \"wheel\", \"x\": 1, \"y\": 2}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 1, \"y\": 2},"
             " {\"action_type\": \"CLICK\", \"button\": \"middle\", \"num_clicks\": 1}]");
    check_ok("{\"openai\": {\"type\": \"click\", \"button\": \"back\", \"x\": 1, \"y\": 2}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 1, \"y\": 2}, {\"action_type\": \"PRESS\", \"key\": \"browserback\"}]");
    check_ok("{\"openai\": {\"type\": \"double_click\", \"x\": 640, \"y\": 400}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 640, \"y\": 400},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 2}]");
    check_ok("{\"openai\": {\"type\": \"keypress\", \"keys\": [\"CTRL\", \"C\"]}}",
             "[{\"action_type\": \"HOTKEY\", \"keys\": [\"ctrl\", \"c\"]}]");
    check_ok("{\"openai\": {\"type\": \"keypress\", \"keys\": [\"ENTER\"]}}", "[{\"action_type\": \"PRESS\", \"key\": \"enter\"}]");
    check_ok("{\"openai\": {\"type\": \"keypress\", \"keys\": [\"ArrowLeft\"]}}", "[{\"action_type\": \"PRESS\", \"key\": \"left\"}]");
    /* pixels of scroll to wheel notches (100 px each, at least one); scroll_y > 0 scrolls down */
    check_ok("{\"openai\": {\"type\": \"scroll\", \"x\": 640, \"y\": 400, \"scroll_x\": 0, \"scroll_y\": 300}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 640, \"y\": 400}, {\"action_type\": \"SCROLL\", \"dx\": 0, \"dy\": -3}]");
    check_ok("{\"openai\": {\"type\": \"scroll\", \"x\": 0, \"y\": 0, \"scroll_x\": -20, \"scroll_y\": 0}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 0, \"y\": 0}, {\"action_type\": \"SCROLL\", \"dx\": -1, \"dy\": 0}]");
    check_ok("{\"openai\": {\"type\": \"drag\", \"path\": [{\"x\": 10, \"y\": 10}, {\"x\": 50, \"y\": 60}, {\"x\": 90, \"y\": 99}]}}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 10, \"y\": 10}, {\"action_type\": \"MOUSE_DOWN\"},"
             " {\"action_type\": \"MOVE_TO\", \"x\": 50, \"y\": 60}, {\"action_type\": \"MOVE_TO\", \"x\": 90, \"y\": 99},"
             " {\"action_type\": \"MOUSE_UP\"}]");
    check_ok("{\"openai\": {\"type\": \"move\", \"x\": 3, \"y\": 4}}", "[{\"action_type\": \"MOVE_TO\", \"x\": 3, \"y\": 4}]");
    check_ok("{\"openai\": {\"type\": \"type\", \"text\": \"hello\"}}", "[{\"action_type\": \"TYPING\", \"text\": \"hello\"}]");
    check_ok("{\"openai\": {\"type\": \"wait\"}}", "[{\"action_type\": \"WAIT\", \"seconds\": 1.0}]");
    check_ok("{\"openai\": {\"type\": \"screenshot\"}}", "[{\"action_type\": \"WAIT\", \"seconds\": 0.0}]");
    /* a computer_call item, with one action or a batch of them */
    check_ok("{\"openai\": {\"type\": \"computer_call\", \"id\": \"cu_1\", \"call_id\": \"call_1\", \"status\": \"completed\","
             " \"pending_safety_checks\": [], \"action\": {\"type\": \"type\", \"text\": \"x\"}}}",
             "[{\"action_type\": \"TYPING\", \"text\": \"x\"}]");
    check_ok("{\"openai\": {\"type\": \"computer_call\", \"call_id\": \"call_2\", \"actions\": ["
             "{\"type\": \"click\", \"button\": \"left\", \"x\": 512, \"y\": 320}, {\"type\": \"type\", \"text\": \"ok\"},"
             " {\"type\": \"keypress\", \"keys\": [\"ENTER\"]}]}, \"display\": [1024, 640]}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 640, \"y\": 400},"
             " {\"action_type\": \"CLICK\", \"button\": \"left\", \"num_clicks\": 1},"
             " {\"action_type\": \"TYPING\", \"text\": \"ok\"}, {\"action_type\": \"PRESS\", \"key\": \"enter\"}]");
    check_ok("{\"openai\": [{\"type\": \"move\", \"x\": 1, \"y\": 1}, {\"type\": \"wait\"}]}",
             "[{\"action_type\": \"MOVE_TO\", \"x\": 1, \"y\": 1}, {\"action_type\": \"WAIT\", \"seconds\": 1.0}]");
}

static void test_openai_refusals(void)
{
    check_err("{\"openai\": {\"type\": \"click\", \"button\": \"side\", \"x\": 1, \"y\": 1}}",
              "action.button: `side` is not left, right, wheel, back or forward");
    check_err("{\"openai\": {\"type\": \"teleport\"}}", "action.type: unknown action `teleport`");
    check_err("{\"openai\": {\"type\": \"click\", \"x\": 1280, \"y\": 1}}", "action: [1280, 1] is off the display (1280x800)");
    check_err("{\"openai\": {\"type\": \"drag\", \"path\": [{\"x\": 1, \"y\": 1}]}}", "action.path: expected 2..64 points");
    check_err("{\"openai\": {\"type\": \"keypress\", \"keys\": []}}", "action.keys: at least one key");
    check_err("{\"openai\": {\"type\": \"scroll\", \"x\": 1, \"y\": 1, \"scroll_x\": 0}}", "action.scroll_y: missing");
    check_err("{\"openai\": {\"type\": \"computer_call\", \"actions\": [{\"type\": \"move\", \"x\": 1, \"y\": 1},"
              " {\"type\": \"move\", \"x\": -1, \"y\": 1}]}}",
              "actions[1]: [-1, 1] is off the display (1280x800)");
    check_err("{\"openai\": {\"type\": \"message\", \"action\": {\"type\": \"wait\"}}}",
              "type: `message` is not a computer_call item");
    check_err("{\"openai\": []}", "actions: expected 1..64 action objects");
}

static void test_other_spaces(void)
{
    check_ok("{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 2}", "[{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 2}]");
    check_ok("{\"pyautogui\": \"pyautogui.press('enter')\"}", "[{\"action_type\": \"PRESS\", \"key\": \"enter\"}]");
    check_err("{\"action_type\": \"CLICK\", \"x\": 1280, \"y\": 2}", "action.x: 1280 is off-screen (0..1279)");
    check_err("{\"pyautogui\": 3}", "pyautogui: expected a string of code");
}

/* A w x h frame: left half red, right half blue. */
static uint8_t *two_halves(void)
{
    uint8_t *px = xcalloc((size_t)W * H, 4);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            px[((size_t)y * W + x) * 4 + (x < W / 2 ? 0 : 2)] = 255;
    return px;
}

static void image_size(const char *b64, int *w, int *h)
{
    size_t len;
    unsigned char *png = NULL;
    uint8_t *px = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(base64_decode(b64, &png, &len), 0);
    CU_ASSERT_EQUAL(png_decode_mem(png, len, &px, w, h, &err), 0);
    free(px);
    free(png);
}

/* The answers the tools expect: the frame scaled to the display, as an image block or a data URL. */
static void test_answers(void)
{
    _cleanup_free_ uint8_t *px = two_halves();
    json_t *r = parse("{\"anthropic\": {\"type\": \"tool_use\", \"id\": \"toolu_9\", \"name\": \"computer\","
                      " \"input\": {\"action\": \"screenshot\"}}, \"display\": [640, 400]}");
    action_reply out;
    em_err err = {0};
    json_t *answer = NULL;
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL_FATAL(action_reply_answer(&out, px, 0, 0, &answer, &err), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(answer, "type")), "tool_result");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(answer, "tool_use_id")), "toolu_9");
    json_t *block = json_array_get(json_object_get(answer, "content"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(block, "type")), "image");
    json_t *src = json_object_get(block, "source");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(src, "media_type")), "image/png");
    int w = 0, h = 0;
    image_size(json_string_value(json_object_get(src, "data")), &w, &h);
    CU_ASSERT(w == 640 && h == 400);
    json_decref(answer);
    action_reply_free(&out);
    json_decref(r);

    r = parse("{\"anthropic\": {\"action\": \"cursor_position\"}, \"display\": [640, 400]}");
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL_FATAL(action_reply_answer(&out, px, 640, 401, &answer, &err), 0);
    block = json_array_get(json_object_get(answer, "content"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(block, "text")), "X=320,Y=200");
    json_decref(answer);
    action_reply_free(&out);
    json_decref(r);

    r = parse("{\"openai\": {\"type\": \"computer_call\", \"call_id\": \"call_7\", \"action\": {\"type\": \"screenshot\"}}}");
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL_FATAL(action_reply_answer(&out, px, 0, 0, &answer, &err), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(answer, "type")), "computer_call_output");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(answer, "call_id")), "call_7");
    const char *url = json_string_value(json_object_get(json_object_get(answer, "output"), "image_url"));
    CU_ASSERT_FATAL(url && !strncmp(url, "data:image/png;base64,", 22));
    image_size(url + 22, &w, &h);
    CU_ASSERT(w == W && h == H);
    json_decref(answer);
    action_reply_free(&out);
    json_decref(r);

    /* a zoom: the region, enlarged to fit the display with its shape */
    r = parse("{\"anthropic\": {\"action\": \"zoom\", \"region\": [600, 0, 700, 100]}}");
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL_FATAL(action_reply_answer(&out, px, 0, 0, &answer, &err), 0);
    src = json_object_get(json_array_get(json_object_get(answer, "content"), 0), "source");
    image_size(json_string_value(json_object_get(src, "data")), &w, &h);
    CU_ASSERT(w == 800 && h == 800);
    json_decref(answer);
    action_reply_free(&out);
    json_decref(r);

    /* the other spaces have no answer of their own */
    r = parse("{\"action_type\": \"WAIT\"}");
    CU_ASSERT_EQUAL_FATAL(action_reply_decode(r, W, H, &out, &err), 0);
    CU_ASSERT_EQUAL(action_reply_answer(&out, px, 0, 0, &answer, &err), 0);
    CU_ASSERT_PTR_NULL(answer);
    action_reply_free(&out);
    json_decref(r);

    /* a refused tool call, in the tool's shape */
    r = parse("{\"anthropic\": {\"type\": \"tool_use\", \"id\": \"toolu_3\", \"input\": {\"action\": \"fly\"}}}");
    answer = action_reply_refusal(r, "input.action: unknown action `fly`");
    CU_ASSERT_TRUE(json_is_true(json_object_get(answer, "is_error")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(answer, "tool_use_id")), "toolu_3");
    json_decref(answer);
    json_decref(r);
}

static CU_TestInfo tests[] = {
    {"Anthropic: clicks, moves, drags, with display scaling", test_anthropic_clicks},
    {"Anthropic: keys, hold_key, type, wait, scroll", test_anthropic_keys_and_time},
    {"Anthropic: screenshot, cursor_position, zoom", test_anthropic_looks},
    {"Anthropic: refusals name the field", test_anthropic_refusals},
    {"OpenAI: every action type, computer_call items, batches", test_openai},
    {"OpenAI: refusals name the field", test_openai_refusals},
    {"computer_13 and pyautogui through the same decoder", test_other_spaces},
    {"the tools' answers: scaled frames, cursor, zoom, refusals", test_answers},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("computer_use", tests);
}

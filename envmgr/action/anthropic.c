#include "envmgr/action/anthropic.h"

#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

#define COMBO_KEYS_MAX 8   /* keys pressed together in one combo ("ctrl+shift+t") */
#define SEQUENCE_MAX 32    /* combos in one `key` text ("Down Down Return") */

typedef struct {
    const char *name;
    const char *fields; /* allowed besides "action", space separated */
} kind;

static const kind kinds[] = {
    {"key", " text "},
    {"hold_key", " text duration "},
    {"type", " text "},
    {"cursor_position", " "},
    {"mouse_move", " coordinate text "},
    {"left_mouse_down", " coordinate text "},
    {"left_mouse_up", " coordinate text "},
    {"left_click", " coordinate text "},
    {"right_click", " coordinate text "},
    {"middle_click", " coordinate text "},
    {"double_click", " coordinate text "},
    {"triple_click", " coordinate text "},
    {"left_click_drag", " start_coordinate coordinate text "},
    {"scroll", " coordinate scroll_direction scroll_amount text "},
    {"wait", " duration "},
    {"screenshot", " "},
    {"zoom", " region "},
};

const char *anthropic_tool_use_id(json_t *tool_use)
{
    return json_is_object(tool_use) && json_object_get(tool_use, "input") ? json_string_value(json_object_get(tool_use, "id"))
                                                                          : NULL;
}

static int coordinate(json_t *in, const char *field, const cu_geometry *g, bool required, int *x, int *y,
                      bool *present, em_err *err)
{
    json_t *c = json_object_get(in, field);
    *present = c != NULL;
    if (!c)
        return required ? em_fail_input(err, "input.%s: missing", field) : 0;
    json_t *jx = json_array_get(c, 0), *jy = json_array_get(c, 1);
    if (!json_is_array(c) || json_array_size(c) != 2 || !json_is_number(jx) || !json_is_number(jy))
        return em_fail_input(err, "input.%s: expected [x, y], got %s", field, json_type_name(c));
    char where[64];
    snprintf(where, sizeof where, "input.%s", field);
    return cu_point(g, json_number_value(jx), json_number_value(jy), where, x, y, err);
}

/* xdotool's combo syntax: keys joined by '+', e.g. "ctrl+shift+t"; a lone "+" is the plus key. */
static int combo(const char *text, size_t len, const char *field, char keys[][32], size_t *n, em_err *err)
{
    *n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && !(text[i] == '+' && i > start))
            continue;
        if (i == start)
            return em_fail_input(err, "%s: empty key in `%.*s`", field, (int)(len > 64 ? 64 : len), text);
        if (*n == COMBO_KEYS_MAX)
            return em_fail_input(err, "%s: more than %d keys held together", field, COMBO_KEYS_MAX);
        char name[32];
        if (i - start >= sizeof name)
            return em_fail_input(err, "%s: key name too long", field);
        memcpy(name, text + start, i - start);
        name[i - start] = '\0';
        if (cu_key_name(name, field, keys[*n], 32, err) < 0)
            return -1;
        (*n)++;
        start = i + 1;
    }
    return 0;
}

/* `key`: combos separated by spaces, pressed one after another, as `xdotool key` takes them. */
static int key_sequence(json_t *in, cu_result *r, em_err *err)
{
    const char *text;
    if (jfield_str(in, "input", "text", true, &text, err) < 0)
        return -1;
    size_t combos = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (!len)
            break;
        char keys[COMBO_KEYS_MAX][32];
        size_t n;
        if (++combos > SEQUENCE_MAX)
            return em_fail_input(err, "input.text: more than %d key combinations", SEQUENCE_MAX);
        if (combo(p, len, "input.text", keys, &n, err) < 0 || cu_add_combo(r, keys, n, err) < 0)
            return -1;
        p += len;
    }
    return combos ? 0 : em_fail_input(err, "input.text: no key given");
}

/* The optional `text` of a click, drag or scroll: modifier keys held while it happens. */
static int modifiers(json_t *in, char keys[][32], size_t *n, em_err *err)
{
    *n = 0;
    const char *text = NULL;
    if (jfield_str(in, "input", "text", false, &text, err) < 0)
        return -1;
    return text && text[0] ? combo(text, strlen(text), "input.text", keys, n, err) : 0;
}

static int duration(json_t *in, bool required, double *s, em_err *err)
{
    bool present = false;
    *s = 0;
    if (jfield_number(in, "input", "duration", required, s, &present, err) < 0)
        return -1;
    if (*s < 0 || *s > ANTHROPIC_DURATION_MAX_S)
        return em_fail_input(err, "input.duration: %g is out of range (0..%g seconds)", *s, ANTHROPIC_DURATION_MAX_S);
    return 0;
}

static int pointer_action(const char *name, json_t *in, const cu_geometry *g, cu_result *r, em_err *err)
{
    int x = 0, y = 0, x0 = 0, y0 = 0;
    bool at = false, from = false;
    bool drag = !strcmp(name, "left_click_drag"), scroll = !strcmp(name, "scroll");
    char mods[COMBO_KEYS_MAX][32];
    size_t nmods;
    if (coordinate(in, "coordinate", g, drag || !strcmp(name, "mouse_move"), &x, &y, &at, err) < 0 ||
        (drag && coordinate(in, "start_coordinate", g, false, &x0, &y0, &from, err) < 0) ||
        modifiers(in, mods, &nmods, err) < 0)
        return -1;
    json_t *act;
    if (scroll) {
        const char *dir;
        int amount = 0;
        bool present;
        double d = 0;
        if (jfield_str(in, "input", "scroll_direction", true, &dir, err) < 0 ||
            jfield_number(in, "input", "scroll_amount", true, &d, &present, err) < 0)
            return -1;
        if (d != (int)d || d < 0 || d > ACTION_SCROLL_MAX)
            return em_fail_input(err, "input.scroll_amount: %g is not a whole number of notches (0..%d)", d,
                                 ACTION_SCROLL_MAX);
        amount = (int)d;
        const char *axis = !strcmp(dir, "up") || !strcmp(dir, "down") ? "dy" : "dx";
        int sign = !strcmp(dir, "up") || !strcmp(dir, "right") ? 1 : -1; /* computer_13: dy > 0 is up */
        if (strcmp(dir, "up") && strcmp(dir, "down") && strcmp(dir, "left") && strcmp(dir, "right"))
            return em_fail_input(err, "input.scroll_direction: `%.16s` is not up, down, left or right", dir);
        if (!amount) /* nothing to scroll: the model asked for a look */
            act = NULL;
        else
            act = json_pack("{s:s, s:i}", "action_type", "SCROLL", axis, sign * amount);
    } else if (drag) {
        act = json_pack("{s:s, s:i, s:i}", "action_type", "DRAG_TO", "x", x, "y", y);
        at = from, x = x0, y = y0; /* the pointer goes to the start first; the drag ends at coordinate */
    } else if (!strcmp(name, "mouse_move")) {
        act = NULL;
    } else if (!strcmp(name, "left_mouse_down") || !strcmp(name, "left_mouse_up")) {
        act = json_pack("{s:s}", "action_type", !strcmp(name, "left_mouse_down") ? "MOUSE_DOWN" : "MOUSE_UP");
    } else {
        const char *button = !strncmp(name, "right", 5) ? "right" : !strncmp(name, "middle", 6) ? "middle" : "left";
        int clicks = !strcmp(name, "double_click") ? 2 : !strcmp(name, "triple_click") ? 3 : 1;
        act = json_pack("{s:s, s:s, s:i}", "action_type", "CLICK", "button", button, "num_clicks", clicks);
    }
    if ((at && cu_add_move(r, x, y, err) < 0) || cu_add_keys(r, "KEY_DOWN", mods, nmods, false, err) < 0) {
        json_decref(act);
        return -1;
    }
    if (act && cu_add(r, act, err) < 0)
        return -1;
    return cu_add_keys(r, "KEY_UP", mods, nmods, true, err);
}

static int zoom(json_t *in, const cu_geometry *g, cu_result *r, em_err *err)
{
    json_t *reg = json_object_get(in, "region");
    if (!json_is_array(reg) || json_array_size(reg) != 4)
        return em_fail_input(err, "input.region: expected [x0, y0, x1, y1]");
    double v[4];
    for (size_t i = 0; i < 4; i++) {
        if (!json_is_number(json_array_get(reg, i)))
            return em_fail_input(err, "input.region[%zu]: expected a number", i);
        v[i] = json_number_value(json_array_get(reg, i));
    }
    if (v[0] >= v[2] || v[1] >= v[3])
        return em_fail_input(err, "input.region: [%g, %g, %g, %g] is empty (x0 < x1 and y0 < y1)", v[0], v[1], v[2], v[3]);
    /* Both corners on the display; the far one is exclusive, so it may sit on the display's edge. */
    if (cu_point(g, v[0], v[1], "input.region", &r->zoom[0], &r->zoom[1], err) < 0 ||
        cu_point(g, v[2] - 1, v[3] - 1, "input.region", &r->zoom[2], &r->zoom[3], err) < 0)
        return -1;
    r->zoom[2]++, r->zoom[3]++;
    r->answer = CU_ANSWER_ZOOM;
    return 0;
}

int anthropic_actions(json_t *tool_use, const cu_geometry *g, cu_result *r, em_err *err)
{
    if (!json_is_object(tool_use))
        return em_fail_input(err, "input: expected the tool_use block or its input (an object), got %s",
                             json_type_name(tool_use));
    json_t *in = tool_use;
    if (json_object_get(tool_use, "input")) {
        const char *type = json_string_value(json_object_get(tool_use, "type"));
        if (type && strcmp(type, "tool_use"))
            return em_fail_input(err, "type: `%.32s` is not a tool_use block", type);
        in = json_object_get(tool_use, "input");
        if (!json_is_object(in))
            return em_fail_input(err, "input: expected an object, got %s", json_type_name(in));
    }
    const char *name;
    if (jfield_str(in, "input", "action", true, &name, err) < 0)
        return -1;
    const kind *k = NULL;
    for (size_t i = 0; i < ARRAY_LEN(kinds); i++)
        if (!strcmp(kinds[i].name, name))
            k = &kinds[i];
    if (!k)
        return em_fail_input(err, "input.action: unknown action `%.32s`", name);
    char known[96];
    snprintf(known, sizeof known, " action%s", k->fields);
    if (jfield_refuse_unknown(in, "input", known, err) < 0)
        return -1;
    double s;
    if (!strcmp(name, "key"))
        return key_sequence(in, r, err);
    if (!strcmp(name, "type")) {
        const char *text;
        return jfield_str(in, "input", "text", true, &text, err) < 0 ? -1 : cu_add_text(r, text, "input.text", err);
    }
    if (!strcmp(name, "hold_key")) {
        char keys[COMBO_KEYS_MAX][32];
        size_t n;
        const char *text;
        if (jfield_str(in, "input", "text", true, &text, err) < 0 ||
            combo(text, strlen(text), "input.text", keys, &n, err) < 0 || duration(in, true, &s, err) < 0)
            return -1;
        return cu_add_keys(r, "KEY_DOWN", keys, n, false, err) < 0 || cu_add_wait(r, s, err) < 0
                   ? -1
                   : cu_add_keys(r, "KEY_UP", keys, n, true, err);
    }
    if (!strcmp(name, "wait"))
        return duration(in, true, &s, err) < 0 ? -1 : cu_add_wait(r, s, err);
    if (!strcmp(name, "screenshot"))
        return 0;
    if (!strcmp(name, "cursor_position")) {
        r->answer = CU_ANSWER_CURSOR;
        return 0;
    }
    if (!strcmp(name, "zoom"))
        return zoom(in, g, r, err);
    return pointer_action(name, in, g, r, err);
}

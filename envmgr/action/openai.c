#include "envmgr/action/openai.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

#define MODIFIERS_MAX 8

static const struct {
    const char *type;
    const char *fields; /* allowed besides "type" */
} kinds[] = {
    {"click", " type x y button keys "},
    {"double_click", " type x y button keys "},
    {"drag", " type path keys "},
    {"keypress", " type keys "},
    {"move", " type x y keys "},
    {"scroll", " type x y scroll_x scroll_y keys "},
    {"type", " type text "},
    {"wait", " type "},
    {"screenshot", " type "},
};

const char *openai_call_id(json_t *call)
{
    return json_string_value(json_object_get(call, "call_id"));
}

static int point(json_t *obj, const char *base, const cu_geometry *g, int *x, int *y, em_err *err)
{
    double dx, dy;
    bool present;
    if (jfield_number(obj, base, "x", true, &dx, &present, err) < 0 ||
        jfield_number(obj, base, "y", true, &dy, &present, err) < 0)
        return -1;
    return cu_point(g, dx, dy, base, x, y, err);
}

/* `keys`: of a keypress, the keys pressed together; of a pointer action, modifiers held during it. */
static int keys_of(json_t *a, const char *base, bool required, char keys[][32], size_t *n, em_err *err)
{
    *n = 0;
    json_t *list;
    char path[JFIELD_PATH_MAX];
    if (jfield_array(a, base, "keys", "an array of key names", &list, err) < 0)
        return -1;
    jfield_path(path, base, "keys");
    if (!list || !json_array_size(list))
        return required ? em_fail_input(err, "%s: at least one key", path) : 0;
    if (json_array_size(list) > MODIFIERS_MAX)
        return em_fail_input(err, "%s: more than %d keys", path, MODIFIERS_MAX);
    for (size_t i = 0; i < json_array_size(list); i++) {
        char item[JFIELD_PATH_MAX];
        if (jfield_item(list, path, i, JSON_STRING, "a key name", item, err) < 0 ||
            cu_key_name(json_string_value(json_array_get(list, i)), item, keys[i], 32, err) < 0)
            return -1;
        (*n)++;
    }
    /* The model names keys in capitals ("CTRL", "A"): in a combination a letter is its key, not
     * its capital (ctrl+a, as the shortcut is meant); SHIFT is written out when it is held. */
    for (size_t i = 0; *n > 1 && i < *n; i++)
        if (keys[i][0] >= 'A' && keys[i][0] <= 'Z' && !keys[i][1])
            keys[i][0] = (char)(keys[i][0] - 'A' + 'a');
    return 0;
}

/* Pixels to wheel notches: at least one for any movement, computer_13's sign (dy > 0 is up). */
static int notches(double px)
{
    if (px == 0)
        return 0;
    long n = lround(fabs(px) / OPENAI_SCROLL_PX_PER_NOTCH);
    if (n < 1)
        n = 1;
    if (n > ACTION_SCROLL_MAX)
        n = ACTION_SCROLL_MAX;
    return (int)(px < 0 ? -n : n);
}

static int drag(json_t *a, const char *base, const cu_geometry *g, cu_result *r, em_err *err)
{
    json_t *path;
    char where[JFIELD_PATH_MAX];
    if (jfield_array(a, base, "path", "an array of points", &path, err) < 0)
        return -1;
    jfield_path(where, base, "path");
    if (!path || json_array_size(path) < 2 || json_array_size(path) > OPENAI_PATH_MAX)
        return em_fail_input(err, "%s: expected 2..%d points", where, OPENAI_PATH_MAX);
    for (size_t i = 0; i < json_array_size(path); i++) {
        char item[JFIELD_PATH_MAX];
        int x, y;
        if (jfield_item(path, where, i, JSON_OBJECT, "a point {x, y}", item, err) < 0 ||
            jfield_refuse_unknown(json_array_get(path, i), item, " x y ", err) < 0 ||
            point(json_array_get(path, i), item, g, &x, &y, err) < 0 || cu_add_move(r, x, y, err) < 0)
            return -1;
        if (i == 0 && cu_add(r, json_pack("{s:s}", "action_type", "MOUSE_DOWN"), err) < 0)
            return -1;
    }
    return cu_add(r, json_pack("{s:s}", "action_type", "MOUSE_UP"), err);
}

static int click(json_t *a, const char *base, const char *type, cu_result *r, em_err *err)
{
    const char *button = "left";
    if (jfield_str(a, base, "button", false, &button, err) < 0)
        return -1;
    if (!button)
        button = "left";
    if (!strcmp(button, "back") || !strcmp(button, "forward")) {
        /* The guest's tablet has three buttons; the key apps bind to the same command stands in. */
        if (!strcmp(type, "double_click"))
            return em_fail_input(err, "%s.button: a double click of `%s` is not supported", base, button);
        return cu_add(r, json_pack("{s:s, s:s}", "action_type", "PRESS", "key", button[0] == 'b' ? "browserback"
                                                                                              : "browserforward"),
                      err);
    }
    const char *b13 = !strcmp(button, "left") ? "left" : !strcmp(button, "right") ? "right"
                      : !strcmp(button, "wheel")                            ? "middle"
                                                                            : NULL;
    if (!b13)
        return em_fail_input(err, "%s.button: `%.16s` is not left, right, wheel, back or forward", base, button);
    return cu_add(r, json_pack("{s:s, s:s, s:i}", "action_type", "CLICK", "button", b13, "num_clicks",
                               !strcmp(type, "double_click") ? 2 : 1),
                  err);
}

static int one(json_t *a, const char *base, const cu_geometry *g, cu_result *r, em_err *err)
{
    if (!json_is_object(a))
        return em_fail_input(err, "%s: expected an action object, got %s", base, json_type_name(a));
    const char *type;
    if (jfield_str(a, base, "type", true, &type, err) < 0)
        return -1;
    size_t k = 0;
    while (k < ARRAY_LEN(kinds) && strcmp(kinds[k].type, type))
        k++;
    if (k == ARRAY_LEN(kinds))
        return em_fail_input(err, "%s.type: unknown action `%.32s`", base, type);
    if (jfield_refuse_unknown(a, base, kinds[k].fields, err) < 0)
        return -1;
    if (!strcmp(type, "screenshot"))
        return 0;
    if (!strcmp(type, "wait"))
        return cu_add_wait(r, OPENAI_WAIT_S, err);
    if (!strcmp(type, "type")) {
        const char *text;
        char path[JFIELD_PATH_MAX];
        jfield_path(path, base, "text");
        return jfield_str(a, base, "text", true, &text, err) < 0 ? -1 : cu_add_text(r, text, path, err);
    }
    char keys[MODIFIERS_MAX][32];
    size_t n;
    if (!strcmp(type, "keypress")) {
        return keys_of(a, base, true, keys, &n, err) < 0 ? -1 : cu_add_combo(r, keys, n, err);
    }
    int x = 0, y = 0;
    if (keys_of(a, base, false, keys, &n, err) < 0 ||
        (strcmp(type, "drag") && (point(a, base, g, &x, &y, err) < 0 || cu_add_move(r, x, y, err) < 0)) ||
        cu_add_keys(r, "KEY_DOWN", keys, n, false, err) < 0)
        return -1;
    int rc = 0;
    if (!strcmp(type, "drag")) {
        rc = drag(a, base, g, r, err);
    } else if (!strcmp(type, "scroll")) {
        double sx = 0, sy = 0;
        bool present;
        if (jfield_number(a, base, "scroll_x", true, &sx, &present, err) < 0 ||
            jfield_number(a, base, "scroll_y", true, &sy, &present, err) < 0)
            return -1;
        int dx = notches(sx), dy = -notches(sy); /* OpenAI: scroll_y > 0 scrolls down */
        if (dx || dy)
            rc = cu_add(r, json_pack("{s:s, s:i, s:i}", "action_type", "SCROLL", "dx", dx, "dy", dy), err);
    } else if (strcmp(type, "move")) {
        rc = click(a, base, type, r, err);
    }
    return rc < 0 ? -1 : cu_add_keys(r, "KEY_UP", keys, n, true, err);
}

int openai_actions(json_t *call, const cu_geometry *g, cu_result *r, em_err *err)
{
    json_t *list = call;
    const char *base = "actions";
    if (json_is_object(call) && (json_object_get(call, "action") || json_object_get(call, "actions"))) {
        const char *type = json_string_value(json_object_get(call, "type"));
        if (type && strcmp(type, "computer_call"))
            return em_fail_input(err, "type: `%.32s` is not a computer_call item", type);
        if (jfield_refuse_unknown(call, "", " type id call_id action actions status pending_safety_checks ", err) < 0)
            return -1;
        json_t *single = json_object_get(call, "action");
        if (single && json_object_get(call, "actions"))
            return em_fail_input(err, "action: give `action` or `actions`, not both");
        if (single)
            return one(single, "action", g, r, err);
        list = json_object_get(call, "actions");
    } else if (json_is_object(call)) {
        return one(call, "action", g, r, err);
    }
    if (!json_is_array(list) || !json_array_size(list) || json_array_size(list) > OPENAI_BATCH_MAX)
        return em_fail_input(err, "%s: expected 1..%d action objects", base, OPENAI_BATCH_MAX);
    for (size_t i = 0; i < json_array_size(list); i++) {
        char item[JFIELD_PATH_MAX];
        jfield_index(item, base, i);
        if (one(json_array_get(list, i), item, g, r, err) < 0)
            return -1;
    }
    return 0;
}

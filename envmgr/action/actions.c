#include "envmgr/action/actions.h"
#include "envmgr/action/pyautogui.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

/* Key events 5 ms apart, in batches the guest has taken (vnc_key), and action_execute returns once
 * it has taken the last (vnc_wait_keys_taken): a guest starved of host CPU gets its keys late, not
 * lost. At 3 ms apart a freshly restored guest under load lost a dozen characters in the middle of a
 * typed line: 3 of 8 cold restores on two busy cores, 1 of 8 once the drain saw a vCPU waiting for a
 * served RAM page as busy; at 10 ms, 0 of 8 either way; at 5 ms, 0 of 30 (test_states, 3 runs) and
 * none lost under a stalled vCPU (test_keys_under_load, 4 runs), and "abc" is typed 25 ms sooner. */
#define KEY_PACE_MS 5.0
/* A click: the pointer there, a button down, up. QEMU's tablet queues its reports in order (a report
 * whose buttons changed is never merged with the one before; motion after it waits until the guest
 * took it: vnc_pointer), and each carries the position, so the press follows the move at once; press and release are CLICK_GAP_MS / 2 apart, which gives the
 * guest's toolkit distinct times, and two clicks CLICK_GAP_MS apart are well inside any double-click
 * time. */
#define CLICK_GAP_MS 20.0
/* Wheel notches and a drag's motion: toolkits read these by their timing (a scroll's speed, the
 * start of a drag), so they keep a human pace. */
#define POINTER_PACE_MS 10.0
#define DRAG_HOLD_MS 40.0
#define DRAG_STEPS 12

static const struct {
    const char *name;
    action_type type;
    const char *fields; /* allowed fields besides action_type, space separated */
} types[] = {
    {"MOVE_TO", ACT_MOVE_TO, " x y "},
    {"CLICK", ACT_CLICK, " x y button num_clicks "},
    {"MOUSE_DOWN", ACT_MOUSE_DOWN, " button "},
    {"MOUSE_UP", ACT_MOUSE_UP, " button "},
    {"RIGHT_CLICK", ACT_RIGHT_CLICK, " x y "},
    {"DOUBLE_CLICK", ACT_DOUBLE_CLICK, " x y "},
    {"DRAG_TO", ACT_DRAG_TO, " x y "},
    {"SCROLL", ACT_SCROLL, " dx dy "},
    {"TYPING", ACT_TYPING, " text "},
    {"PRESS", ACT_PRESS, " key "},
    {"KEY_DOWN", ACT_KEY_DOWN, " key "},
    {"KEY_UP", ACT_KEY_UP, " key "},
    {"HOTKEY", ACT_HOTKEY, " keys "},
    {"WAIT", ACT_WAIT, " seconds "},
    {"FAIL", ACT_FAIL, " "},
    {"DONE", ACT_DONE, " "},
    {"PYAUTOGUI", ACT_PYAUTOGUI, " code "},
};

const char *action_type_name(action_type t)
{
    for (size_t i = 0; i < ARRAY_LEN(types); i++)
        if (types[i].type == t)
            return types[i].name;
    return "?";
}

bool action_type_from_name(const char *name, action_type *out)
{
    for (size_t i = 0; i < ARRAY_LEN(types); i++)
        if (!strcmp(types[i].name, name)) {
            *out = types[i].type;
            return true;
        }
    return false;
}

/* Coordinates may come as 640 or 640.0 (agents print floats): jfield_number. */
static int get_int_in(json_t *obj, const char *field, bool required, long lo, long hi, int *out, bool *present,
                      em_err *err)
{
    double d = 0;
    if (jfield_number(obj, "action", field, required, &d, present, err) < 0 || !*present)
        return *present ? -1 : (required ? -1 : 0);
    if (d != floor(d))
        return em_fail_input(err, "action.%s: expected a whole number, got %g", field, d);
    if (d < (double)lo || d > (double)hi)
        return em_fail_input(err, "action.%s: %g is out of range (%ld..%ld)", field, d, lo, hi);
    *out = (int)d;
    return 0;
}

static int get_xy(json_t *obj, bool required, int w, int h, action *a, em_err *err)
{
    bool hx = false, hy = false;
    double x = 0, y = 0;
    if (jfield_number(obj, "action", "x", required, &x, &hx, err) < 0 || jfield_number(obj, "action", "y", required, &y, &hy, err) < 0)
        return -1;
    if (hx != hy)
        return em_fail_input(err, "action.%s: missing (x and y go together)", hx ? "y" : "x");
    if (!hx)
        return 0;
    x = round(x);
    y = round(y);
    if (x < 0 || x >= w)
        return em_fail_input(err, "action.x: %g is off-screen (0..%d)", x, w - 1);
    if (y < 0 || y >= h)
        return em_fail_input(err, "action.y: %g is off-screen (0..%d)", y, h - 1);
    a->has_xy = true;
    a->x = (int)x;
    a->y = (int)y;
    return 0;
}

static int get_button(json_t *obj, action *a, em_err *err)
{
    json_t *v = json_object_get(obj, "button");
    a->button = BUTTON_LEFT;
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (!s)
        return em_fail_input(err, "action.button: expected a string, got %s", json_type_name(v));
    if (!strcmp(s, "left"))
        a->button = BUTTON_LEFT;
    else if (!strcmp(s, "middle"))
        a->button = BUTTON_MIDDLE;
    else if (!strcmp(s, "right"))
        a->button = BUTTON_RIGHT;
    else
        return em_fail_input(err, "action.button: unknown button `%.32s` (left, middle, right)", s);
    return 0;
}

static int add_key(action *a, const char *field, json_t *v, em_err *err)
{
    const char *name = json_string_value(v);
    if (!name)
        return em_fail_input(err, "action.%s: expected a string, got %s", field, json_type_name(v));
    if (a->nkeys >= ACTION_HOTKEY_MAX)
        return em_fail_input(err, "action.%s: more than %d keys", field, ACTION_HOTKEY_MAX);
    if (key_lookup(name, &a->keys[a->nkeys]) < 0)
        return em_fail_input(err, "action.%s: unknown key `%.32s`", field, name);
    a->key_names[a->nkeys++] = xstrdup(name);
    return 0;
}

static int check_fields(json_t *obj, const char *allowed, em_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        if (!strcmp(k, "action_type"))
            continue;
        if (!jfield_known(allowed, k))
            return em_fail_input(err, "action.%.64s: unknown field for this action type", k);
    }
    return 0;
}

static int parse_fields(json_t *j, int w, int h, action *a, const char *allowed, em_err *err)
{
    bool present;
    if (check_fields(j, allowed, err) < 0)
        return -1;
    switch (a->type) {
    case ACT_MOVE_TO:
    case ACT_DRAG_TO:
        return get_xy(j, true, w, h, a, err);
    case ACT_CLICK:
        a->num_clicks = 1;
        if (get_xy(j, false, w, h, a, err) < 0 || get_button(j, a, err) < 0)
            return -1;
        return get_int_in(j, "num_clicks", false, 1, 3, &a->num_clicks, &present, err);
    case ACT_RIGHT_CLICK:
    case ACT_DOUBLE_CLICK:
        a->button = a->type == ACT_RIGHT_CLICK ? BUTTON_RIGHT : BUTTON_LEFT;
        a->num_clicks = a->type == ACT_DOUBLE_CLICK ? 2 : 1;
        return get_xy(j, false, w, h, a, err);
    case ACT_MOUSE_DOWN:
    case ACT_MOUSE_UP:
        return get_button(j, a, err);
    case ACT_SCROLL: {
        bool px = false, py = false;
        if (get_int_in(j, "dx", false, -ACTION_SCROLL_MAX, ACTION_SCROLL_MAX, &a->dx, &px, err) < 0 ||
            get_int_in(j, "dy", false, -ACTION_SCROLL_MAX, ACTION_SCROLL_MAX, &a->dy, &py, err) < 0)
            return -1;
        if (!px && !py)
            return em_fail_input(err, "action.dy: missing (SCROLL needs dx or dy)");
        return 0;
    }
    case ACT_TYPING: {
        const char *s;
        if (jfield_str(j, "action", "text", true, &s, err) < 0)
            return -1;
        size_t n = json_string_length(json_object_get(j, "text"));
        if (n > ACTION_TEXT_MAX)
            return em_fail_input(err, "action.text: %zu bytes is more than the limit of %d", n, ACTION_TEXT_MAX);
        for (size_t i = 0; i < n; i++) {
            key_code k;
            if (key_for_char((unsigned char)s[i], &k) < 0)
                return em_fail_input(err,
                                     "action.text: character 0x%02x at offset %zu cannot be typed "
                                     "(printable ASCII, newline and tab only)",
                                     (unsigned char)s[i], i);
        }
        a->text = xstrdup(s);
        return 0;
    }
    case ACT_PRESS:
    case ACT_KEY_DOWN:
    case ACT_KEY_UP: {
        json_t *k = json_object_get(j, "key");
        if (!k)
            return em_fail_input(err, "action.key: missing");
        return add_key(a, "key", k, err);
    }
    case ACT_HOTKEY: {
        json_t *ks = json_object_get(j, "keys");
        if (!ks)
            return em_fail_input(err, "action.keys: missing");
        if (!json_is_array(ks))
            return em_fail_input(err, "action.keys: expected an array, got %s", json_type_name(ks));
        if (json_array_size(ks) == 0)
            return em_fail_input(err, "action.keys: empty");
        size_t i;
        json_t *k;
        json_array_foreach(ks, i, k)
        {
            char field[32];
            snprintf(field, sizeof field, "keys[%zu]", i);
            if (add_key(a, field, k, err) < 0)
                return -1;
        }
        return 0;
    }
    case ACT_WAIT:
        a->seconds = 1.0;
        if (jfield_number(j, "action", "seconds", false, &a->seconds, &present, err) < 0)
            return -1;
        if (a->seconds < 0 || a->seconds > ACTION_WAIT_MAX_S)
            return em_fail_input(err, "action.seconds: %g is out of range (0..%g)", a->seconds, ACTION_WAIT_MAX_S);
        return 0;
    case ACT_FAIL:
    case ACT_DONE:
        return 0;
    case ACT_PYAUTOGUI: {
        const char *code;
        if (jfield_str(j, "action", "code", true, &code, err) < 0)
            return -1;
        size_t n = json_string_length(json_object_get(j, "code"));
        if (n == 0 || n > PYAUTOGUI_CODE_MAX)
            return em_fail_input(err, "action.code: %zu bytes (1 to %d)", n, PYAUTOGUI_CODE_MAX);
        if (strlen(code) != n) /* an argv string in the guest */
            return em_fail_input(err, "action.code: contains a NUL byte");
        a->text = xstrdup(code);
        return 0;
    }
    }
    return em_fail_input(err, "action.action_type: unhandled");
}

int action_parse(json_t *j, int w, int h, action *a, em_err *err)
{
    memset(a, 0, sizeof *a);
    if (!json_is_object(j))
        return em_fail_input(err, "action: expected a JSON object, got %s", j ? json_type_name(j) : "nothing");
    const char *name;
    if (jfield_str(j, "action", "action_type", true, &name, err) < 0)
        return -1;
    for (size_t i = 0; i < ARRAY_LEN(types); i++) {
        if (strcmp(name, types[i].name))
            continue;
        a->type = types[i].type;
        if (parse_fields(j, w, h, a, types[i].fields, err) < 0) {
            action_free(a);
            return -1;
        }
        return 0;
    }
    return em_fail_input(err, "action.action_type: unknown action type `%.32s`", name);
}

int action_parse_text(const char *text, int w, int h, action *a, em_err *err)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return em_fail_input(err, "action: invalid JSON at column %d: %s", je.column, je.text);
    int rc = action_parse(j, w, h, a, err);
    json_decref(j);
    return rc;
}

void action_free(action *a)
{
    free(a->text);
    for (size_t i = 0; i < a->nkeys; i++)
        free(a->key_names[i]);
    memset(a, 0, sizeof *a);
}

bool action_is_terminal(const action *a)
{
    return a->type == ACT_DONE || a->type == ACT_FAIL;
}

static const char *button_name(mouse_button b)
{
    return b == BUTTON_RIGHT ? "right" : b == BUTTON_MIDDLE ? "middle" : "left";
}

json_t *action_to_json(const action *a)
{
    json_t *j = json_pack("{s:s}", "action_type", action_type_name(a->type));
    if (a->has_xy) {
        json_object_set_new(j, "x", json_integer(a->x));
        json_object_set_new(j, "y", json_integer(a->y));
    }
    switch (a->type) {
    case ACT_CLICK:
        json_object_set_new(j, "button", json_string(button_name(a->button)));
        json_object_set_new(j, "num_clicks", json_integer(a->num_clicks));
        break;
    case ACT_MOUSE_DOWN:
    case ACT_MOUSE_UP:
        json_object_set_new(j, "button", json_string(button_name(a->button)));
        break;
    case ACT_SCROLL:
        json_object_set_new(j, "dx", json_integer(a->dx));
        json_object_set_new(j, "dy", json_integer(a->dy));
        break;
    case ACT_TYPING:
        json_object_set_new(j, "text", json_string(a->text));
        break;
    case ACT_PRESS:
    case ACT_KEY_DOWN:
    case ACT_KEY_UP:
        json_object_set_new(j, "key", json_string(a->key_names[0]));
        break;
    case ACT_HOTKEY: {
        json_t *ks = json_array();
        for (size_t i = 0; i < a->nkeys; i++)
            json_array_append_new(ks, json_string(a->key_names[i]));
        json_object_set_new(j, "keys", ks);
        break;
    }
    case ACT_WAIT:
        json_object_set_new(j, "seconds", json_real(a->seconds));
        break;
    case ACT_PYAUTOGUI:
        json_object_set_new(j, "code", json_string(a->text));
        break;
    default:
        break;
    }
    return j;
}

/* ---- execution ---- */

static int key_event(vnc_session *v, const key_code *k, bool down, em_err *err)
{
    return vnc_key(v, k, down, KEY_PACE_MS, err);
}

static const key_code shift_key = {.keysym = 0xffe1, .scancode = 0x2a};

/* A key pressed down that needs Shift ("A", "!") goes down with Shift around it, as pyautogui's
 * keyDown does; sent alone, QEMU would toggle Caps Lock to give the guest the keysym's case. */
static int key_press_event(vnc_session *v, const key_code *k, bool down, em_err *err)
{
    if (!down || !k->shift)
        return key_event(v, k, down, err);
    return key_event(v, &shift_key, true, err) < 0 || key_event(v, k, true, err) < 0
               ? -1
               : key_event(v, &shift_key, false, err);
}

static int tap_key(vnc_session *v, const key_code *k, em_err *err)
{
    if (k->shift && key_event(v, &shift_key, true, err) < 0)
        return -1;
    if (key_event(v, k, true, err) < 0 || key_event(v, k, false, err) < 0)
        return -1;
    if (k->shift && key_event(v, &shift_key, false, err) < 0)
        return -1;
    return 0;
}

static int click(vnc_session *v, const action *a, em_err *err)
{
    int x, y, buttons;
    vnc_pointer_state(v, &x, &y, &buttons);
    if (a->has_xy) {
        x = a->x;
        y = a->y;
        if (vnc_pointer(v, x, y, buttons, err) < 0) /* its own report, before the press's */
            return -1;
    }
    for (int i = 0; i < a->num_clicks; i++) {
        if (i)
            sleep_ms(CLICK_GAP_MS);
        if (vnc_pointer(v, x, y, buttons | (int)a->button, err) < 0)
            return -1;
        sleep_ms(CLICK_GAP_MS / 2);
        if (vnc_pointer(v, x, y, buttons & ~(int)a->button, err) < 0)
            return -1;
    }
    return 0;
}

static int wheel(vnc_session *v, int count, int mask, em_err *err)
{
    int x, y, buttons;
    vnc_pointer_state(v, &x, &y, &buttons);
    for (int i = 0; i < count; i++) {
        if (vnc_pointer(v, x, y, buttons | mask, err) < 0 || vnc_pointer(v, x, y, buttons, err) < 0)
            return -1;
        sleep_ms(POINTER_PACE_MS);
    }
    return 0;
}

static int drag(vnc_session *v, const action *a, em_err *err)
{
    int x0, y0, buttons;
    vnc_pointer_state(v, &x0, &y0, &buttons);
    if (vnc_pointer(v, x0, y0, buttons | BUTTON_LEFT, err) < 0)
        return -1;
    sleep_ms(DRAG_HOLD_MS);
    /* Intermediate motion: toolkits start a drag only after the pointer moves while pressed. */
    for (int i = 1; i <= DRAG_STEPS; i++) {
        int x = x0 + (a->x - x0) * i / DRAG_STEPS, y = y0 + (a->y - y0) * i / DRAG_STEPS;
        if (vnc_pointer(v, x, y, buttons | BUTTON_LEFT, err) < 0)
            return -1;
        sleep_ms(POINTER_PACE_MS);
    }
    sleep_ms(DRAG_HOLD_MS);
    return vnc_pointer(v, a->x, a->y, buttons & ~BUTTON_LEFT, err);
}

static int execute(vnc_session *v, const action *a, em_err *err)
{
    int x, y, buttons;
    vnc_pointer_state(v, &x, &y, &buttons);
    switch (a->type) {
    case ACT_MOVE_TO:
        return vnc_pointer(v, a->x, a->y, buttons, err);
    case ACT_CLICK:
    case ACT_RIGHT_CLICK:
    case ACT_DOUBLE_CLICK:
        return click(v, a, err);
    case ACT_MOUSE_DOWN:
        return vnc_pointer(v, x, y, buttons | (int)a->button, err);
    case ACT_MOUSE_UP:
        return vnc_pointer(v, x, y, buttons & ~(int)a->button, err);
    case ACT_DRAG_TO:
        return drag(v, a, err);
    case ACT_SCROLL:
        /* VNC wheel buttons: 4 up (mask 8), 5 down (16). QEMU 7.2's USB tablet has no horizontal
         * wheel (buttons 6 and 7 never reach the guest), so a horizontal scroll is Shift with the
         * vertical wheel, which GTK, Qt, LibreOffice and browsers take as one: up is left. */
        if (a->dy && wheel(v, abs(a->dy), a->dy > 0 ? 8 : 16, err) < 0)
            return -1;
        if (!a->dx)
            return 0;
        if (key_event(v, &shift_key, true, err) < 0)
            return -1;
        em_err ignored = {0}; /* a failed wheel's error is the one to report; Shift goes up anyway */
        int rc = wheel(v, abs(a->dx), a->dx > 0 ? 16 : 8, err);
        return key_event(v, &shift_key, false, rc < 0 ? &ignored : err) < 0 ? -1 : rc;
    case ACT_TYPING:
        for (const char *s = a->text; *s; s++) {
            key_code k;
            if (key_for_char((unsigned char)*s, &k) < 0 || tap_key(v, &k, err) < 0)
                return err && err->msg[0] ? -1 : em_fail(err, "TYPING: cannot type 0x%02x", (unsigned char)*s);
        }
        return 0;
    case ACT_PRESS:
        return tap_key(v, &a->keys[0], err);
    case ACT_KEY_DOWN:
    case ACT_KEY_UP:
        return key_press_event(v, &a->keys[0], a->type == ACT_KEY_DOWN, err);
    case ACT_HOTKEY:
        for (size_t i = 0; i < a->nkeys; i++)
            if (key_press_event(v, &a->keys[i], true, err) < 0)
                return -1;
        for (size_t i = a->nkeys; i-- > 0;)
            if (key_event(v, &a->keys[i], false, err) < 0)
                return -1;
        return 0;
    case ACT_WAIT:
        return vnc_pump(v, a->seconds * 1000, err);
    case ACT_FAIL:
    case ACT_DONE:
        return 0;
    case ACT_PYAUTOGUI:
        return em_fail(err, "PYAUTOGUI: runs in the guest (env_act), not over VNC");
    }
    return em_fail(err, "action: unhandled type");
}

int action_execute(vnc_session *v, const action *a, em_err *err)
{
    if (execute(v, a, err) < 0)
        return -1;
    /* the last batch of keys too: the next action, or `envmgr act` hanging up, must not find the
     * guest behind (a no-op for an action without keys; button events wait for a full batch) */
    return vnc_wait_keys_taken(v, err);
}

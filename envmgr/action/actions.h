/* The OSWorld computer_13 action space: parsing and validation of the JSON
 * form, and execution as VNC pointer and key events. Parsing checks every
 * field before anything is sent, so a bad action leaves the env untouched. */
#ifndef ENVMGR_ACTIONS_H
#define ENVMGR_ACTIONS_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"
#include "envmgr/vm/keys.h"
#include "envmgr/vm/vnc.h"

#define ACTION_TEXT_MAX 8192
#define ACTION_HOTKEY_MAX 8
#define ACTION_WAIT_MAX_S 60.0
#define ACTION_SCROLL_MAX 50 /* notches per axis in one SCROLL */

typedef enum {
    ACT_MOVE_TO,
    ACT_CLICK,
    ACT_MOUSE_DOWN,
    ACT_MOUSE_UP,
    ACT_RIGHT_CLICK,
    ACT_DOUBLE_CLICK,
    ACT_DRAG_TO,
    ACT_SCROLL,
    ACT_TYPING,
    ACT_PRESS,
    ACT_KEY_DOWN,
    ACT_KEY_UP,
    ACT_HOTKEY,
    ACT_WAIT,
    ACT_FAIL,
    ACT_DONE,
    ACT_PYAUTOGUI, /* agent code outside the translated subset: run in the guest (env_act), as OSWorld does */
} action_type;

typedef enum { BUTTON_LEFT = 1, BUTTON_MIDDLE = 2, BUTTON_RIGHT = 4 } mouse_button;

typedef struct action {
    action_type type;
    bool has_xy;
    int x, y;
    mouse_button button;
    int num_clicks;
    int dx, dy;
    char *text;                         /* TYPING; PYAUTOGUI: the code */
    key_code keys[ACTION_HOTKEY_MAX];   /* PRESS, KEY_DOWN, KEY_UP: one; HOTKEY: several */
    char *key_names[ACTION_HOTKEY_MAX]; /* as given, for the canonical JSON */
    size_t nkeys;
    double seconds;                     /* WAIT */
} action;

/* Parse and validate against a screen of w x h. Errors name the field:
 * "action.x: 1400 is off-screen (0..1279)". */
int action_parse(json_t *j, int screen_w, int screen_h, action *out, em_err *err);
int action_parse_text(const char *text, int screen_w, int screen_h, action *out, em_err *err);
void action_free(action *a);
const char *action_type_name(action_type t);
/* The type named `name` ("CLICK"); false when no action has that name. */
bool action_type_from_name(const char *name, action_type *out);
/* Canonical computer_13 JSON of a parsed action (new reference). */
json_t *action_to_json(const action *a);
/* DONE and FAIL end an episode; they send nothing. */
bool action_is_terminal(const action *a);

/* Send the action as VNC events. The session's pointer state is the
 * starting point for actions without coordinates. PYAUTOGUI is not sent
 * over VNC: env_act runs it in the guest. */
int action_execute(vnc_session *v, const action *a, em_err *err);

#endif

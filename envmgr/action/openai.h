/* OpenAI's computer-use tool as computer_13 actions. Accepted: a `computer_call` item ({"type":
 * "computer_call", "call_id", "action"} or, as newer API versions send, "actions": [...]), one action
 * object, or an array of them. Action types: click (button left, right, wheel, back, forward),
 * double_click, drag (a path of points), keypress, move, scroll (x, y, scroll_x, scroll_y in pixels),
 * type, wait, screenshot. Coordinates are in the display the tool was declared with. docs/computer-use.md. */
#ifndef ENVMGR_OPENAI_H
#define ENVMGR_OPENAI_H

#include <jansson.h>

#include "envmgr/action/computer_use.h"
#include "envmgr/base/err.h"

#define OPENAI_BATCH_MAX 64          /* actions in one computer_call */
#define OPENAI_PATH_MAX 64           /* points of one drag */
#define OPENAI_SCROLL_PX_PER_NOTCH 100 /* scroll_x/scroll_y are pixels; the guest gets wheel notches */
#define OPENAI_WAIT_S 1.0            /* `wait` has no duration: the reference sample's one second */

int openai_actions(json_t *call, const cu_geometry *g, cu_result *r, em_err *err);

/* The computer_call's call_id, or NULL when actions came alone. */
const char *openai_call_id(json_t *call);

#endif

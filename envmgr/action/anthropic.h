/* Anthropic's computer tool (computer_20250124 and computer_20251124, as Anthropic's docs describe its
 * `tool_use` input) as computer_13 actions. Accepted: the tool_use block ({"type": "tool_use", "id",
 * "name", "input"}) or its input alone. Actions: key, hold_key, type, cursor_position, mouse_move,
 * left_mouse_down, left_mouse_up, left_click, right_click, middle_click, double_click, triple_click (a
 * `text` of modifier keys held during a click or scroll), left_click_drag, scroll, wait, screenshot,
 * zoom. Coordinates are in the display the tool was declared with (cu_geometry). docs/computer-use.md. */
#ifndef ENVMGR_ANTHROPIC_H
#define ENVMGR_ANTHROPIC_H

#include <jansson.h>

#include "envmgr/action/computer_use.h"
#include "envmgr/base/err.h"

#define ANTHROPIC_DURATION_MAX_S 100.0 /* hold_key and wait */

/* Fills r (cu_result_init'ed) or fails with one line naming the field ("input.coordinate: ..."). */
int anthropic_actions(json_t *tool_use, const cu_geometry *g, cu_result *r, em_err *err);

/* The tool_use block's id, or NULL when the input came alone. */
const char *anthropic_tool_use_id(json_t *tool_use);

#endif

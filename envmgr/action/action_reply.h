/* An agent's reply in any action space envmgr speaks, as the validated computer_13 actions envmgr
 * executes: the one decoder behind `envmgr act`, the agent protocol, the HTTP API and the MCP server.
 *
 *   {"action_type": "CLICK", ...}                          computer_13 (docs/actions.md)
 *   {"pyautogui": "pyautogui.click(10, 20)"}                pyautogui code (docs/agent-protocol.md)
 *   {"anthropic": TOOL_USE_OR_INPUT, "display": [w, h]}     Anthropic's computer tool
 *   {"openai": COMPUTER_CALL_OR_ACTIONS, "display": [w, h]} OpenAI's computer-use tool
 *   {"uitars": "click(start_box='(10,20)')", "display": [w, h], "coords": "absolute"|"relative_1000"}
 *
 * "display" is the size the model sees the screen at (optional: the screen's own size). A reply that
 * only looks (a screenshot, the cursor's position, a zoom) is one WAIT of 0 s: the screen settles and
 * the frame is taken, so every reply is at least one step line in the trace. docs/computer-use.md. */
#ifndef ENVMGR_ACTION_REPLY_H
#define ENVMGR_ACTION_REPLY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/action/computer_use.h"
#include "envmgr/base/err.h"

typedef enum { SPACE_COMPUTER_13, SPACE_PYAUTOGUI, SPACE_ANTHROPIC, SPACE_OPENAI, SPACE_UITARS } action_space;

typedef struct action_reply {
    action_space space;
    json_t *actions; /* validated computer_13 action objects, at least one */
    json_t *sent;    /* the space's member as the agent sent it (NULL for computer_13), for the trace */
    cu_geometry geo;
    cu_answer_kind answer;
    int zoom[4];
    char *call_id; /* Anthropic's tool_use id, OpenAI's call_id, to echo in the answer */
} action_reply;

/* The spaces' names as the trace's `source` and the clients' action_space say them. */
const char *action_space_name(action_space s);
/* The reply's action-space member ("pyautogui", "anthropic", ...), or NULL for computer_13. */
const char *action_reply_space_key(json_t *reply);

/* Decode and validate a reply for a w x h screen; one-line errors name the field. The reply's other
 * members (the agent's "response") are the caller's: it removes them first. */
int action_reply_decode(json_t *reply, int w, int h, action_reply *out, em_err *err);
void action_reply_free(action_reply *r);

/* What the vendor's tool expects back after the actions ran (NULL for spaces that have no answer
 * of their own: computer_13, pyautogui, uitars): Anthropic's tool_result with the frame as an image
 * block (or the cursor's position as text), OpenAI's computer_call_output with the frame as a data URL.
 * pixels: the frame the observation holds (4 bytes a pixel); pointer: the pointer's screen position. */
int action_reply_answer(const action_reply *r, const uint8_t *pixels, int pointer_x, int pointer_y, json_t **answer,
                        em_err *err);
/* The vendor's shape of a refused reply (Anthropic: a tool_result with is_error), or NULL. */
json_t *action_reply_refusal(json_t *reply, const char *message);

#endif

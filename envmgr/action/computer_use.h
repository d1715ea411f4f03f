/* What today's model action formats share: Anthropic's computer tool, OpenAI's computer-use tool and
 * UI-TARS's action text each become a list of computer_13 actions (actions.h) in screen pixels, which
 * is what envmgr executes, records and replays. The model may see the screen scaled to another size
 * (its "display"); its coordinates are in that space and are scaled back here, so the rest of envmgr
 * never sees them. A format's answer to the model (a screenshot, the cursor position, a zoomed region)
 * is described by cu_answer and built by whoever holds the frame. Translators execute nothing. */
#ifndef ENVMGR_COMPUTER_USE_H
#define ENVMGR_COMPUTER_USE_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"

#define CU_ACTIONS_MAX 256 /* computer_13 actions one reply may expand to */

/* The screen as envmgr has it, and the size the model sees it at (equal when nothing is scaled). */
typedef struct cu_geometry {
    int screen_w, screen_h;
    int display_w, display_h;
} cu_geometry;

typedef enum {
    CU_ANSWER_SCREENSHOT, /* the frame after the actions, scaled to the display */
    CU_ANSWER_CURSOR,     /* the pointer's position after the actions, in display pixels */
    CU_ANSWER_ZOOM,       /* a region of the frame, in screen pixels (zoom[]: x0, y0, x1, y1, exclusive ends) */
} cu_answer_kind;

typedef struct cu_result {
    json_t *actions; /* computer_13 action objects in order (may be empty: a screenshot) */
    cu_answer_kind answer;
    int zoom[4];
    bool terminal; /* the list ends in DONE or FAIL */
} cu_result;

/* The geometry for a screen of sw x sh seen as `display` ([w, h], or NULL: unscaled). The display is
 * at most 4 times smaller than the screen on each side, and at most twice as large. */
int cu_geometry_make(int sw, int sh, json_t *display, const char *field, cu_geometry *g, em_err *err);

/* A point the model gave, in display pixels (numbers, rounded), as screen pixels; off the display
 * is an error naming `field`: "input.coordinate: [1400, 3] is off the display (1024x640)". */
int cu_point(const cu_geometry *g, double x, double y, const char *field, int *sx, int *sy, em_err *err);
/* A screen point as the model's display sees it (for cursor_position). */
void cu_point_to_display(const cu_geometry *g, int sx, int sy, int *dx, int *dy);

/* A key name as a vendor spells it (xdotool's "Return", "KP_0", "Page_Down"; OpenAI's "ENTER",
 * "ARROWLEFT", "CMD"; UI-TARS's "ctrl", "arrowleft") in envmgr's key names (keys.h), or an error
 * naming `field`. */
int cu_key_name(const char *vendor, const char *field, char *out, size_t outlen, em_err *err);

/* Append computer_13 actions to r->actions, bounded by CU_ACTIONS_MAX. The helpers take screen
 * pixels and envmgr key names. */
int cu_add(cu_result *r, json_t *one, em_err *err);
int cu_add_move(cu_result *r, int x, int y, em_err *err);
int cu_add_keys(cu_result *r, const char *type, char keys[][32], size_t n, bool reverse, em_err *err);
int cu_add_wait(cu_result *r, double seconds, em_err *err); /* split into WAITs of at most 60 s */
/* Keys pressed together: one PRESS, or a HOTKEY of several. */
int cu_add_combo(cu_result *r, char keys[][32], size_t n, em_err *err);
int cu_add_text(cu_result *r, const char *text, const char *field, em_err *err);

void cu_result_init(cu_result *r);
void cu_result_clear(cu_result *r);

#endif

/* UI-TARS's action text (UI-TARS-1.0, -1.5 and the Qwen-VL models it builds on) as computer_13
 * actions. The text is tokenised, never evaluated: only keyword calls with quoted values from a fixed
 * list are taken, so nothing in a model's answer can run on the host.
 *
 * Accepted (docs/actions.md, "UI-TARS action text", has the sources):
 *   [Thought: ... | Reflection: ... Action_Summary: ...]   skipped: parsing starts after "Action:"
 *   Action: click(start_box='(x,y)')      also left_single; the point may be written
 *           left_double(...)  right_single(...)  hover(...)    '<|box_start|>(x,y)<|box_end|>',
 *           drag(start_box=..., end_box=...)  (select)          '[x1,y1,x2,y2]' (its centre), '<point>x y</point>',
 *           scroll(start_box=..., direction='down')             '<bbox>x1 y1 x2 y2</bbox>', and point= /
 *           hotkey(key='ctrl c')  press / keydown / keyup / release(key=...)   start_point= / end_point=
 *           type(content='text\n')  wait()  finished(content='...')  call_user()  error_env()
 * Several calls in one answer go on separate lines (the format puts a blank line between them). */
#ifndef ENVMGR_UITARS_H
#define ENVMGR_UITARS_H

#include "envmgr/action/computer_use.h"
#include "envmgr/base/err.h"

#define UITARS_TEXT_MAX (64 * 1024) /* bytes of answer accepted */
#define UITARS_WAIT_S 5.0           /* wait(): "Sleep for 5s" in UI-TARS's prompts and its desktop operator */
#define UITARS_SCROLL_NOTCHES 5     /* one scroll(): OSWorld's UI-TARS agent sends pyautogui.scroll(+-5) */

typedef enum {
    /* Pixels of the display as the model's image processor resized it (Qwen2.5-VL's smart_resize: each
     * side rounded to a multiple of 28, the area kept within 100..16384 x 28^2): UI-TARS-1.5. A display
     * whose sides are multiples of 28 is its own resized image. */
    UITARS_COORDS_ABSOLUTE,
    /* 0..1000 of the display on each axis: UI-TARS-1.0 and Qwen2-VL. */
    UITARS_COORDS_RELATIVE_1000,
} uitars_coords;

/* text: the model's whole answer or just its "Action: ..." part. Fills r (cu_result_init'ed by the
 * caller) with computer_13 actions in screen pixels; finished() -> a final {"action_type":"DONE"},
 * call_user() and error_env() -> {"action_type":"FAIL"} (r->terminal = true). On error r is left as it
 * was and the message is one line naming what is wrong, e.g.
 * "uitars: line 1: click: start_box `(1400,3)` is off the display (1024x640)". */
int uitars_actions(const char *text, const cu_geometry *g, uitars_coords coords, cu_result *r, em_err *err);

#endif

/* A safe translator of the pyautogui subset OSWorld agents write into
 * computer_13 actions. pyautogui_parse executes nothing: the code is tokenised
 * and only literal arguments to a fixed list of calls are accepted, so
 * `__import__('os').system(...)` is a parse error, not a risk on the host.
 * pyautogui_actions hands what the subset lacks to the guest, as OSWorld does.
 *
 * Accepted (statements separated by newlines or ';', `#` comments, and
 * `import pyautogui` / `import time` lines, which are ignored):
 *   pyautogui.click(x, y, clicks=, button=, interval=, duration=)   also click() and click((x, y))
 *   pyautogui.doubleClick / tripleClick / rightClick / middleClick(x, y, ...)
 *   pyautogui.moveTo(x, y, duration=)            pyautogui.dragTo(x, y, duration=, button=, mouseDownUp=)
 *   pyautogui.mouseDown(x?, y?, button=)         pyautogui.mouseUp(x?, y?, button=)
 *   pyautogui.scroll(clicks, x?, y?) (vscroll)   pyautogui.hscroll(clicks, x?, y?)
 *   pyautogui.typewrite / write('text' | ['enter', 'a'], interval=)
 *   pyautogui.press('key' | [keys], presses=N, interval=)
 *   pyautogui.keyDown(k)  pyautogui.keyUp(k)  pyautogui.hotkey('ctrl', 'c', interval=)  (or hotkey(['ctrl','c']))
 *   time.sleep(s)  pyautogui.sleep(s)
 * Literals: ints, floats (coordinates are rounded half away from zero),
 * '...' "..." '''...''' strings with \n \t \r \\ \' \" \xNN escapes (r'' and
 * u'' prefixes too), lists of literals, (x, y) tuples, True, False, None.
 *
 * Output: a JSON array of computer_13 action objects in the form
 * envmgr/actions.c validates (see docs/agent-protocol.md, "pyautogui"). */
#ifndef ENVMGR_PYAUTOGUI_H
#define ENVMGR_PYAUTOGUI_H

#include <jansson.h>

#include "envmgr/base/err.h"

#define PYAUTOGUI_CODE_MAX (64 * 1024) /* bytes of code accepted */
#define PYAUTOGUI_SLEEP_MAX_S 3600.0 /* time.sleep(secs) in code, and a setup step's sleep */
#define PYAUTOGUI_ACTIONS_MAX 1000     /* actions one piece of code may expand to */

/* Translate code into a new JSON array of actions (*actions, caller decrefs).
 * Errors are one line, bad input (EM_EXIT_USAGE), e.g.
 * "pyautogui: line 2: `eval('x')` is not in the supported subset". */
int pyautogui_parse(const char *code, json_t **actions, em_err *err);

/* What an agent's code does on a w x h screen, as OSWorld runs any of it in the guest: the
 * subset's exact translation when pyautogui_parse takes it and every action it gives is valid on
 * that screen (action_parse), else one {"action_type": "PYAUTOGUI", "code": code}
 * that env_act runs in the guest with the toolbelt's pyautogui (docs/agent-protocol.md). Only
 * code that is empty or over PYAUTOGUI_CODE_MAX is an error. */
int pyautogui_actions(const char *code, int w, int h, json_t **actions, em_err *err);

#endif

/* libFuzzer target: pyautogui_parse on arbitrary text. It must refuse or
 * translate, never crash, and whatever it returns must be an array of
 * action objects. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/pyautogui.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *code = malloc(size + 1);
    if (!code)
        return 0;
    memcpy(code, data, size);
    code[size] = '\0';
    em_err err = {0};
    json_t *actions = NULL;
    if (pyautogui_parse(code, &actions, &err) == 0) {
        if (!json_is_array(actions) || json_array_size(actions) > PYAUTOGUI_ACTIONS_MAX)
            abort();
        size_t i;
        json_t *a;
        json_array_foreach(actions, i, a)
        {
            if (!json_is_string(json_object_get(a, "action_type")))
                abort();
        }
        json_decref(actions);
    } else if (actions || !err.msg[0]) {
        abort();
    }
    free(code);
    return 0;
}

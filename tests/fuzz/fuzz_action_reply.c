/* libFuzzer target: action_reply_decode on arbitrary JSON, the one decoder of every action space
 * (computer_13, pyautogui, Anthropic's and OpenAI's computer-use tools, UI-TARS text). It must refuse
 * with a one-line message or give at least one action, each passing action_parse; the tool's answer
 * is then built on a small frame (scaling, zooms, the cursor) and must be a JSON object or nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/action_reply.h"
#include "envmgr/action/actions.h"

#define W 64
#define H 40

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *reply = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!reply)
        return 0;
    action_reply r;
    em_err err = {0};
    if (action_reply_decode(reply, W, H, &r, &err) == 0) {
        if (!json_is_array(r.actions) || json_array_size(r.actions) == 0)
            abort();
        size_t i;
        json_t *a;
        json_array_foreach(r.actions, i, a)
        {
            action parsed;
            em_err perr = {0};
            if (action_parse(a, W, H, &parsed, &perr) < 0)
                abort();
            action_free(&parsed);
        }
        static uint8_t frame[W * H * 4];
        json_t *answer = NULL;
        if (action_reply_answer(&r, frame, W - 1, H - 1, &answer, &err) == 0 && answer && !json_is_object(answer))
            abort();
        json_decref(answer);
        action_reply_free(&r);
    } else if (!err.msg[0] || strchr(err.msg, '\n') || r.actions) {
        abort();
    }
    json_t *refusal = action_reply_refusal(reply, "refused");
    if (refusal && !json_is_object(refusal))
        abort();
    json_decref(refusal);
    json_decref(reply);
    return 0;
}

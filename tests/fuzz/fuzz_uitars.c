/* libFuzzer target: uitars_actions on arbitrary text. It must refuse (one-line message, the result as
 * it was) or translate into actions that each pass action_parse on the screen, never crash. The first
 * byte picks the coordinate mode and one of a few geometries, so scaling is fuzzed too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/uitars.h"

static const cu_geometry geometries[] = {
    {1280, 800, 1280, 800}, /* unscaled; the model sees 1288x812 */
    {1280, 800, 1024, 640}, /* scaled */
    {1120, 700, 1120, 700}, /* a smart_resize fixed point */
    {1280, 800, 320, 200},  /* a quarter: scaled up to the processor's minimum */
};

static void check_actions(const cu_result *r, const cu_geometry *g)
{
    if (!json_is_array(r->actions) || json_array_size(r->actions) > CU_ACTIONS_MAX)
        abort();
    size_t i;
    json_t *a;
    json_array_foreach(r->actions, i, a)
    {
        action parsed;
        em_err err = {0};
        if (action_parse(a, g->screen_w, g->screen_h, &parsed, &err) < 0)
            abort();
        bool last = i + 1 == json_array_size(r->actions);
        if (action_is_terminal(&parsed) != (last && r->terminal))
            abort(); /* DONE / FAIL only at the end, and only then terminal */
        action_free(&parsed);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t sel = data[0];
    const cu_geometry *g = &geometries[(sel >> 1) % (sizeof geometries / sizeof *geometries)];
    uitars_coords mode = sel & 1 ? UITARS_COORDS_RELATIVE_1000 : UITARS_COORDS_ABSOLUTE;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    cu_result r;
    cu_result_init(&r);
    em_err err = {0};
    if (uitars_actions(text, g, mode, &r, &err) == 0) {
        check_actions(&r, g);
    } else if (!err.msg[0] || strchr(err.msg, '\n') || json_array_size(r.actions) != 0 || r.terminal) {
        abort();
    }
    cu_result_clear(&r);
    free(text);
    return 0;
}

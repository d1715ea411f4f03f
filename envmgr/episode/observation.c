#include "envmgr/episode/observation.h"

#include <string.h>

#include "envmgr/base/util.h"
#include "envmgr/episode/episode_env.h"
#include "evaluator/getters.h"
#include "recorder/trace.h"

static const char *const names[] = {"screenshot", "a11y_tree", "screenshot_a11y_tree"};

int obs_kind_parse(const char *name, obs_kind *k, em_err *err)
{
    for (size_t i = 0; name && i < ARRAY_LEN(names); i++)
        if (!strcmp(name, names[i])) {
            *k = (obs_kind)i;
            return 0;
        }
    return em_fail_input(err, "observation: `%.64s`: expected screenshot, a11y_tree or screenshot_a11y_tree",
                         name ? name : "");
}

const char *obs_kind_name(obs_kind k) { return (unsigned)k < ARRAY_LEN(names) ? names[k] : "screenshot"; }

int obs_fetch_tree(const episode_env *ev, trace_writer *tw, char sha[65], em_err *err)
{
    if (!ev->guest_ops)
        return em_fail(err, "observation: this env cannot read an accessibility tree");
    em_env_ops ops;
    ev->guest_ops(ev->ctx, &ops);
    /* Only what is showing: all that OSWorld's agents keep of the tree (their filter drops every node
     * not showing), read in a fraction of the time (docs/agent-protocol.md). */
    json_auto_t *spec = json_pack("{s:s,s:b}", "type", "accessibility_tree", "showing", 1);
    json_auto_t *art = NULL;
    if (getter_run(&ops, spec, NULL, NULL, &art, err) < 0)
        return em_prefix(err, "observation: ");
    json_t *v = json_object_get(art, "value");
    return trace_add_a11y(tw, json_string_value(v), json_string_length(v), sha, err) < 0
               ? em_prefix(err, "observation: ")
               : 0;
}

/* What a task asks of its env: the network section (mode, allowlist rules in the net layer's
 * grammar, limits) and the episode limits. The operator's maxima are applied where the task meets
 * an env (netpolicy_for_task, the episode plan). */
#include "envmgr/task/task_int.h"

#include <stdio.h>
#include <string.h>

#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"
#include "envmgr/net/netpolicy.h"

/* ---- network ---- */

/* network.limits, what the task asks for. They may not exceed the operator's maxima, which
 * netpolicy_check_task checks where the task meets an env. A 0 in t->net means the task did not
 * ask, and the env's maxima apply. */
static int parse_network_limits(task *t, json_t *net, em_err *err)
{
    json_t *lim;
    long bytes, conns;
    t->net.max_bytes_out = 0;
    t->net.max_conn_per_min = 0;
    t->net.op_max_bytes_out = 0;
    t->net.op_max_conn_per_min = 0;
    if (jfield_obj(net, "network", "limits", &lim, err) < 0)
        return -1;
    if (!lim)
        return 0;
    if (jfield_refuse_unknown(lim, "network.limits", " max_bytes_out max_connections_per_minute ", err) < 0 ||
        jfield_int(lim, "network.limits", "max_bytes_out", 1, NETPOLICY_BYTES_OUT_MAX, 0, &bytes, err) < 0 ||
        jfield_int(lim, "network.limits", "max_connections_per_minute", 1, NETPOLICY_CONN_PER_MIN_MAX, 0, &conns, err) < 0)
        return -1;
    if (t->net.mode == NETPOLICY_NONE)
        return em_fail_input(err, "network.limits: only with network.mode \"allowlist\" (mode none sends nothing)");
    t->net.max_bytes_out = (uint64_t)bytes;
    t->net.max_conn_per_min = (unsigned)conns;
    return 0;
}

int task_parse_network(task *t, json_t *root, em_err *err)
{
    json_t *net;
    netpolicy_init(&t->net);
    if (jfield_obj(root, "", "network", &net, err) < 0)
        return -1;
    if (!net)
        return parse_network_limits(t, NULL, err);
    if (jfield_refuse_unknown(net, "network", " mode allow limits ", err) < 0)
        return -1;
    const char *mode;
    if (jfield_str(net, "network", "mode", false, &mode, err) < 0)
        return -1;
    json_t *allow;
    if (jfield_array(net, "network", "allow", "an array of \"host:port\" strings", &allow, err) < 0)
        return -1;
    size_t nallow = allow ? json_array_size(allow) : 0;
    if (mode && strcmp(mode, "none") && strcmp(mode, "allowlist"))
        return em_fail_input(err, "network.mode: expected \"none\" or \"allowlist\", got `%.32s`", mode);
    if (mode && !strcmp(mode, "none") && nallow)
        return em_fail_input(err, "network.allow: must be empty when network.mode is \"none\"");
    t->net.mode = (mode ? !strcmp(mode, "allowlist") : nallow > 0) ? NETPOLICY_ALLOWLIST : NETPOLICY_NONE;
    size_t i;
    json_t *e;
    json_array_foreach(allow, i, e)
    {
        char p[JFIELD_PATH_MAX];
        if (jfield_item(allow, "network.allow", i, JSON_STRING, "a \"host:port\" string", p, err) < 0)
            return -1;
        if (netpolicy_add(&t->net, json_string_value(e), err) < 0)
            return em_prefix(err, "%s: ", p);
    }
    return parse_network_limits(t, net, err);
}

int task_parse_limits(task *t, json_t *root, em_err *err)
{
    json_t *lim;
    long steps;
    t->max_steps = 15;
    t->step_timeout_s = 60;
    t->episode_timeout_s = 600;
    t->settle_max_s = TASK_SETTLE_MAX_S;
    if (jfield_obj(root, "", "limits", &lim, err) < 0)
        return -1;
    if (!lim)
        return 0;
    if (jfield_refuse_unknown(lim, "limits", " max_steps step_timeout_s episode_timeout_s settle_max_s ", err) < 0 ||
        jfield_int(lim, "limits", "max_steps", 1, 1000, 15, &steps, err) < 0 ||
        jfield_num(lim, "limits", "step_timeout_s", 0, true, 3600, 60, &t->step_timeout_s, err) < 0 ||
        jfield_num(lim, "limits", "episode_timeout_s", 0, true, 86400, 600, &t->episode_timeout_s, err) < 0 ||
        jfield_num(lim, "limits", "settle_max_s", 0, true, 600, TASK_SETTLE_MAX_S, &t->settle_max_s, err) < 0)
        return -1;
    t->max_steps = (int)steps;
    return 0;
}


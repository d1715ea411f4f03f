/* The options of the commands that serve the API's handlers (serve, mcp): one parser for both. */
#include <string.h>

#include "cli.h"
#include "envmgr/api/api.h"
#include "envmgr/base/util.h"
#include "envmgr/net/netpolicy.h"

bool cli_api_option(const char *usage, int c, const char *arg, api_config *cfg, struct plan_image_choice *image,
                    struct netpolicy *net, int *rc)
{
    long v;
    *rc = 0;
    switch (c) {
    case 'm':
        if (parse_int(arg, 1, API_MAX_ENVS_LIMIT, &v) < 0)
            *rc = cli_usage_error(usage, "--max-envs: expected 1..%d, got `%s`", API_MAX_ENVS_LIMIT, arg);
        cfg->max_envs = (int)v;
        return true;
    case 'o': cfg->out_dir = arg; return true;
    case 'r': cfg->task_root = arg; return true;
    case 'A':
        if (strcmp(arg, "auto") && strcmp(arg, "kvm") && strcmp(arg, "tcg"))
            *rc = cli_usage_error(usage, "--accel: expected auto, kvm or tcg, got `%s`", arg);
        cfg->accel = arg;
        return true;
    case 's':
        if (parse_double(arg, &cfg->settle_ms) < 0 || cfg->settle_ms < 0 || cfg->settle_ms > 10000)
            *rc = cli_usage_error(usage, "--settle-ms: expected 0..10000, got `%s`", arg);
        return true;
    case 'P':
        *rc = cli_allow_private(usage, arg, net);
        cfg->net = net;
        return true;
    case CLI_OPT_MAX_EGRESS_BYTES:
    case CLI_OPT_MAX_CONN_PER_MIN:
        *rc = cli_net_limit_option(usage, c, arg, net);
        cfg->net = net;
        return true;
    case CLI_OPT_IMAGE:
    case CLI_OPT_FORCE_IMAGE: *rc = cli_image_option(usage, c, arg, image); return true;
    default: return false;
    }
}

/* The options of the commands that serve the API's handlers (serve, mcp) beside the episode ones. */
#include <string.h>

#include "cli.h"
#include "envmgr/api/api.h"
#include "envmgr/base/util.h"

bool cli_api_option(const char *usage, int c, const char *arg, api_config *cfg, int *rc)
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
    default: return false;
    }
}

void cli_api_from_episode(api_config *cfg, const cli_episode *ep)
{
    cfg->settle_ms = ep->settle_ms;
    cfg->net = ep->has_net ? &ep->net : NULL;
    cfg->image = ep->image.image;
    cfg->force_image = ep->image.force;
}

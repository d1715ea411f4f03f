/* The options every command that runs episodes reads alike (run, suite run, suite audit, serve, mcp):
 * one parser, so an option means the same and is checked the same wherever it is given. */
#include <getopt.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/settle.h"
#include "envmgr/suite/suite_pool.h"

void cli_episode_init(cli_episode *e)
{
    *e = (cli_episode){.settle_ms = SETTLE_DEFAULT_MS, .observation = OBS_SCREENSHOT};
    netpolicy_init(&e->net);
}

bool cli_episode_option(const char *usage, int c, const char *arg, cli_episode *e, int *rc)
{
    em_err err = {0};
    *rc = 0;
    switch (c) {
    case CLI_OPT_SETTLE_MS:
        if (parse_double(arg, &e->settle_ms) < 0 || e->settle_ms < 0 || e->settle_ms > 10000)
            *rc = cli_usage_error(usage, "--settle-ms: expected 0..10000, got `%s`", arg);
        return true;
    case CLI_OPT_OBSERVATION:
        if (obs_kind_parse(arg, &e->observation, &err) < 0)
            *rc = cli_usage_error(usage, "--%s", err.msg);
        return true;
    case CLI_OPT_VIDEO: e->video = true; return true;
    case CLI_OPT_ALLOW_PRIVATE:
        *rc = cli_allow_private(usage, arg, &e->net);
        e->has_net = true;
        return true;
    case CLI_OPT_MAX_EGRESS_BYTES:
    case CLI_OPT_MAX_CONN_PER_MIN:
        *rc = cli_net_limit_option(usage, c, arg, &e->net);
        e->has_net = true;
        return true;
    case CLI_OPT_OFFLINE:
    case CLI_OPT_ASSET_MIRROR: *rc = cli_asset_option(usage, c == CLI_OPT_OFFLINE, c == CLI_OPT_ASSET_MIRROR ? arg : NULL); return true;
    case CLI_OPT_IMAGE:
    case CLI_OPT_FORCE_IMAGE: *rc = cli_image_option(usage, c, arg, &e->image); return true;
    case CLI_OPT_AGENT_ENV:
    case CLI_OPT_AGENT_SANDBOX: *rc = cli_agent_option(usage, c, arg, &e->ag); return true;
    default: return false;
    }
}

void cli_pool_from_episode(pool_opts *o, const cli_episode *ep)
{
    o->settle_ms = ep->settle_ms;
    o->observation = ep->observation;
    o->video = ep->video;
    o->agent_env = ep->ag.env;
    o->agent_sandbox_off = ep->ag.sandbox_off;
    o->net = ep->has_net ? &ep->net : NULL;
}

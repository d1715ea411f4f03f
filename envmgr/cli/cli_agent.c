/* The agent options run and suite run share (cli.h). */
#include <string.h>

#include "cli.h"
#include "envmgr/episode/agent.h"

int cli_agent_option(const char *usage, int opt, const char *arg, cli_agent *a)
{
    if (opt == CLI_OPT_AGENT_SANDBOX) {
        if (strcmp(arg, "on") && strcmp(arg, "off"))
            return cli_usage_error(usage, "--agent-sandbox: expected on or off, got `%.100s`", arg);
        a->sandbox_off = !strcmp(arg, "off");
        return 0;
    }
    em_err err = {0};
    if (agent_env_name_check(arg, &err) < 0)
        return cli_usage_error(usage, "%s", err.msg);
    if (a->nenv >= CLI_AGENT_ENV_MAX)
        return cli_usage_error(usage, "--agent-env: at most %d names", CLI_AGENT_ENV_MAX);
    a->env[a->nenv++] = arg;
    a->env[a->nenv] = NULL;
    return 0;
}

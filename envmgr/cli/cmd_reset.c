#include <stdio.h>

#include "cli.h"
#include "envmgr/env/env.h"

static const char usage[] = "usage: envmgr reset NAME\n"
                            "  Return the env to its clean golden state (disk, RAM and screen).\n";

int cmd_reset(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc != 2)
        return cli_usage_error(usage, "reset: expected NAME");
    em_err err = {0};
    env *e;
    if (env_open_to_restart(argv[1], &e, &err) < 0)
        return cli_report(&err);
    env_timings t;
    int rc = env_reset(e, &t, &err);
    if (rc == 0)
        printf("env %s reset: stop %.0f ms, restore %.0f ms\n", argv[1], t.stop_ms, t.restore_ms);
    env_close(e);
    return rc < 0 ? cli_report(&err) : 0;
}

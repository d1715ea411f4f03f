#include <stdio.h>

#include "cli.h"
#include "envmgr/env/env.h"

static const char usage[] = "usage: envmgr down NAME...\n"
                            "  Stop each env's QEMU (if it still runs) and remove its run directory.\n";

int cmd_down(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc < 2)
        return cli_usage_error(usage, "down: NAME missing");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        em_err err = {0};
        if (env_down(argv[i], &err) < 0)
            rc = cli_report(&err);
        else
            printf("env %s down\n", argv[i]);
    }
    return rc;
}

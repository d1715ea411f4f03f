/* `envmgr pause NAME...` / `envmgr resume NAME...`: an env nobody uses waits paused and costs no
 * CPU; its guest clock stands still until it is resumed. */
#include <stdbool.h>
#include <stdio.h>

#include "cli.h"
#include "envmgr/env/env.h"

static const char pause_usage[] = "usage: envmgr pause NAME...\n"
                                  "  Stop each env's vCPUs (QMP stop): no CPU used, the guest clock stands still.\n"
                                  "  Screenshots still work; the next act, exec, reset or episode resumes it.\n";
static const char resume_usage[] = "usage: envmgr resume NAME...\n"
                                   "  Let each paused env run again (QMP cont).\n";

static int hold_each(int argc, char **argv, bool hold, const char *usage)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc < 2)
        return cli_usage_error(usage, "%s: NAME missing", argv[0]);
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        em_err err = {0};
        env *e;
        if (env_open(argv[i], &e, &err) < 0) {
            rc = cli_report(&err);
            continue;
        }
        if (env_hold(e, hold, &err) < 0)
            rc = cli_report(&err);
        else
            printf("env %s %s\n", argv[i], hold ? "paused" : "running");
        env_close(e);
    }
    return rc;
}

int cmd_pause(int argc, char **argv) { return hold_each(argc, argv, true, pause_usage); }
int cmd_resume(int argc, char **argv) { return hold_each(argc, argv, false, resume_usage); }

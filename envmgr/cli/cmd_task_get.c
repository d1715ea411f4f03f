/* `envmgr task get NAME SPEC`: one getter on a running env, its artifact printed: what a task's
 * evaluator would read, without running an episode (task authors; the apps tests). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/env/env.h"
#include "envmgr/env/guest_ops.h"
#include "evaluator/getters.h"

static const char usage[] =
    "usage: envmgr task get NAME SPEC [--out DIR]\n"
    "  Run one getter spec (JSON, as in a task's evaluator.result, e.g. '{\"type\": \"open_tabs_info\"}')\n"
    "  on the env NAME and print the artifact as one JSON line; files it copies go into DIR\n"
    "  (default ./envmgr-get). Exit 1 when the getter fails (the reason on stderr).\n";

int cmd_task_get(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    const char *out = "envmgr-get";
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c != 'o')
            return cli_usage_error(usage, "task get: bad option");
        out = optarg;
    }
    if (argc - optind != 2)
        return cli_usage_error(usage, "task get: expected NAME and SPEC");
    json_error_t je;
    json_auto_t *spec = json_loads(argv[optind + 1], JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(spec))
        return cli_usage_error(usage, "task get: SPEC: not a JSON object (%s)", je.text);
    em_err err = {0};
    if (getter_check(spec, &err) < 0)
        return cli_report(&err);
    env *e;
    if (env_open(argv[optind], &e, &err) < 0)
        return cli_report(&err);
    em_env_ops ops;
    guest_ops_bind(e, &ops);
    json_t *art = NULL;
    int rc = getter_run(&ops, spec, out, NULL, &art, &err);
    env_close(e);
    if (rc < 0)
        return cli_report(&err);
    char *s = json_dumps(art, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(art);
    return 0;
}

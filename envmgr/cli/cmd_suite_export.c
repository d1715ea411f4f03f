/* envmgr suite export DIR --osworld OUT: a suite run as OSWorld's results tree, for the scripts and
 * viewers that read OSWorld's results (docs/osworld.md, "Bring your OSWorld agent"). */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "envmgr/suite/export_osworld.h"

static const char usage[] =
    "usage: envmgr suite export DIR --osworld OUT\n"
    "  Write OSWorld's results tree of the suite run in DIR: OUT/<domain>/<task id>/ with traj.jsonl (a\n"
    "  line per agent reply: step_num, action_timestamp, action, response, reward, done, info,\n"
    "  screenshot_file), step_<n>_<timestamp>.png (the screen after the step), result.txt (the score)\n"
    "  and recording.mp4 (ffmpeg), from each final episode's trace. An episode folder that exists\n"
    "  already is an error; episodes without a trace (env_error, unsupported) are skipped and counted.\n";

int cmd_suite_export(int argc, char **argv)
{
    const char *out = NULL;
    static const struct option opts[] = {{"osworld", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 'o')
            return cli_usage_error(usage, "suite export: bad option");
        out = optarg;
    }
    if (!out)
        return cli_usage_error(usage, "suite export: --osworld OUT: missing (the only format so far)");
    if (argc - optind != 1)
        return cli_usage_error(usage, "suite export: expected one DIR (a suite run's --out)");
    em_err err = {0};
    export_osworld_info info;
    if (export_osworld(argv[optind], out, &info, &err) < 0)
        return cli_report(&err);
    printf("exported %zu episode%s to %s", info.episodes, info.episodes == 1 ? "" : "s", out);
    if (info.skipped)
        printf(" (%zu without a trace skipped)", info.skipped);
    printf("\n");
    return 0;
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "recorder/trace.h"

static const char usage[] =
    "usage: envmgr trace verify DIR\n"
    "       envmgr trace show DIR\n"
    "       envmgr trace export DIR (--html OUT_DIR | --frames OUT_DIR | --video OUT.mp4)\n"
    "  verify: check the hash chain, the trailer, the HMAC (when ENVMGR_TRACE_KEY is set) and every frame;\n"
    "          a changed byte is reported with its line number.\n"
    "  show:   a human summary (steps, durations, score).\n"
    "  export: a self-contained HTML page with every step, numbered PNG frames, or the episode as a video\n"
    "          (H.264 MP4 built with ffmpeg from the frames and their timings, as OSWorld's recording.mp4).\n";

int cmd_trace(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc < 3)
        return cli_usage_error(usage, "trace: expected a subcommand and DIR");
    const char *sub = argv[1], *dir = argv[2];
    em_err err = {0};
    if (!strcmp(sub, "verify") && argc == 3) {
        json_t *report = NULL;
        int rc = trace_verify(dir, &report, &err);
        if (report) {
            char *text = json_dumps(report, JSON_INDENT(2));
            if (rc == 0)
                puts(text);
            free(text);
            json_decref(report);
        }
        if (rc < 0)
            return cli_report(&err);
        return 0;
    }
    if (!strcmp(sub, "show") && argc == 3)
        return trace_show(dir, stdout, &err) < 0 ? cli_report(&err) : 0;
    if (!strcmp(sub, "export") && argc == 5) {
        int rc;
        if (!strcmp(argv[3], "--html"))
            rc = trace_export_html(dir, argv[4], &err);
        else if (!strcmp(argv[3], "--frames"))
            rc = trace_export_frames(dir, argv[4], &err);
        else if (!strcmp(argv[3], "--video"))
            rc = trace_export_video(dir, argv[4], &err);
        else
            return cli_usage_error(usage, "trace export: expected --html, --frames or --video, got `%s`", argv[3]);
        if (rc < 0)
            return cli_report(&err);
        printf("exported %s to %s\n", dir, argv[4]);
        return 0;
    }
    return cli_usage_error(usage, "trace: unknown subcommand or arguments");
}

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/env/env.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

static const char usage[] =
    "usage: envmgr screenshot NAME FILE [--format png|raw]\n"
    "  Save a fresh full frame of the env's screen. FILE - writes to stdout.\n"
    "  --format raw    RGBX bytes, 4 per pixel, row by row (width and height on stderr)\n";

int cmd_screenshot(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    const char *format = "png";
    static const struct option opts[] = {{"format", required_argument, 0, 'f'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "f:", opts, NULL)) != -1) {
        if (c != 'f')
            return cli_usage_error(usage, "screenshot: bad option");
        format = optarg;
    }
    if (strcmp(format, "png") && strcmp(format, "raw"))
        return cli_usage_error(usage, "--format: expected png or raw, got `%s`", format);
    if (argc - optind != 2)
        return cli_usage_error(usage, "screenshot: expected NAME and FILE");
    const char *name = argv[optind], *file = argv[optind + 1];
    em_err err = {0};
    env *e;
    if (env_open(name, &e, &err) < 0)
        return cli_report(&err);
    int rc = 0;
    const void *data = NULL;
    size_t len = 0;
    if (!strcmp(format, "png")) {
        const png_buf *png;
        rc = env_screenshot(e, &png, &err);
        if (rc == 0) {
            data = png->data;
            len = png->len;
        }
    } else {
        const uint8_t *px;
        rc = env_frame(e, &px, &err);
        if (rc == 0) {
            data = px;
            len = (size_t)env_width(e) * env_height(e) * 4;
            fprintf(stderr, "%dx%d rgbx\n", env_width(e), env_height(e));
        }
    }
    if (rc == 0) {
        if (!strcmp(file, "-"))
            rc = write_full(1, data, len, &err);
        else
            rc = write_file_atomic(file, data, len, 0644, &err);
    }
    env_close(e);
    return rc < 0 ? cli_report(&err) : 0;
}

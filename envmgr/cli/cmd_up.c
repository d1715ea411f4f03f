#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "envmgr/env.h"

static const char usage[] =
    "usage: envmgr up --name NAME [--image IMAGE] [--accel auto|kvm|tcg]\n"
    "  Boot an env from the image's golden state (built on first use: a cold boot to a ready desktop).\n"
    "  --name NAME     the env's name (letters, digits, . - _)\n"
    "  --image IMAGE   an image name under ENVMGR_IMAGE_DIR or a directory with manifest.json (default: desktop)\n"
    "  --accel MODE    auto (default: KVM only if a probe boot works), kvm or tcg\n";

int cmd_up(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    env_up_opts o = {.image = "desktop", .accel = "auto"};
    static const struct option opts[] = {{"name", required_argument, 0, 'n'},
                                         {"image", required_argument, 0, 'i'},
                                         {"accel", required_argument, 0, 'a'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "+n:i:a:", opts, NULL)) != -1) {
        switch (c) {
        case 'n': o.name = optarg; break;
        case 'i': o.image = optarg; break;
        case 'a': o.accel = optarg; break;
        default: return cli_usage_error(usage, "up: bad option");
        }
    }
    if (optind < argc)
        return cli_usage_error(usage, "up: unexpected argument `%s`", argv[optind]);
    if (!o.name)
        return cli_usage_error(usage, "--name: missing");
    em_err err = {0};
    env *e;
    env_timings t;
    if (env_up(&o, &e, &t, &err) < 0)
        return cli_report(&err);
    printf("env %s ready (%s): restore %.0f ms, golden state %.0f ms\n", o.name, env_accel(e), t.restore_ms,
           t.golden_ms);
    env_close(e);
    return 0;
}

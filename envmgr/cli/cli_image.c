/* --image NAME [--force-image] for every command that runs tasks (cli.h). */
#include "cli.h"
#include "envmgr/episode/plan.h"
#include "envmgr/base/util.h"

int cli_image_option(const char *usage, int opt, const char *arg, plan_image_choice *ch)
{
    if (opt == CLI_OPT_FORCE_IMAGE) {
        ch->force = true;
        return 0;
    }
    em_err err = {0};
    if (check_name("image", arg, &err) < 0)
        return cli_usage_error(usage, "--%s", err.msg);
    ch->image = arg;
    return 0;
}

int cli_image_check(const char *usage, const plan_image_choice *ch)
{
    return ch->force && !ch->image ? cli_usage_error(usage, "--force-image: give the image with --image NAME") : 0;
}

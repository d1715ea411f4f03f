#include <stdio.h>

#include "cli.h"
#include "envmgr/env/env.h"

static const char usage[] =
    "usage: envmgr act NAME ACTION_JSON\n"
    "  Perform one computer_13 action, e.g. '{\"action_type\":\"CLICK\",\"x\":640,\"y\":400}'.\n"
    "  Types: MOVE_TO CLICK MOUSE_DOWN MOUSE_UP RIGHT_CLICK DOUBLE_CLICK DRAG_TO SCROLL TYPING PRESS\n"
    "         KEY_DOWN KEY_UP HOTKEY WAIT FAIL DONE (see docs/actions.md). A bad action is refused\n"
    "  with exit 2 before anything reaches the guest.\n";

int cmd_act(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc != 3)
        return cli_usage_error(usage, "act: expected NAME and ACTION_JSON");
    em_err err = {0};
    env *e;
    if (env_open(argv[1], &e, &err) < 0)
        return cli_report(&err);
    action a;
    int rc = action_parse_text(argv[2], env_width(e), env_height(e), &a, &err);
    if (rc == 0) {
        rc = env_act(e, &a, &err);
        action_free(&a);
    }
    env_close(e);
    return rc < 0 ? cli_report(&err) : 0;
}

#include "envmgr/base/exit_cause.h"

#include <string.h>

#include "envmgr/base/util.h"

static const char *const names[] = {
    [EXIT_NONE] = NULL,
    [EXIT_DONE] = "done",
    [EXIT_FAIL] = "fail",
    [EXIT_TIMEOUT] = "timeout",
    [EXIT_MAX_STEPS] = "max_steps",
    [EXIT_AGENT_ERROR] = "agent_error",
    [EXIT_ENV_ERROR] = "env_error",
    [EXIT_TASK_ERROR] = "task_error",
    [EXIT_EVALUATED] = "evaluated",
    [EXIT_GUEST_SHUTDOWN] = "guest_shutdown",
    [EXIT_SETUP_ERROR] = "setup_error",
    [EXIT_UNSUPPORTED] = "unsupported",
};

const char *exit_cause_name(exit_cause c)
{
    return (size_t)c < ARRAY_LEN(names) ? names[c] : NULL;
}

exit_cause exit_cause_from_name(const char *name)
{
    if (!name)
        return EXIT_NONE;
    for (size_t i = 1; i < ARRAY_LEN(names); i++)
        if (!strcmp(names[i], name))
            return (exit_cause)i;
    return EXIT_NONE;
}

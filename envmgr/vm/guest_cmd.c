#include "envmgr/vm/guest_cmd.h"

#include <stdio.h>

#include "envmgr/base/util.h"

json_t *guest_cmd_timeout_args(const char *const *argv, double timeout_s, em_err *err)
{
    if (!argv || !argv[0]) {
        em_fail_input(err, "exec: empty command");
        return NULL;
    }
    if (timeout_s <= 0 || timeout_s > 86400) {
        em_fail_input(err, "exec: timeout must be in (0, 86400] seconds");
        return NULL;
    }
    json_t *args = json_array();
    char secs[32];
    snprintf(secs, sizeof secs, "%.3f", timeout_s);
    json_array_append_new(args, json_string("-k"));
    json_array_append_new(args, json_string("2"));
    json_array_append_new(args, json_string(secs));
    for (size_t i = 0; argv[i]; i++) {
        json_t *s = json_string(argv[i]);
        if (!s) {
            json_decref(args);
            em_fail_input(err, "exec: argument %zu is not valid UTF-8", i);
            return NULL;
        }
        json_array_append_new(args, s);
    }
    return args;
}

bool guest_cmd_timed_out(int exit_code, double started_ms, double timeout_s)
{
    return (exit_code == 124 || exit_code == 137) && now_ms() - started_ms >= timeout_s * 1000;
}

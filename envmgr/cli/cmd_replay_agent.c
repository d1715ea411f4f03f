/* `envmgr __replay-agent TRACE_DIR [--fast] [--until N]`: the agent a replay
 * runs. It speaks the stdio agent protocol like any agent and answers each
 * observation with the next recorded action, after the recorded think time
 * unless --fast. Hidden: `envmgr replay` starts it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "recorder/trace.h"

int cmd_replay_agent(int argc, char **argv)
{
    if (argc < 2)
        return EM_EXIT_USAGE;
    int fast = 0;
    long until = -1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--fast"))
            fast = 1;
        else if (!strcmp(argv[i], "--until") && i + 1 < argc && parse_int(argv[++i], 0, 1000000, &until) == 0)
            ;
        else
            return EM_EXIT_USAGE;
    }
    em_err err = {0};
    trace *t;
    if (trace_read(argv[1], &t, &err) < 0)
        return cli_report(&err);
    size_t next = 0, sent = 0;
    /* One observation per line, whatever its length: a fixed buffer would split a long one into
     * two "observations" and answer twice. */
    _cleanup_free_ char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, stdin) > 0) {
        json_t *step = NULL;
        while (next < trace_n_steps(t)) {
            json_t *s = trace_step(t, next++);
            const char *type = json_string_value(json_object_get(json_object_get(s, "action"), "action_type"));
            if (type && strcmp(type, "REFUSED")) { /* refused replies never reached the guest */
                step = s;
                break;
            }
        }
        json_t *reply;
        if (!step || (until >= 0 && (long)sent >= until)) {
            reply = json_pack("{s:s}", "action_type", "DONE");
        } else {
            if (!fast)
                sleep_ms(json_number_value(json_object_get(step, "agent_ms")));
            reply = json_incref(json_object_get(step, "action"));
        }
        char *text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
        if (!text) /* a step without an encodable action: end the episode rather than print garbage */
            text = xstrdup("{\"action_type\":\"DONE\"}");
        printf("%s\n", text);
        fflush(stdout);
        free(text);
        json_decref(reply);
        sent++;
    }
    trace_free(t);
    return 0;
}

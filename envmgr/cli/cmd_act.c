#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/action/action_reply.h"
#include "envmgr/env/env.h"
#include "envmgr/episode/settle.h"
#include "envmgr/episode/setup.h"

#define ACT_TEXT_MAX (256 * 1024) /* a reply on the command line: pyautogui code, a tool call */
#define ACT_SETTLE_MS SETTLE_DEFAULT_MS /* before a tool's answer frame: the settle rule's default window */
#define ACT_SETTLE_MAX_MS 20000.0

static const char usage[] =
    "usage: envmgr act NAME REPLY_JSON\n"
    "  Perform an agent's reply in any action space (docs/actions.md, docs/computer-use.md):\n"
    "    computer_13   '{\"action_type\":\"CLICK\",\"x\":640,\"y\":400}'\n"
    "    pyautogui     '{\"pyautogui\":\"pyautogui.hotkey(\\\"ctrl\\\", \\\"s\\\")\"}'\n"
    "    anthropic     '{\"anthropic\":{\"action\":\"left_click\",\"coordinate\":[512,320]},\"display\":[1024,640]}'\n"
    "    openai        '{\"openai\":{\"type\":\"click\",\"button\":\"left\",\"x\":512,\"y\":320}}'\n"
    "    uitars        '{\"uitars\":\"click(start_box=\\'(512,320)\\')\"}'\n"
    "  A bad reply is refused with exit 2 before anything reaches the guest. For Anthropic's and\n"
    "  OpenAI's tools, the tool's answer (a tool_result, a computer_call_output) is printed as one JSON\n"
    "  line once the screen has settled.\n";

static int act_all(env *e, const action_reply *rep, em_err *err)
{
    size_t i;
    json_t *j;
    json_array_foreach(rep->actions, i, j)
    {
        action a;
        if (action_parse(j, env_width(e), env_height(e), &a, err) < 0)
            return -1;
        int rc = env_act(e, &a, err);
        action_free(&a);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int print_answer(env *e, const action_reply *rep, em_err *err)
{
    const uint8_t *px;
    int x, y;
    json_t *answer = NULL;
    settle_info info;
    if (screen_settle(e, ACT_SETTLE_MS, ACT_SETTLE_MAX_MS, false, &info, err) < 0 || env_frame(e, &px, err) < 0 ||
        env_pointer(e, &x, &y, err) < 0 || action_reply_answer(rep, px, x, y, &answer, err) < 0)
        return -1;
    if (answer) {
        char *line = json_dumps(answer, JSON_COMPACT);
        puts(line);
        free(line);
        json_decref(answer);
    }
    return 0;
}

int cmd_act(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc != 3)
        return cli_usage_error(usage, "act: expected NAME and REPLY_JSON");
    em_err err = {0};
    if (strlen(argv[2]) > ACT_TEXT_MAX) {
        em_fail_input(&err, "action: longer than %d KiB", ACT_TEXT_MAX / 1024);
        return cli_report(&err);
    }
    json_error_t je;
    json_t *reply = json_loads(argv[2], JSON_REJECT_DUPLICATES, &je);
    if (!reply) {
        em_fail_input(&err, "action: invalid JSON at column %d: %s", je.column, je.text);
        return cli_report(&err);
    }
    env *e;
    if (env_open(argv[1], &e, &err) < 0) {
        json_decref(reply);
        return cli_report(&err);
    }
    action_reply rep;
    int rc = action_reply_decode(reply, env_width(e), env_height(e), &rep, &err);
    json_decref(reply);
    if (rc == 0) {
        rc = act_all(e, &rep, &err);
        if (rc == 0 && (rep.space == SPACE_ANTHROPIC || rep.space == SPACE_OPENAI))
            rc = print_answer(e, &rep, &err);
        action_reply_free(&rep);
    }
    env_close(e);
    return rc < 0 ? cli_report(&err) : 0;
}

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "envmgr/api/api.h"
#include "envmgr/api/api_mcp.h"
#include "envmgr/base/linebuf.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/plan.h"
#include "envmgr/episode/settle.h"
#include "envmgr/net/netpolicy.h"

#define POLL_MS 200 /* how soon a SIGINT/SIGTERM is noticed while the client is silent */

static const char usage[] =
    "usage: envmgr mcp [--display WxH] [--max-envs N] [--out DIR] [--task-root DIR] [--accel auto|kvm|tcg]\n"
    "                  [--settle-ms MS] [--allow-private ADDR:PORT]... [--image NAME [--force-image]]\n"
    "  A Model Context Protocol server on stdin/stdout (docs/mcp.md): one JSON-RPC message a line. Its\n"
    "  tools drive one env, created when first needed and torn down when stdin closes (or on\n"
    "  SIGINT/SIGTERM): computer (Anthropic's computer tool), act, screenshot, start_task,\n"
    "  accessibility_tree, evaluate, save_state, restore_state. Logs go to stderr.\n"
    "  --display WxH       the size the computer tool's model sees the screen at (coordinates scaled\n"
    "                      back; default: the screen's own size)\n" CLI_API_USAGE;

static int parse_display(const char *arg, api_config *c)
{
    char *end;
    long w = strtol(arg, &end, 10), h = *end == 'x' ? strtol(end + 1, &end, 10) : 0;
    if (*end || w < 1 || h < 1 || w > 8192 || h > 8192)
        return cli_usage_error(usage, "--display: expected WIDTHxHEIGHT, got `%s`", arg);
    c->display_w = (int)w;
    c->display_h = (int)h;
    return 0;
}

static int write_line(const char *line)
{
    size_t n = strlen(line);
    /* one message a line: jansson's compact output escapes every newline inside strings */
    if (fwrite(line, 1, n, stdout) != n || fputc('\n', stdout) == EOF || fflush(stdout) == EOF)
        return -1;
    return 0;
}

/* Answers every complete line in lb; a line past the cap gets one error and is dropped up to its
 * newline (*skipping: inside such a line). */
static int answer_lines(api_mcp_session *m, linebuf *lb, bool *skipping)
{
    const char *line;
    size_t n;
    for (;;) {
        int got = linebuf_next(lb, &line, &n);
        if (got == LINEBUF_NONE)
            return 0;
        char *reply = NULL;
        if (got == LINEBUF_TOO_LONG) { /* its first MCP_MESSAGE_MAX + 1 bytes hold no newline */
            if (!*skipping)
                reply = api_mcp_handle(m, "", MCP_MESSAGE_MAX + 1);
            *skipping = true;
            linebuf_skip(lb, MCP_MESSAGE_MAX + 1);
        } else if (*skipping) { /* the long line's end */
            *skipping = false;
        } else if (n > 0) {
            reply = api_mcp_handle(m, line, n);
        }
        int rc = reply ? write_line(reply) : 0;
        free(reply);
        if (rc < 0)
            return -1;
    }
}

/* Messages until stdin ends or a signal. */
static int serve_stdio(api_mcp_session *m)
{
    linebuf lb;
    linebuf_init(&lb, MCP_MESSAGE_MAX);
    bool skipping = false;
    int rc = 0;
    while (rc == 0 && !interrupted()) {
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (poll(&p, 1, POLL_MS) <= 0)
            continue;
        em_err err = {0};
        ssize_t got = linebuf_read(&lb, STDIN_FILENO, &err);
        if (got == 0)
            break;
        if (got < 0 && errno == 0) { /* cannot happen: answer_lines takes every over-long line */
            fprintf(stderr, "envmgr mcp: %s\n", err.msg);
            rc = -1;
        } else if (got > 0) {
            rc = answer_lines(m, &lb, &skipping);
        }
    }
    linebuf_release(&lb);
    return rc;
}

int cmd_mcp(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    api_config c = {.max_envs = 1, .settle_ms = SETTLE_DEFAULT_MS, .accel = "auto", .no_listen = true};
    static const struct option opts[] = {{"display", required_argument, 0, 'D'}, CLI_API_OPTIONS, {0, 0, 0, 0}};
    cli_episode ep;
    cli_episode_init(&ep);
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (cli_api_option(usage, ch, optarg, &c, &rc) || cli_episode_option(usage, ch, optarg, &ep, &rc)) {
            if (rc)
                return rc;
        } else if (ch == 'D') {
            if (parse_display(optarg, &c))
                return EM_EXIT_USAGE;
        } else {
            return cli_usage_error(usage, "mcp: bad option");
        }
    }
    if (cli_image_check(usage, &ep.image))
        return EM_EXIT_USAGE;
    if (optind != argc)
        return cli_usage_error(usage, "mcp: unexpected argument `%s`", argv[optind]);
    cli_api_from_episode(&c, &ep);
    char token[65]; /* the handlers' own check wants one; nothing listens to take it */
    em_err err = {0};
    if (api_token_generate(token, &err) < 0)
        return cli_report(&err);
    c.token = token;
    api_server *s;
    if (api_server_start(&c, &s, &err) < 0)
        return cli_report(&err);
    api_mcp_session *m = api_mcp_session_new(s);
    rc = serve_stdio(m);
    api_mcp_session_free(m);
    api_server_stop(s);
    return rc < 0 ? EM_EXIT_FAIL : 0;
}

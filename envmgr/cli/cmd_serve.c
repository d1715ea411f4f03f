#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "envmgr/api/api.h"
#include "envmgr/base/paths.h"
#include "envmgr/episode/plan.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/settle.h"
#include "envmgr/net/netpolicy.h"

static const char usage[] =
    "usage: envmgr serve [--listen HOST:PORT | --socket PATH] [--token-file FILE] [--max-envs N]\n"
    "                    [--out DIR] [--task-root DIR] [--accel auto|kvm|tcg] [--settle-ms MS]\n"
    "                    [--allow-private ADDR:PORT]... [--max-egress-bytes N] [--max-connections-per-minute N]\n"
    "                    [--image NAME [--force-image]]\n"
    "  Serve the JSON HTTP API (docs/http-api.md) until SIGINT/SIGTERM, then tear down every env it created.\n"
    "  --listen HOST:PORT  default " API_DEFAULT_LISTEN "; a port of 0 picks a free one. Only loopback\n"
    "                      unless you name another address here.\n"
    "  --socket PATH       a unix socket (0600) instead of TCP\n"
    "  --token-file FILE   read the bearer token from FILE (mode 0600), or create FILE with a new one;\n"
    "                      default: a new token in RUN_ROOT/.serve-PID.token, removed at exit\n"
    CLI_API_USAGE
    "                  (for POST /v1/envs: a request's own \"image\" always wins)\n"
    "  Prints `envmgr serve: listening on URL` and `envmgr serve: token file FILE` on stdout when ready.\n";

static bool is_loopback(const char *listen)
{
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : strlen(listen);
    return (n == 9 && !strncmp(listen, "localhost", 9)) || !strncmp(listen, "127.", 4) ||
           (n == 5 && !strncmp(listen, "[::1]", 5));
}

int cmd_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    api_config c = {.max_envs = 4, .settle_ms = SETTLE_DEFAULT_MS, .accel = "auto"};
    const char *token_file = NULL;
    static const struct option opts[] = {{"listen", required_argument, 0, 'l'},
                                         {"socket", required_argument, 0, 'S'},
                                         {"token-file", required_argument, 0, 't'},
                                         CLI_API_OPTIONS,
                                         {0, 0, 0, 0}};
    cli_episode ep;
    cli_episode_init(&ep);
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (cli_api_option(usage, ch, optarg, &c, &rc) || cli_episode_option(usage, ch, optarg, &ep, &rc)) {
            if (rc)
                return rc;
            continue;
        }
        switch (ch) {
        case 'l': c.listen = optarg; break;
        case 'S': c.socket_path = optarg; break;
        case 't': token_file = optarg; break;
        default: return cli_usage_error(usage, "serve: bad option");
        }
    }
    if (cli_image_check(usage, &ep.image))
        return EM_EXIT_USAGE;
    cli_api_from_episode(&c, &ep);
    if (optind != argc)
        return cli_usage_error(usage, "serve: unexpected argument `%s`", argv[optind]);
    if (c.listen && c.socket_path)
        return cli_usage_error(usage, "serve: --listen and --socket exclude each other");
    if (c.listen && !is_loopback(c.listen))
        fprintf(stderr, "envmgr serve: warning: listening on %s, not loopback: anyone who can reach it and has "
                        "the token controls the envs\n", c.listen);
    em_err err = {0};
    char *token = NULL;
    bool created = false;
    _cleanup_free_ char *default_file = NULL;
    if (!token_file) {
        if (paths_ensure_run_root(&err) < 0)
            return cli_report(&err);
        default_file = xasprintf("%s/.serve-%d.token", paths_run_root(), (int)getpid());
        unlink(default_file);
        token_file = default_file;
    }
    if (api_token_load_or_create(token_file, &token, &created, &err) < 0)
        return cli_report(&err);
    c.token = token;
    api_server *s;
    if (api_server_start(&c, &s, &err) < 0) {
        if (created)
            unlink(token_file);
        free(token);
        return cli_report(&err);
    }
    printf("envmgr serve: listening on %s\n", api_server_url(s));
    printf("envmgr serve: token file %s\n", token_file);
    fflush(stdout);
    while (!interrupted()) /* SIGINT/SIGTERM set the flag (install_interrupt_handlers) */
        sleep_ms(100);
    fprintf(stderr, "envmgr serve: stopping: tearing down the envs this server owns\n");
    api_server_stop(s);
    if (created && default_file)
        unlink(token_file);
    free(token);
    fprintf(stderr, "envmgr serve: stopped\n");
    return 0;
}

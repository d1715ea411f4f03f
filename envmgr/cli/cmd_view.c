#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/view/view.h"
#include "envmgr/base/util.h"

static const char usage[] =
    "usage: envmgr view ENV [--listen 127.0.0.1:PORT | --socket PATH] [--control]\n"
    "  Watch an env: serves a view-only VNC endpoint that any VNC viewer opens (keyboard, mouse and\n"
    "  clipboard from the viewer are dropped, so watching never disturbs an agent) until Ctrl-C.\n"
    "  --listen ADDR  loopback address (default 127.0.0.1:0, a free port)\n"
    "  --socket PATH  a unix socket (0600) instead\n"
    "  --control      pass the viewer's input through (debugging a stuck env; not while an agent runs)\n"
    "  An env owned by `envmgr serve` can also be watched in a browser: GET /v1/envs/ENV/live.\n";

typedef struct view_args {
    const char *name;
    bool control, unix_sock;
} view_args;

static void ready(const char *where, void *arg)
{
    const view_args *a = arg;
    printf("envmgr view: env %s: %s VNC at %s\n", a->name, a->control ? "CONTROL (input passes)" : "view-only",
           where);
    if (a->unix_sock) {
        printf("  open it with: vncviewer %s   (TigerVNC; or socat TCP-LISTEN:5901,bind=127.0.0.1 UNIX:%s)\n", where,
               where);
    } else {
        const char *colon = strrchr(where, ':');
        printf("  open it with: vncviewer %.*s::%s   (any VNC viewer: host %.*s, port %s, no password)\n",
               (int)(colon - where), where, colon + 1, (int)(colon - where), where, colon + 1);
    }
    printf("  with `envmgr serve`: http://HOST:PORT/v1/envs/%s/live?token=TOKEN in a browser\n", a->name);
    printf("  Ctrl-C stops watching (the env keeps running)\n");
    fflush(stdout);
}

int cmd_view(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    const char *listen = NULL, *socket_path = NULL;
    view_args a = {0};
    static const struct option opts[] = {{"listen", required_argument, 0, 'l'},
                                         {"socket", required_argument, 0, 'S'},
                                         {"control", no_argument, 0, 'c'},
                                         {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'l': listen = optarg; break;
        case 'S': socket_path = optarg; break;
        case 'c': a.control = true; break;
        default: return cli_usage_error(usage, "view: bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(usage, "view: expected one ENV");
    if (listen && socket_path)
        return cli_usage_error(usage, "view: --listen and --socket exclude each other");
    a.name = argv[optind];
    a.unix_sock = socket_path != NULL;
    em_err err = {0};
    if (view_serve(a.name, listen, socket_path, a.control, ready, &a, &err) < 0)
        return cli_report(&err);
    return 0;
}

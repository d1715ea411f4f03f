/* The HTTP JSON API (`envmgr serve`): remote agents create envs, reset them
 * to a task, step, take screenshots, evaluate and fetch traces, with the same
 * parsers and the same per-step logic (episode.h) as the CLI. docs/http-api.md
 * is the reference.
 *
 * The server owns the envs it creates and tears them down when it stops. It
 * listens on loopback TCP (another address only when named explicitly) or a
 * unix socket, and every request but /v1/health needs the bearer token. */
#ifndef ENVMGR_API_H
#define ENVMGR_API_H

#include <stdbool.h>

#include "envmgr/base/err.h"

#define API_DEFAULT_LISTEN "127.0.0.1:7480"
#define API_MAX_ENVS_LIMIT 64

typedef struct api_config {
    const char *listen;      /* HOST:PORT (PORT 0: any free port); NULL with socket_path */
    const char *socket_path; /* listen on this unix socket instead (created 0600) */
    const char *token;       /* the bearer token (required, 16..256 printable bytes) */
    int max_envs;            /* envs this server may own at once */
    const char *out_dir;     /* episodes go to OUT/<env id>/<n>/ (result.json, trace/) */
    const char *task_root;   /* task paths in requests are resolved inside this folder */
    const char *novnc_dir;   /* noVNC's files for the live page (NULL: ENVMGR_NOVNC_DIR or /usr/share/novnc) */
    const char *accel;       /* auto, kvm, tcg */
    double settle_ms;        /* after each action, as `envmgr run --settle-ms` */
    const char *image;       /* --image: for requests that name none and tasks that name none (NULL: desktop) */
    bool force_image;        /* --force-image: that image even for a task that names another */
    const struct netpolicy *net; /* every env's: the operator's --allow-private rules and egress limit maxima
                                  * (NULL: none and the defaults) */
    bool no_listen;              /* no HTTP at all: the handlers are reached through api_call (envmgr mcp) */
    int display_w, display_h;    /* the MCP computer tool's display (0: the screen's own size) */
} api_config;

typedef struct api_server api_server;

/* A fresh token: 64 hex digits from the kernel's random source. */
int api_token_generate(char out[65], em_err *err);
/* Read a token file (its mode must not let group or others read it), or
 * create it (0600, O_EXCL) holding a new random token. *token is malloc'd. */
int api_token_load_or_create(const char *path, char **token, bool *created, em_err *err);

/* Bind, listen and start serving on MHD's threads; returns at once. */
int api_server_start(const api_config *c, api_server **out, em_err *err);
/* "http://127.0.0.1:7480" or "unix:/path" (borrowed). */
const char *api_server_url(const api_server *s);
/* Stop accepting, end live views, finish in-flight requests, tear down every env the server owns. */
void api_server_stop(api_server *s);

#endif

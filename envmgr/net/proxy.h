/* The egress proxy of an allowlist env: a helper process (`envmgr net serve
 * RUN_DIR`) that vm_spawn starts as QEMU's parent, so it lives exactly as
 * long as the env's QEMU, and reaps the per-connection relays QEMU spawns.
 *
 * How a guest connection reaches it: QEMU's user networking runs, for each
 * guest TCP connection to a guestfwd address, `envmgr net relay SOCK TAG`
 * with the connection as its stdin. The relay passes that descriptor over
 * the unix socket RUN_DIR/egress.sock (SCM_RIGHTS) with its tag and exits;
 * the proxy then serves the connection on a thread of its own:
 *   tag "proxy"           an HTTP proxy: CONNECT host:port, or a plain
 *                         http:// request; refusals get an HTTP status
 *   tag "tcp:HOST:PORT"   a raw TCP relay to that allowlisted endpoint;
 *                         a refusal closes the connection at once
 * Either way the destination is checked against the policy, names are
 * resolved on the host and loopback or private addresses are refused unless
 * an address rule lists them, and one JSON line per connection goes to
 * RUN_DIR/egress.jsonl. */
#ifndef ENVMGR_PROXY_H
#define ENVMGR_PROXY_H

#include <stdbool.h>
#include <sys/types.h>

#include "envmgr/net/egress_log.h"
#include "envmgr/base/err.h"
#include "envmgr/net/netpolicy.h"

typedef struct proxy_config {
    netpolicy policy;
    char env_name[64];
    egress_log *log;            /* borrowed; NULL: no log */
    double head_timeout_ms;     /* the whole request head (slow clients get 408) */
    double connect_timeout_ms;  /* upstream connect (504 after it) */
    double idle_timeout_ms;     /* no byte either way for this long ends a connection */
    int max_conns;              /* open at once; more are refused */
} proxy_config;

/* 10 s head, 10 s connect, 300 s idle, 256 connections; mode none, no log. */
void proxy_config_defaults(proxy_config *c);

typedef struct proxy_server proxy_server;

int proxy_server_new(const proxy_config *cfg, proxy_server **out, em_err *err);
/* Listen on a unix socket (0600) for relays and control commands. */
int proxy_server_listen(proxy_server *s, const char *sock_path, em_err *err);
/* Accept hand-offs and commands until stop_fd is readable; returns 0 then. */
int proxy_server_run(proxy_server *s, int stop_fd, em_err *err);
/* Serve one guest connection (takes fd) on a new thread. */
void proxy_server_start(proxy_server *s, int fd, const char *tag);
/* Log every open connection now, with its bytes so far and "open": true. */
void proxy_server_flush(proxy_server *s);
/* Open connections right now. */
int proxy_server_active(proxy_server *s);
/* End every connection (each is logged), wait for their threads, free. */
void proxy_server_free(proxy_server *s);

/* `envmgr net serve DIR [--qemu-pid N]`: serve until QEMU N exits (or a
 * signal); writes DIR/egress-proxy.pid, logs to DIR/egress-proxy.log. */
int proxy_serve_main(const char *dir, pid_t qemu_pid, em_err *err);
/* `envmgr net relay SOCK TAG`, run by QEMU with the guest connection on
 * stdin: hand it to the proxy and exit. Returns the exit status; prints
 * nothing (stdout and stderr are the guest's connection). */
int proxy_relay_main(const char *sock, const char *tag);

#endif

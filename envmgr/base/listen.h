/* Listening sockets, one way for every server envmgr runs (the HTTP API, `envmgr view`, the
 * egress proxy's hand-off socket): one backlog, one stale-socket rule, IPv4 and IPv6. */
#ifndef ENVMGR_BASE_LISTEN_H
#define ENVMGR_BASE_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

#define LISTEN_BACKLOG 128
#define LISTEN_WHERE_MAX 64 /* "[v6 address]:port" */

/* A unix socket at path, mode 0600 from the moment it has a name (bound in a private 0700
 * folder beside path and renamed into place: no umask change, no window for others).
 * Stale-socket rule: a socket already at path is replaced only when nothing answers on it;
 * anything else at path is refused. */
int listen_unix(const char *path, int *fd_out, em_err *err);

/* TCP on "HOST:PORT" or "[V6]:PORT" (a numeric address or a name; PORT 0 picks a free port).
 * loopback_only refuses an address outside 127.0.0.0/8 and ::1. *where gets the bound address
 * as "127.0.0.1:5901" or "[::1]:5901". Messages name the spec, not an option: callers prefix. */
int listen_tcp(const char *spec, bool loopback_only, int *fd_out, char where[LISTEN_WHERE_MAX], em_err *err);

#endif

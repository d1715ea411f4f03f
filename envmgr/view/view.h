/* `envmgr view`: a view-only VNC endpoint for one env. */
#ifndef ENVMGR_VIEW_VIEW_H
#define ENVMGR_VIEW_VIEW_H

#include <stdbool.h>

#include "envmgr/base/err.h"

/* envmgr view: serve a view-only VNC relay to env `name` on a loopback TCP
 * address (listen, "127.0.0.1:0" picks a free port) or a unix socket, one
 * thread per viewer, until SIGINT/SIGTERM. ready(where, arg) is called once
 * listening, with "127.0.0.1:5901" or the socket path. control lifts the
 * input filter. */
int view_serve(const char *name, const char *listen, const char *socket_path, bool control,
               void (*ready)(const char *where, void *arg), void *arg, em_err *err);

#endif

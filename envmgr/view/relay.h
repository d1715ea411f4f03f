/* The view-only relay between a viewer and an env's VNC socket. */
#ifndef ENVMGR_VIEW_RELAY_H
#define ENVMGR_VIEW_RELAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rfb_filter {
    int state;        /* handshake stage, then messages */
    int minor;        /* RFB 3.minor */
    uint8_t buf[4200];/* the message being gathered */
    size_t have;
    uint64_t skip;    /* bytes of a dropped message still to skip */
    long dropped;     /* input messages dropped */
} rfb_filter;
/* Client → server bytes of a view-only session. Forwards the handshake
 * (forcing the shared flag, so a viewer never disconnects the env's own VNC
 * session), pixel-format, encoding and update requests; drops key, pointer and
 * clipboard messages; strips encodings that would let the client send
 * anything else. Writes at most n + sizeof f->buf bytes to out (a message
 * gathered over several calls comes out whole); returns how many, or -1 when
 * the client sent something no view-only session may (the caller hangs up). */
long rfb_filter_feed(rfb_filter *f, const uint8_t *in, size_t n, uint8_t *out);

/* Relay one viewer connection to the env's VNC socket until either side closes
 * or *stop is set. ws: the client speaks websocket frames (the handshake is done). */
void view_relay(int client_fd, bool ws, const char *vnc_sock, bool view_only, const atomic_int *stop);

#endif

/* The view-only relay between a viewer and an env's VNC socket. */
#ifndef ENVMGR_VIEW_RELAY_H
#define ENVMGR_VIEW_RELAY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

typedef struct rfb_filter {
    int state;          /* the viewer's handshake stage, then messages */
    bool view_only;     /* drop input; false (--control): messages pass as the viewer sent them */
    bool auth;          /* VNC authentication (a TCP listener); else security None */
    uint8_t challenge[16], response[16]; /* VNC authentication: what the viewer gets and owes */
    uint8_t reply[64];  /* bytes this feed owes the viewer (handshake replies), sent by the caller */
    size_t reply_len;
    bool ready;         /* the viewer finished its handshake: send it QEMU's ServerInit, then the screen */
    uint8_t buf[4200];  /* the message being gathered */
    size_t have;
    uint64_t skip;      /* bytes of a dropped message still to skip */
    long dropped;       /* input messages dropped */
} rfb_filter;

#define RFB_GREETING "RFB 003.008\n" /* what the relay says first; it speaks only 3.8 */

/* The server side of a viewer's handshake, spoken by the relay itself: QEMU never sees a byte of
 * it (the relay has its own session with QEMU). password NULL: security None (a 0600 unix socket,
 * or the API's live page behind its token); else VNC authentication with it. */
int rfb_filter_init(rfb_filter *f, bool view_only, const char *password, em_err *err);
/* Viewer → QEMU bytes. Handshake bytes are answered in f->reply (send them to the viewer after
 * each call, also when it returns -1: a refusal says why). Once ready, every message for QEMU is
 * built here from parsed fields: pixel-format, encoding and update requests pass, key, pointer and
 * clipboard messages are dropped, encodings that would let the viewer send anything else are
 * stripped. Writes at most n + sizeof f->buf bytes to out; returns how many, or -1 when the
 * viewer sent something no viewer may (the caller hangs up). */
long rfb_filter_feed(rfb_filter *f, const uint8_t *in, size_t n, uint8_t *out);

/* Relay one viewer connection to the env's VNC socket until either side closes
 * or *stop is set. ws: the client speaks websocket frames (the handshake is done). */
void view_relay(int client_fd, bool ws, const char *vnc_sock, bool view_only, const char *password,
                const atomic_int *stop);

#endif

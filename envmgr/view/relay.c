/* Watching an env without touching it: a relay between a viewer (a plain VNC
 * client, or noVNC over a websocket) and the env's VNC socket that lets
 * screen updates through and drops every input message. QEMU's VNC server has
 * no view-only mode, so the filtering happens here, on the client → server
 * stream, which is small and simple to parse (RFC 6143 §7.5). */
#include "envmgr/view/relay.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envmgr/base/util.h"
#include "envmgr/view/websocket.h"

/* ---- the view-only RFB filter ---- */

enum { RFB_VERSION, RFB_SECTYPE, RFB_INIT, RFB_MSG };

/* Encodings a viewer may announce: pixel encodings and pseudo-encodings that
 * only change what the server sends. Left out: QEMU's extended key events and
 * audio (-258, -259), fences and continuous updates (-312, -313) and xvp
 * (-309): each would let or make the client send other messages. */
static bool encoding_ok(int32_t e)
{
    static const int32_t ok[] = {0, 1, 2, 5, 6, 7, 16, -223, -224, -239, -240, -260, -261, -307, -308};
    for (size_t i = 0; i < ARRAY_LEN(ok); i++)
        if (e == ok[i])
            return true;
    return (e >= -256 && e <= -247) || (e >= -32 && e <= -23) || (e >= -512 && e <= -412);
}

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Bytes the message in f->buf needs in all (0: not known yet), or -1 for a type no viewer may send. */
static long msg_size(const rfb_filter *f)
{
    switch (f->buf[0]) {
    case 0: return 20;  /* SetPixelFormat */
    case 2: return f->have < 4 ? 0 : 4 + 4 * (long)((f->buf[2] << 8) | f->buf[3]); /* SetEncodings */
    case 3: return 10;  /* FramebufferUpdateRequest */
    case 4: return 8;   /* KeyEvent: dropped */
    case 5: return 6;   /* PointerEvent: dropped */
    case 6: return 8;   /* ClientCutText header: dropped with its text */
    case 251: return f->have < 8 ? 0 : 8 + 16 * (long)f->buf[6]; /* SetDesktopSize: dropped */
    default: return -1;
    }
}

long rfb_filter_feed(rfb_filter *f, const uint8_t *in, size_t n, uint8_t *out)
{
    size_t used = 0, o = 0;
    while (used < n) {
        if (f->skip) {
            size_t k = n - used < f->skip ? n - used : (size_t)f->skip;
            used += k;
            f->skip -= k;
            continue;
        }
        f->buf[f->have++] = in[used++];
        switch (f->state) {
        case RFB_VERSION:
            if (f->have < 12)
                continue;
            if (memcmp(f->buf, "RFB 003.", 8) != 0 || f->buf[11] != '\n')
                return -1;
            f->minor = (f->buf[9] - '0') * 10 + (f->buf[10] - '0');
            memcpy(out + o, f->buf, 12);
            o += 12;
            f->state = f->minor >= 7 ? RFB_SECTYPE : RFB_INIT;
            f->have = 0;
            continue;
        case RFB_SECTYPE:
            if (f->buf[0] != 1) /* None: the env's VNC socket needs no password */
                return -1;
            out[o++] = 1;
            f->state = RFB_INIT;
            f->have = 0;
            continue;
        case RFB_INIT:
            out[o++] = 1; /* shared: an exclusive viewer would disconnect the env's own session */
            f->state = RFB_MSG;
            f->have = 0;
            continue;
        default: break;
        }
        long size = msg_size(f);
        if (size < 0)
            return -1;
        if (size == 0 || f->have < (size_t)size) {
            if (size > (long)sizeof f->buf) { /* too long to gather: only a dropped message gets here */
                if (f->buf[0] != 251)
                    return -1;
                f->skip = (uint64_t)size - f->have;
                f->have = 0;
                f->dropped++;
            }
            continue;
        }
        uint8_t type = f->buf[0];
        if (type == 0 || type == 3) {
            memcpy(out + o, f->buf, (size_t)size);
            o += (size_t)size;
        } else if (type == 2) {
            size_t count = (size_t)((f->buf[2] << 8) | f->buf[3]), kept = 0;
            uint8_t *hdr = out + o;
            memcpy(hdr, f->buf, 4);
            for (size_t i = 0; i < count; i++) {
                const uint8_t *e = f->buf + 4 + 4 * i;
                if (encoding_ok((int32_t)be32(e))) {
                    memcpy(hdr + 4 + 4 * kept, e, 4);
                    kept++;
                }
            }
            hdr[2] = (uint8_t)(kept >> 8);
            hdr[3] = (uint8_t)kept;
            o += 4 + 4 * kept;
        } else {
            f->dropped++;
            if (type == 6)
                f->skip = be32(f->buf + 4);
        }
        f->have = 0;
    }
    return (long)o;
}

/* ---- the relay ---- */

#define RELAY_BUF 65536

static int send_ws(int fd, int opcode, const uint8_t *p, size_t n)
{
    uint8_t h[10];
    size_t hl = ws_header(h, opcode, n);
    em_err e;
    if (send_full(fd, h, hl, &e) < 0)
        return -1;
    return n ? send_full(fd, p, n, &e) : 0;
}

void view_relay(int client_fd, bool ws, const char *vnc_sock, bool view_only, const atomic_int *stop)
{
    em_err err;
    int vnc = unix_connect(vnc_sock, 5000, &err);
    if (vnc < 0) {
        if (ws) { /* tell the page why, then close */
            uint8_t msg[2 + 123] = {0x03, 0xf3}; /* 1011: internal error */
            size_t l = strlen(err.msg) > 120 ? 120 : strlen(err.msg);
            memcpy(msg + 2, err.msg, l);
            send_ws(client_fd, 8, msg, 2 + l);
        }
        return;
    }
    uint8_t *in = xmalloc(RELAY_BUF), *data = xmalloc(RELAY_BUF);
    uint8_t *out = xmalloc(RELAY_BUF + sizeof(((rfb_filter *)0)->buf)); /* a message gathered over reads */
    ws_parser wp = {0};
    rfb_filter rf = {0};
    struct pollfd pf[2] = {{.fd = client_fd, .events = POLLIN}, {.fd = vnc, .events = POLLIN}};
    bool open = true;
    while (open && !*stop && !interrupted()) {
        int r = poll(pf, 2, 250);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) { /* server → viewer: as it comes */
            ssize_t k = recv(vnc, in, RELAY_BUF, 0);
            if (k <= 0)
                break;
            if (ws ? send_ws(client_fd, 2, in, (size_t)k) < 0 : send_full(client_fd, in, (size_t)k, &err) < 0)
                break;
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) { /* viewer → server: filtered */
            ssize_t k = recv(client_fd, in, RELAY_BUF, 0);
            if (k <= 0)
                break;
            size_t off = 0;
            while (open && off < (size_t)k) {
                size_t dlen = 0;
                const uint8_t *payload = in + off;
                size_t plen = (size_t)k - off;
                if (ws) {
                    ws_event ev;
                    long used = ws_feed(&wp, in + off, (size_t)k - off, data, RELAY_BUF, &dlen, &ev);
                    if (used < 0) {
                        open = false;
                        break;
                    }
                    off += (size_t)used;
                    if (ev == WS_CLOSE) {
                        send_ws(client_fd, 8, wp.ctl, wp.ctl_len >= 2 ? 2 : 0);
                        open = false;
                    } else if (ev == WS_PING) {
                        send_ws(client_fd, 10, wp.ctl, wp.ctl_len);
                    }
                    payload = data;
                    plen = dlen;
                } else {
                    off = (size_t)k;
                }
                if (!plen)
                    continue;
                if (view_only) {
                    long m = rfb_filter_feed(&rf, payload, plen, out);
                    if (m < 0) {
                        open = false;
                        break;
                    }
                    if (m > 0 && send_full(vnc, out, (size_t)m, &err) < 0)
                        open = false;
                } else if (send_full(vnc, payload, plen, &err) < 0) {
                    open = false;
                }
            }
        }
    }
    close(vnc);
    free(in);
    free(data);
    free(out);
}

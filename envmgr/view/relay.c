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
#include "envmgr/view/vnc_auth.h"
#include "envmgr/view/websocket.h"

/* ---- the viewer's side: the relay is its RFB server ---- */

enum { V_VERSION, V_SECTYPE, V_AUTH, V_INIT, V_MSG };

#define SEC_NONE 1
#define SEC_VNC_AUTH 2

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

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void reply(rfb_filter *f, const void *p, size_t n)
{
    if (f->reply_len + n <= sizeof f->reply) {
        memcpy(f->reply + f->reply_len, p, n);
        f->reply_len += n;
    }
}

int rfb_filter_init(rfb_filter *f, bool view_only, const char *password, em_err *err)
{
    memset(f, 0, sizeof *f);
    f->view_only = view_only;
    f->auth = password != NULL;
    return f->auth ? vnc_auth_challenge(password, f->challenge, f->response, err) : 0;
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

/* One whole message: what QEMU gets of it, built from its parsed fields (never the viewer's bytes
 * as they came: padding is zero, flags are 0 or 1). Returns the bytes written to out. */
static size_t rebuild(rfb_filter *f, uint8_t *out)
{
    const uint8_t *m = f->buf;
    switch (m[0]) {
    case 0: /* SetPixelFormat: type, 3 padding, bpp depth big-endian true-colour, 3 maxima, 3 shifts, 3 padding */
        memset(out, 0, 20);
        memcpy(out + 4, m + 4, 4);
        out[6] = m[6] ? 1 : 0;
        out[7] = m[7] ? 1 : 0;
        memcpy(out + 8, m + 8, 9);
        return 20;
    case 3: /* FramebufferUpdateRequest: type, incremental, x, y, w, h */
        out[0] = 3;
        out[1] = m[1] ? 1 : 0;
        memcpy(out + 2, m + 2, 8);
        return 10;
    case 2: { /* SetEncodings: type, padding, count, encodings (only the allowed ones) */
        size_t count = (size_t)((m[2] << 8) | m[3]), kept = 0;
        out[0] = 2;
        out[1] = 0;
        for (size_t i = 0; i < count; i++)
            if (encoding_ok((int32_t)be32(m + 4 + 4 * i)))
                memcpy(out + 4 + 4 * kept++, m + 4 + 4 * i, 4);
        put16(out + 2, (unsigned)kept);
        return 4 + 4 * kept;
    }
    default:
        f->dropped++;
        if (m[0] == 6)
            f->skip = be32(m + 4);
        return 0;
    }
}

/* The handshake: version, security, ClientInit. Returns 1 when the byte completed a stage, 0 when
 * more is needed, -1 to refuse (f->reply may say why). */
static int handshake(rfb_filter *f)
{
    static const char auth_failed[] = "authentication failed";
    switch (f->state) {
    case V_VERSION:
        if (f->have < 12)
            return 0;
        /* exactly 3.8: any other string would be parsed one way here and another way by a server */
        if (memcmp(f->buf, RFB_GREETING, 12) != 0)
            return -1;
        reply(f, (uint8_t[]){1, f->auth ? SEC_VNC_AUTH : SEC_NONE}, 2);
        f->state = V_SECTYPE;
        return 1;
    case V_SECTYPE:
        if (f->buf[0] != (f->auth ? SEC_VNC_AUTH : SEC_NONE))
            return -1;
        if (f->auth) {
            reply(f, f->challenge, sizeof f->challenge);
            f->state = V_AUTH;
            return 1;
        }
        reply(f, (uint8_t[]){0, 0, 0, 0}, 4); /* SecurityResult: OK */
        f->state = V_INIT;
        return 1;
    case V_AUTH:
        if (f->have < 16)
            return 0;
        if (!vnc_auth_check(f->response, f->buf)) {
            uint8_t fail[8] = {0, 0, 0, 1, 0, 0, 0, sizeof auth_failed - 1};
            reply(f, fail, sizeof fail);
            reply(f, auth_failed, sizeof auth_failed - 1);
            return -1;
        }
        reply(f, (uint8_t[]){0, 0, 0, 0}, 4);
        f->state = V_INIT;
        return 1;
    case V_INIT: /* ClientInit's shared flag: the relay's own session with QEMU is always shared */
        f->state = V_MSG;
        f->ready = true;
        return 1;
    }
    return -1;
}

long rfb_filter_feed(rfb_filter *f, const uint8_t *in, size_t n, uint8_t *out)
{
    size_t used = 0, o = 0;
    f->reply_len = 0;
    while (used < n) {
        if (f->skip) {
            size_t k = n - used < f->skip ? n - used : (size_t)f->skip;
            used += k;
            f->skip -= k;
            continue;
        }
        if (f->state == V_MSG && !f->view_only) { /* --control: the operator's own input, as it comes */
            memcpy(out + o, in + used, n - used);
            return (long)(o + n - used);
        }
        f->buf[f->have++] = in[used++];
        if (f->state != V_MSG) {
            int h = handshake(f);
            if (h < 0)
                return -1;
            if (h > 0)
                f->have = 0;
            continue;
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
        o += rebuild(f, out + o);
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

/* The relay's own session with QEMU: version 3.8, security None, shared, and QEMU's ServerInit
 * (which the viewer gets once its own handshake is done). Nothing of the viewer's goes into it. */
static int qemu_session(int fd, uint8_t **init, size_t *init_len, em_err *err)
{
    double deadline = now_ms() + 5000;
    uint8_t b[24], n;
    if (read_full_deadline(fd, b, 12, deadline, err) < 0 || memcmp(b, "RFB 003.", 8) != 0)
        return em_fail(err, "vnc: not an RFB server");
    if (send_full(fd, RFB_GREETING, 12, err) < 0 || read_full_deadline(fd, &n, 1, deadline, err) < 0)
        return -1;
    uint8_t types[255];
    if (n == 0 || read_full_deadline(fd, types, n, deadline, err) < 0 || !memchr(types, SEC_NONE, n))
        return em_fail(err, "vnc: the env's VNC socket wants a password");
    uint8_t none = SEC_NONE, shared = 1;
    if (send_full(fd, &none, 1, err) < 0 || read_full_deadline(fd, b, 4, deadline, err) < 0 || be32(b) != 0)
        return em_fail(err, "vnc: security handshake refused");
    if (send_full(fd, &shared, 1, err) < 0 || read_full_deadline(fd, b, 24, deadline, err) < 0)
        return -1;
    uint32_t name_len = be32(b + 20);
    if (name_len > 4096)
        return em_fail(err, "vnc: a desktop name of %u bytes", name_len);
    *init = xmalloc(24 + name_len);
    memcpy(*init, b, 24);
    if (read_full_deadline(fd, *init + 24, name_len, deadline, err) < 0) {
        free(*init);
        *init = NULL;
        return -1;
    }
    *init_len = 24 + name_len;
    return 0;
}

static int to_viewer(int fd, bool ws, const void *p, size_t n, em_err *err)
{
    if (!n)
        return 0;
    return ws ? (send_ws(fd, 2, p, n) < 0 ? em_fail(err, "viewer gone") : 0) : send_full(fd, p, n, err);
}

void view_relay(int client_fd, bool ws, const char *vnc_sock, bool view_only, const char *password,
                const atomic_int *stop)
{
    em_err err;
    uint8_t *init = NULL;
    size_t init_len = 0;
    rfb_filter *rf = xcalloc(1, sizeof *rf);
    int vnc = unix_connect(vnc_sock, 5000, &err);
    if (vnc >= 0 && qemu_session(vnc, &init, &init_len, &err) < 0) {
        close(vnc);
        vnc = -1;
    }
    if (vnc < 0 || rfb_filter_init(rf, view_only, password, &err) < 0 ||
        to_viewer(client_fd, ws, RFB_GREETING, 12, &err) < 0) {
        if (ws) { /* tell the page why, then close */
            uint8_t msg[2 + 123] = {0x03, 0xf3}; /* 1011: internal error */
            size_t l = strlen(err.msg) > 120 ? 120 : strlen(err.msg);
            memcpy(msg + 2, err.msg, l);
            send_ws(client_fd, 8, msg, 2 + l);
        }
        if (vnc >= 0)
            close(vnc);
        free(init);
        free(rf);
        return;
    }
    uint8_t *in = xmalloc(RELAY_BUF), *data = xmalloc(RELAY_BUF);
    uint8_t *out = xmalloc(RELAY_BUF + sizeof rf->buf); /* a message gathered over reads */
    ws_parser wp = {0};
    /* QEMU is read only once the viewer is through its handshake: until then it has nothing to say */
    struct pollfd pf[2] = {{.fd = client_fd, .events = POLLIN}, {.fd = vnc, .events = 0}};
    bool open = true;
    while (open && !*stop && !interrupted()) {
        int r = poll(pf, 2, 250);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) { /* server → viewer: as it comes */
            ssize_t k = recv(vnc, in, RELAY_BUF, 0);
            if (k <= 0 || to_viewer(client_fd, ws, in, (size_t)k, &err) < 0)
                break;
        }
        if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) { /* viewer → server: rebuilt */
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
                bool was_ready = rf->ready;
                long m = rfb_filter_feed(rf, payload, plen, out);
                if (to_viewer(client_fd, ws, rf->reply, rf->reply_len, &err) < 0 || m < 0) {
                    open = false;
                    break;
                }
                if (rf->ready && !was_ready) { /* the viewer is in: QEMU's ServerInit, then its updates */
                    if (to_viewer(client_fd, ws, init, init_len, &err) < 0) {
                        open = false;
                        break;
                    }
                    pf[1].events = POLLIN;
                }
                if (m > 0 && send_full(vnc, out, (size_t)m, &err) < 0)
                    open = false;
            }
        }
    }
    close(vnc);
    free(init);
    free(rf);
    free(in);
    free(data);
    free(out);
}

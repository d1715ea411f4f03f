/* Watching an env without touching it: a relay between a viewer (a plain VNC
 * client, or noVNC over a websocket) and the env's VNC socket that lets
 * screen updates through and drops every input message. QEMU's VNC server has
 * no view-only mode, so the filtering happens here, on the client → server
 * stream, which is small and simple to parse (RFC 6143 §7.5). */
#include <errno.h>
#include <gcrypt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/base64.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"

/* ---- websocket ---- */

int api_ws_accept(const char *key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    size_t kl = strlen(key);
    if (kl == 0 || kl > 64)
        return -1;
    char buf[64 + sizeof guid];
    memcpy(buf, key, kl);
    memcpy(buf + kl, guid, sizeof guid - 1);
    unsigned char digest[20];
    crypto_init();
    gcry_md_hash_buffer(GCRY_MD_SHA1, digest, buf, kl + sizeof guid - 1);
    char *b64 = base64_encode(digest, sizeof digest);
    snprintf(out, 29, "%s", b64);
    free(b64);
    return 0;
}

size_t api_ws_header(uint8_t out[10], int opcode, uint64_t len)
{
    out[0] = (uint8_t)(0x80 | (opcode & 0x0f));
    if (len < 126) {
        out[1] = (uint8_t)len;
        return 2;
    }
    if (len <= 0xffff) {
        out[1] = 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
    return 10;
}

long api_ws_feed(api_ws_parser *p, const uint8_t *in, size_t n, uint8_t *data, size_t cap, size_t *data_len,
                 api_ws_event *event)
{
    size_t used = 0;
    *event = API_WS_DATA;
    while (used < n) {
        if (p->need_hdr == 0) { /* start of a frame */
            p->hdr_len = 0;
            p->need_hdr = 2;
        }
        if (p->hdr_len < p->need_hdr) {
            p->hdr[p->hdr_len++] = in[used++];
            if (p->hdr_len == 2) {
                uint8_t b0 = p->hdr[0], b1 = p->hdr[1];
                if (b0 & 0x70)
                    return -1; /* reserved bits: no extension was negotiated */
                if (!(b1 & 0x80))
                    return -1; /* client frames must be masked */
                int len7 = b1 & 0x7f;
                p->need_hdr = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + 4;
            }
            if (p->hdr_len < p->need_hdr)
                continue;
            /* the whole header is in */
            uint8_t b0 = p->hdr[0], b1 = p->hdr[1];
            int len7 = b1 & 0x7f;
            uint64_t len = (uint64_t)len7;
            size_t off = 2;
            if (len7 == 126) {
                len = ((uint64_t)p->hdr[2] << 8) | p->hdr[3];
                off = 4;
            } else if (len7 == 127) {
                len = 0;
                for (int i = 0; i < 8; i++)
                    len = (len << 8) | p->hdr[2 + i];
                off = 10;
                if (len >> 63)
                    return -1;
            }
            memcpy(p->mask, p->hdr + off, 4);
            p->mask_pos = 0;
            p->opcode = b0 & 0x0f;
            p->fin = b0 & 0x80;
            p->payload_left = len;
            p->ctl_len = 0;
            bool control = p->opcode & 0x08;
            if (control && (len > 125 || !p->fin))
                return -1;
            if (!(p->opcode <= 2 || p->opcode == 8 || p->opcode == 9 || p->opcode == 10))
                return -1;
            if (len == 0) {
                p->need_hdr = 0;
                if (p->opcode == 8 || p->opcode == 9) {
                    *event = p->opcode == 8 ? API_WS_CLOSE : API_WS_PING;
                    return (long)used;
                }
            }
            continue;
        }
        /* payload */
        size_t avail = n - used;
        size_t take = avail < p->payload_left ? avail : (size_t)p->payload_left;
        bool control = p->opcode & 0x08;
        if (!control && take > cap - *data_len)
            take = cap - *data_len;
        if (take == 0)
            return (long)used; /* data buffer full: the caller drains it and calls again */
        for (size_t i = 0; i < take; i++) {
            uint8_t c = in[used + i] ^ p->mask[p->mask_pos++ & 3];
            if (control)
                p->ctl[p->ctl_len++] = c;
            else
                data[(*data_len)++] = c;
        }
        used += take;
        p->payload_left -= take;
        if (p->payload_left == 0) {
            p->need_hdr = 0;
            if (p->opcode == 8 || p->opcode == 9) {
                *event = p->opcode == 8 ? API_WS_CLOSE : API_WS_PING;
                return (long)used;
            }
        }
    }
    return (long)used;
}

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
static long msg_size(const api_rfb_filter *f)
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

long api_rfb_filter_feed(api_rfb_filter *f, const uint8_t *in, size_t n, uint8_t *out)
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
    size_t hl = api_ws_header(h, opcode, n);
    em_err e;
    if (send_full(fd, h, hl, &e) < 0)
        return -1;
    return n ? send_full(fd, p, n, &e) : 0;
}

void api_relay(int client_fd, bool ws, const char *vnc_sock, bool view_only, const volatile int *stop)
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
    uint8_t *out = xmalloc(RELAY_BUF + sizeof(((api_rfb_filter *)0)->buf)); /* a message gathered over reads */
    api_ws_parser wp = {0};
    api_rfb_filter rf = {0};
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
                    api_ws_event ev;
                    long used = api_ws_feed(&wp, in + off, (size_t)k - off, data, RELAY_BUF, &dlen, &ev);
                    if (used < 0) {
                        open = false;
                        break;
                    }
                    off += (size_t)used;
                    if (ev == API_WS_CLOSE) {
                        send_ws(client_fd, 8, wp.ctl, wp.ctl_len >= 2 ? 2 : 0);
                        open = false;
                    } else if (ev == API_WS_PING) {
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
                    long m = api_rfb_filter_feed(&rf, payload, plen, out);
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

/* ---- tar ---- */

int api_tar_header(uint8_t h[512], const char *name, uint64_t size, long mtime)
{
    memset(h, 0, 512);
    size_t n = strlen(name);
    const char *base = name;
    if (n > 99) { /* ustar: prefix (155) '/' name (100) */
        const char *slash = NULL;
        for (const char *p = name; *p; p++)
            if (*p == '/' && (size_t)(p - name) <= 155 && strlen(p + 1) <= 99)
                slash = slash ? slash : p;
        if (!slash)
            return -1;
        memcpy(h + 345, name, (size_t)(slash - name));
        base = slash + 1;
    }
    memcpy(h, base, strlen(base));
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", 0);
    snprintf((char *)h + 116, 8, "%07o", 0);
    if (size > 077777777777ull)
        return -1;
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    unsigned long long mt = mtime > 0 ? (unsigned long long)mtime : 0;
    snprintf((char *)h + 136, 12, "%011llo", mt > 077777777777ull ? 077777777777ull : mt);
    h[156] = '0';
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    return 0;
}

/* Websocket framing (RFC 6455), server side: the live view's transport to noVNC. */
#include "envmgr/view/websocket.h"

#include <gcrypt.h>
#include <stdio.h>
#include <string.h>

#include "envmgr/base/base64.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"

int ws_accept(const char *key, char out[29])
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

size_t ws_header(uint8_t out[10], int opcode, uint64_t len)
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

long ws_feed(ws_parser *p, const uint8_t *in, size_t n, uint8_t *data, size_t cap, size_t *data_len,
                 ws_event *event)
{
    size_t used = 0;
    *event = WS_DATA;
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
                    *event = p->opcode == 8 ? WS_CLOSE : WS_PING;
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
                *event = p->opcode == 8 ? WS_CLOSE : WS_PING;
                return (long)used;
            }
        }
    }
    return (long)used;
}

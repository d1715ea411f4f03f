/* libFuzzer target: what a live-view client sends. The input is split at
 * arbitrary points (its first byte seeds the chunk sizes and the mode) and fed
 * to the websocket parser; the unmasked payload goes through the relay's RFB
 * server side. Neither may crash or overrun. Differential: everything the
 * relay sends QEMU is parsed here the way QEMU's VNC server parses client
 * messages (RFC 6143 sizes, QEMU's own types), and that parse must never meet
 * a key, pointer, clipboard or QEMU message, nor an encoding that lets the
 * client send one. The relay does its own handshake with QEMU, so its output
 * is messages from the first byte. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/view/relay.h"
#include "envmgr/view/websocket.h"

static uint8_t data_buf[65536], out_buf[65536 + 4200];

/* QEMU's reading of the stream, message by message, carried across calls. */
typedef struct qemu_parse {
    uint8_t msg[4096];
    size_t have, skip;
} qemu_parse;

static uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void qemu_feed(qemu_parse *q, const uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (q->skip) {
            q->skip--;
            continue;
        }
        q->msg[q->have++] = out[i];
        size_t need;
        switch (q->msg[0]) {
        case 0: need = 20; break;
        case 2: need = q->have < 4 ? 4 : 4 + 4 * (size_t)((q->msg[2] << 8) | q->msg[3]); break;
        case 3: need = 10; break;
        default: abort(); /* 4 key, 5 pointer, 6 cut text, 255 QEMU, 251 desktop size, or garbage */
        }
        if (q->have < need)
            continue;
        if (q->msg[0] == 2)
            for (size_t k = 0; k < (size_t)((q->msg[2] << 8) | q->msg[3]); k++) {
                int32_t e = (int32_t)be32(q->msg + 4 + 4 * k);
                if (e == -258 || e == -259 || e == -309 || e == -312 || e == -313)
                    abort();
            }
        if (need > sizeof q->msg) /* cannot happen: the relay gathers at most 4200 bytes */
            abort();
        q->have = 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned seed = data[0];
    data++;
    size--;
    /* bit 0: raw RFB (envmgr view) or websocket frames (the live page);
     * bit 1: the fuzzer's bytes after a correct handshake, or from the first byte */
    bool raw = seed & 1, handshaken = seed & 2;
    ws_parser wp = {0};
    rfb_filter rf;
    em_err err;
    if (rfb_filter_init(&rf, true, NULL, &err) < 0)
        abort();
    qemu_parse q = {0};
    if (handshaken && (rfb_filter_feed(&rf, (const uint8_t *)"RFB 003.008\n\x01\x01", 14, out_buf) != 0 ||
                       !rf.ready))
        abort();
    size_t off = 0;
    while (off < size) {
        size_t chunk = 1 + (seed % 97);
        seed = seed * 1103515245u + 12345u;
        if (chunk > size - off)
            chunk = size - off;
        const uint8_t *payload = data + off;
        size_t plen = chunk, used_total = 0;
        while (used_total < chunk) {
            size_t dlen = 0;
            if (!raw) {
                ws_event ev;
                long used = ws_feed(&wp, data + off + used_total, chunk - used_total, data_buf, sizeof data_buf,
                                    &dlen, &ev);
                if (used < 0)
                    return 0;
                if (used == 0 && dlen == 0)
                    abort(); /* no progress */
                used_total += (size_t)used;
                payload = data_buf;
                plen = dlen;
            } else {
                used_total = chunk;
            }
            if (plen) {
                long m = rfb_filter_feed(&rf, payload, plen, out_buf);
                if (rf.reply_len > sizeof rf.reply)
                    abort();
                if (m < 0)
                    return 0;
                if ((size_t)m > plen + sizeof rf.buf || (m > 0 && !rf.ready))
                    abort(); /* nothing reaches QEMU before the viewer's handshake is done */
                qemu_feed(&q, out_buf, (size_t)m);
            }
        }
        off += chunk;
    }
    return 0;
}

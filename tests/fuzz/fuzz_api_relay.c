/* libFuzzer target: what a live-view client sends. The input is split at
 * arbitrary points (its first byte seeds the chunk sizes) and fed to the
 * websocket parser; the unmasked payload goes through the view-only RFB
 * filter. Neither may crash or overrun, and the filter must never let a key,
 * pointer or clipboard message through. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/view/relay.h"
#include "envmgr/view/websocket.h"

static uint8_t data_buf[65536], out_buf[65536 + 4200];

/* Walk the filter's output as an RFB client stream and check no input message is in it. */
static void check_output(const uint8_t *out, size_t n, size_t *state, size_t *skip)
{
    for (size_t i = 0; i < n; i++) {
        if (*skip) {
            (*skip)--;
            continue;
        }
        if (*state < 14) { /* the 12-byte version, security type and ClientInit at most */
            (*state)++;
            continue;
        }
        if (out[i] == 4 || out[i] == 5 || out[i] == 6)
            abort();
        /* message sizes are checked by the unit tests; here only the types matter,
         * so skip conservatively by the fixed sizes we know */
        if (out[i] == 0)
            *skip = 19;
        else if (out[i] == 3)
            *skip = 9;
        else if (out[i] == 2 && i + 3 < n)
            *skip = 3 + 4 * (size_t)((out[i + 2] << 8) | out[i + 3]);
        else
            *skip = 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned seed = data[0];
    data++;
    size--;
    /* 1: raw RFB through the filter (envmgr view); 0: websocket frames first (the live page) */
    bool raw = seed & 1;
    ws_parser wp = {0};
    rfb_filter rf = {0};
    size_t state = 0, skip = 0;
    /* RFB 3.3 handshakes have no security byte: the checker cannot tell them apart cheaply, so only 3.8 streams are checked */
    bool checkable = size >= 12 && !memcmp(data, "RFB 003.008\n", 12);
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
                if (m < 0)
                    return 0;
                if ((size_t)m > plen + sizeof rf.buf)
                    abort();
                if (raw && checkable)
                    check_output(out_buf, (size_t)m, &state, &skip);
            }
        }
        off += chunk;
    }
    return 0;
}

/* Websocket framing (RFC 6455), server side. */
#ifndef ENVMGR_VIEW_WEBSOCKET_H
#define ENVMGR_VIEW_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key. */
int ws_accept(const char *key, char out[29]);

typedef struct ws_parser {
    uint8_t hdr[14];
    size_t hdr_len, need_hdr;
    uint64_t payload_left;
    uint8_t mask[4];
    size_t mask_pos;
    int opcode;   /* of the frame being read */
    bool fin;
    /* a control frame's payload, gathered whole */
    uint8_t ctl[125];
    size_t ctl_len;
} ws_parser;

typedef enum { WS_DATA, WS_PING, WS_CLOSE } ws_event;
/* Feed bytes from the client. Unmasked payload of data frames is appended to
 * data (capacity cap, *data_len updated); a ping's payload to *ctl. Returns
 * bytes consumed (less than n when an event needs handling first: call again
 * with the rest), or -1 on a protocol violation (unmasked frame, oversized
 * control frame, reserved bits, unknown opcode). *event is WS_DATA unless
 * a complete ping or close frame was read. */
long ws_feed(ws_parser *p, const uint8_t *in, size_t n, uint8_t *data, size_t cap, size_t *data_len,
                 ws_event *event);
/* A server frame header (unmasked) for a payload of len bytes; returns its size (2, 4 or 10). */
size_t ws_header(uint8_t out[10], int opcode, uint64_t len);

#endif

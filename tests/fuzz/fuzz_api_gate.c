/* libFuzzer target: the connection gate's view of a request head (issue 27), differential
 * against libmicrohttpd 0.9.75's own reading of it (get_next_header_line and its state machine
 * in connection.c, restated below byte by byte). The input is what a client sent so far. The gate
 * must call the head complete exactly where MHD's headers end: earlier would hand MHD a
 * connection it still waits on (the slowloris the gate exists to stop), later would keep a
 * real client waiting until the deadline. Then the head's credential check runs on it: nothing
 * may crash or read out of bounds. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_gate.h"

/* Where MHD's headers end: lines end at CR LF or a bare LF; a line whose first byte is NUL is
 * empty; empty lines before the request line are skipped; the first empty one after it ends
 * the headers. 0 when MHD is still waiting. */
static size_t mhd_headers_end(const uint8_t *b, size_t n)
{
    bool seen_request_line = false;
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        bool crlf = b[i] == '\r' && i + 1 < n && b[i + 1] == '\n';
        if (!crlf && b[i] != '\n')
            continue;
        size_t next = i + (crlf ? 2 : 1);
        bool empty = i == start || b[start] == '\0';
        if (empty && seen_request_line)
            return next;
        seen_request_line |= !empty;
        start = next;
        i = next - 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > API_GATE_HEAD_MAX)
        size = API_GATE_HEAD_MAX; /* what one peek sees */
    size_t end = api_gate_head_end((const char *)data, size);
    if (end != mhd_headers_end(data, size))
        abort();
    if (!end)
        return 0;
    char *head = malloc(end); /* exactly the head: a read past it is out of bounds */
    if (!head)
        return 0;
    memcpy(head, data, end);
    if (api_gate_head_credential(head, end, "0123456789abcdef0123456789abcdef", 1000))
        if (!memmem(data, end, "0123456789abcdef0123456789abcdef", 32) && !memmem(data, end, "envmgr_live_", 12) &&
            !memmem(data, end, "token=", 6))
            abort(); /* a credential from nothing */
    free(head);
    return 0;
}

/* libFuzzer target: OSWorld's server is the guest's (guest root may replace it), so an /execute reply is
 * any bytes with any status. osworld_exec_reply_parse must end with a result or an error, never crash,
 * and what it returns must fit the cap it was given. The first two bytes choose the HTTP status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/vm/guest_osworld.h"

#define CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > (1u << 20))
        return 0;
    long status = 100 + (long)((data[0] << 8 | data[1]) % 500);
    guest_exec_result r;
    em_err err = {0};
    if (osworld_exec_reply_parse(status, (const char *)data + 2, size - 2, CAP, &r, &err) == 0) {
        if (!r.out || !r.err || r.out_len > CAP || r.err_len > CAP || r.out[r.out_len] || r.err[r.err_len])
            abort();
        guest_exec_result_free(&r);
    } else if (!err.msg[0] || memchr(err.msg, '\0', sizeof err.msg) == NULL) {
        abort();
    }
    char ex[65];
    osworld_excerpt((const char *)data, size, ex, 64);
    for (size_t i = 0; ex[i]; i++)
        if ((unsigned char)ex[i] < 0x20 || (unsigned char)ex[i] >= 0x7f)
            abort();
    return 0;
}

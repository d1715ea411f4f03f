/* ustar headers for the trace download (GET /v1/envs/{id}/trace): a tar is simple enough to
 * stream without a library and without a temporary file. */
#include <stdio.h>
#include <string.h>

#include "envmgr/api/api_int.h"

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

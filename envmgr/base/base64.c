#include "envmgr/base/base64.h"

#include <stdlib.h>
#include <string.h>

#include "envmgr/base/util.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const void *data, size_t len)
{
    const unsigned char *in = data;
    char *out = xmalloc(4 * ((len + 2) / 3) + 1), *p = out;
    size_t i = 0;
    for (; i + 2 < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        *p++ = alphabet[v >> 18];
        *p++ = alphabet[(v >> 12) & 63];
        *p++ = alphabet[(v >> 6) & 63];
        *p++ = alphabet[v & 63];
    }
    if (i < len) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < len ? (unsigned)in[i + 1] << 8 : 0);
        *p++ = alphabet[v >> 18];
        *p++ = alphabet[(v >> 12) & 63];
        *p++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = '\0';
    return out;
}

static int value_of(char c)
{
    const char *p = c ? strchr(alphabet, c) : NULL;
    return p ? (int)(p - alphabet) : -1;
}

int base64_decode(const char *text, unsigned char **out, size_t *out_len)
{
    size_t n = strlen(text);
    if (n % 4)
        return -1;
    unsigned char *buf = try_malloc(n / 4 * 3 + 1, "decoded base64", NULL);
    if (!buf)
        return BASE64_NOMEM;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            char c = text[i + k];
            if (c == '=' && i + 4 == n && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad || (v[k] = value_of(c)) < 0) {
                free(buf);
                return -1;
            }
        }
        unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        buf[o++] = (unsigned char)(w >> 16);
        if (pad < 2)
            buf[o++] = (unsigned char)(w >> 8);
        if (pad < 1)
            buf[o++] = (unsigned char)w;
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return 0;
}

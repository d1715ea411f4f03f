#include "envmgr/base/utf8.h"

#include <string.h>

#include "envmgr/base/util.h"

size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (n == 0)
        return 0;
    unsigned c = s[0];
    size_t len;
    uint32_t v;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    if (cp)
        *cp = v;
    return len;
}

bool utf8_valid(const char *s, size_t n, bool no_nul)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0, k; i < n; i += k)
        if ((no_nul && u[i] == 0) || !(k = utf8_decode(u + i, n - i, NULL)))
            return false;
    return true;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)s;
    char *buf = xmalloc(n * 3 + 1), *o = buf; /* each bad byte becomes 3 bytes */
    for (size_t i = 0; i < n;) {
        size_t k = u[i] ? utf8_decode(u + i, n - i, NULL) : 0;
        if (k) {
            memcpy(o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    *o = '\0';
    if (out_len)
        *out_len = (size_t)(o - buf);
    return buf;
}

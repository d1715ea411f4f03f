#include "envmgr/base/sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/utf8.h"
#include "envmgr/base/util.h"

static void reserve(sbuf *b, size_t n)
{
    if (b->len + n + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n + 1)
        cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void sbuf_add(sbuf *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sbuf_puts(sbuf *b, const char *s)
{
    sbuf_add(b, s, strlen(s));
}

void sbuf_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

char *sbuf_steal(sbuf *b)
{
    char *s = b->s ? b->s : xstrdup("");
    b->s = NULL;
    b->len = b->cap = 0;
    return s;
}

void sbuf_release(sbuf *b)
{
    free(b->s);
    b->s = NULL;
    b->len = b->cap = 0;
}

static int is_bidi_control(unsigned cp)
{
    return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f ||
           cp == 0x061c;
}

void sbuf_add_visible(sbuf *b, const char *s, size_t max)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = strlen(s), i = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = utf8_decode(p + i, len - i, &cp);
        if (i + (n ? n : 1) > max) {
            sbuf_puts(b, "...");
            return;
        }
        if (n == 0) {
            sbuf_printf(b, "\\x%02x", p[i]);
            i++;
            continue;
        }
        if (cp == '\n')
            sbuf_puts(b, "\\n");
        else if (cp == '\t')
            sbuf_puts(b, "\\t");
        else if (cp == '\r')
            sbuf_puts(b, "\\r");
        else if (cp < 0x20 || cp == 0x7f)
            sbuf_printf(b, "\\x%02x", cp);
        else if ((cp >= 0x80 && cp < 0xa0) || is_bidi_control(cp))
            sbuf_printf(b, "\\u%04x", cp);
        else
            sbuf_add(b, s + i, n);
        i += n;
    }
}

void sbuf_add_html(sbuf *b, const char *s)
{
    const char *run = s;
    for (const char *p = s; *p; p++) {
        const char *ent;
        switch (*p) {
        case '&': ent = "&amp;"; break;
        case '<': ent = "&lt;"; break;
        case '>': ent = "&gt;"; break;
        case '"': ent = "&quot;"; break;
        case '\'': ent = "&#39;"; break;
        default: continue;
        }
        sbuf_add(b, run, (size_t)(p - run));
        sbuf_puts(b, ent);
        run = p + 1;
    }
    sbuf_puts(b, run);
}

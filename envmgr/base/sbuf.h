/* Internal: a growing string for building summaries and HTML, with the two
 * escapes untrusted trace text needs before it is shown. */
#ifndef ENVMGR_RECORDER_SBUF_H
#define ENVMGR_RECORDER_SBUF_H

#include <stddef.h>

typedef struct sbuf {
    char *s; /* always NUL-terminated once anything was added */
    size_t len, cap;
} sbuf;

void sbuf_add(sbuf *b, const char *s, size_t n);
void sbuf_puts(sbuf *b, const char *s);
void sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the string over (never NULL) and reset b. */
char *sbuf_steal(sbuf *b);
void sbuf_release(sbuf *b);

/* For terminals and one-line summaries: control characters, DEL, C1 controls
 * and bidi overrides become visible escapes (\n, \x1b, \u202e); invalid UTF-8
 * bytes become \xNN. At most max input bytes are taken (cut on a character
 * boundary, marked with "..."). */
void sbuf_add_visible(sbuf *b, const char *s, size_t max);
/* For HTML text and attribute values: & < > " ' become entities. */
void sbuf_add_html(sbuf *b, const char *s);

#endif

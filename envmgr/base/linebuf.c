#include "envmgr/base/linebuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/util.h"

#define READ_MIN (64u << 10) /* room for one read; the buffer doubles up to max_line + this */

void linebuf_init(linebuf *l, size_t max_line)
{
    memset(l, 0, sizeof *l);
    l->max_line = max_line;
    l->owned = true;
}

void linebuf_init_text(linebuf *l, const char *text, size_t len, size_t max_line)
{
    memset(l, 0, sizeof *l);
    l->buf = (char *)text; /* never written: linebuf_room refuses a borrowed buffer */
    l->end = l->cap = len;
    l->max_line = max_line;
}

void linebuf_release(linebuf *l)
{
    if (l->owned)
        free(l->buf);
    l->buf = NULL;
    l->start = l->end = l->cap = l->scanned = 0;
}

int linebuf_room(linebuf *l, char **p, size_t *room, em_err *err)
{
    if (!l->owned)
        return em_fail(err, "linebuf: a text scanner takes no reads");
    size_t unread = l->end - l->start;
    if (unread > l->max_line) /* linebuf_next said LINEBUF_TOO_LONG, or will */
        return em_fail(err, "a line longer than %zu bytes", l->max_line);
    if (l->start > 0) { /* once per read, however many lines the last one brought */
        memmove(l->buf, l->buf + l->start, unread);
        l->start = 0;
        l->end = unread;
    }
    /* A whole line with its newline, and one read (no bigger than a line: a 512-byte control
     * socket needs no 64 KiB). */
    size_t one_read = l->max_line + 1 < READ_MIN ? l->max_line + 1 : READ_MIN;
    size_t limit = l->max_line + 1 + one_read;
    if (l->cap - l->end < one_read && l->cap < limit) {
        size_t cap = l->cap ? l->cap * 2 : 2 * one_read;
        if (cap > limit)
            cap = limit;
        char *grown = try_realloc(l->buf, cap, "a line", err);
        if (!grown)
            return -1;
        l->buf = grown;
        l->cap = cap;
    }
    *p = l->buf + l->end;
    *room = l->cap - l->end;
    return 0;
}

void linebuf_commit(linebuf *l, size_t n)
{
    l->end += n;
}

ssize_t linebuf_read(linebuf *l, int fd, em_err *err)
{
    char *p;
    size_t room;
    if (linebuf_room(l, &p, &room, err) < 0) {
        errno = 0;
        return -1;
    }
    ssize_t r = read(fd, p, room);
    if (r > 0)
        linebuf_commit(l, (size_t)r);
    return r;
}

int linebuf_fill(linebuf *l, int fd, double deadline, em_err *err)
{
    for (;;) {
        if (wait_readable(fd, deadline, err) < 0)
            return em_prefix(err, "waiting for a reply: ");
        ssize_t r = linebuf_read(l, fd, err);
        if (r < 0 && errno == 0)
            return -1;
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        /* A reset is a peer that exited with our message unread: gone, like EOF. */
        if (r < 0 && errno != ECONNRESET)
            return em_fail_errno(err, "read");
        if (r <= 0)
            return em_fail(err, "the peer closed the connection");
        return 0;
    }
}

int linebuf_read_line(linebuf *l, int fd, double deadline, const char **line, size_t *n, em_err *err)
{
    for (;;) {
        int got = linebuf_next(l, line, n);
        if (got == LINEBUF_LINE)
            return 0;
        if (got == LINEBUF_TOO_LONG)
            return em_fail(err, "a line longer than %zu bytes", l->max_line);
        if (linebuf_fill(l, fd, deadline, err) < 0)
            return -1;
    }
}

int linebuf_next(linebuf *l, const char **line, size_t *n)
{
    size_t unread = l->end - l->start;
    if (!unread) { /* and maybe no buffer yet */
        l->scanned = 0;
        return LINEBUF_NONE;
    }
    size_t look = unread < l->max_line + 1 ? unread : l->max_line + 1;
    /* Bytes already searched are not searched again: a long line arriving in small reads costs
     * its length once. */
    char *from = l->buf + l->start + l->scanned;
    char *nl = look > l->scanned ? memchr(from, '\n', look - l->scanned) : NULL;
    if (!nl) {
        l->scanned = look;
        return unread > l->max_line ? LINEBUF_TOO_LONG : LINEBUF_NONE;
    }
    *line = l->buf + l->start;
    *n = (size_t)(nl - *line);
    l->start += *n + 1;
    l->scanned = 0;
    return LINEBUF_LINE;
}

size_t linebuf_pending(const linebuf *l)
{
    return l->end - l->start;
}

const char *linebuf_unread(const linebuf *l)
{
    return l->buf + l->start;
}

void linebuf_skip(linebuf *l, size_t n)
{
    l->start += n;
    l->scanned = l->scanned > n ? l->scanned - n : 0;
}

size_t linebuf_offset(const linebuf *l)
{
    return l->start;
}

/* The one line scanner: a buffer that reads append to and lines are taken from, for sockets
 * (jsonline: QMP, the guest agent, agents; the suite channel; the egress proxy's control socket)
 * and for texts already in memory (results.jsonl, the egress log, trace.jsonl).
 *
 * Taking a line only moves an offset; the unread bytes move to the front once per read (in
 * linebuf_room), so a read that brings many lines costs one memmove, not one per line. A line is
 * at most max_line bytes without its newline; a longer one is an error, never buffered on. */
#ifndef ENVMGR_LINEBUF_H
#define ENVMGR_LINEBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

typedef struct linebuf {
    char *buf;
    size_t start, end, cap; /* unread bytes: buf[start, end) */
    size_t max_line;
    size_t scanned;         /* bytes after start known to hold no newline */
    bool owned;             /* buf is ours (linebuf_init) or the caller's text (linebuf_init_text) */
} linebuf;

/* An empty scanner for reads; nothing is allocated until linebuf_room. */
void linebuf_init(linebuf *l, size_t max_line);
/* A scanner over text the caller keeps (not copied, not freed); linebuf_room refuses. */
void linebuf_init_text(linebuf *l, const char *text, size_t len, size_t max_line);
void linebuf_release(linebuf *l);

/* Where the next read goes: the unread bytes moved to the front, the buffer grown (never past
 * what one line and one read need). -1 when a line would pass max_line, or on no memory
 * (EM_EXIT_NOMEM: the size is the peer's choice). */
int linebuf_room(linebuf *l, char **p, size_t *room, em_err *err);
/* n bytes were read into the room. */
void linebuf_commit(linebuf *l, size_t n);
/* linebuf_room, then one read(2). Returns bytes read, 0 at EOF, -1 with errno set (EINTR, EAGAIN
 * included) or, with errno 0, err set by linebuf_room. */
ssize_t linebuf_read(linebuf *l, int fd, em_err *err);

/* Wait for fd to be readable by deadline_ms (now_ms() time), then one read: 0 when bytes came,
 * -1 on a timeout, the peer's end (EOF or a reset: "the peer closed the connection"), a read
 * error or a line past the cap. */
int linebuf_fill(linebuf *l, int fd, double deadline_ms, em_err *err);
/* The next line from fd by deadline_ms (a reply to a command), reading as needed. */
int linebuf_read_line(linebuf *l, int fd, double deadline_ms, const char **line, size_t *n, em_err *err);

enum { LINEBUF_NONE = 0, LINEBUF_LINE = 1, LINEBUF_TOO_LONG = -1 };
/* The next complete line, its newline not counted and not included (line[n] is '\n'; the text is
 * not NUL-terminated). LINEBUF_NONE: no newline yet (more to read, or at the end of a text the
 * bytes linebuf_pending counts). LINEBUF_TOO_LONG: max_line bytes and no newline; linebuf_skip drops them. */
int linebuf_next(linebuf *l, const char **line, size_t *n);
/* Unread bytes: those of an incomplete last line, or all when linebuf_next has not run. */
size_t linebuf_pending(const linebuf *l);
const char *linebuf_unread(const linebuf *l);
/* Drop n unread bytes (n <= linebuf_pending). */
void linebuf_skip(linebuf *l, size_t n);
/* Bytes taken so far from a text (linebuf_init_text): where the next line starts. */
size_t linebuf_offset(const linebuf *l);

#endif

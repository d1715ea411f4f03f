#include "envmgr/net/egress_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/util.h"
#include "envmgr/base/linebuf.h"

#define READ_CHUNK_MAX ((size_t)16 << 20)

struct egress_log {
    int fd;
    pthread_mutex_t mu;
    uint64_t size;
    uint64_t dropped;
};

int egress_log_open(const char *path, egress_log **out, em_err *err)
{
    /* A new proxy is a new env life (up, or the reset that starts each episode): the last one's
     * events move aside, so its flood of refusals cannot use up this one's room. */
    struct stat old;
    if (lstat(path, &old) == 0 && S_ISREG(old.st_mode) && old.st_size > 0) {
        _cleanup_free_ char *prev = xasprintf("%s.prev", path);
        if (rename(path, prev) < 0)
            return em_fail_errno(err, "egress log `%s`: move aside", path);
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return em_fail_errno(err, "egress log `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return em_fail(err, "egress log `%s`: not a regular file", path);
    }
    egress_log *l = xcalloc(1, sizeof *l);
    l->fd = fd;
    l->size = (uint64_t)st.st_size;
    pthread_mutex_init(&l->mu, NULL);
    *out = l;
    return 0;
}

static void write_line(egress_log *l, const char *text)
{
    size_t n = strlen(text);
    char *line = xmalloc(n + 2);
    memcpy(line, text, n);
    line[n] = '\n';
    line[n + 1] = '\0';
    em_err ignored;
    if (write_full(l->fd, line, n + 1, &ignored) == 0)
        l->size += n + 1;
    free(line);
}

bool egress_event_allowed(json_t *event)
{
    return !strcmp(json_string_value(json_object_get(event, "verdict")) ?: "", "allowed");
}

void egress_log_write(egress_log *l, json_t *event)
{
    if (!l)
        return;
    char *text = json_dumps(event, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return;
    /* allowed connections are always written (the proxy's limits bound how many there are); past
     * EGRESS_LOG_MAX the rest are only counted */
    bool allowed = egress_event_allowed(event);
    pthread_mutex_lock(&l->mu);
    if (l->size + strlen(text) + 1 > (allowed ? EGRESS_LOG_HARD_MAX : EGRESS_LOG_MAX) ||
        strlen(text) >= EGRESS_LINE_MAX)
        l->dropped++;
    else
        write_line(l, text);
    pthread_mutex_unlock(&l->mu);
    free(text);
}

void egress_log_close(egress_log *l)
{
    if (!l)
        return;
    if (l->dropped) {
        char when[40];
        iso8601_now(when, sizeof when);
        json_t *j = json_pack("{s:s, s:s, s:I}", "time", when, "verdict", "log_full", "dropped",
                              (json_int_t)l->dropped);
        char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(j);
        if (text)
            write_line(l, text);
        free(text);
    }
    close(l->fd);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

uint64_t egress_log_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

int egress_log_read(const char *path, uint64_t *offset, size_t max, json_t **events, em_err *err)
{
    if (!*events)
        *events = json_array();
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT ? 0 : em_fail_errno(err, "egress log `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return em_fail_errno(err, "egress log `%s`", path);
    if (!S_ISREG(st.st_mode))
        return em_fail(err, "egress log `%s`: not a regular file", path);
    uint64_t size = (uint64_t)st.st_size;
    if (*offset > size) /* the log was replaced: start over */
        *offset = 0;
    while (*offset < size && json_array_size(*events) < max) {
        size_t want = size - *offset > READ_CHUNK_MAX ? READ_CHUNK_MAX : (size_t)(size - *offset);
        char *buf = xmalloc(want + 1);
        ssize_t got = pread(fd, buf, want, (off_t)*offset);
        if (got < 0) {
            free(buf);
            return em_fail_errno(err, "egress log `%s`: read", path);
        }
        linebuf in; /* an incomplete last line is not yet written: it stays unread */
        linebuf_init_text(&in, buf, (size_t)got, READ_CHUNK_MAX);
        const char *line;
        size_t ll;
        while (json_array_size(*events) < max && linebuf_next(&in, &line, &ll) == LINEBUF_LINE) {
            if (ll > 0 && ll < EGRESS_LINE_MAX) {
                json_t *j = json_loadb(line, ll, JSON_REJECT_DUPLICATES, NULL);
                if (json_is_object(j))
                    json_array_append(*events, j);
                json_decref(j);
            }
        }
        size_t used = linebuf_offset(&in);
        free(buf);
        if (used == 0) {
            if ((size_t)got == READ_CHUNK_MAX) /* a line longer than a whole chunk: skip it */
                *offset += (uint64_t)got;
            break;
        }
        *offset += used;
    }
    return 0;
}

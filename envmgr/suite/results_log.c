#include "envmgr/suite/results_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/suite/suite.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/linebuf.h"

int results_open_append(const char *path, int *out, size_t *dropped, em_err *err)
{
    if (dropped)
        *dropped = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return em_fail_errno(err, "open `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return em_fail_errno(err, "stat `%s`", path);
    }
    /* Walk back from the end to the last newline: anything after it is a line cut short. */
    off_t end = st.st_size, keep = 0;
    char buf[4096];
    while (end > 0) {
        off_t start = end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
        ssize_t r = pread(fd, buf, (size_t)(end - start), start);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(fd);
            return em_fail_errno(err, "read `%s`", path);
        }
        char *nl = memrchr(buf, '\n', (size_t)r);
        if (nl) {
            keep = start + (nl - buf) + 1;
            break;
        }
        end = start;
    }
    if (keep < st.st_size) {
        if (ftruncate(fd, keep) < 0 || fsync(fd) < 0) {
            close(fd);
            return em_fail_errno(err, "cut the partial last line of `%s`", path);
        }
        if (dropped)
            *dropped = (size_t)(st.st_size - keep);
    }
    *out = fd;
    return 0;
}

int results_append(int fd, json_t *line, em_err *err)
{
    _cleanup_free_ char *text = json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return em_fail(err, "results: cannot encode a line");
    size_t n = strlen(text);
    if (n + 1 > RESULTS_LINE_MAX)
        return em_fail(err, "results: a line of %zu bytes is over the limit of %zu", n + 1, RESULTS_LINE_MAX);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    /* One write(): with O_APPEND the line lands whole at the end or, if the
     * write fails part-way, leaves a tail without a newline that the next
     * open cuts off. */
    ssize_t w;
    do
        w = write(fd, text, n);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return em_fail_errno(err, "results: write");
    if ((size_t)w != n)
        return em_fail(err, "results: short write (%zd of %zu bytes; disk full?)", w, n);
    if (fsync(fd) < 0)
        return em_fail_errno(err, "results: fsync");
    return 0;
}

int results_read(const char *path, json_t **lines, size_t *skipped, em_err *err)
{
    *lines = json_array();
    if (skipped)
        *skipped = 0;
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    if (read_file_capped(path, RESULTS_MAX_BYTES, &text, &len, err) < 0) {
        json_decref(*lines);
        *lines = NULL;
        return -1;
    }
    size_t bad = 0;
    linebuf in;
    linebuf_init_text(&in, text, len, RESULTS_MAX_BYTES);
    const char *p;
    size_t n;
    while (linebuf_next(&in, &p, &n) == LINEBUF_LINE) {
        json_t *j = n ? json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (j && json_is_object(j) && json_is_string(json_object_get(j, "task_id")))
            json_array_append_new(*lines, j);
        else {
            json_decref(j);
            if (n)
                bad++;
        }
    }
    if (linebuf_pending(&in)) /* a partial last line: never a result */
        bad++;
    if (skipped)
        *skipped = bad;
    return 0;
}

/* The key of a line (caller frees), NULL when it has no task_id. */
static char *results_line_key(json_t *line)
{
    const char *id = json_string_value(json_object_get(line, "task_id"));
    if (!id)
        return NULL;
    json_int_t rep = json_integer_value(json_object_get(line, "repeat"));
    return suite_episode_key(id, (int)rep);
}

json_t *results_final(json_t *lines)
{
    json_t *out = json_object(), *line;
    size_t i;
    json_array_foreach(lines, i, line)
    {
        json_t *f = json_object_get(line, "final");
        if (f && !json_is_true(f))
            continue;
        _cleanup_free_ char *key = results_line_key(line);
        if (key)
            json_object_set(out, key, line);
    }
    return out;
}

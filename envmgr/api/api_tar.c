/* The trace download (GET /v1/envs/{id}/trace) as a ustar stream: a tar is simple enough to
 * stream without a library and without a temporary file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/util.h"

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

/* ---- a trace as a tar stream ---- */

typedef struct tar_file {
    char *path, *name;
    uint64_t size;
    long mtime;
} tar_file;

typedef struct tar_stream {
    tar_file *files;
    size_t n, cur;
    uint64_t pos;      /* within the current member: header (512), data, padding */
    int fd;
    uint8_t hdr[512];
} tar_stream;

static void tar_free(void *cls)
{
    tar_stream *t = cls;
    for (size_t i = 0; i < t->n; i++) {
        free(t->files[i].path);
        free(t->files[i].name);
    }
    free(t->files);
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

static ssize_t tar_read(void *cls, uint64_t offset, char *buf, size_t max)
{
    tar_stream *t = cls;
    size_t out = 0;
    while (out < max) {
        if (t->cur == t->n) { /* two zero blocks end the archive */
            uint64_t end = 1024;
            if (t->pos >= end)
                break;
            size_t k = (size_t)(end - t->pos) < max - out ? (size_t)(end - t->pos) : max - out;
            memset(buf + out, 0, k);
            out += k;
            t->pos += k;
            continue;
        }
        tar_file *f = &t->files[t->cur];
        uint64_t padded = (f->size + 511) / 512 * 512;
        if (t->pos == 0 && api_tar_header(t->hdr, f->name, f->size, f->mtime) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (t->pos < 512) {
            size_t k = (size_t)(512 - t->pos) < max - out ? (size_t)(512 - t->pos) : max - out;
            memcpy(buf + out, t->hdr + t->pos, k);
            out += k;
            t->pos += k;
            continue;
        }
        uint64_t in_data = t->pos - 512;
        if (in_data < f->size) {
            if (t->fd < 0 && (t->fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            size_t want = (size_t)(f->size - in_data) < max - out ? (size_t)(f->size - in_data) : max - out;
            ssize_t k = pread(t->fd, buf + out, want, (off_t)in_data);
            if (k <= 0) /* the file shrank: a trace never does, so give up */
                return MHD_CONTENT_READER_END_WITH_ERROR;
            out += (size_t)k;
            t->pos += (uint64_t)k;
            continue;
        }
        if (in_data < padded) {
            size_t k = (size_t)(padded - in_data) < max - out ? (size_t)(padded - in_data) : max - out;
            memset(buf + out, 0, k);
            out += k;
            t->pos += k;
            continue;
        }
        if (t->fd >= 0)
            close(t->fd);
        t->fd = -1;
        t->cur++;
        t->pos = 0;
    }
    if (out == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    (void)offset;
    return (ssize_t)out;
}

static void tar_add(tar_stream *t, const char *path, const char *name, const struct stat *st)
{
    t->files = xrealloc(t->files, (t->n + 1) * sizeof *t->files);
    t->files[t->n++] = (tar_file){xstrdup(path), xstrdup(name), (uint64_t)st->st_size, (long)st->st_mtime};
}

/* The files <sha256><ext> of one content-addressed store of the trace: no temp files, no links. */
static void add_store(tar_stream *t, const char *trace_dir, const char *sub, const char *ext)
{
    _cleanup_free_ char *dir = xasprintf("%s/%s", trace_dir, sub);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n != 64 + strlen(ext) || strcmp(de->d_name + 64, ext))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name), *name = xasprintf("trace/%s/%s", sub, de->d_name);
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            tar_add(t, p, name, &st);
    }
    closedir(d);
}

struct MHD_Response *api_tar_response(const char *trace_dir, em_err *err)
{
    tar_stream *t = xcalloc(1, sizeof *t);
    t->fd = -1;
    _cleanup_free_ char *jsonl = xasprintf("%s/trace.jsonl", trace_dir);
    struct stat st;
    if (lstat(jsonl, &st) < 0 || !S_ISREG(st.st_mode)) {
        tar_free(t);
        em_fail_errno(err, "trace `%s`", jsonl);
        return NULL;
    }
    tar_add(t, jsonl, "trace/trace.jsonl", &st);
    add_store(t, trace_dir, "frames", ".png");
    add_store(t, trace_dir, "a11y", ".xml"); /* the accessibility trees of a11y_tree observations */
    uint64_t total = 1024;
    for (size_t i = 0; i < t->n; i++)
        total += 512 + (t->files[i].size + 511) / 512 * 512;
    struct MHD_Response *r = MHD_create_response_from_callback(total, 64 * 1024, tar_read, t, tar_free);
    if (!r) {
        tar_free(t);
        em_fail(err, "trace: cannot create the response");
    }
    return r;
}

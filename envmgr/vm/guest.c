#include "envmgr/vm/guest.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "envmgr/base/base64.h"
#include "envmgr/base/jsonline.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/guest_cmd.h"
#include "envmgr/vm/guest_osworld.h"

/* The largest reply a real agent sends: guest-exec-status with both out-data and err-data at the
 * agent's own 16 MiB output limit, base64 (2 x 22369624 bytes) plus a few dozen bytes of JSON, is
 * 42.7 MiB. Reading and parsing a reply of the cap costs at most about 2.5 times it (the line
 * buffer, bounded at the cap + 64 KiB, plus jansson's token buffer and the decoded strings; a
 * reply of many small values is refused past JSONLINE_VALUES_MAX): measured 110 MiB for a 44 MiB
 * reply of two long strings, 93 MiB for one of 65000 strings. 64 MiB had cost 160 MiB. */
#define GUEST_REPLY_MAX (44u << 20)
#define GUEST_CMD_TIMEOUT_MS 10000.0
#define FILE_CHUNK (1u << 20)

struct guest {
    jsonline conn;
    char *label;
    unsigned sync_id;
    osworld *osw; /* guest interface osworld: every operation goes to its server (guest_osworld.c) */
};

/* The agent answers in order and does not echo ids; guest_sync guards the order. */
static int call(guest *g, const char *cmd, json_t *args, double timeout_ms, json_t **ret, em_err *err)
{
    json_t *msg = json_pack("{s:s}", "execute", cmd);
    if (args)
        json_object_set(msg, "arguments", args);
    int rc = jsonline_send(&g->conn, msg, -1, err);
    json_decref(msg);
    if (rc < 0)
        return em_prefix(err, "guest agent: %s: ", cmd);
    json_t *reply;
    if (jsonline_read(&g->conn, now_ms() + timeout_ms, &reply, err) < 0)
        return em_prefix(err, "guest agent: %s: ", cmd);
    json_t *e = json_object_get(reply, "error");
    if (e) {
        const char *desc = json_string_value(json_object_get(e, "desc"));
        em_fail(err, "guest agent: %s failed: %s", cmd, desc ? desc : "no description");
        json_decref(reply);
        return -1;
    }
    json_t *r = json_object_get(reply, "return");
    if (!r) {
        json_decref(reply);
        return em_fail(err, "guest agent: %s: reply has no return value", cmd);
    }
    if (ret)
        *ret = json_incref(r);
    json_decref(reply);
    return 0;
}

/* Resynchronise the stream (after a restore the agent may hold stale bytes). */
static int guest_sync(guest *g, double timeout_ms, em_err *err)
{
    double deadline = now_ms() + timeout_ms;
    /* A 0xFF byte resets the agent's parser in case a previous client left half a command. */
    static const unsigned char reset = 0xff;
    if (send_full(g->conn.fd, &reset, 1, err) < 0)
        return em_prefix(err, "guest agent: sync: ");
    unsigned id = (unsigned)(now_ms() * 1000) ^ (++g->sync_id * 2654435761u);
    id &= 0x7fffffff;
    json_t *msg = json_pack("{s:s, s:{s:I}}", "execute", "guest-sync-delimited", "arguments", "id", (json_int_t)id);
    int rc = jsonline_send(&g->conn, msg, -1, err);
    json_decref(msg);
    if (rc < 0)
        return em_prefix(err, "guest agent: sync: ");
    for (;;) {
        if (jsonline_skip_to_ff(&g->conn, deadline, err) < 0)
            return em_prefix(err, "guest agent: sync: ");
        json_t *reply;
        if (jsonline_read(&g->conn, deadline, &reply, err) < 0)
            return em_prefix(err, "guest agent: sync: ");
        json_int_t got = json_integer_value(json_object_get(reply, "return"));
        json_decref(reply);
        if (got == (json_int_t)id)
            return 0;
    }
}

guest *guest_attach(int fd, const char *what)
{
    guest *g = xcalloc(1, sizeof *g);
    g->label = xasprintf("guest agent %s", what);
    jsonline_init(&g->conn, fd, g->label, GUEST_REPLY_MAX);
    return g;
}

int guest_open(const char *sock_path, double timeout_ms, guest **out, em_err *err)
{
    double deadline = now_ms() + timeout_ms;
    int fd = unix_connect(sock_path, timeout_ms, err);
    if (fd < 0)
        return em_prefix(err, "guest agent: ");
    guest *g = guest_attach(fd, sock_path);
    /* The agent may not be up yet (guest still booting): retry the sync until the deadline. */
    for (;;) {
        double left = deadline - now_ms();
        if (guest_sync(g, left < 2000 ? left : 2000, err) == 0)
            break;
        if (interrupted() || now_ms() >= deadline) {
            guest_close(g);
            return -1;
        }
    }
    *out = g;
    return 0;
}

int guest_open_osworld(pid_t qemu_pid, const char *password, guest **out, em_err *err)
{
    if (qemu_pid <= 0)
        return em_fail(err, "OSWorld's server: no QEMU process to reach it through");
    guest *g = xcalloc(1, sizeof *g);
    g->label = xasprintf("OSWorld's server in QEMU %d's network namespace", (int)qemu_pid);
    g->conn.fd = -1;
    g->osw = osworld_new(qemu_pid, password);
    *out = g;
    return 0;
}

bool guest_is_osworld(const guest *g) { return g && g->osw; }

int guest_osworld_call(guest *g, const char *endpoint, json_t *body, double timeout_s, long *status, char **reply,
                       em_err *err)
{
    if (!g->osw)
        return em_fail(err, "%s: not OSWorld's server (guest interface osworld only)", endpoint);
    osworld_reply r;
    if (osworld_request(g->osw, endpoint, body, timeout_s * 1000, 64 * 1024, &r, err) < 0)
        return -1;
    *status = r.status;
    size_t n = r.len < 300 ? r.len : 300;
    *reply = xmalloc(n + 1);
    osworld_excerpt(r.body, r.len, *reply, n);
    osworld_reply_free(&r);
    return 0;
}

int guest_osworld_fetch(guest *g, const char *path, json_t *body, double timeout_s, size_t cap, long *status,
                        char **data, size_t *len, em_err *err)
{
    if (!g->osw)
        return em_fail(err, "%s: not OSWorld's server (guest interface osworld only)", path);
    osworld_reply r;
    if (osworld_request(g->osw, path, body, timeout_s * 1000, cap, &r, err) < 0)
        return -1;
    *status = r.status;
    *data = r.body;
    *len = r.len;
    return 0;
}

void guest_close(guest *g)
{
    if (!g)
        return;
    if (g->osw) {
        osworld_free(g->osw);
        free(g->label);
        free(g);
        return;
    }
    jsonline_release(&g->conn);
    free(g->label);
    free(g);
}

int guest_set_time(guest *g, em_err *err)
{
    if (g->osw)
        return osworld_set_time(g->osw, err);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_t *args = json_pack("{s:I}", "time", (json_int_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
    int rc = call(g, "guest-set-time", args, GUEST_CMD_TIMEOUT_MS, NULL, err);
    json_decref(args);
    return rc;
}

static int decode_field(json_t *obj, const char *key, size_t cap, char **out, size_t *len, int *truncated,
                        em_err *err)
{
    const char *b64 = json_string_value(json_object_get(obj, key));
    unsigned char *data = NULL;
    size_t n = 0;
    int dr = b64 ? base64_decode(b64, &data, &n) : 0;
    if (dr == BASE64_NOMEM) {
        em_fail_nomem(err, strlen(b64) / 4 * 3, "decoded base64");
        return em_prefix(err, "guest agent: %s: ", key);
    }
    if (dr < 0)
        return em_fail(err, "guest agent: %s is not valid base64", key);
    if (!data)
        data = (unsigned char *)xstrdup("");
    if (n > cap) {
        n = cap;
        data[n] = '\0';
        *truncated = 1;
    }
    *out = (char *)data;
    *len = n;
    return 0;
}

int guest_exec(guest *g, const char *const *argv, const void *in, size_t in_len, double timeout_s, size_t cap,
               guest_exec_result *res, em_err *err)
{
    memset(res, 0, sizeof *res);
    if (g->osw && in)
        return em_fail_input(err, "exec: OSWorld's server gives a command no stdin (guest interface osworld)");
    if (g->osw)
        return osworld_exec(g->osw, argv, timeout_s, cap, res, err);
    json_t *args = guest_cmd_timeout_args(argv, timeout_s, err);
    if (!args)
        return -1;
    if (in_len > GUEST_STDIN_MAX) {
        json_decref(args);
        return em_fail_input(err, "exec: stdin: %zu bytes, over the %d MiB the guest agent takes in one message",
                             in_len, GUEST_STDIN_MAX >> 20);
    }
    json_t *req = json_pack("{s:s, s:o, s:b}", "path", "/usr/bin/timeout", "arg", args, "capture-output", 1);
    if (in) {
        char *b64 = base64_encode(in, in_len);
        json_object_set_new(req, "input-data", json_string(b64));
        free(b64);
    }
    json_t *ret;
    double started = now_ms();
    int rc = call(g, "guest-exec", req, GUEST_CMD_TIMEOUT_MS, &ret, err);
    json_decref(req);
    if (rc < 0)
        return em_prefix(err, "exec `%s`: ", argv[0]);
    json_int_t pid = json_integer_value(json_object_get(ret, "pid"));
    json_decref(ret);

    double deadline = now_ms() + timeout_s * 1000 + 5000, wait = 2;
    for (;;) {
        json_t *st_args = json_pack("{s:I}", "pid", pid), *st;
        rc = call(g, "guest-exec-status", st_args, GUEST_CMD_TIMEOUT_MS, &st, err);
        json_decref(st_args);
        if (rc < 0)
            return em_prefix(err, "exec `%s`: ", argv[0]);
        if (json_is_true(json_object_get(st, "exited"))) {
            json_t *code = json_object_get(st, "exitcode");
            res->exit_code = code ? (int)json_integer_value(code) : -1;
            res->signal = (int)json_integer_value(json_object_get(st, "signal"));
            res->timed_out = guest_cmd_timed_out(res->exit_code, started, timeout_s);
            res->truncated = json_is_true(json_object_get(st, "out-truncated")) ||
                             json_is_true(json_object_get(st, "err-truncated"));
            rc = decode_field(st, "out-data", cap, &res->out, &res->out_len, &res->truncated, err);
            if (rc == 0)
                rc = decode_field(st, "err-data", cap, &res->err, &res->err_len, &res->truncated, err);
            json_decref(st);
            if (rc < 0)
                guest_exec_result_free(res);
            return rc;
        }
        json_decref(st);
        if (check_interrupt(err) < 0)
            return -1;
        if (now_ms() > deadline)
            return em_fail(err, "exec `%s`: still running %.0f s after its timeout", argv[0], 5.0);
        sleep_ms(wait);
        wait = wait < 50 ? wait * 1.5 : 50;
    }
}

void guest_exec_result_free(guest_exec_result *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}

static int file_open(guest *g, const char *path, const char *mode, json_int_t *handle, em_err *err)
{
    json_t *args = json_pack("{s:s, s:s}", "path", path, "mode", mode), *ret;
    if (!args)
        return em_fail_input(err, "file `%s`: path is not valid UTF-8", path);
    int rc = call(g, "guest-file-open", args, GUEST_CMD_TIMEOUT_MS, &ret, err);
    json_decref(args);
    if (rc < 0)
        return em_prefix(err, "file `%s`: ", path);
    *handle = json_integer_value(ret);
    json_decref(ret);
    return 0;
}

static void file_close(guest *g, json_int_t handle)
{
    json_t *args = json_pack("{s:I}", "handle", handle);
    em_err ignored;
    call(g, "guest-file-close", args, GUEST_CMD_TIMEOUT_MS, NULL, &ignored);
    json_decref(args);
}

int guest_file_read(guest *g, const char *path, size_t cap, char **data, size_t *len, em_err *err)
{
    if (g->osw)
        return osworld_file_read(g->osw, path, cap, data, len, err);
    json_int_t h;
    if (file_open(g, path, "r", &h, err) < 0)
        return -1;
    char *buf = xmalloc(1);
    size_t n = 0;
    /* One deadline for the whole file: an agent answering every read with a byte, just in time,
     * must not stretch it without end. A minute and a second per MiB the cap allows. */
    double limit_ms = 60000.0 + 1000.0 * (double)(cap >> 20), deadline = now_ms() + limit_ms;
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0) {
            em_fail(err, "guest agent: reading `%s` took over %.0f s (%zu bytes so far)", path, limit_ms / 1000, n);
            goto fail;
        }
        json_t *args = json_pack("{s:I, s:I}", "handle", h, "count", (json_int_t)FILE_CHUNK), *ret;
        int rc = call(g, "guest-file-read", args, left < GUEST_CMD_TIMEOUT_MS ? left : GUEST_CMD_TIMEOUT_MS, &ret,
                      err);
        json_decref(args);
        if (rc < 0)
            goto fail;
        unsigned char *chunk;
        size_t clen;
        const char *b64 = json_string_value(json_object_get(ret, "buf-b64"));
        int eof = json_is_true(json_object_get(ret, "eof"));
        int dr = b64 ? base64_decode(b64, &chunk, &clen) : -1;
        if (dr < 0) {
            if (dr == BASE64_NOMEM) {
                em_fail_nomem(err, strlen(b64) / 4 * 3, "decoded base64");
                em_prefix(err, "guest agent: file `%s`: ", path);
            } else {
                em_fail(err, "guest agent: file `%s`: malformed read reply", path);
            }
            json_decref(ret);
            goto fail;
        }
        json_decref(ret);
        if (n + clen > cap) {
            free(chunk);
            em_fail(err, "file `%s` is larger than the limit of %zu bytes", path, cap);
            goto fail;
        }
        buf = xrealloc(buf, n + clen + 1);
        memcpy(buf + n, chunk, clen);
        n += clen;
        free(chunk);
        if (eof || clen == 0)
            break;
    }
    file_close(g, h);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    file_close(g, h);
    return -1;
}

/* Write chunks that next() hands out (len 0: done) into a guest file opened for writing. */
typedef int (*chunk_fn)(void *ctx, const char **data, size_t *len, em_err *err);

static int write_chunks(guest *g, const char *path, const char *mode, chunk_fn next, void *ctx, em_err *err)
{
    json_int_t h;
    if (file_open(g, path, mode, &h, err) < 0)
        return -1;
    for (;;) {
        const char *data;
        size_t n;
        if (next(ctx, &data, &n, err) < 0) {
            file_close(g, h);
            return em_prefix(err, "file `%s`: ", path);
        }
        if (n == 0)
            break;
        char *b64 = base64_encode(data, n);
        json_t *args = json_pack("{s:I, s:s}", "handle", h, "buf-b64", b64);
        free(b64);
        int rc = call(g, "guest-file-write", args, GUEST_CMD_TIMEOUT_MS, NULL, err);
        json_decref(args);
        if (rc < 0) {
            file_close(g, h);
            return em_prefix(err, "file `%s`: ", path);
        }
    }
    json_t *args = json_pack("{s:I}", "handle", h);
    int rc = call(g, "guest-file-flush", args, GUEST_CMD_TIMEOUT_MS, NULL, err);
    json_decref(args);
    file_close(g, h);
    return rc < 0 ? em_prefix(err, "file `%s`: ", path) : 0;
}

typedef struct mem_chunks {
    const char *data;
    size_t len, off;
} mem_chunks;

static int next_mem(void *ctx, const char **data, size_t *len, em_err *err)
{
    mem_chunks *m = ctx;
    *data = m->data + m->off;
    *len = m->len - m->off < FILE_CHUNK ? m->len - m->off : FILE_CHUNK;
    m->off += *len;
    return 0;
}

int guest_file_write(guest *g, const char *path, const void *data, size_t len, em_err *err)
{
    if (len > GUEST_FILE_CAP_DEFAULT)
        return em_fail_input(err, "file `%s`: %zu bytes is more than the limit of %u", path, len,
                             GUEST_FILE_CAP_DEFAULT);
    if (g->osw)
        return osworld_file_upload(g->osw, path, data, len, -1, err);
    mem_chunks m = {.data = data, .len = len};
    return write_chunks(g, path, "w", next_mem, &m, err);
}

int guest_file_write_system(guest *g, const char *path, const void *data, size_t len, em_err *err)
{
    if (g->osw)
        return osworld_file_write_system(g->osw, path, data, len, err);
    return guest_file_write(g, path, data, len, err);
}

/* The guest clock through the image's clock daemon (vm-images/toolbelt/envmgr_guest/clockd.py): a
 * line written into its FIFO, opened read-write so the open cannot block on a pipe with no reader,
 * then the guest's clock read back until it agrees. No process starts in the guest. */
#define CLOCK_AGREE_NS 1000000000LL /* the guest's clock within a second of ours */
#define CLOCK_CHECK_MS 500.0
#define CLOCK_CHECK_PAUSE_MS 5.0

int guest_set_time_fifo(guest *g, const char *fifo, em_err *err)
{
    if (g->osw)
        return em_fail(err, "OSWorld's server: no clock daemon");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char line[48];
    int n = snprintf(line, sizeof line, "%lld.%09ld\n", (long long)ts.tv_sec, ts.tv_nsec);
    mem_chunks m = {.data = line, .len = (size_t)n};
    if (write_chunks(g, fifo, "r+", next_mem, &m, err) < 0)
        return -1;
    double deadline = now_ms() + CLOCK_CHECK_MS;
    for (;;) {
        json_t *ret;
        if (call(g, "guest-get-time", NULL, GUEST_CMD_TIMEOUT_MS, &ret, err) < 0)
            return -1;
        long long guest_ns = json_is_integer(ret) ? (long long)json_integer_value(ret) : 0;
        json_decref(ret);
        clock_gettime(CLOCK_REALTIME, &ts);
        long long d = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec - guest_ns;
        if (d < CLOCK_AGREE_NS && d > -CLOCK_AGREE_NS)
            return 0;
        if (now_ms() >= deadline)
            return em_fail(err, "guest agent: the clock daemon did not set the clock (%.1f s off after %.0f ms)",
                           (double)d / 1e9, CLOCK_CHECK_MS);
        sleep_ms(CLOCK_CHECK_PAUSE_MS);
    }
}

typedef struct fd_chunks {
    int fd;
    char *buf;
    uint64_t left;
} fd_chunks;

static int next_fd(void *ctx, const char **data, size_t *len, em_err *err)
{
    fd_chunks *f = ctx;
    *data = f->buf;
    *len = 0;
    if (f->left == 0)
        return 0;
    size_t want = f->left < FILE_CHUNK ? (size_t)f->left : FILE_CHUNK;
    if (read_full_deadline(f->fd, f->buf, want, now_ms() + GUEST_CMD_TIMEOUT_MS, err) < 0)
        return -1;
    f->left -= want;
    *len = want;
    return 0;
}

int guest_file_upload(guest *g, const char *guest_path, const char *host_path, uint64_t cap, em_err *err)
{
    _cleanup_close_ int fd = open(host_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return em_fail_errno(err, "upload `%s`", host_path);
    if (!S_ISREG(st.st_mode))
        return em_fail_input(err, "upload `%s`: not a regular file", host_path);
    if ((uint64_t)st.st_size > cap)
        return em_fail_input(err, "upload `%s`: %lld bytes is more than the limit of %llu", host_path,
                             (long long)st.st_size, (unsigned long long)cap);
    if (g->osw)
        return osworld_file_upload(g->osw, guest_path, NULL, (size_t)st.st_size, fd, err);
    _cleanup_free_ char *buf = xmalloc(FILE_CHUNK);
    fd_chunks f = {.fd = fd, .buf = buf, .left = (uint64_t)st.st_size};
    return write_chunks(g, guest_path, "w", next_fd, &f, err);
}

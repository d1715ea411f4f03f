#include "envmgr/vm/guest_osworld.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/guest_cmd.h"
#include "envmgr/vm/netns.h"
#include "envmgr/vm/vm.h"

#define CONNECT_TIMEOUT_MS 5000L
#define FILE_TIMEOUT_BASE_MS 60000.0 /* a file's request: a minute and a second per MiB, as the agent's */
#define EXEC_GRACE_MS 10000.0        /* past a command's own timeout: the reply's way back */
#define EXCERPT 200

struct osworld {
    pid_t pid;      /* QEMU's: its network namespace holds the server's forwarded port */
    char *password; /* the image user's (sudo for the clock), or NULL */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_setup(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

osworld *osworld_new(pid_t qemu_pid, const char *password)
{
    osworld *o = xcalloc(1, sizeof *o);
    o->pid = qemu_pid;
    o->password = password ? xstrdup(password) : NULL;
    pthread_once(&curl_once, curl_setup); /* once per process, whichever thread (the API's) comes first */
    return o;
}

void osworld_free(osworld *o)
{
    if (!o)
        return;
    free(o->password);
    free(o);
}

void osworld_reply_free(osworld_reply *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}

void osworld_excerpt(const char *body, size_t len, char *out, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; body && i < len && k < max; i++) {
        unsigned char c = (unsigned char)body[i];
        out[k++] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
    }
    while (k > 0 && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
}

/* ---- one request ---- */

typedef struct xfer {
    osworld *o;
    em_err sock_err; /* why no socket could be made in the namespace */
    bool sock_failed;
    char *buf;
    size_t len, cap;
    bool over, stopped;
} xfer;

static curl_socket_t on_open(void *ctx, curlsocktype purpose, struct curl_sockaddr *addr)
{
    xfer *x = ctx;
    (void)purpose;
    (void)addr;
    int fd;
    if (netns_socket(x->o->pid, &fd, &x->sock_err) < 0) {
        x->sock_failed = true;
        return CURL_SOCKET_BAD;
    }
    return fd;
}

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    xfer *x = ctx;
    size_t k = size * n;
    if (k > x->cap - x->len) {
        x->over = true;
        return 0; /* aborts the transfer */
    }
    char *nb = realloc(x->buf, x->len + k + 1);
    if (!nb)
        return 0;
    x->buf = nb;
    memcpy(x->buf + x->len, p, k);
    x->len += k;
    x->buf[x->len] = '\0';
    return k;
}

/* Ctrl-C (or the API's stop) ends a long request as it ends envmgr's other waits. */
static int on_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    xfer *x = ctx;
    x->stopped = interrupted() != 0;
    return x->stopped;
}

/* Perform c (method and body set by the caller) on path under timeout and cap; content_type, when
 * not NULL, is the request body's. */
static int perform(osworld *o, CURL *c, const char *path, const char *content_type, double timeout_ms, size_t cap,
                   osworld_reply *r, em_err *err)
{
    memset(r, 0, sizeof *r);
    xfer x = {.o = o, .cap = cap};
    char ebuf[CURL_ERROR_SIZE] = "", url[256], ctype[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", VM_OSWORLD_PORT, path);
    struct curl_slist *hdr = curl_slist_append(NULL, "Expect:"); /* no 100-continue wait on uploads */
    if (content_type) {
        snprintf(ctype, sizeof ctype, "Content-Type: %s", content_type);
        hdr = curl_slist_append(hdr, ctype);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* never the environment's proxy */
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 1 ? timeout_ms : 1));
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)cap);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    CURLcode rc = curl_easy_perform(c);
    /* nothing of this frame stays with the handle */
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK) {
        free(x.buf);
        if (x.stopped)
            return check_interrupt(err) < 0 ? -1 : em_fail(err, "OSWorld's server %s: interrupted", path);
        if (x.sock_failed)
            return em_fail(err, "OSWorld's server %s: %s", path, x.sock_err.msg);
        if (x.over || rc == CURLE_FILESIZE_EXCEEDED)
            return em_fail(err, "OSWorld's server %s: the reply is over the limit of %zu bytes", path, cap);
        if (rc == CURLE_OPERATION_TIMEDOUT)
            return em_fail(err, "OSWorld's server %s: no whole reply within %.1f s", path, timeout_ms / 1000);
        return em_fail(err, "OSWorld's server %s: %s", path, ebuf[0] ? ebuf : curl_easy_strerror(rc));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    r->body = x.buf ? x.buf : xstrdup("");
    r->len = x.len;
    return 0;
}

int osworld_request(osworld *o, const char *path, json_t *body, double timeout_ms, size_t cap, osworld_reply *r,
                    em_err *err)
{
    char *text = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT)))
        return em_fail_input(err, "OSWorld's server %s: the request is not valid JSON (UTF-8)", path);
    CURL *c = curl_easy_init();
    if (!c) {
        free(text);
        return em_fail(err, "OSWorld's server %s: curl_easy_init failed", path);
    }
    if (text)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    int rc = perform(o, c, path, text ? "application/json" : NULL, timeout_ms, cap, r, err);
    curl_easy_cleanup(c);
    free(text);
    return rc;
}

/* A reply that is not 200: one line naming the status and what the server said. */
static int refused(const char *what, const osworld_reply *r, em_err *err)
{
    char ex[EXCERPT + 1];
    osworld_excerpt(r->body, r->len, ex, EXCERPT);
    return em_fail(err, "%s: OSWorld's server answered %ld%s%s", what, r->status, ex[0] ? ": " : "", ex);
}

/* ---- commands ---- */

/* A member that must be a string (or absent, or null: ""), capped; its length may hold NUL bytes. */
static int stream(json_t *reply, const char *key, size_t cap, char **out, size_t *len, int *truncated, em_err *err)
{
    json_t *v = json_object_get(reply, key);
    if (v && !json_is_string(v) && !json_is_null(v))
        return em_fail(err, "OSWorld's server /execute: `%s` is %s, not a string", key, json_type_name(v));
    size_t n = json_is_string(v) ? json_string_length(v) : 0;
    if (n > cap) {
        n = cap;
        *truncated = 1;
    }
    char *s = xmalloc(n + 1);
    if (n)
        memcpy(s, json_string_value(v), n);
    s[n] = '\0';
    *out = s;
    *len = n;
    return 0;
}

int osworld_exec_reply_parse(long status, const char *body, size_t len, size_t cap, guest_exec_result *res,
                             em_err *err)
{
    memset(res, 0, sizeof *res);
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    const char *st = json_string_value(json_object_get(j, "status"));
    if (!json_is_object(j) || !st) {
        char ex[EXCERPT + 1];
        osworld_excerpt(body, len, ex, EXCERPT);
        json_decref(j);
        return em_fail(err, "OSWorld's server /execute: answered %ld without a JSON object with a status%s%s", status,
                       ex[0] ? ": " : "", ex);
    }
    if (strcmp(st, "success") || status != 200) {
        /* the server could not run it (no such program, its own 120 s limit): message says why */
        const char *msg = json_string_value(json_object_get(j, "message"));
        char ex[EXCERPT + 1];
        osworld_excerpt(msg, msg ? strlen(msg) : 0, ex, EXCERPT);
        int timed_out = msg && strstr(msg, "timed out") != NULL;
        int not_found = msg && (strstr(msg, "No such file") || strstr(msg, "not found"));
        char stx[33];
        osworld_excerpt(st, strlen(st), stx, 32);
        json_decref(j); /* st and msg go with it */
        if (!timed_out && !not_found)
            return em_fail(err, "OSWorld's server /execute: answered %ld, status `%s`%s%s", status, stx,
                           ex[0] ? ": " : "", ex);
        /* as a shell says it: 127 for a program that is not there; a timeout as the agent's */
        res->exit_code = timed_out ? 124 : 127;
        res->timed_out = timed_out;
        res->out = xstrdup("");
        res->err = xstrdup(ex);
        res->err_len = strlen(ex);
        return 0;
    }
    json_t *code = json_object_get(j, "returncode");
    if (!json_is_integer(code)) {
        json_decref(j);
        return em_fail(err, "OSWorld's server /execute: `returncode` is not an integer");
    }
    json_int_t c = json_integer_value(code);
    /* Python reports a signal's death as -N */
    if (c < 0 && c >= -64) {
        res->exit_code = -1;
        res->signal = (int)-c;
    } else if (c >= 0 && c <= 255) {
        res->exit_code = (int)c;
    } else {
        json_decref(j);
        return em_fail(err, "OSWorld's server /execute: returncode %lld is not an exit status", (long long)c);
    }
    int rc = stream(j, "output", cap, &res->out, &res->out_len, &res->truncated, err);
    if (rc == 0)
        rc = stream(j, "error", cap, &res->err, &res->err_len, &res->truncated, err);
    json_decref(j);
    if (rc < 0)
        guest_exec_result_free(res);
    return rc;
}

int osworld_exec(osworld *o, const char *const *argv, double timeout_s, size_t cap, guest_exec_result *res,
                 em_err *err)
{
    memset(res, 0, sizeof *res);
    /* coreutils' timeout in the guest stops a runaway command, as on the guest agent; the server's
     * own limit of 120 s stops it first when the timeout is longer */
    json_t *cmd = guest_cmd_timeout_args(argv, timeout_s, err);
    if (!cmd)
        return -1;
    json_array_insert_new(cmd, 0, json_string("timeout"));
    json_t *req = json_pack("{s:o, s:b}", "command", cmd, "shell", 0);
    /* two streams of cap bytes, each byte at most 6 in JSON (\u00XX), and the object around them */
    size_t body_cap = cap > (OSWORLD_REPLY_MAX - 65536) / 12 ? OSWORLD_REPLY_MAX : cap * 12 + 65536;
    double limit = timeout_s < OSWORLD_EXEC_SERVER_LIMIT_S ? timeout_s : OSWORLD_EXEC_SERVER_LIMIT_S;
    osworld_reply r;
    double started = now_ms();
    int rc = osworld_request(o, "/execute", req, limit * 1000 + EXEC_GRACE_MS, body_cap, &r, err);
    json_decref(req);
    if (rc < 0)
        return em_prefix(err, "exec `%s`: ", argv[0]);
    rc = osworld_exec_reply_parse(r.status, r.body, r.len, cap, res, err);
    osworld_reply_free(&r);
    if (rc < 0)
        return em_prefix(err, "exec `%s`: ", argv[0]);
    if (guest_cmd_timed_out(res->exit_code, started, timeout_s))
        res->timed_out = 1;
    return 0;
}

/* ---- files ---- */

int osworld_file_read(osworld *o, const char *path, size_t cap, char **data, size_t *len, em_err *err)
{
    CURL *c = curl_easy_init();
    if (!c)
        return em_fail(err, "file `%s`: curl_easy_init failed", path);
    curl_mime *mime = curl_mime_init(c);
    curl_mimepart *part = curl_mime_addpart(mime);
    curl_mime_name(part, "file_path");
    curl_mime_data(part, path, CURL_ZERO_TERMINATED);
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    osworld_reply r;
    double limit_ms = FILE_TIMEOUT_BASE_MS + 1000.0 * (double)(cap >> 20);
    int rc = perform(o, c, "/file", NULL, limit_ms, cap, &r, err);
    curl_easy_cleanup(c);
    curl_mime_free(mime);
    if (rc < 0) {
        if (strstr(err->msg, "over the limit"))
            return em_fail(err, "file `%s` is larger than the limit of %zu bytes", path, cap);
        return em_prefix(err, "file `%s`: ", path);
    }
    if (r.status == 404) {
        osworld_reply_free(&r);
        return em_fail(err, "file `%s`: No such file or directory (OSWorld's server answered 404)", path);
    }
    if (r.status != 200) {
        char what[300];
        snprintf(what, sizeof what, "file `%.250s`", path);
        rc = refused(what, &r, err);
        osworld_reply_free(&r);
        return rc;
    }
    *data = r.body;
    *len = r.len;
    return 0;
}

typedef struct fd_src {
    int fd;
    curl_off_t left;
} fd_src;

static size_t read_fd(char *buf, size_t size, size_t n, void *ctx)
{
    fd_src *f = ctx;
    size_t want = size * n;
    if ((curl_off_t)want > f->left)
        want = (size_t)f->left;
    if (want == 0)
        return 0;
    ssize_t r;
    do
        r = read(f->fd, buf, want);
    while (r < 0 && errno == EINTR);
    if (r <= 0) /* shorter than it was: the transfer fails rather than sending less */
        return CURL_READFUNC_ABORT;
    f->left -= r;
    return (size_t)r;
}

int osworld_file_upload(osworld *o, const char *guest_path, const void *data, size_t len, int fd, em_err *err)
{
    CURL *c = curl_easy_init();
    if (!c)
        return em_fail(err, "file `%s`: curl_easy_init failed", guest_path);
    fd_src src = {.fd = fd, .left = (curl_off_t)len};
    curl_mime *mime = curl_mime_init(c);
    curl_mimepart *part = curl_mime_addpart(mime);
    curl_mime_name(part, "file_path");
    curl_mime_data(part, guest_path, CURL_ZERO_TERMINATED);
    part = curl_mime_addpart(mime);
    curl_mime_name(part, "file_data");
    if (data)
        curl_mime_data(part, data, len);
    else
        curl_mime_data_cb(part, (curl_off_t)len, read_fd, NULL, NULL, &src);
    curl_mime_filename(part, "file"); /* a file field, as the server's request.files wants */
    curl_mime_type(part, "application/octet-stream");
    curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    osworld_reply r = {0};
    int rc = perform(o, c, "/setup/upload", NULL, FILE_TIMEOUT_BASE_MS + 1000.0 * (double)(len >> 20), 64 * 1024, &r,
                     err);
    if (rc < 0)
        em_prefix(err, "file `%s`: ", guest_path);
    curl_easy_cleanup(c);
    curl_mime_free(mime);
    if (rc == 0 && r.status != 200) {
        char what[300];
        snprintf(what, sizeof what, "file `%.250s`", guest_path);
        rc = refused(what, &r, err);
    }
    osworld_reply_free(&r);
    return rc;
}

int osworld_file_write_system(osworld *o, const char *path, const void *data, size_t len, em_err *err)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/.envmgr-system-%d-%ld", (int)getpid(), (long)now_ms());
    if (osworld_file_upload(o, tmp, data, len, -1, err) < 0)
        return -1;
    /* cat into the file keeps its owner and mode; the copy in /tmp goes either way */
    const char *argv[] = {"sh", "-c",
                          "cat \"$1\" 2>/dev/null >\"$2\" || { [ -n \"$3\" ] && printf '%s\\n' \"$3\" | "
                          "sudo -S -p '' sh -c 'cat \"$1\" >\"$2\"' sh \"$1\" \"$2\"; }; rc=$?; rm -f \"$1\"; exit $rc",
                          "sh", tmp, path, o->password ? o->password : "", NULL};
    guest_exec_result r;
    if (osworld_exec(o, argv, 30, 4096, &r, err) < 0)
        return em_prefix(err, "file `%s`: ", path);
    int code = r.exit_code;
    char ex[EXCERPT + 1];
    osworld_excerpt(r.err, r.err_len, ex, EXCERPT);
    guest_exec_result_free(&r);
    if (code != 0)
        return em_fail(err, "file `%s`: neither the server's user nor sudo may write it (exit status %d)%s%s", path,
                       code, ex[0] ? ": " : "", ex);
    return 0;
}

/* ---- the clock ---- */

int osworld_set_time(osworld *o, em_err *err)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char secs[32];
    snprintf(secs, sizeof secs, "@%lld", (long long)ts.tv_sec + (ts.tv_nsec >= 500000000L));
    /* as the server's user when it may, else sudo with the image's password on its stdin */
    const char *argv[] = {"sh", "-c",
                          "date -s \"$1\" >/dev/null 2>&1 && exit 0; [ -n \"$2\" ] || exit 1; "
                          "printf '%s\\n' \"$2\" | sudo -S -p '' date -s \"$1\" >/dev/null",
                          "sh", secs, o->password ? o->password : "", NULL};
    guest_exec_result r;
    if (osworld_exec(o, argv, 20, 4096, &r, err) < 0)
        return -1;
    int code = r.exit_code;
    char ex[EXCERPT + 1];
    osworld_excerpt(r.err, r.err_len, ex, EXCERPT);
    guest_exec_result_free(&r);
    if (code != 0)
        return em_fail(err, "OSWorld's server: date -s failed (exit status %d, neither the server's user nor sudo "
                            "may set the clock)%s%s", code, ex[0] ? ": " : "", ex);
    return 0;
}

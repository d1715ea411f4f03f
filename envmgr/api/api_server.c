/* The HTTP side of the API: libmicrohttpd with a thread per connection (a
 * step that takes seconds on one env never delays another env's requests),
 * request bodies gathered with a cap, the token checked before a body is
 * read, handlers dispatched, responses built. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

typedef struct conn_req {
    double t0;
    bool ready;        /* route and auth checked */
    api_route rt;
    char *buf;
    size_t len, cap;
    bool too_big;
    size_t discarded;
} conn_req;

#define API_DISCARD_MAX ((size_t)64 << 20) /* bytes of an oversized body read before hanging up */

/* ---- replies ---- */

void api_reply_json(api_reply *r, int status, json_t *j)
{
    r->status = status;
    json_decref(r->json);
    r->json = j;
}

void api_reply_error(api_reply *r, const api_error *ae)
{
    if (ae->status == 405 && ae->field[0]) { /* the field carries the Allow header */
        api_reply_header(r, "Allow", ae->field);
        api_error copy = *ae;
        copy.field[0] = '\0';
        api_reply_json(r, 405, api_error_json(&copy));
        return;
    }
    if (ae->status == 401)
        api_reply_header(r, "WWW-Authenticate", "Bearer realm=\"envmgr\"");
    api_reply_json(r, ae->status, api_error_json(ae));
}

void api_reply_header(api_reply *r, const char *name, const char *value)
{
    for (size_t i = 0; i < ARRAY_LEN(r->headers); i++)
        if (!r->headers[i]) {
            r->headers[i] = xasprintf("%s: %s", name, value);
            return;
        }
}

static void reply_free(api_reply *r)
{
    json_decref(r->json);
    free(r->body);
    for (size_t i = 0; i < ARRAY_LEN(r->headers); i++)
        free(r->headers[i]);
    if (r->mhd)
        MHD_destroy_response(r->mhd);
}

const char *api_query(const api_request *q, const char *name)
{
    return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *api_header(const api_request *q, const char *name)
{
    return MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, name);
}

static enum MHD_Result send_reply(api_server *s, struct MHD_Connection *c, api_reply *r)
{
    struct MHD_Response *resp = r->mhd;
    r->mhd = NULL;
    if (!resp) {
        if (r->json) {
            char *text = json_dumps(r->json, JSON_COMPACT);
            size_t n = strlen(text);
            text = xrealloc(text, n + 2);
            text[n++] = '\n';
            resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
            r->ctype = "application/json";
        } else {
            resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (void *)"", 
                                                   r->body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
            r->body = NULL;
        }
    }
    if (!resp)
        return MHD_NO;
    if (r->ctype)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    for (size_t i = 0; i < ARRAY_LEN(r->headers); i++) {
        if (!r->headers[i])
            continue;
        char *colon = strchr(r->headers[i], ':');
        *colon = '\0';
        MHD_add_response_header(resp, r->headers[i], colon + 2);
    }
    if (r->env_ms > 0) { /* what the env took, so a client can tell it from the API's own cost */
        char timing[64];
        snprintf(timing, sizeof timing, "env;dur=%.3f", r->env_ms);
        MHD_add_response_header(resp, "Server-Timing", timing);
    }
    int status = r->status ? r->status : 500;
    api_metrics_http(&s->metrics, status);
    if (status >= 500)
        fprintf(stderr, "envmgr serve: %d %s\n", status,
                r->json ? json_string_value(json_object_get(r->json, "error")) : "");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_error(api_server *s, struct MHD_Connection *c, const api_error *ae)
{
    api_reply r = {0};
    api_reply_error(&r, ae);
    enum MHD_Result rc = send_reply(s, c, &r);
    reply_free(&r);
    return rc;
}

/* ---- auth ---- */

static bool authorized(api_server *s, struct MHD_Connection *c, const api_route *rt)
{
    if (rt->id == API_R_HEALTH)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (api_auth_bearer(h, s->cfg.token))
        return true;
    /* A browser cannot send a header with a page's scripts or its websocket: the live
     * view's pages also take the cookie the live page sets (SameSite=Strict, GET only). */
    if (rt->id == API_R_LIVE || rt->id == API_R_LIVE_WS || rt->id == API_R_NOVNC) {
        if (api_auth_cookie(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_COOKIE), s->cfg.token))
            return true;
        const char *qt = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
        if (rt->id == API_R_LIVE && qt && api_token_equal(qt, s->cfg.token))
            return true;
    }
    return false;
}

/* ---- dispatch ---- */

static void dispatch(api_request *q, api_reply *r)
{
    switch (q->rt.id) {
    case API_R_HEALTH:
        api_reply_json(r, 200, json_pack("{s:s, s:s}", "status", "ok", "version", ENVMGR_VERSION));
        return;
    case API_R_METRICS: {
        api_envs_count_egress(q->s);
        char *text = api_metrics_render(&q->s->metrics, api_envs_count(q->s), q->s->cfg.max_envs);
        r->status = 200;
        r->body = (unsigned char *)text;
        r->len = strlen(text);
        r->ctype = "text/plain; version=0.0.4; charset=utf-8";
        return;
    }
    case API_R_ENVS:
        if (!strcmp(q->method, "POST"))
            api_h_create(q, r);
        else
            api_h_list(q, r);
        return;
    case API_R_ENV:
        if (!strcmp(q->method, "DELETE"))
            api_h_delete(q, r);
        else
            api_h_get(q, r);
        return;
    case API_R_RESET: api_h_reset(q, r); return;
    case API_R_STEP: api_h_step(q, r); return;
    case API_R_EVALUATE: api_h_evaluate(q, r); return;
    case API_R_SCREENSHOT: api_h_screenshot(q, r); return;
    case API_R_TRACE: api_h_trace(q, r); return;
    case API_R_LIVE: api_h_live_page(q, r); return;
    case API_R_LIVE_WS: api_h_live_ws(q, r); return;
    case API_R_NOVNC: api_h_novnc(q, r); return;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **req_cls)
{
    api_server *s = cls;
    conn_req *cr = *req_cls;
    api_error ae = {0};
    if (!cr) { /* headers are in: decide before reading any body */
        cr = xcalloc(1, sizeof *cr);
        cr->t0 = now_ms();
        *req_cls = cr;
        if (api_route_match(method, url, &cr->rt, &ae) < 0)
            return send_error(s, c, &ae);
        if (!authorized(s, c, &cr->rt)) {
            api_fail(&ae, 401, "Authorization", "missing or wrong token (Authorization: Bearer <token>)");
            return send_error(s, c, &ae);
        }
        if (s->stopping) {
            api_fail(&ae, 503, "", "the server is stopping");
            return send_error(s, c, &ae);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        long v;
        if (cl && (parse_int(cl, 0, (long)API_BODY_MAX, &v) < 0)) {
            api_fail(&ae, 413, "body", "request body of %.20s bytes is over the limit of %zu", cl, API_BODY_MAX);
            return send_error(s, c, &ae);
        }
        cr->ready = true;
        return MHD_YES;
    }
    if (*upload_size) {
        /* MHD cannot answer before the body is read: an oversized body (sent
         * chunked, without a length) is read and dropped, then refused with
         * 413; one that never ends is cut off at the upload deadline. */
        if (now_ms() - cr->t0 > API_UPLOAD_DEADLINE_MS || cr->discarded > API_DISCARD_MAX)
            return MHD_NO;
        if (cr->too_big || cr->len + *upload_size > API_BODY_MAX) {
            cr->too_big = true;
            cr->discarded += *upload_size;
            free(cr->buf);
            cr->buf = NULL;
            cr->len = cr->cap = 0;
            *upload_size = 0;
            return MHD_YES;
        }
        if (cr->len + *upload_size > cr->cap) {
            cr->cap = (cr->len + *upload_size) * 2;
            cr->buf = xrealloc(cr->buf, cr->cap);
        }
        memcpy(cr->buf + cr->len, upload_data, *upload_size);
        cr->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    if (cr->too_big) {
        api_fail(&ae, 413, "body", "request body is over the limit of %zu bytes", API_BODY_MAX);
        return send_error(s, c, &ae);
    }
    /* the whole request is in */
    api_request q = {.s = s, .conn = c, .method = method, .rt = cr->rt};
    if (api_parse_body(cr->buf ? cr->buf : "", cr->len, &q.body, &ae) < 0)
        return send_error(s, c, &ae);
    if (cr->len && strcmp(method, "POST")) {
        json_decref(q.body);
        api_fail(&ae, 400, "body", "%s takes no body", method);
        return send_error(s, c, &ae);
    }
    api_reply r = {0};
    dispatch(&q, &r);
    json_decref(q.body);
    enum MHD_Result rc = send_reply(s, c, &r);
    reply_free(&r);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
    conn_req *cr = *req_cls;
    if (!cr)
        return;
    free(cr->buf);
    free(cr);
    *req_cls = NULL;
}

/* ---- listening ---- */

static int listen_tcp(const char *spec, int *fd_out, char *url, size_t url_len, em_err *err)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec)
        return em_fail_input(err, "--listen: expected HOST:PORT, got `%s`", spec);
    size_t hl = (size_t)(colon - spec);
    if (hl >= sizeof host)
        return em_fail_input(err, "--listen: host too long");
    memcpy(host, spec, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    long port;
    if (parse_int(colon + 1, 0, 65535, &port) < 0)
        return em_fail_input(err, "--listen: bad port `%s`", colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0)
        return em_fail_input(err, "--listen: `%s`: %s", host, gai_strerror(g));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return em_fail_errno(err, "--listen: socket");
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        freeaddrinfo(ai);
        close(fd);
        errno = e;
        return em_fail_errno(err, "--listen: bind %s", spec);
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char num[INET6_ADDRSTRLEN];
    int bound;
    if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a6->sin6_addr, num, sizeof num);
        bound = ntohs(a6->sin6_port);
        snprintf(url, url_len, "http://[%s]:%d", num, bound);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a4->sin_addr, num, sizeof num);
        bound = ntohs(a4->sin_port);
        snprintf(url, url_len, "http://%s:%d", num, bound);
    }
    *fd_out = fd;
    return 0;
}

static int listen_unix(const char *path, int *fd_out, em_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return em_fail_input(err, "--socket: path longer than %zu bytes", sizeof sa.sun_path - 1);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return em_fail_input(err, "--socket: `%s` exists and is not a socket", path);
        /* a stale socket of a server that died: remove it only if nobody answers */
        int probe = unix_connect(path, 0, NULL);
        if (probe >= 0) {
            close(probe);
            return em_fail_input(err, "--socket: `%s` is in use by a running server", path);
        }
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return em_fail_errno(err, "--socket: socket");
    mode_t old = umask(0177); /* the socket is created 0600 */
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return em_fail_errno(err, "--socket: bind `%s`", path);
    }
    *fd_out = fd;
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int api_server_start(const api_config *c, api_server **out, em_err *err)
{
    if (!c->token || strlen(c->token) < API_TOKEN_MIN)
        return em_fail_input(err, "serve: a token of at least %d bytes is needed", API_TOKEN_MIN);
    if (c->max_envs < 1 || c->max_envs > API_MAX_ENVS_LIMIT)
        return em_fail_input(err, "--max-envs: expected 1..%d", API_MAX_ENVS_LIMIT);
    if (!MHD_is_feature_supported(MHD_FEATURE_UPGRADE))
        return em_fail(err, "serve: this libmicrohttpd has no HTTP upgrade support (needed by the live view)");
    crypto_init(); /* libgcrypt before any thread uses it */
    api_server *s = xcalloc(1, sizeof *s);
    s->listen_fd = -1;
    s->cfg = *c;
    s->cfg.listen = dup_or_null(c->listen);
    s->cfg.socket_path = dup_or_null(c->socket_path);
    s->cfg.token = xstrdup(c->token);
    s->cfg.out_dir = xstrdup(c->out_dir ? c->out_dir : "envmgr-out/serve");
    s->cfg.task_root = xstrdup(c->task_root ? c->task_root : ".");
    const char *nv = c->novnc_dir ? c->novnc_dir : getenv("ENVMGR_NOVNC_DIR");
    s->cfg.novnc_dir = xstrdup(nv && *nv ? nv : "/usr/share/novnc");
    s->cfg.accel = xstrdup(c->accel ? c->accel : "auto");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    api_metrics_init(&s->metrics);
    int rc = mkdir_p(s->cfg.out_dir, 0755, err);
    if (rc == 0) {
        s->empty_dir = xasprintf("%s/.inline-task", s->cfg.out_dir);
        remove_tree(s->empty_dir, NULL);
        rc = mkdir_p(s->empty_dir, 0700, err);
    }
    if (rc == 0 && c->socket_path) {
        rc = listen_unix(c->socket_path, &s->listen_fd, err);
        s->unix_sock = true;
        snprintf(s->url, sizeof s->url, "unix:%s", c->socket_path);
    } else if (rc == 0) {
        rc = listen_tcp(c->listen ? c->listen : API_DEFAULT_LISTEN, &s->listen_fd, s->url, sizeof s->url, err);
    }
    if (rc < 0) {
        api_server_stop(s);
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_ALLOW_UPGRADE |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG;
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)API_CONN_TIMEOUT_S,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)API_CONN_LIMIT,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
                              on_completed, s, MHD_OPTION_END);
    if (!s->mhd) {
        api_server_stop(s);
        return em_fail(err, "serve: libmicrohttpd did not start");
    }
    *out = s;
    return 0;
}

const char *api_server_url(const api_server *s)
{
    return s->url;
}

void api_server_stop(api_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_mutex_unlock(&s->lock);
    if (s->mhd) {
        /* live views notice `stopping` within 250 ms; then MHD joins its connection threads */
        pthread_mutex_lock(&s->lock);
        double deadline = now_ms() + 5000;
        while (s->live > 0 && now_ms() < deadline) {
            pthread_mutex_unlock(&s->lock);
            sleep_ms(20);
            pthread_mutex_lock(&s->lock);
        }
        pthread_mutex_unlock(&s->lock);
        MHD_stop_daemon(s->mhd);
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->unix_sock && s->cfg.socket_path)
        unlink(s->cfg.socket_path);
    api_envs_teardown_all(s);
    if (s->empty_dir)
        remove_tree(s->empty_dir, NULL);
    free(s->empty_dir);
    api_metrics_destroy(&s->metrics);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free((char *)s->cfg.listen);
    free((char *)s->cfg.socket_path);
    free((char *)s->cfg.token);
    free((char *)s->cfg.out_dir);
    free((char *)s->cfg.task_root);
    free((char *)s->cfg.novnc_dir);
    free((char *)s->cfg.accel);
    free(s);
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

struct MHD_Response *api_tar_response(const char *trace_dir, em_err *err)
{
    tar_stream *t = xcalloc(1, sizeof *t);
    t->fd = -1;
    _cleanup_free_ char *jsonl = xasprintf("%s/trace.jsonl", trace_dir), *frames = xasprintf("%s/frames", trace_dir);
    struct stat st;
    if (lstat(jsonl, &st) < 0 || !S_ISREG(st.st_mode)) {
        tar_free(t);
        em_fail_errno(err, "trace `%s`", jsonl);
        return NULL;
    }
    tar_add(t, jsonl, "trace/trace.jsonl", &st);
    DIR *d = opendir(frames);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            size_t n = strlen(de->d_name);
            if (n != 68 || strcmp(de->d_name + 64, ".png")) /* <sha256>.png only: no temp files, no links */
                continue;
            _cleanup_free_ char *p = xasprintf("%s/%s", frames, de->d_name), *name = xasprintf("trace/frames/%s", de->d_name);
            if (lstat(p, &st) == 0 && S_ISREG(st.st_mode))
                tar_add(t, p, name, &st);
        }
        closedir(d);
    }
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

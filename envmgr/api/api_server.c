/* The HTTP side of the API: libmicrohttpd with a thread per connection (a
 * step that takes seconds on one env never delays another env's requests),
 * fed by the gate (api_gate.c) with connections whose request head is in,
 * request bodies gathered with a cap, the token checked before a body is
 * read, handlers dispatched, responses built. */
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/api/api_gate.h"
#include "envmgr/api/api_int.h"
#include "envmgr/api/api_mcp_int.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/listen.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

typedef struct conn_req {
    double t0;
    bool ready;        /* route and auth checked */
    bool credential;   /* the request proved itself: only then may the connection stay open */
    api_route rt;
    char *buf;
    size_t len, cap;
    bool too_big;
    bool nomem; /* no memory for the body: it is read and dropped, then the request fails with 503 */
    size_t discarded;
} conn_req;

#define API_DISCARD_MAX ((size_t)64 << 20) /* bytes of an oversized body read before hanging up */

static enum MHD_Result send_reply(api_server *s, struct MHD_Connection *c, const conn_req *cr, api_reply *r)
{
    struct MHD_Response *resp = r->mhd;
    r->mhd = NULL;
    if (!resp) {
        if (r->json) {
            char *text = json_dumps(r->json, JSON_COMPACT);
            if (!text) { /* never expected: replies are built from valid values */
                r->status = MHD_HTTP_INTERNAL_SERVER_ERROR;
                text = xstrdup("{\"error\": \"the reply could not be encoded\", \"field\": null}");
            }
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
    /* A client that proved nothing gets no keep-alive: it cannot hold a connection slot after
     * its answer (api_gate.c admits new connections). */
    if (!cr->credential)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
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
        em_log(EM_LOG_ERROR, "envmgr serve: %d %s", status,
                r->json ? json_string_value(json_object_get(r->json, "error")) : "");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_error(api_server *s, struct MHD_Connection *c, const conn_req *cr, const api_error *ae)
{
    api_reply r = {0};
    api_reply_error(&r, ae);
    enum MHD_Result rc = send_reply(s, c, cr, &r);
    api_reply_free(&r);
    return rc;
}

/* ---- auth ---- */

static bool credential(api_server *s, struct MHD_Connection *c, const api_route *rt)
{
    api_creds cr = {
        .authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
        .cookie = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_COOKIE),
        .query_token = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token"),
        .query_control = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "control"),
    };
    return api_auth_credential(s->cfg.token, rt, &cr, (long)time(NULL));
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
    case API_R_VIDEO: api_h_video(q, r); return;
    case API_R_LIVE: api_h_live_page(q, r); return;
    case API_R_LIVE_TOKEN: api_h_live_token(q, r); return;
    case API_R_LIVE_WS: api_h_live_ws(q, r); return;
    case API_R_NOVNC: api_h_novnc(q, r); return;
    case API_R_STATE: api_h_state_save(q, r); return;
    case API_R_RESTORE: api_h_state_restore(q, r); return;
    case API_R_STATES: api_h_states(q, r); return;
    case API_R_MCP: return; /* answered from the raw body (respond) */
    }
}

void api_call(api_server *s, const char *method, const char *path, json_t *body, const char *const *query,
              api_reply *r)
{
    api_error ae = {0};
    api_request q = {.s = s, .method = method, .query = query};
    if (api_route_match(method, path, &q.rt, &ae) < 0)
        return api_reply_error(r, &ae);
    q.body = body ? json_incref(body) : json_object();
    dispatch(&q, r);
    json_decref(q.body);
}

/* The whole request is in (its body in cr->buf). */
static enum MHD_Result respond(api_server *s, struct MHD_Connection *c, const conn_req *cr, const char *method)
{
    api_error ae = {0};
    api_request q = {.s = s, .conn = c, .method = method, .rt = cr->rt};
    if (cr->rt.id == API_R_MCP) { /* JSON-RPC answers its own parse errors */
        api_reply r = {0};
        api_h_mcp(&q, cr->buf ? cr->buf : "", cr->len, &r);
        enum MHD_Result rc = send_reply(s, c, cr, &r);
        api_reply_free(&r);
        return rc;
    }
    if (api_parse_body(cr->buf ? cr->buf : "", cr->len, &q.body, &ae) < 0)
        return send_error(s, c, cr, &ae);
    if (cr->len && strcmp(method, "POST")) {
        json_decref(q.body);
        api_fail(&ae, 400, "body", "%s takes no body", method);
        return send_error(s, c, cr, &ae);
    }
    api_reply r = {0};
    dispatch(&q, &r);
    json_decref(q.body);
    enum MHD_Result rc = send_reply(s, c, cr, &r);
    api_reply_free(&r);
    return rc;
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
        if (api_route_match(method, url, &cr->rt, &ae) < 0 || api_query_unique(c, &ae) < 0) {
            cr->credential = api_auth_bearer(
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION), s->cfg.token);
            return send_error(s, c, cr, &ae);
        }
        cr->credential = credential(s, c, &cr->rt);
        if (!cr->credential && cr->rt.id != API_R_HEALTH) {
            api_fail(&ae, 401, "Authorization", "missing or wrong token (Authorization: Bearer <token>)");
            return send_error(s, c, cr, &ae);
        }
        if (s->stopping) {
            api_fail(&ae, 503, "", "the server is stopping");
            return send_error(s, c, cr, &ae);
        }
        if (!cr->credential) /* /v1/health without the token: answered now, so no body can hold the connection */
            return respond(s, c, cr, method);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        long v;
        if (cl && (parse_int(cl, 0, (long)API_BODY_MAX, &v) < 0)) {
            api_fail(&ae, 413, "body", "request body of %.20s bytes is over the limit of %zu", cl, API_BODY_MAX);
            return send_error(s, c, cr, &ae);
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
        if (cr->too_big || cr->nomem || cr->len + *upload_size > API_BODY_MAX) {
            cr->too_big |= !cr->nomem;
            cr->discarded += *upload_size;
            free(cr->buf);
            cr->buf = NULL;
            cr->len = cr->cap = 0;
            *upload_size = 0;
            return MHD_YES;
        }
        if (cr->len + *upload_size > cr->cap) {
            size_t cap = (cr->len + *upload_size) * 2;
            char *grown = try_realloc(cr->buf, cap, "a request body", NULL);
            if (!grown) {
                cr->nomem = true;
                free(cr->buf);
                cr->buf = NULL;
                cr->len = cr->cap = 0;
                cr->discarded += *upload_size;
                *upload_size = 0;
                return MHD_YES;
            }
            cr->buf = grown;
            cr->cap = cap;
        }
        memcpy(cr->buf + cr->len, upload_data, *upload_size);
        cr->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    if (cr->too_big) {
        api_fail(&ae, 413, "body", "request body is over the limit of %zu bytes", API_BODY_MAX);
        return send_error(s, c, cr, &ae);
    }
    if (cr->nomem) {
        api_fail(&ae, 503, "body", "out of memory for the request body: try again later");
        return send_error(s, c, cr, &ae);
    }
    return respond(s, c, cr, method);
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

/* What the gate counts against MHD's connection limit. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx, enum MHD_ConnectionNotificationCode toe)
{
    api_server *s = cls;
    if (s->gate)
        api_gate_note(s->gate, toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

/* MHD's messages, but for those about TCP options on a unix-socket connection: MHD cannot tell
 * one handed to it from a TCP one, tries TCP_NODELAY and TCP_CORK on each, and says it failed. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    api_server *s = cls;
    if (s->unix_sock && (!strncmp(fmt, "Setting ", 8) || !strncmp(fmt, "Failed to push the data", 23)))
        return;
    em_vlog(EM_LOG_WARNING, fmt, ap);
}

/* The server's log is its stderr: what the library says goes there as one line with the time and
 * the level, and warnings and errors count in the metrics. No progress lines: nobody watches a
 * terminal. */
static em_warn_fn outer_sink;
static void *outer_arg;

static void server_sink(em_log_level level, const char *msg, void *arg)
{
    api_server *s = arg;
    if (level == EM_LOG_PROGRESS)
        return;
    if (level == EM_LOG_WARNING || level == EM_LOG_ERROR)
        api_metrics_add(&s->metrics, &s->metrics.warnings, 1);
    char when[32];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&ts.tv_sec, &tm));
    fprintf(stderr, "%s %s: %s\n", when, em_log_level_name(level), msg);
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
    s->cfg.image = c->image ? xstrdup(c->image) : NULL;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    api_metrics_init(&s->metrics);
    em_warn_get(&outer_sink, &outer_arg);
    em_warn_set(server_sink, s);
    int rc = mkdir_p(s->cfg.out_dir, 0755, err);
    if (rc == 0) {
        s->empty_dir = xasprintf("%s/.inline-task", s->cfg.out_dir);
        remove_tree(s->empty_dir, NULL);
        rc = mkdir_p(s->empty_dir, 0700, err);
    }
    if (rc == 0 && c->no_listen) { /* envmgr mcp: the handlers without HTTP */
        snprintf(s->url, sizeof s->url, "stdio:");
        *out = s;
        return 0;
    }
    if (rc == 0 && c->socket_path) {
        rc = listen_unix(c->socket_path, &s->listen_fd, err) < 0 ? em_prefix(err, "--socket: ") : 0;
        s->unix_sock = true;
        snprintf(s->url, sizeof s->url, "unix:%s", c->socket_path);
    } else if (rc == 0) {
        char where[LISTEN_WHERE_MAX];
        rc = listen_tcp(c->listen ? c->listen : API_DEFAULT_LISTEN, false, &s->listen_fd, where, err);
        if (rc < 0)
            em_prefix(err, "--listen: ");
        else
            snprintf(s->url, sizeof s->url, "http://%s", where);
    }
    if (rc < 0) {
        api_server_stop(s);
        return -1;
    }
    /* MHD gets only connections whose request head is in (api_gate.c accepts them); its own
     * limit is a backstop above the gate's, with room for connections it closed and has not
     * counted off yet. Its timeout (idle) is for keep-alive connections that proved themselves. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_ALLOW_UPGRADE |
                     MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)API_CONN_TIMEOUT_S,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(API_CONN_LIMIT + API_GATE_RESERVE),
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
                              on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!s->mhd) {
        api_server_stop(s);
        return em_fail(err, "serve: libmicrohttpd did not start");
    }
    if (api_gate_start(s->listen_fd, s->mhd, s->cfg.token, &s->metrics, &s->gate, err) < 0) {
        api_server_stop(s);
        return -1;
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
        api_gate_stop(s->gate); /* no new connections; the ones it held are closed */
        MHD_stop_daemon(s->mhd);
    }
    api_gate_free(s->gate);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->unix_sock && s->cfg.socket_path)
        unlink(s->cfg.socket_path);
    api_mcp_sessions_close_all(s);
    api_envs_teardown_all(s);
    em_warn_set(outer_sink, outer_arg); /* the metrics it counts into go next */
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
    free((char *)s->cfg.image);
    free(s);
}


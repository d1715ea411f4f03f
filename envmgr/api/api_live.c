/* Watching an env in a browser: GET /v1/envs/{id}/live is a page running
 * noVNC; its websocket (/v1/envs/{id}/live/ws) is terminated here and relayed
 * to the env's VNC socket through the view-only filter (api_relay.c), so the
 * page cannot type or click into an env an agent is using, whatever the
 * browser runs. ?control=1 lifts the filter, for a person debugging an env. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/env/env_image.h"
#include "envmgr/view/relay.h"
#include "envmgr/view/websocket.h"

#define NOVNC_FILE_MAX (8u << 20)

static const char page[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<title>envmgr live: %s</title>\n"
    "<style>html,body{margin:0;height:100%%;background:#1e1e1e;color:#ddd;font:13px sans-serif}"
    "#bar{height:26px;line-height:26px;padding:0 8px;background:#333}#screen{height:calc(100%% - 26px)}</style>\n"
    "</head><body data-state=\"connecting\">\n"
    "<div id=\"bar\">env <b>%s</b> &mdash; <span id=\"status\">connecting&hellip;</span> &mdash; %s</div>\n"
    "<div id=\"screen\"></div>\n"
    "<script type=\"module\">\n"
    "import RFB from '/v1/novnc/core/rfb.js';\n"
    "const control = %s;\n"
    "const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host +\n"
    "            '/v1/envs/%s/live/ws' + (control ? '?control=1' : '');\n"
    "const status = document.getElementById('status');\n"
    "let delay = 500;\n"
    "function connect() {\n"
    "  const rfb = new RFB(document.getElementById('screen'), url, {wsProtocols: ['binary'], shared: true});\n"
    "  rfb.viewOnly = !control;\n"
    "  rfb.scaleViewport = true;\n"
    "  rfb.addEventListener('connect', () => { status.textContent = 'connected'; document.body.dataset.state = 'connected'; delay = 500; });\n"
    "  rfb.addEventListener('disconnect', () => {\n"
    "    status.textContent = 'disconnected; retrying'; document.body.dataset.state = 'disconnected';\n"
    "    setTimeout(connect, delay); delay = Math.min(delay * 2, 5000);\n"
    "  });\n"
    "  window.envmgrRfb = rfb;\n"
    "}\n"
    "connect();\n"
    "</script></body></html>\n";

static bool query_true(const api_request *q, const char *name)
{
    const char *v = api_query(q, name);
    return api_truthy(v);
}

void api_h_live_page(api_request *q, api_reply *r)
{
    api_env *ae = api_env_acquire(q->s, q->rt.env);
    if (!ae) {
        api_error e;
        api_fail(&e, 404, "id", "no env `%s` on this server (GET /v1/envs lists them)", q->rt.env);
        return api_reply_error(r, &e);
    }
    api_env_release(q->s, ae);
    bool control = query_true(q, "control");
    char *html = xasprintf(page, q->rt.env, q->rt.env,
                           control ? "<b>control</b>: your keyboard and mouse reach the env" : "view only",
                           control ? "true" : "false", q->rt.env);
    r->status = 200;
    r->body = (unsigned char *)html;
    r->len = strlen(html);
    r->ctype = "text/html; charset=utf-8";
    api_reply_header(r, "Content-Security-Policy",
                     "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; "
                     "img-src 'self' data: blob:; connect-src 'self'");
    /* The page's module scripts and websocket carry no Authorization header: a cookie does it for
     * them, holding a live-view token for this env (view, or control when asked and allowed). */
    /* Never longer, nor more, than what opened the page: a live-view link's own token as it is; a
     * fresh one only for the master token (Authorization header or ?token=). */
    long now = (long)time(NULL);
    api_live_grant_t g = {0};
    if (api_auth_bearer(api_header(q, "Authorization"), q->s->cfg.token))
        g = (api_live_grant_t){.ok = true, .master = true, .control = control, .expires = now + API_LIVE_TTL_S};
    else
        api_live_grant(q->s->cfg.token, api_header(q, "Cookie"), api_query(q, "token"), true, q->rt.env, control, now,
                       &g);
    if (g.ok && g.master && api_live_token_make(q->s->cfg.token, q->rt.env, g.control, g.expires, g.token) < 0)
        g.ok = false;
    if (g.ok && g.expires > now) {
        char cookie[API_LIVE_TOKEN_MAX + API_ID_MAX + 120];
        snprintf(cookie, sizeof cookie, API_COOKIE "_%s=%s; Path=/v1/; Max-Age=%ld; HttpOnly; SameSite=Strict",
                 q->rt.env, g.token, g.expires - now);
        api_reply_header(r, "Set-Cookie", cookie);
    }
    api_reply_header(r, "Referrer-Policy", "no-referrer");
}

/* ---- the websocket ---- */

typedef struct live_ctx {
    api_server *s;
    char *vnc_sock, *env; /* the env's name */
    bool view_only;
} live_ctx;

typedef struct live_thread {
    live_ctx *ctx;
    struct MHD_UpgradeResponseHandle *urh;
    int fd;
    char *extra;
    size_t extra_len;
} live_thread;

static void *live_main(void *arg)
{
    live_thread *lt = arg;
    api_server *s = lt->ctx->s;
    /* the socket was non-blocking under MHD; the relay polls and wants whole writes */
    int fl = fcntl(lt->fd, F_GETFL);
    if (fl >= 0)
        fcntl(lt->fd, F_SETFL, fl & ~O_NONBLOCK);
    if (!lt->ctx->view_only) { /* someone drives the env by hand: its guest runs (an episode pauses it again) */
        em_err herr = {0};
        if (env_hold_by_name(lt->ctx->env, false, &herr) < 0)
            em_log(EM_LOG_ERROR, "envmgr serve: live control: %s", herr.msg);
    }
    if (lt->extra_len == 0) /* (a client does not talk before the server's RFB version) */
        view_relay(lt->fd, true, lt->ctx->vnc_sock, lt->ctx->view_only, NULL, &s->stopping);
    MHD_upgrade_action(lt->urh, MHD_UPGRADE_ACTION_CLOSE);
    free(lt->extra);
    free(lt->ctx->vnc_sock);
    free(lt->ctx->env);
    free(lt->ctx);
    free(lt);
    pthread_mutex_lock(&s->lock);
    s->live--;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in, size_t extra_in_size,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
    live_ctx *ctx = cls;
    live_thread *lt = xcalloc(1, sizeof *lt);
    lt->ctx = ctx;
    lt->urh = urh;
    lt->fd = sock;
    lt->extra_len = extra_in_size;
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&ctx->s->lock);
    ctx->s->live++;
    pthread_mutex_unlock(&ctx->s->lock);
    api_metrics_add(&ctx->s->metrics, &ctx->s->metrics.live_views, 1);
    if (pthread_create(&th, &at, live_main, lt) != 0) {
        pthread_mutex_lock(&ctx->s->lock);
        ctx->s->live--;
        pthread_mutex_unlock(&ctx->s->lock);
        MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
        free(ctx->vnc_sock);
        free(ctx->env);
        free(ctx);
        free(lt);
    }
    pthread_attr_destroy(&at);
    (void)extra_in;
}

static bool header_has_token(const char *value, const char *token)
{
    if (!value)
        return false;
    size_t tl = strlen(token);
    for (const char *p = value; (p = strcasestr(p, token)); p += tl) {
        bool start = p == value || p[-1] == ',' || p[-1] == ' ';
        bool end = p[tl] == '\0' || p[tl] == ',' || p[tl] == ' ';
        if (start && end)
            return true;
    }
    return false;
}

void api_h_live_ws(api_request *q, api_reply *r)
{
    api_error e;
    const char *upgrade = api_header(q, "Upgrade"), *conn = api_header(q, "Connection");
    const char *key = api_header(q, "Sec-WebSocket-Key"), *ver = api_header(q, "Sec-WebSocket-Version");
    if (!header_has_token(upgrade, "websocket") || !header_has_token(conn, "upgrade") || !key) {
        api_fail(&e, 426, "Upgrade", "this endpoint speaks websocket only (the live page connects to it)");
        api_reply_header(r, "Upgrade", "websocket");
        return api_reply_error(r, &e);
    }
    if (!ver || strcmp(ver, "13")) {
        api_fail(&e, 426, "Sec-WebSocket-Version", "websocket version 13 only");
        api_reply_header(r, "Sec-WebSocket-Version", "13");
        return api_reply_error(r, &e);
    }
    /* A page on another origin must not drive this socket with the user's cookie. */
    const char *origin = api_header(q, "Origin"), *host = api_header(q, "Host");
    if (origin && host) {
        const char *o = strstr(origin, "://");
        if (!o || strcmp(o + 3, host)) {
            api_fail(&e, 403, "Origin", "cross-origin websocket refused (origin %.100s, host %.100s)", origin, host);
            return api_reply_error(r, &e);
        }
    }
    api_env *ae = api_env_acquire(q->s, q->rt.env);
    if (!ae) {
        api_fail(&e, 404, "id", "no env `%s` on this server", q->rt.env);
        return api_reply_error(r, &e);
    }
    api_env_release(q->s, ae);
    char accept[29];
    if (ws_accept(key, accept) < 0) {
        api_fail(&e, 400, "Sec-WebSocket-Key", "bad Sec-WebSocket-Key");
        return api_reply_error(r, &e);
    }
    live_ctx *ctx = xcalloc(1, sizeof *ctx);
    ctx->s = q->s;
    ctx->vnc_sock = env_vnc_socket(q->rt.env);
    ctx->env = xstrdup(q->rt.env);
    ctx->view_only = !query_true(q, "control");
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, ctx);
    if (!resp) {
        free(ctx->vnc_sock);
        free(ctx->env);
        free(ctx);
        api_fail(&e, 500, "", "cannot create the upgrade response");
        return api_reply_error(r, &e);
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
    MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
    if (header_has_token(api_header(q, "Sec-WebSocket-Protocol"), "binary"))
        MHD_add_response_header(resp, "Sec-WebSocket-Protocol", "binary");
    r->status = MHD_HTTP_SWITCHING_PROTOCOLS;
    r->mhd = resp;
}

/* ---- noVNC's files ---- */

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    static const struct {
        const char *ext, *type;
    } types[] = {{".js", "text/javascript; charset=utf-8"}, {".html", "text/html; charset=utf-8"},
                 {".css", "text/css; charset=utf-8"},       {".svg", "image/svg+xml"},
                 {".png", "image/png"},                    {".json", "application/json"},
                 {".ico", "image/x-icon"},                 {".ogg", "audio/ogg"},
                 {".mp3", "audio/mpeg"},                   {".woff", "font/woff"}};
    for (size_t i = 0; dot && i < ARRAY_LEN(types); i++)
        if (!strcmp(dot, types[i].ext))
            return types[i].type;
    return "application/octet-stream";
}

void api_h_novnc(api_request *q, api_reply *r)
{
    api_error e;
    char root[PATH_MAX], real[PATH_MAX];
    _cleanup_free_ char *path = xasprintf("%s/%s", q->s->cfg.novnc_dir, q->rt.file);
    if (!realpath(q->s->cfg.novnc_dir, root)) {
        api_fail(&e, 404, "url", "noVNC is not installed at %s (apt-get install novnc, or set ENVMGR_NOVNC_DIR)",
                 q->s->cfg.novnc_dir);
        return api_reply_error(r, &e);
    }
    /* Debian links some of noVNC's files to other packages under /usr/share: allow those, nothing else. */
    size_t rl = strlen(root);
    if (!realpath(path, real) ||
        !((!strncmp(real, root, rl) && real[rl] == '/') || !strncmp(real, "/usr/share/javascript/", 22))) {
        api_fail(&e, 404, "url", "no such file: /v1/novnc/%s", q->rt.file);
        return api_reply_error(r, &e);
    }
    char *data = NULL;
    size_t len;
    em_err err = {0};
    if (read_file_capped(real, NOVNC_FILE_MAX, &data, &len, &err) < 0) {
        api_fail(&e, 404, "url", "no such file: /v1/novnc/%s", q->rt.file);
        return api_reply_error(r, &e);
    }
    r->status = 200;
    r->body = (unsigned char *)data;
    r->len = len;
    r->ctype = content_type(q->rt.file);
}

void api_h_live_token(api_request *q, api_reply *r)
{
    api_error e;
    if (api_check_fields(q->body, " ttl_s control ", &e) < 0)
        return api_reply_error(r, &e);
    json_t *jttl = json_object_get(q->body, "ttl_s"), *jctl = json_object_get(q->body, "control");
    if (jttl && (!json_is_number(jttl) || json_number_value(jttl) < 1 || json_number_value(jttl) > 86400)) {
        api_fail(&e, 400, "ttl_s", "ttl_s: expected seconds, 1 to 86400");
        return api_reply_error(r, &e);
    }
    if (jctl && !json_is_boolean(jctl)) {
        api_fail(&e, 400, "control", "control: expected true or false");
        return api_reply_error(r, &e);
    }
    api_env *ae = api_env_acquire(q->s, q->rt.env);
    if (!ae) {
        api_fail(&e, 404, "id", "no env `%s` on this server (GET /v1/envs lists them)", q->rt.env);
        return api_reply_error(r, &e);
    }
    api_env_release(q->s, ae);
    long expires = (long)time(NULL) + (jttl ? (long)json_number_value(jttl) : API_LIVE_TTL_S);
    bool control = jctl && json_is_true(jctl);
    char tok[API_LIVE_TOKEN_MAX];
    if (api_live_token_make(q->s->cfg.token, q->rt.env, control, expires, tok) < 0) {
        api_fail(&e, 500, "", "cannot sign a live-view token");
        return api_reply_error(r, &e);
    }
    _cleanup_free_ char *url = xasprintf("/v1/envs/%s/live?token=%s%s", q->rt.env, tok, control ? "&control=1" : "");
    api_reply_json(r, 200, json_pack("{s:s, s:I, s:b, s:s}", "token", tok, "expires_at", (json_int_t)expires,
                                     "control", control, "url", url));
}

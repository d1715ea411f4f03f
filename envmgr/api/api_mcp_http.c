/* MCP's streamable HTTP transport under `envmgr serve`: POST /v1/mcp carries one JSON-RPC message and
 * gets its answer as application/json (202 and no body for a notification); an initialize request
 * without a session opens one (Mcp-Session-Id in the answer), which every later request names and
 * DELETE /v1/mcp ends (its env deleted). The server offers no SSE stream: it never calls the client. */
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_mcp_int.h"
#include "envmgr/base/util.h"

#define MCP_SESSIONS_MAX 256 /* open sessions: each may hold an env, and --max-envs bounds those */
#define SESSION_HEADER "Mcp-Session-Id"

/* The session named sid, with a reference the caller drops (unref); NULL when there is none. */
static api_mcp_session *find(api_server *s, const char *sid)
{
    pthread_mutex_lock(&s->lock);
    api_mcp_session *m = s->mcp;
    while (m && strcmp(m->id, sid))
        m = m->next;
    if (m)
        m->refs++;
    pthread_mutex_unlock(&s->lock);
    return m;
}

static void unref(api_server *s, api_mcp_session *m)
{
    pthread_mutex_lock(&s->lock);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last)
        api_mcp_session_free(m);
}

static api_mcp_session *open_session(api_server *s, api_error *ae)
{
    char id[65];
    em_err err = {0};
    if (api_token_generate(id, &err) < 0) {
        api_fail(ae, 500, "", "%s", err.msg);
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    int n = 0;
    for (api_mcp_session *x = s->mcp; x; x = x->next)
        n++;
    if (n >= MCP_SESSIONS_MAX) {
        pthread_mutex_unlock(&s->lock);
        api_fail(ae, 503, "", "%d MCP sessions are open: end one (DELETE /v1/mcp) first", MCP_SESSIONS_MAX);
        return NULL;
    }
    api_mcp_session *m = api_mcp_session_new(s);
    snprintf(m->id, sizeof m->id, "%s", id);
    m->refs = 2; /* the table's and this request's */
    m->next = s->mcp;
    s->mcp = m;
    pthread_mutex_unlock(&s->lock);
    return m;
}

/* Takes the session out of the table; it is freed when its last request ends. */
static bool close_session(api_server *s, const char *sid)
{
    pthread_mutex_lock(&s->lock);
    api_mcp_session **p = &s->mcp;
    while (*p && strcmp((*p)->id, sid))
        p = &(*p)->next;
    api_mcp_session *m = *p;
    if (m)
        *p = m->next;
    pthread_mutex_unlock(&s->lock);
    if (m)
        unref(s, m);
    return m != NULL;
}

void api_mcp_sessions_close_all(api_server *s)
{
    for (;;) {
        pthread_mutex_lock(&s->lock);
        api_mcp_session *m = s->mcp;
        char sid[65] = "";
        if (m)
            snprintf(sid, sizeof sid, "%s", m->id);
        pthread_mutex_unlock(&s->lock);
        if (!m || !close_session(s, sid))
            return;
    }
}

static bool is_initialize(const char *body, size_t len)
{
    json_t *j = json_loadb(body, len, 0, NULL);
    bool yes = json_is_object(j) && !strcmp(json_string_value(json_object_get(j, "method")) ?: "", "initialize");
    json_decref(j);
    return yes;
}

static void reply_rpc(api_reply *r, int status, char *line)
{
    r->status = status;
    r->body = (unsigned char *)line;
    r->len = strlen(line);
    r->ctype = "application/json";
}

static void reply_rpc_error(api_reply *r, int status, int code, const char *msg)
{
    json_t *j = json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code", code, "message", msg);
    reply_rpc(r, status, json_dumps(j, JSON_COMPACT));
    json_decref(j);
}

void api_h_mcp(api_request *q, const char *body, size_t len, api_reply *r)
{
    api_server *s = q->s;
    const char *sid = api_header(q, SESSION_HEADER);
    api_error ae = {0};
    if (!strcmp(q->method, "DELETE")) {
        if (!sid || !close_session(s, sid))
            return reply_rpc_error(r, 404, -32600, "no such MCP session");
        r->status = 204;
        return;
    }
    api_mcp_session *m;
    if (sid) {
        if (!(m = find(s, sid))) /* the client starts a new session (MCP: 404 means initialize again) */
            return reply_rpc_error(r, 404, -32600, "no such MCP session: initialize a new one");
    } else if (!is_initialize(body, len)) {
        api_mcp_session *scratch = api_mcp_session_new(s); /* a parse error's answer, or this one */
        char *line = api_mcp_handle(scratch, body, len);
        api_mcp_session_free(scratch);
        if (line && strstr(line, "\"code\":-32700"))
            return reply_rpc(r, 400, line);
        free(line);
        return reply_rpc_error(r, 400, -32600, "Bad Request: no " SESSION_HEADER " header (initialize first)");
    } else if (!(m = open_session(s, &ae))) {
        return reply_rpc_error(r, ae.status, -32603, ae.msg);
    } else {
        api_reply_header(r, SESSION_HEADER, m->id);
    }
    char *line = api_mcp_handle(m, body, len);
    unref(s, m);
    if (!line) {
        r->status = 202;
        return;
    }
    reply_rpc(r, 200, line);
}

/* Requests and replies as handlers see them: JSON bodies, errors with their headers, query
 * and header lookups. The server (api_server.c) turns a reply into an HTTP response. */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/util.h"

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

void api_reply_free(api_reply *r)
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
    if (!q->conn) {
        for (size_t i = 0; q->query && q->query[i] && q->query[i + 1]; i += 2)
            if (!strcmp(q->query[i], name))
                return q->query[i + 1];
        return NULL;
    }
    return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *api_header(const api_request *q, const char *name)
{
    return q->conn ? MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, name) : NULL;
}

typedef struct query_seen {
    const char *keys[API_QUERY_MAX];
    size_t n;
    const char *dup; /* the first repeated parameter */
    bool too_many;
} query_seen;

static enum MHD_Result note_key(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    query_seen *qs = cls;
    (void)kind;
    (void)value;
    for (size_t i = 0; i < qs->n; i++)
        if (!strcmp(qs->keys[i], key)) {
            qs->dup = key;
            return MHD_NO;
        }
    if (qs->n == API_QUERY_MAX) {
        qs->too_many = true;
        return MHD_NO;
    }
    qs->keys[qs->n++] = key;
    return MHD_YES;
}

int api_query_unique(struct MHD_Connection *c, api_error *ae)
{
    query_seen qs = {.n = 0};
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, note_key, &qs);
    if (qs.too_many)
        return api_fail(ae, 400, "query", "more than %d query parameters", API_QUERY_MAX);
    if (!qs.dup)
        return 0;
    return api_fail(ae, 400, qs.dup, "query parameter `%.60s` given more than once", qs.dup);
}

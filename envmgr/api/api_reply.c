/* Requests and replies as handlers see them: JSON bodies, errors with their headers, query
 * and header lookups. The server (api_server.c) turns a reply into an HTTP response. */
#include <microhttpd.h>
#include <stdlib.h>

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
    return MHD_lookup_connection_value(q->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *api_header(const api_request *q, const char *name)
{
    return MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, name);
}

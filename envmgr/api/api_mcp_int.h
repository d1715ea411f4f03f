/* Inside the MCP server: a session's state, shared by the protocol (api_mcp.c), the tools
 * (api_mcp_tools.c) and the HTTP transport's session table (api_mcp_http.c). */
#ifndef ENVMGR_API_MCP_INT_H
#define ENVMGR_API_MCP_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "envmgr/api/api_int.h"
#include "envmgr/api/api_mcp.h"

struct api_mcp_session {
    api_server *s;
    pthread_mutex_t mu;        /* one message at a time: a tool call is a step of one env */
    char id[65];               /* the HTTP transport's Mcp-Session-Id ("" on stdio) */
    char env[API_ID_MAX + 1];  /* the env this session drives ("": none yet) */
    int width, height;         /* its screen */
    bool episode;              /* an episode runs on it (a task started, or a freeform one) */
    char *tree;                /* the last observation's accessibility tree, if it had one */
    bool initialized;
    int refs;                     /* HTTP: the table's reference and each request's (the server's lock) */
    struct api_mcp_session *next; /* in the server's table (HTTP) */
};

/* The HTTP transport (api_mcp_http.c): POST or DELETE /v1/mcp with the raw body. */
void api_h_mcp(api_request *q, const char *body, size_t len, api_reply *r);
/* At server stop: every HTTP session ends (their envs go with the server's). */
void api_mcp_sessions_close_all(api_server *s);

/* The tools' descriptions for tools/list (a new array). */
json_t *mcp_tools_list(const api_mcp_session *m);
/* tools/call: the result object ({"content": [...], "isError": ...}), or NULL with a JSON-RPC
 * error code and message (an unknown tool). */
json_t *mcp_tools_call(api_mcp_session *m, const char *name, json_t *args, int *code, char *msg, size_t msglen);

#endif

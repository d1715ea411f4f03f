/* The Model Context Protocol (MCP) server: an env as MCP tools (a computer tool in Anthropic's action
 * shape, any action space, screenshots, the accessibility tree, tasks, evaluation, saved states), over
 * JSON-RPC 2.0. `envmgr mcp` speaks it on stdio (one message per line); `envmgr serve` on POST /v1/mcp
 * (streamable HTTP, behind its token). Each tool is a call of the HTTP API's own endpoints (api_call),
 * so an MCP episode is recorded, scored and replayed as any other. docs/mcp.md. */
#ifndef ENVMGR_API_MCP_H
#define ENVMGR_API_MCP_H

#include <stddef.h>

#include "envmgr/api/api.h"

#define MCP_MESSAGE_MAX ((size_t)4 << 20) /* bytes of one JSON-RPC message */

typedef struct api_mcp_session api_mcp_session;

/* A session on server s: it creates its env when a tool first needs one. */
api_mcp_session *api_mcp_session_new(api_server *s);
/* Ends the session and deletes the env it created. */
void api_mcp_session_free(api_mcp_session *m);

/* One JSON-RPC message (len bytes, not necessarily terminated); returns the reply as one line of
 * compact JSON (malloc'd), or NULL when the message needs none (a notification, a response). */
char *api_mcp_handle(api_mcp_session *m, const char *text, size_t len);

#endif

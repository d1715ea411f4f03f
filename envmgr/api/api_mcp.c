/* MCP's JSON-RPC 2.0 layer: message checks, lifecycle (initialize, ping), tools/list and tools/call.
 * Every malformed message gets the specification's error and the session goes on. */
#include "envmgr/api/api_mcp.h"

#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_mcp_int.h"
#include "envmgr/base/util.h"

/* JSON-RPC 2.0's error codes (MCP uses them as they are). */
#define RPC_PARSE_ERROR -32700
#define RPC_INVALID_REQUEST -32600
#define RPC_METHOD_NOT_FOUND -32601
#define RPC_INVALID_PARAMS -32602

/* Newest first: the first is offered when the client asks for one envmgr does not know. */
static const char *const protocol_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

static const char instructions[] =
    "An envmgr desktop env (a QEMU guest). start_task starts an episode of a task (or use computer at once "
    "for a free one); computer and act drive the mouse and keyboard and answer with a screenshot; evaluate "
    "scores the episode. Every episode is recorded as a verifiable trace.";

api_mcp_session *api_mcp_session_new(api_server *s)
{
    api_mcp_session *m = xcalloc(1, sizeof *m);
    m->s = s;
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void api_mcp_session_free(api_mcp_session *m)
{
    if (!m)
        return;
    if (m->env[0]) {
        char path[32 + API_ID_MAX];
        snprintf(path, sizeof path, "/v1/envs/%s", m->env);
        api_reply r = {0};
        api_call(m->s, "DELETE", path, NULL, NULL, &r);
        api_reply_free(&r);
    }
    free(m->tree);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static char *dump(json_t *j)
{
    char *line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return line;
}

static char *rpc_error(json_t *id, int code, const char *msg)
{
    return dump(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", "code",
                          code, "message", msg));
}

static char *rpc_result(json_t *id, json_t *result)
{
    return dump(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static json_t *initialize(api_mcp_session *m, json_t *params)
{
    const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
    const char *version = protocol_versions[0];
    for (size_t i = 0; asked && i < ARRAY_LEN(protocol_versions); i++)
        if (!strcmp(asked, protocol_versions[i]))
            version = protocol_versions[i];
    m->initialized = true;
    return json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}, s:s}", "protocolVersion", version, "capabilities", "tools",
                     "listChanged", 0, "serverInfo", "name", "envmgr", "version", ENVMGR_VERSION, "instructions",
                     instructions);
}

static char *request(api_mcp_session *m, json_t *id, const char *method, json_t *params)
{
    if (params && !json_is_object(params))
        return rpc_error(id, RPC_INVALID_PARAMS, "params: expected an object");
    if (!strcmp(method, "initialize"))
        return rpc_result(id, initialize(m, params));
    if (!strcmp(method, "ping"))
        return rpc_result(id, json_object());
    if (!strcmp(method, "tools/list"))
        return rpc_result(id, json_pack("{s:o}", "tools", mcp_tools_list(m)));
    if (!strcmp(method, "tools/call")) {
        const char *name = json_string_value(json_object_get(params, "name"));
        json_t *args = json_object_get(params, "arguments");
        if (!name)
            return rpc_error(id, RPC_INVALID_PARAMS, "params.name: expected the tool's name");
        if (args && !json_is_object(args))
            return rpc_error(id, RPC_INVALID_PARAMS, "params.arguments: expected an object");
        int code = 0;
        char msg[256] = "";
        json_t *result = mcp_tools_call(m, name, args, &code, msg, sizeof msg);
        return result ? rpc_result(id, result) : rpc_error(id, code, msg);
    }
    char msg[160];
    snprintf(msg, sizeof msg, "Method not found: %.100s", method);
    return rpc_error(id, RPC_METHOD_NOT_FOUND, msg);
}

char *api_mcp_handle(api_mcp_session *m, const char *text, size_t len)
{
    if (len > MCP_MESSAGE_MAX)
        return rpc_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: message over 4 MiB");
    json_error_t je;
    json_t *msg = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!msg) {
        char why[240];
        snprintf(why, sizeof why, "Parse error: %s (column %d)", je.text, je.column);
        return rpc_error(NULL, RPC_PARSE_ERROR, why);
    }
    char *reply = NULL;
    json_t *id = json_object_get(msg, "id");
    bool id_ok = json_is_string(id) || json_is_integer(id);
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (json_is_array(msg)) {
        reply = rpc_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: batches are not part of MCP since 2025-06-18");
    } else if (!json_is_object(msg) || strcmp(json_string_value(json_object_get(msg, "jsonrpc")) ?: "", "2.0")) {
        reply = rpc_error(id_ok ? id : NULL, RPC_INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object");
    } else if (!method) {
        /* a response to a request of ours (we send none) is dropped; anything else is refused */
        if (!(id_ok && (json_object_get(msg, "result") || json_object_get(msg, "error"))))
            reply = rpc_error(id_ok ? id : NULL, RPC_INVALID_REQUEST, "Invalid Request: no method");
    } else if (!id) {
        /* a notification (initialized, cancelled, ...): nothing to answer */
    } else if (!id_ok) {
        reply = rpc_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: id must be a string or an integer");
    } else {
        pthread_mutex_lock(&m->mu);
        reply = request(m, id, method, json_object_get(msg, "params"));
        pthread_mutex_unlock(&m->mu);
    }
    json_decref(msg);
    return reply;
}

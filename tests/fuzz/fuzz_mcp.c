/* libFuzzer target: one MCP message (JSON-RPC 2.0) into a session of a server with no listener whose
 * image does not exist, so a tool that needs an env fails at once instead of booting a guest. Every
 * message gets nothing (a notification) or one JSON-RPC 2.0 object with an id and either a result or
 * an error; the server never crashes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "envmgr/api/api.h"
#include "envmgr/api/api_mcp.h"
#include "envmgr/base/fileio.h"

static api_server *server;
static api_mcp_session *session;
static char dir[] = "/tmp/envmgr-fuzz-mcp.XXXXXX";

static void stop(void)
{
    api_mcp_session_free(session);
    api_server_stop(server);
    remove_tree(dir, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    if (!mkdtemp(dir))
        abort();
    api_config c = {.max_envs = 1, .accel = "tcg", .no_listen = true, .out_dir = dir, .task_root = dir,
                    .token = "fuzz-token-fuzz-token-fuzz-token", .image = "envmgr-fuzz-no-such-image",
                    .force_image = true};
    em_err err = {0};
    if (api_server_start(&c, &server, &err) < 0)
        abort();
    session = api_mcp_session_new(server);
    atexit(stop);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *reply = api_mcp_handle(session, (const char *)data, size);
    if (!reply)
        return 0;
    json_t *j = json_loads(reply, 0, NULL);
    if (!json_is_object(j) || strcmp(json_string_value(json_object_get(j, "jsonrpc")) ?: "", "2.0") ||
        !json_object_get(j, "id") || !json_object_get(j, "result") == !json_object_get(j, "error") ||
        strchr(reply, '\n'))
        abort();
    json_decref(j);
    free(reply);
    return 0;
}

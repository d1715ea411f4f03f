/* The MCP tools: each is a call of the HTTP API's own endpoints on the session's env, so what an MCP
 * client does is checked, executed, recorded and scored exactly as over HTTP. A refusal or a failure is
 * a tool result with isError and envmgr's one-line message (the model can read it and try again); only
 * an unknown tool is a JSON-RPC error. */
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_mcp_int.h"
#include "envmgr/base/base64.h"
#include "envmgr/base/util.h"

#define RPC_INVALID_PARAMS -32602

/* Anthropic's computer tool's input, as MCP's inputSchema (docs/computer-use.md has each action). */
static const char computer_schema[] =
    "{\"type\": \"object\", \"required\": [\"action\"], \"properties\": {"
    "\"action\": {\"type\": \"string\", \"enum\": [\"key\", \"hold_key\", \"type\", \"cursor_position\", \"mouse_move\","
    " \"left_mouse_down\", \"left_mouse_up\", \"left_click\", \"right_click\", \"middle_click\", \"double_click\","
    " \"triple_click\", \"left_click_drag\", \"scroll\", \"wait\", \"screenshot\", \"zoom\"]},"
    "\"coordinate\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 2, \"maxItems\": 2},"
    "\"start_coordinate\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 2, \"maxItems\": 2},"
    "\"text\": {\"type\": \"string\"}, \"duration\": {\"type\": \"number\"},"
    "\"scroll_direction\": {\"type\": \"string\", \"enum\": [\"up\", \"down\", \"left\", \"right\"]},"
    "\"scroll_amount\": {\"type\": \"integer\"},"
    "\"region\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}, \"minItems\": 4, \"maxItems\": 4}}}";

static const char task_schema[] =
    "{\"type\": \"object\", \"required\": [\"task\"], \"properties\": {"
    "\"task\": {\"description\": \"a task file's path inside the server's task root, or the task itself (an object)\"},"
    "\"observation\": {\"type\": \"string\", \"enum\": [\"screenshot\", \"screenshot_a11y_tree\", \"a11y_tree\"]}}}";

static const char name_schema[] =
    "{\"type\": \"object\", \"required\": [\"name\"], \"properties\": {\"name\": {\"type\": \"string\"}}}";

static const char act_schema[] =
    "{\"type\": \"object\", \"required\": [\"action\"], \"properties\": {\"action\": {\"description\": "
    "\"a computer_13 object, pyautogui code (a string), or a tool call in any action space envmgr speaks: "
    "{\\\"openai\\\": ...}, {\\\"uitars\\\": \\\"...\\\"}, {\\\"anthropic\\\": ...} (docs/computer-use.md)\"}}}";

static const char empty_schema[] = "{\"type\": \"object\", \"properties\": {}}";

typedef struct tool tool;
typedef json_t *(*tool_fn)(api_mcp_session *m, json_t *args);

struct tool {
    const char *name, *description, *schema;
    tool_fn fn;
};

/* ---- calls of the API ---- */

/* The API's answer as JSON (NULL for a body that is not: a PNG), its status in *status. */
static json_t *call(api_mcp_session *m, const char *method, const char *sub, json_t *body, int *status)
{
    char path[64 + API_ID_MAX];
    if (sub[0] == '/')
        snprintf(path, sizeof path, "%s", sub);
    else
        snprintf(path, sizeof path, "/v1/envs/%s/%s", m->env, sub);
    api_reply r = {0};
    api_call(m->s, method, path, body, NULL, &r);
    json_decref(body);
    *status = r.status;
    json_t *j = json_incref(r.json);
    api_reply_free(&r);
    return j;
}

static json_t *text_content(const char *text)
{
    return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

static json_t *result_of(json_t *content, bool is_error)
{
    return json_pack("{s:o, s:b}", "content", content, "isError", is_error);
}

static json_t *error_result(const char *msg)
{
    return result_of(json_pack("[o]", text_content(msg)), true);
}

/* An API error as the tool's error, its message as envmgr wrote it. */
static json_t *api_error_result(json_t *reply, int status)
{
    const char *msg = json_string_value(json_object_get(reply, "error"));
    char text[EM_ERR_MAX + 32];
    snprintf(text, sizeof text, "%s (HTTP %d)", msg ? msg : "the server answered without a message", status);
    json_decref(reply);
    return result_of(json_pack("[o]", text_content(text)), true);
}

static json_t *image_content(const char *b64)
{
    return json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", "image/png");
}

/* The env this session drives, created (for the task, when one is given) the first time. */
static json_t *ensure_env(api_mcp_session *m, json_t *task_spec)
{
    if (m->env[0])
        return NULL;
    int status;
    json_t *body = task_spec ? json_pack("{s:O}", "task", task_spec) : json_object();
    json_t *r = call(m, "POST", "/v1/envs", body, &status);
    if (status != 201)
        return api_error_result(r, status);
    snprintf(m->env, sizeof m->env, "%s", json_string_value(json_object_get(r, "id")) ?: "");
    m->width = (int)json_integer_value(json_object_get(r, "width"));
    m->height = (int)json_integer_value(json_object_get(r, "height"));
    json_decref(r);
    return NULL;
}

/* What an observation shows: its screenshot, and its tree kept for accessibility_tree. */
static void take_observation(api_mcp_session *m, json_t *obs, json_t *content)
{
    const char *png = json_string_value(json_object_get(obs, "screenshot"));
    const char *tree = json_string_value(json_object_get(obs, "accessibility_tree"));
    free(m->tree);
    m->tree = tree ? xstrdup(tree) : NULL;
    if (png)
        json_array_append_new(content, image_content(png));
}

/* The episode ended with this step: say how, and what to do next. */
static void say_end(json_t *reply, json_t *content)
{
    if (!json_is_true(json_object_get(reply, "done")))
        return;
    const char *cause = json_string_value(json_object_get(json_object_get(reply, "info"), "exit_cause"));
    char text[160];
    snprintf(text, sizeof text, "The episode has ended (%s): call evaluate for its score.", cause ? cause : "?");
    json_array_append_new(content, text_content(text));
}

/* An episode to act in: the env's task, or a free one when it has none. */
static json_t *ensure_episode(api_mcp_session *m)
{
    json_t *err = ensure_env(m, NULL);
    if (err || m->episode)
        return err;
    int status;
    json_t *r = call(m, "POST", "reset", json_object(), &status);
    if (status != 200)
        return api_error_result(r, status);
    m->episode = true;
    json_decref(r);
    return NULL;
}

static json_t *step(api_mcp_session *m, json_t *act_json, bool tool_answer)
{
    json_t *err = ensure_episode(m);
    if (err) {
        json_decref(act_json);
        return err;
    }
    int status;
    json_t *r = call(m, "POST", "step", json_pack("{s:o}", "action", act_json), &status);
    if (status != 200)
        return api_error_result(r, status);
    json_t *content = json_array(), *answer = json_object_get(r, "answer");
    size_t i;
    json_t *block;
    if (tool_answer && answer) { /* Anthropic's tool_result blocks as MCP content */
        json_array_foreach(json_object_get(answer, "content"), i, block)
        {
            json_t *src = json_object_get(block, "source");
            if (src)
                json_array_append_new(content, image_content(json_string_value(json_object_get(src, "data"))));
            else
                json_array_append_new(content, text_content(json_string_value(json_object_get(block, "text")) ?: ""));
        }
        json_t *unused = json_array(); /* the observation's tree is kept; its frame is the answer's */
        take_observation(m, json_object_get(r, "observation"), unused);
        json_decref(unused);
    } else {
        take_observation(m, json_object_get(r, "observation"), content);
    }
    const char *agent_error = json_string_value(json_object_get(json_object_get(r, "info"), "agent_error"));
    if (agent_error)
        json_array_append_new(content, text_content(agent_error));
    say_end(r, content);
    json_decref(r);
    return result_of(content, false);
}

/* ---- the tools ---- */

static json_t *tool_computer(api_mcp_session *m, json_t *args)
{
    json_t *err = ensure_env(m, NULL);
    if (err)
        return err;
    const api_config *c = &m->s->cfg;
    int w = c->display_w ? c->display_w : m->width, h = c->display_h ? c->display_h : m->height;
    return step(m, json_pack("{s:O, s:[i, i]}", "anthropic", args, "display", w, h), true);
}

static json_t *tool_act(api_mcp_session *m, json_t *args)
{
    json_t *act_json = json_object_get(args, "action");
    if (!act_json)
        return error_result("action: missing (a computer_13 object, pyautogui code or a tool call)");
    return step(m, json_incref(act_json), false);
}

static json_t *tool_screenshot(api_mcp_session *m, json_t *args)
{
    json_t *err = ensure_env(m, NULL);
    if (err)
        return err;
    char path[64 + API_ID_MAX];
    snprintf(path, sizeof path, "/v1/envs/%s/screenshot", m->env);
    api_reply r = {0};
    api_call(m->s, "GET", path, NULL, NULL, &r);
    json_t *out;
    if (r.status == 200 && r.body) {
        char *b64 = base64_encode(r.body, r.len);
        out = result_of(json_pack("[o]", image_content(b64)), false);
        free(b64);
    } else {
        int status = r.status;
        out = api_error_result(json_incref(r.json), status);
    }
    api_reply_free(&r);
    return out;
}

static json_t *tool_start_task(api_mcp_session *m, json_t *args)
{
    json_t *spec = json_object_get(args, "task"), *observation = json_object_get(args, "observation");
    if (!json_is_string(spec) && !json_is_object(spec))
        return error_result("task: expected a task file's path (a string) or a task (an object)");
    json_t *err = ensure_env(m, spec);
    if (err)
        return err;
    json_t *body = json_pack("{s:O}", "task", spec);
    if (observation)
        json_object_set(body, "observation", observation);
    int status;
    json_t *r = call(m, "POST", "reset", body, &status);
    if (status != 200)
        return api_error_result(r, status);
    m->episode = true;
    json_t *obs = json_object_get(r, "observation"), *content = json_array();
    char text[4096];
    snprintf(text, sizeof text, "Task %s started (episode %lld). Instruction: %s",
             json_string_value(json_object_get(r, "task_id")) ?: "?",
             (long long)json_integer_value(json_object_get(r, "episode")),
             json_string_value(json_object_get(obs, "instruction")) ?: "");
    json_array_append_new(content, text_content(text));
    take_observation(m, obs, content);
    json_decref(r);
    return result_of(content, false);
}

static json_t *tool_tree(api_mcp_session *m, json_t *args)
{
    if (!m->tree)
        return error_result("no accessibility tree: start_task with observation screenshot_a11y_tree "
                                  "(the apps image has the guest toolbelt that reads it)");
    return result_of(json_pack("[o]", text_content(m->tree)), false);
}

static json_t *tool_evaluate(api_mcp_session *m, json_t *args)
{
    if (!m->env[0])
        return error_result("no episode to evaluate: start_task first");
    int status;
    json_t *r = call(m, "POST", "evaluate", json_object(), &status);
    if (status != 200)
        return api_error_result(r, status);
    m->episode = false;
    char *text = json_dumps(r, JSON_COMPACT);
    json_t *out = result_of(json_pack("[o]", text_content(text)), false);
    free(text);
    json_decref(r);
    return out;
}

static json_t *state_call(api_mcp_session *m, json_t *args, const char *sub)
{
    json_t *name = json_object_get(args, "name");
    if (!json_is_string(name))
        return error_result("name: expected the state's name (a string)");
    json_t *err = ensure_env(m, NULL);
    if (err)
        return err;
    int status;
    json_t *r = call(m, "POST", sub, json_pack("{s:O}", "name", name), &status);
    if (status != 200 && status != 201)
        return api_error_result(r, status);
    json_t *content = json_array();
    json_t *obs = json_object_get(r, "observation");
    if (obs) { /* a restore starts an episode there */
        m->episode = true;
        json_object_del(r, "observation");
    }
    char *text = json_dumps(r, JSON_COMPACT);
    json_array_append_new(content, text_content(text));
    free(text);
    take_observation(m, obs, content);
    json_decref(r);
    return result_of(content, false);
}

static json_t *tool_save_state(api_mcp_session *m, json_t *args) { return state_call(m, args, "state"); }
static json_t *tool_restore_state(api_mcp_session *m, json_t *args) { return state_call(m, args, "restore"); }

static const tool tools[] = {
    {"computer",
     "Use the desktop's mouse and keyboard and see its screen, with the actions of Anthropic's computer tool "
     "(coordinates in the screen's pixels unless the server was started with --display). Answers with a "
     "screenshot (or the cursor's position).",
     computer_schema, tool_computer},
    {"act",
     "Perform one reply of an agent in any action space envmgr speaks (computer_13, pyautogui code, OpenAI's "
     "computer_call, UI-TARS's text). Answers with the screenshot after it.",
     act_schema, tool_act},
    {"screenshot", "The screen now, as a PNG (not a step of the episode).", empty_schema, tool_screenshot},
    {"start_task",
     "Start an episode of a task: its setup runs on a fresh copy of the desktop. Answers with the instruction "
     "and the first screenshot.",
     task_schema, tool_start_task},
    {"accessibility_tree",
     "The desktop's accessibility tree (OSWorld's XML) as the last observation read it; start_task with "
     "observation screenshot_a11y_tree to have one.",
     empty_schema, tool_tree},
    {"evaluate", "End the episode and score it with the task's evaluator. Answers with the result (score, status, reason).",
     empty_schema, tool_evaluate},
    {"save_state", "Save this moment of the env (screen, memory, disk) as a named state; the episode goes on.",
     name_schema, tool_save_state},
    {"restore_state", "Go back to a saved state and start a new episode there. Answers with its screenshot.",
     name_schema, tool_restore_state},
};

json_t *mcp_tools_list(const api_mcp_session *m)
{
    json_t *list = json_array();
    for (size_t i = 0; i < ARRAY_LEN(tools); i++) {
        json_error_t je;
        json_t *schema = json_loads(tools[i].schema, 0, &je);
        json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", tools[i].name, "description",
                                              tools[i].description, "inputSchema", schema ? schema : json_object()));
    }
    return list;
}

json_t *mcp_tools_call(api_mcp_session *m, const char *name, json_t *args, int *code, char *msg, size_t msglen)
{
    for (size_t i = 0; i < ARRAY_LEN(tools); i++)
        if (!strcmp(tools[i].name, name)) {
            json_t *empty = args ? NULL : json_object();
            json_t *out = tools[i].fn(m, args ? args : empty);
            json_decref(empty);
            return out;
        }
    *code = RPC_INVALID_PARAMS;
    snprintf(msg, msglen, "Unknown tool: %.100s", name);
    return NULL;
}

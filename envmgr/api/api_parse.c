/* The API's input side with no server behind it: errors, routing, request
 * bodies. Everything a client sends is checked here before a handler sees it,
 * with the same parsers as the CLI (action_parse, pyautogui_parse, task_parse). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/api/api_int.h"
#include "envmgr/action/action_reply.h"
#include "envmgr/episode/plan.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

int api_fail(api_error *ae, int status, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ae->msg, sizeof ae->msg, fmt, ap);
    va_end(ap);
    ae->status = status;
    snprintf(ae->field, sizeof ae->field, "%s", field ? field : "");
    return -1;
}

/* "action.x: 1400 is off-screen" → "action.x"; "config[2].parameters.command: missing" → that path. */
static bool leading_path(const char *msg, char *out, size_t len)
{
    size_t i = 0;
    while (msg[i] && (isalnum((unsigned char)msg[i]) || strchr("._[]-", msg[i])))
        i++;
    if (i == 0 || i >= len || msg[i] != ':' || !isalpha((unsigned char)msg[0]))
        return false;
    memcpy(out, msg, i);
    out[i] = '\0';
    return true;
}

int api_fail_em(api_error *ae, const em_err *err, const char *field)
{
    int status = err->code == EM_EXIT_USAGE ? 400 : err->code == EM_EXIT_NOMEM ? 503 : 500;
    const char *msg = err->msg[0] ? err->msg : "failed";
    char path[96], joined[200];
    const char *f = field;
    if (status == 400 && leading_path(msg, path, sizeof path)) {
        if (field && strncmp(path, field, strlen(field)) != 0) { /* a task's paths are relative to the task */
            snprintf(joined, sizeof joined, "%s.%s", field, path);
            f = joined;
        } else {
            f = path;
        }
    }
    return api_fail(ae, status, f, "%s", msg);
}

json_t *api_error_json(const api_error *ae)
{
    return json_pack("{s:s, s:o}", "error", ae->msg, "field", ae->field[0] ? json_string(ae->field) : json_null());
}

/* ---- routing ---- */

bool api_env_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > API_ID_MAX || id[0] == '.' || id[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)id[i]) && !strchr("._-", id[i]))
            return false;
    return true;
}

typedef struct sub_route {
    const char *name;
    api_route_id id;
    const char *method;
} sub_route;

static const sub_route subs[] = {
    {"reset", API_R_RESET, "POST"},       {"step", API_R_STEP, "POST"},   {"evaluate", API_R_EVALUATE, "POST"},
    {"screenshot", API_R_SCREENSHOT, "GET"}, {"trace", API_R_TRACE, "GET"}, {"live", API_R_LIVE, "GET"},
    {"live/ws", API_R_LIVE_WS, "GET"}, {"live-token", API_R_LIVE_TOKEN, "POST"},
    {"video", API_R_VIDEO, "GET"},
    {"state", API_R_STATE, "POST"},    {"restore", API_R_RESTORE, "POST"},
};

static int want(const char *method, const char *allow, api_route_id id, api_route *out, api_error *ae)
{
    /* allow: "GET" or "GET, POST"; HEAD is served like GET where GET is */
    char m[16];
    snprintf(m, sizeof m, "%s", method);
    if (!strcmp(m, "HEAD"))
        snprintf(m, sizeof m, "GET");
    const char *p = strstr(allow, m);
    size_t ml = strlen(m);
    if (ml && p && (p == allow || p[-1] == ' ') && (p[ml] == '\0' || p[ml] == ','))
        return out->id = id, 0;
    api_fail(ae, 405, "", "method %s not allowed here (allowed: %s)", method, allow);
    snprintf(ae->field, sizeof ae->field, "%s", allow); /* the Allow header, for the caller */
    return -1;
}

int api_route_match(const char *method, const char *path, api_route *out, api_error *ae)
{
    memset(out, 0, sizeof *out);
    if (strlen(path) > 1024)
        return api_fail(ae, 414, "url", "path too long");
    if (!strcmp(path, "/v1/health"))
        return want(method, "GET", API_R_HEALTH, out, ae);
    if (!strcmp(path, "/v1/metrics"))
        return want(method, "GET", API_R_METRICS, out, ae);
    if (!strcmp(path, "/v1/envs") || !strcmp(path, "/v1/envs/"))
        return want(method, "GET, POST", API_R_ENVS, out, ae);
    if (!strcmp(path, "/v1/states"))
        return want(method, "GET", API_R_STATES, out, ae);
    if (!strcmp(path, "/v1/mcp"))
        return want(method, "POST, DELETE", API_R_MCP, out, ae);
    if (!strncmp(path, "/v1/novnc/", 10)) {
        const char *f = path + 10;
        size_t n = strlen(f);
        if (n == 0 || n >= sizeof out->file || f[0] == '/' || strstr(f, "..") || strstr(f, "//"))
            return api_fail(ae, 404, "url", "no such file: %s", path);
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)f[i]) && !strchr("._-/", f[i]))
                return api_fail(ae, 404, "url", "no such file: %s", path);
        memcpy(out->file, f, n + 1);
        return want(method, "GET", API_R_NOVNC, out, ae);
    }
    if (!strncmp(path, "/v1/envs/", 9)) {
        const char *id = path + 9, *slash = strchr(id, '/');
        size_t idlen = slash ? (size_t)(slash - id) : strlen(id);
        if (idlen == 0 || idlen > API_ID_MAX)
            return api_fail(ae, idlen ? 400 : 404, "id", "bad env id (1 to %d of A-Z a-z 0-9 . _ -)", API_ID_MAX);
        memcpy(out->env, id, idlen);
        out->env[idlen] = '\0';
        if (!api_env_id_ok(out->env))
            return api_fail(ae, 400, "id", "bad env id `%.64s` (1 to %d of A-Z a-z 0-9 . _ -)", out->env, API_ID_MAX);
        if (!slash || !strcmp(slash, "/"))
            return want(method, "GET, DELETE", API_R_ENV, out, ae);
        for (size_t i = 0; i < ARRAY_LEN(subs); i++)
            if (!strcmp(slash + 1, subs[i].name))
                return want(method, subs[i].method, subs[i].id, out, ae);
    }
    return api_fail(ae, 404, "url", "no such endpoint: %.200s (docs/http-api.md lists them)", path);
}

/* ---- bodies ---- */

int api_parse_body(const char *data, size_t len, json_t **out, api_error *ae)
{
    *out = NULL;
    if (len > API_BODY_MAX)
        return api_fail(ae, 413, "body", "request body of %zu bytes is over the limit of %zu", len, API_BODY_MAX);
    size_t i = 0;
    while (i < len && isspace((unsigned char)data[i]))
        i++;
    if (i == len) {
        *out = json_object();
        return 0;
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return api_fail(ae, 400, "body", "body is not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    if (!json_is_object(j)) {
        json_decref(j);
        return api_fail(ae, 400, "body", "body must be a JSON object");
    }
    *out = j;
    return 0;
}

int api_check_fields(json_t *obj, const char *allowed, api_error *ae)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        char needle[80];
        if (strlen(k) > 64 || (snprintf(needle, sizeof needle, " %s ", k), !strstr(allowed, needle)))
            return api_fail(ae, 400, "body", "unknown field `%.64s` (expected one of:%s)", k, allowed);
    }
    return 0;
}

int api_parse_step(json_t *body, int w, int h, json_t **reply, api_error *ae)
{
    *reply = NULL;
    if (api_check_fields(body, " action ", ae) < 0)
        return -1;
    json_t *a = json_object_get(body, "action");
    if (!a)
        return api_fail(ae, 400, "action", "action: missing (a computer_13 object, pyautogui code or a tool call)");
    json_t *r;
    if (json_is_string(a)) {
        const char *s = json_string_value(a);
        if (!strcmp(s, "DONE") || !strcmp(s, "FAIL") || !strcmp(s, "WAIT")) /* OSWorld's special pyautogui answers */
            r = json_pack("{s:s}", "action_type", s);
        else
            r = json_pack("{s:s}", "pyautogui", s);
    } else if (json_is_object(a)) {
        r = json_incref(a);
    } else {
        return api_fail(ae, 400, "action", "action: expected an object (computer_13, a tool call) or a string (pyautogui code)");
    }
    /* Validate every action now, so a bad one is a 400 and nothing reaches the guest. */
    action_reply dec;
    em_err err = {0};
    if (action_reply_decode(r, w, h, &dec, &err) < 0) {
        json_decref(r);
        return api_fail_em(ae, &err, "action");
    }
    action_reply_free(&dec);
    *reply = r;
    return 0;
}

int api_parse_task(json_t *spec, const char *field, const char *task_root, const char *empty_dir,
                   const netpolicy *net, int w, int h,
                   const char *client_password,
                   task **out, char **path, char sha[65], api_error *ae)
{
    *out = NULL;
    *path = NULL;
    em_err err = {0};
    task *t = NULL;
    if (json_is_string(spec)) {
        const char *p = json_string_value(spec);
        char *abs = NULL;
        if (!p[0] || path_inside(task_root, p, true, &abs, &err) < 0)
            return api_fail(ae, 400, field, "%s: `%.200s`: %s", field, p,
                            p[0] ? err.msg : "empty path");
        if (task_load(abs, &t, &err) < 0) {
            free(abs);
            task_free(t);
            return api_fail_em(ae, &err, field);
        }
        *path = abs;
    } else if (json_is_object(spec)) {
        char *text = json_dumps(spec, JSON_COMPACT);
        if (!text)
            return api_fail(ae, 400, field, "%s: cannot be serialised", field);
        size_t len = strlen(text);
        int rc = task_parse(text, len, empty_dir, &t, &err);
        free(text);
        if (rc < 0)
            return api_fail_em(ae, &err, field);
    } else {
        return api_fail(ae, 400, field, "%s: expected a task object or a task file path", field);
    }
    memcpy(sha, t->sha256, sizeof t->sha256); /* of the bytes parsed: one reading */
    task_vars v = {.screen_w = w, .screen_h = h, .client_password = client_password};
    if (plan_settle(t, net, &v, &err) < 0) {
        task_free(t);
        free(*path);
        *path = NULL;
        return api_fail_em(ae, &err, field);
    }
    *out = t;
    return 0;
}

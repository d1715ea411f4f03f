/* The HTTP API's pure parts: routing, request bodies (with the CLI's
 * parsers), auth, metrics text, websocket framing, the view-only RFB filter
 * and tar headers. The server itself is tested on real guests by
 * tests/integration/test_api.sh. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/un.h>

#include "envmgr/api/api.h"
#include "envmgr/api/api_gate.h"
#include "envmgr/api/api_int.h"
#include "envmgr/view/relay.h"
#include "envmgr/view/vnc_auth.h"
#include "envmgr/view/websocket.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

/* ---- routing ---- */

static void route_ok(const char *method, const char *path, api_route_id id, const char *env_id)
{
    api_route rt;
    api_error ae = {0};
    int rc = api_route_match(method, path, &rt, &ae);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) {
        CU_ASSERT_EQUAL(rt.id, id);
        CU_ASSERT_STRING_EQUAL(rt.env, env_id);
    } else {
        fprintf(stderr, "route %s %s: %d %s\n", method, path, ae.status, ae.msg);
    }
}

static int route_status(const char *method, const char *path, api_error *ae)
{
    api_route rt;
    memset(ae, 0, sizeof *ae);
    if (api_route_match(method, path, &rt, ae) == 0)
        return 0;
    return ae->status;
}

static void test_routes(void)
{
    route_ok("GET", "/v1/health", API_R_HEALTH, "");
    route_ok("HEAD", "/v1/health", API_R_HEALTH, "");
    route_ok("GET", "/v1/metrics", API_R_METRICS, "");
    route_ok("GET", "/v1/envs", API_R_ENVS, "");
    route_ok("POST", "/v1/envs", API_R_ENVS, "");
    route_ok("GET", "/v1/envs/e1", API_R_ENV, "e1");
    route_ok("DELETE", "/v1/envs/api12-3", API_R_ENV, "api12-3");
    route_ok("POST", "/v1/envs/e1/reset", API_R_RESET, "e1");
    route_ok("POST", "/v1/envs/e1/step", API_R_STEP, "e1");
    route_ok("POST", "/v1/envs/e1/evaluate", API_R_EVALUATE, "e1");
    route_ok("GET", "/v1/envs/e1/screenshot", API_R_SCREENSHOT, "e1");
    route_ok("GET", "/v1/envs/e.1_x/trace", API_R_TRACE, "e.1_x");
    route_ok("GET", "/v1/envs/e1/live", API_R_LIVE, "e1");
    route_ok("GET", "/v1/envs/e1/live/ws", API_R_LIVE_WS, "e1");
    route_ok("GET", "/v1/novnc/core/rfb.js", API_R_NOVNC, "");
    route_ok("POST", "/v1/envs/e1/state", API_R_STATE, "e1");
    route_ok("POST", "/v1/envs/e1/restore", API_R_RESTORE, "e1");
    route_ok("GET", "/v1/states", API_R_STATES, "");
}

static void test_route_errors(void)
{
    api_error ae;
    CU_ASSERT_EQUAL(route_status("GET", "/", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v1", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/e1/nothing", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v2/envs", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/", &ae), 0); /* the list, trailing slash */
    CU_ASSERT_EQUAL(route_status("PUT", "/v1/envs", &ae), 405);
    CU_ASSERT_STRING_EQUAL(ae.field, "GET, POST"); /* the Allow header */
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/e1/step", &ae), 405);
    CU_ASSERT_STRING_EQUAL(ae.field, "POST");
    CU_ASSERT_EQUAL(route_status("POST", "/v1/health", &ae), 405);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/e1/state", &ae), 405); /* a save is a POST */
    CU_ASSERT_EQUAL(route_status("POST", "/v1/states", &ae), 405);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/states/s1", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GETX", "/v1/health", &ae), 405);
    CU_ASSERT_EQUAL(route_status("", "/v1/health", &ae), 405);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/../etc/trace", &ae), 400);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/.hidden", &ae), 400);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/-x", &ae), 400);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/envs/a b/trace", &ae), 400);
    CU_ASSERT_STRING_EQUAL(ae.field, "id");
    char longid[200] = "/v1/envs/";
    memset(longid + 9, 'a', 100);
    CU_ASSERT_EQUAL(route_status("GET", longid, &ae), 400);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/novnc/../secret", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/novnc//etc/passwd", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/novnc/", &ae), 404);
    CU_ASSERT_EQUAL(route_status("GET", "/v1/novnc/a%2f..", &ae), 404);
    char huge[3000];
    memset(huge, 'a', sizeof huge - 1);
    huge[0] = '/';
    huge[sizeof huge - 1] = '\0';
    CU_ASSERT_EQUAL(route_status("GET", huge, &ae), 414);
}

/* ---- bodies ---- */

static void test_body(void)
{
    json_t *j;
    api_error ae;
    CU_ASSERT_EQUAL(api_parse_body("", 0, &j, &ae), 0);
    CU_ASSERT_TRUE(json_is_object(j) && json_object_size(j) == 0);
    json_decref(j);
    CU_ASSERT_EQUAL(api_parse_body(" \n", 2, &j, &ae), 0);
    json_decref(j);
    CU_ASSERT_EQUAL(api_parse_body("{\"a\":1}", 7, &j, &ae), 0);
    json_decref(j);
    CU_ASSERT_EQUAL(api_parse_body("[1]", 3, &j, &ae), -1);
    CU_ASSERT_EQUAL(ae.status, 400);
    CU_ASSERT_STRING_EQUAL(ae.field, "body");
    CU_ASSERT_EQUAL(api_parse_body("{\"a\":1,\"a\":2}", 13, &j, &ae), -1);
    CU_ASSERT_EQUAL(api_parse_body("{\"a\":", 5, &j, &ae), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ae.msg, "not JSON"));
    CU_ASSERT_EQUAL(api_parse_body("{}\0{}", 5, &j, &ae), -1); /* NUL inside */
    CU_ASSERT_EQUAL(api_parse_body("{}", API_BODY_MAX + 1, &j, &ae), -1);
    CU_ASSERT_EQUAL(ae.status, 413);
    j = json_pack("{s:i, s:i}", "a", 1, "b", 2);
    CU_ASSERT_EQUAL(api_check_fields(j, " a b ", &ae), 0);
    CU_ASSERT_EQUAL(api_check_fields(j, " a ", &ae), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ae.msg, "`b`"));
    json_decref(j);
}

static int step_of(const char *text, json_t **reply, api_error *ae)
{
    json_t *body;
    if (api_parse_body(text, strlen(text), &body, ae) < 0)
        return -1;
    int rc = api_parse_step(body, 1280, 800, reply, ae);
    json_decref(body);
    return rc;
}

static void test_step_bodies(void)
{
    json_t *r;
    api_error ae;
    CU_ASSERT_EQUAL(step_of("{\"action\":{\"action_type\":\"CLICK\",\"x\":10,\"y\":20}}", &r, &ae), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "action_type")), "CLICK");
    json_decref(r);
    CU_ASSERT_EQUAL(step_of("{\"action\":\"pyautogui.click(10, 20)\"}", &r, &ae), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "pyautogui")), "pyautogui.click(10, 20)");
    json_decref(r);
    CU_ASSERT_EQUAL(step_of("{\"action\":{\"pyautogui\":\"pyautogui.press('a')\"}}", &r, &ae), 0);
    json_decref(r);
    /* pyautogui code for a bigger screen is taken (OSWorld's guest runs it; X clamps the pointer) */
    CU_ASSERT_EQUAL(step_of("{\"action\":\"pyautogui.click(5000, 1)\"}", &r, &ae), 0);
    json_decref(r);
    const char *special[] = {"DONE", "FAIL", "WAIT"};
    for (size_t i = 0; i < 3; i++) {
        char b[64];
        snprintf(b, sizeof b, "{\"action\":\"%s\"}", special[i]);
        CU_ASSERT_EQUAL(step_of(b, &r, &ae), 0);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "action_type")), special[i]);
        json_decref(r);
    }
    /* every refusal names its field, and nothing comes back */
    struct {
        const char *body, *field;
        int status;
    } bad[] = {
        {"{}", "action", 400},
        {"{\"action\":1}", "action", 400},
        {"{\"action\":null}", "action", 400},
        {"{\"action\":[]}", "action", 400},
        {"{\"action\":{\"action_type\":\"CLICK\",\"x\":1280,\"y\":0}}", "action.x", 400},
        {"{\"action\":{\"action_type\":\"CLICK\",\"x\":0,\"y\":800}}", "action.y", 400},
        {"{\"action\":{\"action_type\":\"PRESS\",\"key\":\"nosuchkey\"}}", "action.key", 400},
        {"{\"action\":{\"action_type\":\"TELEPORT\"}}", "action.action_type", 400},
        {"{\"action\":{\"action_type\":\"TYPING\"}}", "action.text", 400},
        {"{\"action\":{\"action_type\":\"PYAUTOGUI\",\"code\":\"\"}}", "action.code", 400}, /* any code runs in the guest */
        {"{\"action\":{\"pyautogui\":1}}", "action.pyautogui", 400},
        {"{\"action\":{\"pyautogui\":\"x\",\"y\":1}}", "action.pyautogui", 400},
        {"{\"action\":\"DONE\",\"extra\":1}", "body", 400},
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        r = NULL;
        int rc = step_of(bad[i].body, &r, &ae);
        CU_ASSERT_EQUAL(rc, -1);
        CU_ASSERT_PTR_NULL(r);
        CU_ASSERT_EQUAL(ae.status, bad[i].status);
        if (strcmp(ae.field, bad[i].field))
            fprintf(stderr, "%s: field `%s` (%s), expected `%s`\n", bad[i].body, ae.field, ae.msg, bad[i].field);
        CU_ASSERT_STRING_EQUAL(ae.field, bad[i].field);
    }
}

static void test_task_spec(void)
{
    const char *dir = test_tmpdir();
    _cleanup_free_ char *empty = xasprintf("%s/empty", dir), *root = xasprintf("%s/tasks", dir);
    mkdir(empty, 0700);
    mkdir(root, 0700);
    const char *text = "{\"id\":\"t1\",\"instruction\":\"click at {SCREEN_WIDTH_HALF}\",\"config\":[{\"type\":"
                       "\"execute\",\"parameters\":{\"command\":\"echo {SCREEN_WIDTH}\"}}],"
                       "\"evaluator\":{\"func\":\"infeasible\"}}";
    _cleanup_free_ char *path = xasprintf("%s/t1.json", root);
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(path, text, strlen(text), 0644, NULL), 0);
    task *t;
    char *tpath, sha[65];
    api_error ae;
    json_t *spec = json_string("t1.json");
    CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, NULL, 1280, 800, NULL, &t, &tpath, sha, &ae), 0);
    CU_ASSERT_STRING_EQUAL(t->id, "t1");
    CU_ASSERT_PTR_NOT_NULL(tpath);
    CU_ASSERT_EQUAL(strlen(sha), 64);
    CU_ASSERT_STRING_EQUAL(t->config[0].argv[2], "echo 1280"); /* placeholders substituted */
    task_free(t);
    free(tpath);
    json_decref(spec);
    /* paths outside the root, and inline tasks with errors, are 400s naming the field */
    const char *outside[] = {"../t1.json", "/etc/passwd", "", "nosuch.json"};
    for (size_t i = 0; i < ARRAY_LEN(outside); i++) {
        spec = json_string(outside[i]);
        CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, NULL, 1280, 800, NULL, &t, &tpath, sha, &ae), -1);
        CU_ASSERT_EQUAL(ae.status, 400);
        CU_ASSERT_STRING_EQUAL(ae.field, "task");
        json_decref(spec);
    }
    json_error_t je;
    spec = json_loads(text, 0, &je);
    CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, NULL, 1280, 800, NULL, &t, &tpath, sha, &ae), 0);
    CU_ASSERT_PTR_NULL(tpath);
    task_free(t);
    json_object_del(spec, "evaluator");
    CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, NULL, 1280, 800, NULL, &t, &tpath, sha, &ae), -1);
    CU_ASSERT_EQUAL(ae.status, 400);
    CU_ASSERT_STRING_EQUAL(ae.field, "task.evaluator");
    json_decref(spec);
    spec = json_integer(3);
    CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, NULL, 1280, 800, NULL, &t, &tpath, sha, &ae), -1);
    json_decref(spec);
    /* egress limits above the server's maxima (the defaults; then --max-egress-bytes): a 400 naming the field */
    spec = json_loads(text, 0, &je);
    json_object_set_new(spec, "network", json_pack("{s:s, s:[s], s:{s:I}}", "mode", "allowlist", "allow",
                                                   "example.com:443", "limits", "max_bytes_out",
                                                   (json_int_t)1 << 30));
    CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, NULL, 1280, 800, NULL, &t, &tpath, sha, &ae), -1);
    CU_ASSERT_EQUAL(ae.status, 400);
    CU_ASSERT_STRING_EQUAL(ae.field, "task.network.limits.max_bytes_out");
    CU_ASSERT_PTR_NOT_NULL(strstr(ae.msg, "above the operator's maximum 268435456 (--max-egress-bytes)"));
    netpolicy net;
    netpolicy_init(&net);
    netpolicy_set_maxima(&net, 2ull << 30, 600);
    CU_ASSERT_EQUAL(api_parse_task(spec, "task", root, empty, &net, 1280, 800, NULL, &t, &tpath, sha, &ae), 0);
    CU_ASSERT_EQUAL(t->net.max_bytes_out, 1u << 30);
    task_free(t);
    json_decref(spec);
}

static void test_error_json(void)
{
    api_error ae;
    em_err err = {0};
    em_fail_input(&err, "config[2].parameters.command: missing");
    api_fail_em(&ae, &err, "task");
    CU_ASSERT_EQUAL(ae.status, 400);
    CU_ASSERT_STRING_EQUAL(ae.field, "task.config[2].parameters.command");
    em_fail_nomem(&err, 1u << 30, "a PNG's pixels"); /* out of memory: the request fails, the server stays */
    api_fail_em(&ae, &err, "");
    CU_ASSERT_EQUAL(ae.status, 503);
    em_fail(&err, "qemu died");
    api_fail_em(&ae, &err, "");
    CU_ASSERT_EQUAL(ae.status, 500);
    json_t *j = api_error_json(&ae);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "error")), "qemu died");
    CU_ASSERT_TRUE(json_is_null(json_object_get(j, "field")));
    json_decref(j);
}

/* ---- auth ---- */

static void test_auth(void)
{
    const char *tok = "0123456789abcdef0123456789abcdef";
    CU_ASSERT_TRUE(api_auth_bearer("Bearer 0123456789abcdef0123456789abcdef", tok));
    CU_ASSERT_TRUE(api_auth_bearer("bearer  0123456789abcdef0123456789abcdef ", tok));
    CU_ASSERT_FALSE(api_auth_bearer("Bearer 0123456789abcdef0123456789abcde", tok));
    CU_ASSERT_FALSE(api_auth_bearer("Bearer 0123456789abcdef0123456789abcdef0", tok));
    CU_ASSERT_FALSE(api_auth_bearer("Basic 0123456789abcdef0123456789abcdef", tok));
    CU_ASSERT_FALSE(api_auth_bearer("Bearer ", tok));
    CU_ASSERT_FALSE(api_auth_bearer(NULL, tok));
    CU_ASSERT_FALSE(api_auth_bearer("", tok));
    /* live-view tokens: one env, a kind, an expiry; the master token itself is no live token */
    char view[API_LIVE_TOKEN_MAX], ctl[API_LIVE_TOKEN_MAX], cookie[2 * API_LIVE_TOKEN_MAX];
    CU_ASSERT_EQUAL_FATAL(api_live_token_make(tok, "api1-1", false, 2000, view), 0);
    CU_ASSERT_EQUAL_FATAL(api_live_token_make(tok, "api1-1", true, 2000, ctl), 0);
    CU_ASSERT_TRUE(api_live_token_check(tok, view, "api1-1", false, 1999));
    CU_ASSERT_TRUE(api_live_token_check(tok, view, NULL, false, 2000));
    CU_ASSERT_FALSE(api_live_token_check(tok, view, "api1-1", false, 2001)); /* expired */
    CU_ASSERT_FALSE(api_live_token_check(tok, view, "api1-2", false, 1000)); /* another env */
    CU_ASSERT_FALSE(api_live_token_check(tok, view, "api1-1", true, 1000));  /* view is no control */
    CU_ASSERT_TRUE(api_live_token_check(tok, ctl, "api1-1", true, 1000));
    CU_ASSERT_FALSE(api_live_token_check("another-master-token-of-32-bytes", view, "api1-1", false, 1000));
    CU_ASSERT_FALSE(api_live_token_check(tok, tok, "api1-1", false, 1000));
    char forged[API_LIVE_TOKEN_MAX];
    snprintf(forged, sizeof forged, "%s", view);
    forged[65] = 'c'; /* view -> control without the key */
    CU_ASSERT_FALSE(api_live_token_check(tok, forged, "api1-1", true, 1000));
    snprintf(forged, sizeof forged, "%.66s9999999999.api1-1", view); /* a later expiry */
    CU_ASSERT_FALSE(api_live_token_check(tok, forged, "api1-1", false, 1000));
    snprintf(cookie, sizeof cookie, "a=b; envmgr_live_api1-1=%s; c=d", view);
    CU_ASSERT_TRUE(api_live_cookie_check(cookie, tok, "api1-1", false, 1000));
    CU_ASSERT_FALSE(api_live_cookie_check(cookie, tok, "api1-1", true, 1000));
    snprintf(cookie, sizeof cookie, "envmgr_token=%s", tok); /* the old master-token cookie opens nothing */
    CU_ASSERT_FALSE(api_live_cookie_check(cookie, tok, "api1-1", false, 1000));
    CU_ASSERT_FALSE(api_live_cookie_check(NULL, tok, NULL, false, 1000));
    /* What a live page's cookie may hold (issue 27): the master token earns a fresh hour; a
     * live-view token is passed on as it is, so the cookie never outlives the link and a reload
     * with the cookie alone renews nothing. */
    api_live_grant_t g;
    CU_ASSERT_TRUE(api_live_grant(tok, NULL, tok, true, "api1-1", true, 1000, &g));
    CU_ASSERT_TRUE(g.master && g.control && g.expires == 1000 + API_LIVE_TTL_S);
    CU_ASSERT_FALSE(api_live_grant(tok, NULL, tok, false, "api1-1", false, 1000, &g)); /* ?token= opens the page only */
    CU_ASSERT_TRUE(api_live_grant(tok, NULL, ctl, true, "api1-1", true, 1000, &g));
    CU_ASSERT_TRUE(!g.master && g.control && g.expires == 2000 && !strcmp(g.token, ctl));
    snprintf(cookie, sizeof cookie, "envmgr_live_api1-1=%s", ctl);
    CU_ASSERT_TRUE(api_live_grant(tok, cookie, NULL, true, "api1-1", true, 1999, &g));
    CU_ASSERT_TRUE(!g.master && g.expires == 2000 && !strcmp(g.token, ctl));   /* the same token back */
    CU_ASSERT_TRUE(api_live_grant(tok, cookie, NULL, false, "api1-1", true, 1999, &g)); /* the websocket */
    CU_ASSERT_FALSE(api_live_grant(tok, cookie, NULL, true, "api1-1", true, 2001, &g)); /* expired with its link */
    CU_ASSERT_FALSE(g.ok);
    CU_ASSERT_FALSE(api_live_grant(tok, cookie, NULL, true, "api1-2", false, 1000, &g)); /* another env */
    snprintf(cookie, sizeof cookie, "envmgr_live_api1-1=%s", view);
    CU_ASSERT_FALSE(api_live_grant(tok, cookie, NULL, false, "api1-1", true, 1000, &g)); /* view is no control */
    CU_ASSERT_TRUE(api_live_grant(tok, cookie, "not-a-token", true, "api1-1", false, 1000, &g)); /* falls back */
    CU_ASSERT_TRUE(!strcmp(g.token, view) && !g.control);
    CU_ASSERT_TRUE(api_token_equal(tok, tok));
    CU_ASSERT_FALSE(api_token_equal("", tok));
    char a[65], b[65];
    CU_ASSERT_EQUAL(api_token_generate(a, NULL), 0);
    CU_ASSERT_EQUAL(api_token_generate(b, NULL), 0);
    CU_ASSERT_EQUAL(strlen(a), 64);
    CU_ASSERT_STRING_NOT_EQUAL(a, b);
}

static void test_token_file(void)
{
    _cleanup_free_ char *path = xasprintf("%s/token", test_tmpdir());
    unlink(path);
    char *t1 = NULL, *t2 = NULL;
    bool created;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(api_token_load_or_create(path, &t1, &created, &err), 0);
    CU_ASSERT_TRUE(created);
    struct stat st;
    CU_ASSERT_EQUAL(stat(path, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
    CU_ASSERT_EQUAL_FATAL(api_token_load_or_create(path, &t2, &created, &err), 0);
    CU_ASSERT_FALSE(created);
    CU_ASSERT_STRING_EQUAL(t1, t2);
    free(t1);
    free(t2);
    chmod(path, 0644);
    CU_ASSERT_EQUAL(api_token_load_or_create(path, &t1, &created, &err), -1);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "readable by others"));
    write_file_atomic(path, "short\n", 6, 0600, NULL);
    CU_ASSERT_EQUAL(api_token_load_or_create(path, &t1, &created, &err), -1);
    unlink(path);
}

/* ---- metrics ---- */

static void test_metrics(void)
{
    api_metrics m;
    api_metrics_init(&m);
    api_metrics_reset_done(&m, 0.15, true);
    api_metrics_reset_done(&m, 0.04, true);
    api_metrics_reset_done(&m, 100, true);
    api_metrics_reset_done(&m, 0, false);
    api_metrics_add(&m, &m.actions, 5);
    api_metrics_http(&m, 404);
    char *text = api_metrics_render(&m, 2, 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nenvmgr_envs 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_resets_total 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_reset_failures_total 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_reset_seconds_bucket{le=\"0.05\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_reset_seconds_bucket{le=\"0.2\"} 2\n"));  /* cumulative */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_reset_seconds_bucket{le=\"30\"} 2\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_reset_seconds_bucket{le=\"+Inf\"} 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_reset_seconds_count 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_actions_total 5\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_egress_denied_total 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "envmgr_http_responses_total{class=\"4xx\"} 1\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# TYPE envmgr_reset_seconds histogram\n"));
    free(text);
    api_metrics_destroy(&m);
}

/* ---- websocket ---- */

static void test_ws_accept(void)
{
    char out[29];
    CU_ASSERT_EQUAL(ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out), 0); /* RFC 6455's example */
    CU_ASSERT_STRING_EQUAL(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    CU_ASSERT_EQUAL(ws_accept("", out), -1);
}

/* A masked client frame. */
static size_t client_frame(uint8_t *out, int opcode, const uint8_t *payload, size_t n)
{
    static const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t h = ws_header(out, opcode, n);
    out[1] |= 0x80;
    memcpy(out + h, mask, 4);
    for (size_t i = 0; i < n; i++)
        out[h + 4 + i] = payload[i] ^ mask[i % 4];
    return h + 4 + n;
}

static void test_ws_frames(void)
{
    uint8_t buf[70000 + 14], data[70000], payload[70000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7);
    size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 70000};
    for (size_t s = 0; s < ARRAY_LEN(sizes); s++) {
        size_t n = client_frame(buf, 2, payload, sizes[s]);
        /* fed byte by byte and whole, the payload comes out unmasked */
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            ws_parser p = {0};
            size_t dlen = 0, off = 0;
            ws_event ev;
            while (off < n) {
                size_t chunk = bytewise ? 1 : n - off;
                long used = ws_feed(&p, buf + off, chunk, data, sizeof data, &dlen, &ev);
                CU_ASSERT_FATAL(used > 0);
                CU_ASSERT_EQUAL(ev, WS_DATA);
                off += (size_t)used;
            }
            CU_ASSERT_EQUAL(dlen, sizes[s]);
            CU_ASSERT_EQUAL(memcmp(data, payload, sizes[s]), 0);
        }
    }
    /* ping then data in one read: the ping is reported first, then the rest */
    size_t n = client_frame(buf, 9, (const uint8_t *)"hi", 2);
    n += client_frame(buf + n, 2, (const uint8_t *)"RFB", 3);
    ws_parser p = {0};
    size_t dlen = 0;
    ws_event ev;
    long used = ws_feed(&p, buf, n, data, sizeof data, &dlen, &ev);
    CU_ASSERT_EQUAL(ev, WS_PING);
    CU_ASSERT_EQUAL(p.ctl_len, 2);
    CU_ASSERT_EQUAL(memcmp(p.ctl, "hi", 2), 0);
    used += ws_feed(&p, buf + used, n - (size_t)used, data, sizeof data, &dlen, &ev);
    CU_ASSERT_EQUAL((size_t)used, n);
    CU_ASSERT_EQUAL(dlen, 3);
    n = client_frame(buf, 8, (const uint8_t *)"\x03\xe8", 2);
    CU_ASSERT_EQUAL(ws_feed(&p, buf, n, data, sizeof data, &dlen, &ev), (long)n);
    CU_ASSERT_EQUAL(ev, WS_CLOSE);
    /* a full data buffer stops the parser; it goes on after draining */
    ws_parser q = {0};
    n = client_frame(buf, 2, payload, 100);
    dlen = 0;
    used = ws_feed(&q, buf, n, data, 10, &dlen, &ev);
    CU_ASSERT_EQUAL(dlen, 10);
    CU_ASSERT_TRUE(used < (long)n);
    dlen = 0;
    CU_ASSERT_EQUAL(ws_feed(&q, buf + used, n - (size_t)used, data, sizeof data, &dlen, &ev), (long)n - used);
    CU_ASSERT_EQUAL(dlen, 90);
    /* protocol violations */
    uint8_t unmasked[] = {0x82, 0x01, 'x'};
    ws_parser r = {0};
    CU_ASSERT_EQUAL(ws_feed(&r, unmasked, 3, data, sizeof data, &dlen, &ev), -1);
    uint8_t rsv[] = {0xc2, 0x80, 0, 0, 0, 0};
    memset(&r, 0, sizeof r);
    CU_ASSERT_EQUAL(ws_feed(&r, rsv, sizeof rsv, data, sizeof data, &dlen, &ev), -1);
    uint8_t bigping[] = {0x89, 0x80 | 126, 0, 200, 0, 0, 0, 0};
    memset(&r, 0, sizeof r);
    CU_ASSERT_EQUAL(ws_feed(&r, bigping, sizeof bigping, data, sizeof data, &dlen, &ev), -1);
    uint8_t badop[] = {0x83, 0x80, 0, 0, 0, 0};
    memset(&r, 0, sizeof r);
    CU_ASSERT_EQUAL(ws_feed(&r, badop, sizeof badop, data, sizeof data, &dlen, &ev), -1);
    uint8_t h[10];
    CU_ASSERT_EQUAL(ws_header(h, 2, 5), 2);
    CU_ASSERT_EQUAL(h[0], 0x82);
    CU_ASSERT_EQUAL(ws_header(h, 2, 300), 4);
    CU_ASSERT_EQUAL(ws_header(h, 2, 1 << 20), 10);
}

/* ---- the view-only filter ---- */

static long feed_all(rfb_filter *f, const uint8_t *in, size_t n, uint8_t *out, bool bytewise, uint8_t *replies,
                     size_t *nreplies)
{
    long total = 0;
    for (size_t off = 0; off < n;) {
        size_t k = bytewise ? 1 : n - off;
        long m = rfb_filter_feed(f, in + off, k, out + total);
        if (replies) {
            memcpy(replies + *nreplies, f->reply, f->reply_len);
            *nreplies += f->reply_len;
        }
        if (m < 0)
            return -1;
        total += m;
        off += k;
    }
    return total;
}

static void test_rfb_filter(void)
{
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        uint8_t in[512], out[512 + 4200], rep[256];
        size_t n = 0, nrep = 0;
        memcpy(in + n, "RFB 003.008\n", 12);
        n += 12;
        in[n++] = 1;  /* security: None */
        in[n++] = 0;  /* ClientInit: exclusive (!) */
        uint8_t spf[20] = {0, 0xaa, 0xbb, 0xcc, 32, 24, 7, 9, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0xdd, 0xee, 0xff};
        memcpy(in + n, spf, 20);
        n += 20;                                 /* SetPixelFormat: rebuilt (padding zero, flags 0/1) */
        uint8_t enc[] = {2, 9, 0, 5, 0, 0, 0, 7, 0xff, 0xff, 0xfe, 0xfe,  /* Tight, -258 (QEMU keys) */
                         0xff, 0xff, 0xff, 0x21, 0, 0, 0, 0, 0xff, 0xff, 0xfe, 0xc7}; /* DesktopSize, Raw, -313 */
        memcpy(in + n, enc, sizeof enc);
        n += sizeof enc;
        uint8_t key[8] = {4, 1, 0, 0, 0, 0, 0, 0x61};
        memcpy(in + n, key, 8);
        n += 8;                                   /* KeyEvent: dropped */
        uint8_t ptr[6] = {5, 1, 0, 10, 0, 10};
        memcpy(in + n, ptr, 6);
        n += 6;                                   /* PointerEvent: dropped */
        uint8_t cut[8 + 5] = {6, 0, 0, 0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'};
        memcpy(in + n, cut, sizeof cut);
        n += sizeof cut;                 /* ClientCutText: dropped */
        uint8_t req[10] = {3, 7, 0, 0, 0, 0, 5, 0, 3, 0x20};
        memcpy(in + n, req, 10);
        n += 10;                                 /* FramebufferUpdateRequest: rebuilt (incremental 0/1) */
        rfb_filter f;
        em_err err = {0};
        CU_ASSERT_EQUAL_FATAL(rfb_filter_init(&f, true, NULL, &err), 0);
        long m = feed_all(&f, in, n, out, bytewise, rep, &nrep);
        CU_ASSERT_FATAL(m > 0);
        CU_ASSERT_TRUE(f.ready);
        /* the viewer heard: one security type (None), then SecurityResult OK */
        CU_ASSERT_EQUAL(nrep, 6);
        CU_ASSERT_EQUAL(memcmp(rep, "\x01\x01\0\0\0\0", 6), 0);
        /* QEMU gets messages only (the relay has its own handshake with it), each one rebuilt */
        size_t o = 0;
        uint8_t want_spf[20] = {0, 0, 0, 0, 32, 24, 1, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0};
        CU_ASSERT_EQUAL(memcmp(out + o, want_spf, 20), 0);
        o += 20;
        uint8_t want_enc[] = {2, 0, 0, 3, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0x21, 0, 0, 0, 0};
        CU_ASSERT_EQUAL(memcmp(out + o, want_enc, sizeof want_enc), 0);
        o += sizeof want_enc;
        uint8_t want_req[10] = {3, 1, 0, 0, 0, 0, 5, 0, 3, 0x20};
        CU_ASSERT_EQUAL(memcmp(out + o, want_req, 10), 0);
        o += 10;
        CU_ASSERT_EQUAL((size_t)m, o);
        CU_ASSERT_EQUAL(f.dropped, 3);
    }
    uint8_t out[64];
    em_err err = {0};
    /* only RFB 3.8, byte for byte: anything else could be read differently by a server */
    const char *bad[] = {"HTTP/1.1 200", "RFB 003.003\n", "RFB 003.  7\n", "RFB 003.008\r",
                         "RFB 003.008\n\x02", "RFB 003.008\n\x01\x01\xff\x00", "RFB 003.008\n\x01\x01\x07"};
    const size_t badlen[] = {12, 12, 12, 12, 13, 16, 15};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        rfb_filter g;
        rfb_filter_init(&g, true, NULL, &err);
        CU_ASSERT_EQUAL(rfb_filter_feed(&g, (const uint8_t *)bad[i], badlen[i], out), -1);
    }
    /* SetEncodings with more entries than a message may gather: refused */
    rfb_filter g;
    rfb_filter_init(&g, true, NULL, &err);
    uint8_t big[] = {'R', 'F', 'B', ' ', '0', '0', '3', '.', '0', '0', '8', '\n', 1, 1, 2, 0, 0xff, 0xff};
    CU_ASSERT_EQUAL(rfb_filter_feed(&g, big, sizeof big, out), -1);
}

/* libvncclient's VNC authentication (d3des), exported by the library but not declared in its header */
void rfbClientEncryptBytes(unsigned char *bytes, char *passwd);

/* VNC authentication: the viewer must answer the challenge with the password; libvncclient's own
 * implementation (what real viewers compute) checks our DES and bit-reversed key. */
static void test_rfb_auth(void)
{
    em_err err = {0};
    uint8_t ch[16], resp[16];
    for (int i = 0; i < 16; i++)
        ch[i] = (uint8_t)i;
    CU_ASSERT_EQUAL_FATAL(vnc_auth_response("password", ch, resp, &err), 0);
    uint8_t want[16];
    memcpy(want, ch, 16);
    char pw[] = "password";
    rfbClientEncryptBytes(want, pw);
    CU_ASSERT_EQUAL(memcmp(resp, want, 16), 0);
    for (int right = 0; right < 2; right++) {
        rfb_filter f;
        CU_ASSERT_EQUAL_FATAL(rfb_filter_init(&f, true, "s3cretpw", &err), 0);
        uint8_t out[64];
        CU_ASSERT_EQUAL(rfb_filter_feed(&f, (const uint8_t *)"RFB 003.008\n", 12, out), 0);
        CU_ASSERT_EQUAL(f.reply_len, 2);
        CU_ASSERT_EQUAL(f.reply[1], 2); /* VNC authentication is the only type offered */
        CU_ASSERT_EQUAL(rfb_filter_feed(&f, (const uint8_t *)"\x02", 1, out), 0);
        CU_ASSERT_EQUAL_FATAL(f.reply_len, 16);
        uint8_t answer[16];
        CU_ASSERT_EQUAL_FATAL(vnc_auth_response(right ? "s3cretpw" : "guess123", f.reply, answer, &err), 0);
        long m = rfb_filter_feed(&f, answer, 16, out);
        if (right) {
            CU_ASSERT_EQUAL(m, 0);
            CU_ASSERT_EQUAL(memcmp(f.reply, "\0\0\0\0", 4), 0);
        } else {
            CU_ASSERT_EQUAL(m, -1);
            CU_ASSERT_EQUAL(f.reply[3], 1); /* SecurityResult failed, with a reason */
            CU_ASSERT_FALSE(f.ready);
        }
    }
}

/* ---- tar ---- */

static void test_tar_header(void)
{
    uint8_t h[512];
    CU_ASSERT_EQUAL(api_tar_header(h, "trace/trace.jsonl", 1234, 1700000000), 0);
    CU_ASSERT_STRING_EQUAL((char *)h, "trace/trace.jsonl");
    CU_ASSERT_EQUAL(strncmp((char *)h + 124, "00000002322", 11), 0);
    CU_ASSERT_EQUAL(memcmp(h + 257, "ustar", 6), 0);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    CU_ASSERT_EQUAL(strtoul((char *)h + 148, NULL, 8), sum);
    char name[200];
    snprintf(name, sizeof name, "trace/frames/%064d.png", 0);
    CU_ASSERT_EQUAL(strlen(name), 81);
    CU_ASSERT_EQUAL(api_tar_header(h, name, 1, 0), 0);
    char longname[300];
    memset(longname, 'a', 150);
    longname[150] = '/';
    memset(longname + 151, 'b', 60);
    longname[211] = '\0';
    CU_ASSERT_EQUAL(api_tar_header(h, longname, 1, 0), 0); /* split into prefix and name */
    CU_ASSERT_EQUAL(h[345 + 149], 'a');
    CU_ASSERT_EQUAL(h[0], 'b');
    memset(longname, 'c', 250);
    longname[250] = '\0';
    CU_ASSERT_EQUAL(api_tar_header(h, longname, 1, 0), -1);
}

/* ---- the connection gate (issue 27): request heads, credentials, the book of held connections ---- */

#define HEAD_END(lit) api_gate_head_end(lit, sizeof lit - 1)

static void test_gate_head_end(void)
{
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 27);
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\nHost: x\r\n\r\n{\"a\": 1}"), 27); /* a body is not the head */
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\nHost: x\n\n"), 24);                  /* bare LF, as MHD reads it */
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\nHost: x\r\n\n"), 26);
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\nHost: x\r\n"), 0);
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\nHost: x\r\n\r"), 0);
    CU_ASSERT_EQUAL(HEAD_END(""), 0);
    /* empty lines before the request line are skipped by MHD: they end nothing, or a client
     * could pass the gate with a blank line and trickle its request to MHD */
    CU_ASSERT_EQUAL(HEAD_END("\r\n\r\n\n"), 0);
    CU_ASSERT_EQUAL(HEAD_END("\r\n\r\nGET / HTTP/1.1\r\n"), 0);
    CU_ASSERT_EQUAL(HEAD_END("\r\nGET / HTTP/1.1\r\n\r\n"), 20);
    /* MHD takes a line starting with NUL for an empty one */
    CU_ASSERT_EQUAL(HEAD_END("\0\r\n\r\nGET / HTTP/1.1\r\n"), 0);
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\n\0x\r\nHost: x"), 20);
    /* a CR before CR LF is a line of its own, not an empty one */
    CU_ASSERT_EQUAL(HEAD_END("GET / HTTP/1.1\r\n\r\r\n"), 0);
}

static bool head_cred(const char *head, const char *master, long now)
{
    char *copy = xstrdup(head); /* parsed in place */
    bool ok = api_gate_head_credential(copy, strlen(copy), master, now);
    free(copy);
    return ok;
}

static void test_gate_head_credential(void)
{
    const char *tok = "0123456789abcdef0123456789abcdef";
    char h[4096], view[API_LIVE_TOKEN_MAX], ctl[API_LIVE_TOKEN_MAX], other[API_LIVE_TOKEN_MAX];
    CU_ASSERT_EQUAL_FATAL(api_live_token_make(tok, "api1-1", false, 2000, view), 0);
    CU_ASSERT_EQUAL_FATAL(api_live_token_make(tok, "api1-1", true, 2000, ctl), 0);
    CU_ASSERT_EQUAL_FATAL(api_live_token_make(tok, "api1-2", true, 2000, other), 0);
    snprintf(h, sizeof h, "GET /v1/envs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", tok);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    snprintf(h, sizeof h, "POST /v1/envs/api1-1/step HTTP/1.1\nauthorization:   bearer %s \n\n", tok);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    CU_ASSERT_FALSE(head_cred("GET /v1/envs HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdef\r\n\r\n", tok, 1000));
    CU_ASSERT_FALSE(head_cred("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n", tok, 1000)); /* public, but no credential */
    /* the first Authorization counts, as MHD_lookup_connection_value finds it */
    snprintf(h, sizeof h, "GET /v1/envs HTTP/1.1\r\nAuthorization: Bearer x\r\nAuthorization: Bearer %s\r\n\r\n", tok);
    CU_ASSERT_FALSE(head_cred(h, tok, 1000));
    /* a header after the head's end is no part of it */
    snprintf(h, sizeof h, "GET /v1/envs HTTP/1.1\r\n\r\nAuthorization: Bearer %s\r\n\r\n", tok);
    CU_ASSERT_FALSE(head_cred(h, tok, 1000));
    /* unknown paths: the bearer token alone */
    snprintf(h, sizeof h, "GET /nowhere HTTP/1.1\r\nAuthorization: Bearer %s\r\n\r\n", tok);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    CU_ASSERT_FALSE(head_cred("GET /nowhere HTTP/1.1\r\n\r\n", tok, 1000));
    CU_ASSERT_FALSE(head_cred("GARBAGE\r\n\r\n", tok, 1000));
    /* the live page: ?token= (master or live-view token for this env), its cookie */
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live?a=1&token=%s HTTP/1.1\r\n\r\n", tok);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live?token=%s&control=1 HTTP/1.1\r\n\r\n", ctl);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live?control=1&token=%s HTTP/1.1\r\n\r\n", view);
    CU_ASSERT_FALSE(head_cred(h, tok, 1000)); /* a view token opens no control page */
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live?token=%s HTTP/1.1\r\n\r\n", other);
    CU_ASSERT_FALSE(head_cred(h, tok, 1000)); /* another env's */
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live?token=%s HTTP/1.1\r\n\r\n", view);
    CU_ASSERT_FALSE(head_cred(h, tok, 2001)); /* expired */
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live/ws HTTP/1.1\r\nCookie: a=b; envmgr_live_api1-1=%s\r\n\r\n", view);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    snprintf(h, sizeof h, "GET /v1/envs/api1-1/live/ws?token=%s HTTP/1.1\r\n\r\n", tok);
    CU_ASSERT_FALSE(head_cred(h, tok, 1000)); /* the websocket takes the cookie only */
    snprintf(h, sizeof h, "GET /v1/novnc/app/ui.js HTTP/1.1\r\nCookie: envmgr_live_api1-2=%s\r\n\r\n", other);
    CU_ASSERT_TRUE(head_cred(h, tok, 1000));
    snprintf(h, sizeof h, "GET /v1/envs HTTP/1.1\r\nCookie: envmgr_live_api1-1=%s\r\n\r\n", view);
    CU_ASSERT_FALSE(head_cred(h, tok, 1000)); /* a live cookie opens no API endpoint */
}

static api_gate_conn gate_conn(int fd, const char *ip)
{
    api_gate_conn c = {.fd = fd};
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &sa.sin_addr);
    api_gate_addr_key((struct sockaddr *)&sa, sizeof sa, c.key);
    return c;
}

static void test_gate_book(void)
{
    uint8_t k1[16], k2[16];
    struct sockaddr_in a = {.sin_family = AF_INET}, b = a;
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    inet_pton(AF_INET, "127.0.0.2", &b.sin_addr);
    api_gate_addr_key((struct sockaddr *)&a, sizeof a, k1);
    api_gate_addr_key((struct sockaddr *)&b, sizeof b, k2);
    CU_ASSERT_NOT_EQUAL(memcmp(k1, k2, 16), 0);
    a.sin_port = 1234; /* the port is no part of the address */
    api_gate_addr_key((struct sockaddr *)&a, sizeof a, k2);
    CU_ASSERT_EQUAL(memcmp(k1, k2, 16), 0);
    struct sockaddr_in6 m = {.sin6_family = AF_INET6}, v6 = m;
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.sin6_addr); /* IPv4-mapped: the IPv4 address */
    api_gate_addr_key((struct sockaddr *)&m, sizeof m, k2);
    CU_ASSERT_EQUAL(memcmp(k1, k2, 16), 0);
    inet_pton(AF_INET6, "2001:db8:1:2::1", &v6.sin6_addr); /* IPv6: its /64 */
    api_gate_addr_key((struct sockaddr *)&v6, sizeof v6, k1);
    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &v6.sin6_addr);
    api_gate_addr_key((struct sockaddr *)&v6, sizeof v6, k2);
    CU_ASSERT_EQUAL(memcmp(k1, k2, 16), 0);
    inet_pton(AF_INET6, "2001:db8:1:3::1", &v6.sin6_addr);
    api_gate_addr_key((struct sockaddr *)&v6, sizeof v6, k2);
    CU_ASSERT_NOT_EQUAL(memcmp(k1, k2, 16), 0);
    struct sockaddr_un u1 = {.sun_family = AF_UNIX}, u2 = u1;
    api_gate_addr_key((struct sockaddr *)&u1, sizeof(sa_family_t), k1);
    snprintf(u2.sun_path, sizeof u2.sun_path, "/x");
    api_gate_addr_key((struct sockaddr *)&u2, sizeof u2, k2);
    CU_ASSERT_EQUAL(memcmp(k1, k2, 16), 0); /* every unix-socket client is one address */

    /* per address: its oldest goes; another address is not touched */
    api_gate_book *bk = xcalloc(1, sizeof *bk);
    api_gate_conn x = gate_conn(100, "10.0.0.1"), y = gate_conn(200, "10.0.0.2");
    for (int i = 0; i < 3; i++) {
        y.fd = 200 + i;
        CU_ASSERT_EQUAL(api_gate_book_victim(bk, y.key, 3, 8), -1);
        api_gate_book_add(bk, &y);
        x.fd = 100 + i;
        CU_ASSERT_EQUAL(api_gate_book_victim(bk, x.key, 3, 8), -1);
        api_gate_book_add(bk, &x);
    }
    CU_ASSERT_EQUAL(api_gate_book_count(bk, x.key), 3);
    int v = api_gate_book_victim(bk, x.key, 3, 8);
    CU_ASSERT_EQUAL_FATAL(v, 1);
    CU_ASSERT_EQUAL(bk->c[v].fd, 100);
    api_gate_book_remove(bk, v);
    CU_ASSERT_EQUAL(api_gate_book_find(bk, 100), -1);
    CU_ASSERT_EQUAL(api_gate_book_find(bk, 200), 0); /* order kept: the oldest first */
    CU_ASSERT_EQUAL(api_gate_book_find(bk, 101), 2);
    x.fd = 103;
    api_gate_book_add(bk, &x);
    CU_ASSERT_EQUAL(api_gate_book_victim(bk, x.key, 3, 8), api_gate_book_find(bk, 101));
    /* in all: the oldest of anyone's when the book is full */
    api_gate_conn z = gate_conn(300, "10.0.0.3");
    CU_ASSERT_EQUAL(api_gate_book_victim(bk, z.key, 3, 8), -1);
    api_gate_book_add(bk, &z);
    api_gate_conn w = gate_conn(400, "10.0.0.4");
    CU_ASSERT_EQUAL(bk->n, 7);
    api_gate_book_add(bk, &w);
    CU_ASSERT_EQUAL(api_gate_book_victim(bk, gate_conn(500, "10.0.0.5").key, 3, 8), 0);
    api_gate_book_remove(bk, 0);
    CU_ASSERT_EQUAL(bk->c[0].fd, 201);
    api_gate_book_remove(bk, 99); /* out of range: nothing */
    CU_ASSERT_EQUAL(bk->n, 7);
    free(bk);
}

static CU_TestInfo tests[] = {
    {"routes", test_routes},
    {"route errors", test_route_errors},
    {"bodies", test_body},
    {"step bodies use the CLI's parsers", test_step_bodies},
    {"task specs", test_task_spec},
    {"error JSON", test_error_json},
    {"auth", test_auth},
    {"token file", test_token_file},
    {"metrics text", test_metrics},
    {"websocket accept", test_ws_accept},
    {"websocket frames", test_ws_frames},
    {"view-only RFB filter", test_rfb_filter},
    {"VNC authentication for TCP viewers", test_rfb_auth},
    {"tar headers", test_tar_header},
    {"gate: where a request head ends", test_gate_head_end},
    {"gate: a credential in a request head", test_gate_head_credential},
    {"gate: held connections per address and in all", test_gate_book},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("api", tests);
}

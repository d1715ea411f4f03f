/* The getters OSWorld's server answers itself (guest interface osworld: em_env_ops' server callback):
 * accessibility_tree from GET /accessibility, vm_wallpaper from POST /wallpaper, vm_window_size from
 * POST /window_size; a refusal or a malformed answer is the getter's one-line error. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "helpers/cunit_main.h"

typedef struct server {
    long status;
    const char *reply;
    char path[64];
    char body[256]; /* what was POSTed ("" for a GET) */
} server;

static int fake_server(void *ctx, const char *path, json_t *body, size_t cap, long *status, char **data, size_t *len,
                       em_err *err)
{
    server *s = ctx;
    snprintf(s->path, sizeof s->path, "%s", path);
    char *b = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    snprintf(s->body, sizeof s->body, "%s", b ? b : "");
    free(b);
    *status = s->status;
    *data = xstrdup(s->reply);
    *len = strlen(s->reply);
    return 0;
}

static json_t *run(server *s, const char *spec_json, em_err *err)
{
    em_env_ops ops = {.ctx = s, .server = fake_server, .screen_w = 1920, .screen_h = 1080};
    json_t *spec = json_loads(spec_json, 0, NULL), *art = NULL;
    memset(err, 0, sizeof *err);
    if (getter_run(&ops, spec, test_tmpdir(), test_tmpdir(), &art, err) < 0)
        art = NULL;
    json_decref(spec);
    return art;
}

static void test_a11y(void)
{
    em_err err;
    server s = {.status = 200, .reply = "{\"AT\": \"<desktop-frame/>\"}"};
    json_t *a = run(&s, "{\"type\": \"accessibility_tree\"}", &err);
    CU_ASSERT_STRING_EQUAL(s.path, "/accessibility");
    CU_ASSERT_STRING_EQUAL(s.body, ""); /* a GET */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a, "value")), "<desktop-frame/>");
    json_decref(a);
    s = (server){.status = 500, .reply = "Currently not implemented for platform Linux.\n\x01"};
    CU_ASSERT_PTR_NULL(run(&s, "{\"type\": \"accessibility_tree\"}", &err));
    CU_ASSERT_STRING_EQUAL(err.msg, "accessibility_tree: OSWorld's server /accessibility answered 500: Currently not "
                                    "implemented for platform Linux.");
    s = (server){.status = 200, .reply = "{\"AT\": 7}"};
    CU_ASSERT_PTR_NULL(run(&s, "{\"type\": \"accessibility_tree\"}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "answered no {\"AT\": string}"));
}

static void test_window_size(void)
{
    em_err err;
    server s = {.status = 200, .reply = "{\"width\": 800, \"height\": 600}"};
    json_t *a = run(&s, "{\"type\": \"vm_window_size\", \"app_class_name\": \"gedit\"}", &err);
    CU_ASSERT_STRING_EQUAL(s.path, "/window_size");
    CU_ASSERT_STRING_EQUAL(s.body, "{\"app_class_name\":\"gedit\"}");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(a, "value"), "width")), 800);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(a, "value"), "height")), 600);
    json_decref(a);
    s = (server){.status = 200, .reply = "{\"width\": \"800\", \"height\": 600}"};
    CU_ASSERT_PTR_NULL(run(&s, "{\"type\": \"vm_window_size\", \"app_class_name\": \"gedit\"}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "answered no {width, height} for `gedit`"));
}

static void test_wallpaper(void)
{
    em_err err;
    server s = {.status = 200, .reply = "PNG-bytes"};
    json_t *a = run(&s, "{\"type\": \"vm_wallpaper\", \"dest\": \"wall.png\"}", &err);
    CU_ASSERT_STRING_EQUAL(s.path, "/wallpaper");
    CU_ASSERT_STRING_EQUAL(s.body, "{}"); /* a POST, as OSWorld's */
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    const char *p = json_string_value(json_object_get(a, "path"));
    char *data = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(read_file_capped(p, 100, &data, &n, &err), 0);
    CU_ASSERT_STRING_EQUAL(data, "PNG-bytes");
    free(data);
    json_decref(a);
    s = (server){.status = 404, .reply = "Wallpaper file not found"};
    CU_ASSERT_PTR_NULL(run(&s, "{\"type\": \"vm_wallpaper\", \"dest\": \"wall.png\"}", &err));
    CU_ASSERT_STRING_EQUAL(err.msg, "vm_wallpaper: OSWorld's server /wallpaper answered 404: Wallpaper file not found");
}

static CU_TestInfo tests[] = {
    {"accessibility_tree through /accessibility", test_a11y},
    {"vm_window_size through /window_size", test_window_size},
    {"vm_wallpaper through /wallpaper", test_wallpaper},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("getters_server", tests);
}

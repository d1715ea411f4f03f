/* The apps' and the browser's getters: what the guest toolbelt answers, parsed into OSWorld's
 * result shapes (getter_parse.c), and the getters run through an env whose exec hands back a
 * canned envmgr-guest answer (the real toolbelt is exercised in tests/integration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/util.h"
#include "evaluator/getter_parse.h"
#include "evaluator/getters.h"
#include "helpers/cunit_main.h"

static void test_toolbelt_answer(void)
{
    em_err err = {0};
    json_t *a = NULL;
    CU_ASSERT_EQUAL(toolbelt_answer("bookmarks", "", 0, TOOLBELT_MISSING, &a, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bookmarks: the image has no guest toolbelt (envmgr-guest)"));
    CU_ASSERT_EQUAL(toolbelt_answer("history", "", 0, -1, &a, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "history: envmgr-guest did not answer in time");
    const char *bad = "Traceback (most recent call last)";
    CU_ASSERT_EQUAL(toolbelt_answer("history", bad, strlen(bad), 1, &a, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "history: envmgr-guest exited with status 1 without a JSON answer");
    const char *rep = "{\"error\": \"no Chrome profile under /home/user/.config\"}\n";
    CU_ASSERT_EQUAL(toolbelt_answer("profile_name", rep, strlen(rep), 1, &a, &err), TOOLBELT_REPORTED);
    CU_ASSERT_STRING_EQUAL(err.msg, "profile_name: no Chrome profile under /home/user/.config");
    const char *twice = "{\"a\": 1, \"a\": 2}";
    CU_ASSERT_EQUAL(toolbelt_answer("x", twice, strlen(twice), 0, &a, &err), -1); /* duplicate keys refused */
    const char *ok = "{\"width\": 1920, \"height\": 1080}";
    CU_ASSERT_EQUAL(toolbelt_answer("x", ok, strlen(ok), 0, &a, &err), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(a, "width")), 1920);
    json_decref(a);
}

static void test_address_bar(void)
{
    const char *xml =
        "<desktop-frame><application name=\"Thunar\"><entry name=\"Address and search bar\">nope</entry></application>"
        "<application name=\"Google Chrome\"><frame name=\"x\"><entry name=\"Find\">f</entry>"
        "<entry st:focused=\"true\" name=\"Address and search bar\" cp:size=\"(1, 2)\">example.com/a?q=1&amp;b=&lt;2&gt;"
        "</entry></frame></application></desktop-frame>";
    char *u = a11y_address_bar(xml, strlen(xml));
    CU_ASSERT_STRING_EQUAL(u, "example.com/a?q=1&b=<2>");
    free(u);
    const char *empty = "<application name=\"Chromium\"><entry name=\"Address and search bar\"></entry></application>";
    CU_ASSERT_PTR_NULL(a11y_address_bar(empty, strlen(empty)));
    const char *cut = "<application name=\"Google Chrome\"><entry name=\"Address and search bar\"";
    CU_ASSERT_PTR_NULL(a11y_address_bar(cut, strlen(cut)));
    CU_ASSERT_PTR_NULL(a11y_address_bar("", 0));
}

static void test_url_pieces(void)
{
    json_t *keys = json_pack("[s, s, s]", "q", "tbm", "none");
    json_t *repl = json_pack("{s:s}", "tbm", "kind");
    json_t *v = url_query_pick("https://www.google.com/search?q=hello+world%21&tbm=isch&q=second&empty=#frag", keys,
                               repl);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(v, "q")), "hello world!");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(v, "kind")), "isch");
    CU_ASSERT_PTR_NULL(json_object_get(v, "tbm"));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(v, "none")), "");
    json_decref(v);
    v = url_query_pick("https://a.org/no-query", keys, NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(v, "q")), "");
    json_decref(v);
    json_decref(keys);
    json_decref(repl);

    char *p = url_dash_part("https://www.x.com/a/b-c?id=3", -1, true);
    CU_ASSERT_STRING_EQUAL(p, "b-c");
    free(p);
    p = url_dash_part("https://www.x.com/a/b-c?id=3", -1, false);
    CU_ASSERT_STRING_EQUAL(p, "b-c?id=3");
    free(p);
    p = url_dash_part("https://www.x.com/a/b-c", -2, false);
    CU_ASSERT_STRING_EQUAL(p, "a");
    free(p);
    p = url_dash_part("https://www.x.com/a", 2, false);
    CU_ASSERT_STRING_EQUAL(p, "www.x.com");
    free(p);
    CU_ASSERT_PTR_NULL(url_dash_part("https://x.com", 5, false));
    CU_ASSERT_PTR_NULL(url_dash_part("https://x.com", -5, false));
}

/* ---- getters through an env that answers like envmgr-guest ---- */

typedef struct canned {
    const char *out;
    int code;
    char argv_all[512]; /* the last exec's argv, space-joined */
} canned;

static int canned_exec(void *ctx, const char *const *argv, unsigned flags, double timeout_s, size_t cap, char **out,
                       size_t *len, int *code, em_err *err)
{
    canned *c = ctx;
    c->argv_all[0] = '\0';
    for (size_t i = 0; argv[i]; i++)
        snprintf(c->argv_all + strlen(c->argv_all), sizeof c->argv_all - strlen(c->argv_all), "%s ", argv[i]);
    if (strstr(c->argv_all, "envmgr-guest"))
        CU_ASSERT_TRUE(cap >= (8u << 20)); /* at least the accessibility tree's own cap */
    *out = xstrdup(c->out);
    *len = strlen(c->out);
    *code = c->code;
    return 0;
}

static json_t *run_spec(canned *c, const char *spec_json, em_err *err)
{
    em_env_ops ops = {.ctx = c, .exec = canned_exec, .screen_w = 1920, .screen_h = 1080};
    json_t *spec = json_loads(spec_json, 0, NULL), *art = NULL;
    CU_ASSERT_EQUAL(getter_check(spec, err), 0);
    if (getter_run(&ops, NULL, spec, test_tmpdir(), test_tmpdir(), &art, err) < 0)
        art = NULL;
    json_decref(spec);
    return art;
}

static void test_getters_shapes(void)
{
    em_err err = {0};
    canned c = {.out = "{\"port\": 1337, \"tabs\": [{\"id\": \"A\", \"title\": \"T\", \"url\": \"https://a.org/\", "
                       "\"visible\": true}], \"active\": null}", .code = 0};
    json_t *art = run_spec(&c, "{\"type\": \"open_tabs_info\"}", &err);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, "envmgr-guest"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, "chrome-tabs"));
    char *s = json_dumps(json_object_get(art, "value"), JSON_SORT_KEYS | JSON_COMPACT);
    CU_ASSERT_STRING_EQUAL(s, "[{\"title\":\"T\",\"url\":\"https://a.org/\"}]");
    free(s);
    json_decref(art);

    c = (canned){.out = "{\"enable_do_not_track\": true, \"profile_name\": \"Thomas\", \"extensions\": "
                        "[{\"id\": \"e\", \"path\": \"/p\", \"name\": \"Ext\"}]}"};
    art = run_spec(&c, "{\"type\": \"enable_do_not_track\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "value")), "true");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "type")), "text");
    json_decref(art);
    art = run_spec(&c, "{\"type\": \"find_installed_extension_name\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(art, "value"), 0)), "Ext");
    json_decref(art);

    /* no profile: OSWorld's fallback values, not an error */
    c = (canned){.out = "{\"error\": \"no Chrome profile\"}", .code = 1};
    art = run_spec(&c, "{\"type\": \"default_search_engine\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "value")), "Google");
    json_decref(art);
    art = run_spec(&c, "{\"type\": \"bookmarks\"}", &err);
    CU_ASSERT_TRUE(json_is_array(json_object_get(art, "value")));
    json_decref(art);

    /* an image without the toolbelt */
    c = (canned){.out = "", .code = TOOLBELT_MISSING};
    CU_ASSERT_PTR_NULL(run_spec(&c, "{\"type\": \"accessibility_tree\"}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "accessibility_tree: the image has no guest toolbelt (envmgr-guest)"));

    /* the whole tree for metrics; only what is showing when asked (the observations ask) */
    c = (canned){.out = "{\"AT\": \"<desktop-frame/>\"}"};
    art = run_spec(&c, "{\"type\": \"accessibility_tree\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "value")), "<desktop-frame/>");
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, "envmgr-guest \"$@\" sh --max-bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, " a11y-tree "));
    CU_ASSERT_PTR_NULL(strstr(c.argv_all, "--showing"));
    json_decref(art);
    art = run_spec(&c, "{\"type\": \"accessibility_tree\", \"showing\": true}", &err);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, " a11y-tree --showing "));
    json_decref(art);
    json_t *bad_flag = json_loads("{\"type\": \"accessibility_tree\", \"showing\": \"maybe\"}", 0, NULL);
    CU_ASSERT_EQUAL(getter_check(bad_flag, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "showing: expected true or false, got string"));
    json_decref(bad_flag);

    c = (canned){.out = "{\"AT\": \"<desktop-frame><application name=\\\"Google Chrome\\\"><entry name=\\\"Address "
                        "and search bar\\\">x.org/p/q-r?id=1</entry></application></desktop-frame>\"}"};
    art = run_spec(&c, "{\"type\": \"url_dashPart\", \"goto_prefix\": \"https://www.\", \"partIndex\": -1, "
                       "\"needDeleteId\": true, \"returnType\": \"json\", \"key\": \"k\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(art, "value"), "k")), "q-r");
    json_decref(art);
    art = run_spec(&c, "{\"type\": \"active_url_from_accessTree\", \"goto_prefix\": \"https://www.\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "value")), "https://www.x.org/p/q-r?id=1");
    json_decref(art);

    c = (canned){.out = "/usr/bin/nothing\n", .code = 1};
    CU_ASSERT_PTR_NULL(run_spec(&c, "{\"type\": \"vscode_config\", \"path\": \"x\", \"dest\": \"y\"}", &err));
    CU_ASSERT_STRING_EQUAL(err.msg, "vscode_config: needs VS Code, which this image does not have (no `code` command)");

    c = (canned){.out = "vlc.desktop\nmpv.desktop\nmpv.desktop\nvlc.desktop\n\nvlc.desktop\n"};
    art = run_spec(&c, "{\"type\": \"default_video_player\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "value")), "vlc.desktop");
    json_decref(art);
    c = (canned){.out = ""};
    art = run_spec(&c, "{\"type\": \"default_video_player\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "value")), "unknown"); /* as OSWorld */
    json_decref(art);

    json_t *bad = json_loads("{\"type\": \"gimp_config_file\", \"file_name\": \"../x\", \"dest\": \"d\"}", 0, NULL);
    CU_ASSERT_EQUAL(getter_check(bad, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "file_name"));
    json_decref(bad);
}

static CU_TestInfo tests[] = {
    {"toolbelt answers: missing, timeout, reported error, not JSON, ok", test_toolbelt_answer},
    {"the address bar in an OSWorld-shaped tree", test_address_bar},
    {"url_query_pick and url_dash_part as OSWorld's Python", test_url_pieces},
    {"app and browser getters give OSWorld's shapes", test_getters_shapes},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("getters_apps", tests);
}

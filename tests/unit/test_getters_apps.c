/* The apps' and the browser's getters: what the guest toolbelt answers, parsed into OSWorld's
 * result shapes (getter_parse.c), and the getters run through an env whose exec hands back a
 * canned envmgr-guest answer (the real toolbelt is exercised in tests/integration). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "envmgr/base/base64.h"
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
    char argv_all[1024]; /* the last exec's argv, space-joined */
    const char *seq[4];  /* when set: the answers of the first calls, in order (then out) */
    int calls;
} canned;

static int canned_exec(void *ctx, const char *const *argv, unsigned flags, double timeout_s, size_t cap, char **out,
                       size_t *len, char **err_out, int *code, em_err *err)
{
    if (err_out)
        *err_out = xstrdup("");
    canned *c = ctx;
    c->argv_all[0] = '\0';
    for (size_t i = 0; argv[i]; i++)
        snprintf(c->argv_all + strlen(c->argv_all), sizeof c->argv_all - strlen(c->argv_all), "%s ", argv[i]);
    if (strstr(c->argv_all, "envmgr-guest"))
        CU_ASSERT_TRUE(cap >= (8u << 20)); /* at least the accessibility tree's own cap */
    const char *o = c->calls < 4 && c->seq[c->calls] ? c->seq[c->calls] : c->out;
    c->calls++;
    *out = xstrdup(o);
    *len = strlen(o);
    *code = c->code;
    return 0;
}

static json_t *run_spec(canned *c, const char *spec_json, em_err *err)
{
    em_env_ops ops = {.ctx = c, .exec = canned_exec, .screen_w = 1920, .screen_h = 1080};
    json_t *spec = json_loads(spec_json, 0, NULL), *art = NULL;
    CU_ASSERT_EQUAL(getter_check(spec, err), 0);
    if (getter_run(&ops, spec, test_tmpdir(), test_tmpdir(), &art, err) < 0)
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


static json_t *value_of(json_t *art)
{
    return json_object_get(art, "value");
}

static char *compact(json_t *v)
{
    return json_dumps(v, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
}

/* rule_relativeTime against what OSWorld-Verified's own get_rule_relativeTime answered for the
 * same rules on the same days (tests/data/osworld/relative_time.jsonl: [today, relativeTime,
 * expected formats, OSWorld's expected]), today being the guest's `date`. */
static void test_relative_time(void)
{
    char *path = xasprintf("%s/tests/data/osworld/relative_time.jsonl", ENVMGR_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[4096];
    int n = 0;
    em_err err = {0};
    while (fgets(line, sizeof line, f)) {
        json_t *row = json_loads(line, 0, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(row);
        char *date = xasprintf("%s\n", json_string_value(json_array_get(row, 0)));
        json_t *spec = json_pack("{s:s, s:{s:O, s:O}}", "type", "rule_relativeTime", "rules", "relativeTime",
                                 json_array_get(row, 1), "expected", json_array_get(row, 2));
        char *spec_text = json_dumps(spec, 0);
        canned c = {.out = date};
        json_t *art = run_spec(&c, spec_text, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(art);
        CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, "date +%F"));
        char *got = compact(json_object_get(value_of(art), "expected")), *want = compact(json_array_get(row, 3));
        if (strcmp(got, want))
            fprintf(stderr, "\n  %s  got:  %s\n  want: %s\n", line, got, want);
        CU_ASSERT_STRING_EQUAL(got, want);
        free(got);
        free(want);
        json_decref(art);
        free(spec_text);
        json_decref(spec);
        free(date);
        json_decref(row);
        n++;
    }
    fclose(f);
    free(path);
    CU_ASSERT_TRUE(n >= 70);

    /* where OSWorld's month formula fails (four months from August, eight from April): the calendar */
    const char *later[][2] = {{"2026-08-14\n", "four"}, {"2026-04-05\n", "eight"}};
    for (size_t i = 0; i < ARRAY_LEN(later); i++) {
        char *spec = xasprintf("{\"type\": \"rule_relativeTime\", \"rules\": {\"relativeTime\": {\"from\": \"first monday "
                               "%s months later\"}, \"expected\": {\"time\": \"{DoW} {MonthFull} {Day0D}, {Year}\"}}}",
                               later[i][1]);
        canned c = {.out = later[i][0]};
        json_t *art = run_spec(&c, spec, &err);
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(value_of(art), "expected"), "time")),
                               "Mon December 07, 2026");
        json_decref(art);
        free(spec);
    }
    /* rules.timezone: the host's date there (no guest call) */
    canned c = {.out = "1999-01-01\n"};
    json_t *art = run_spec(&c, "{\"type\": \"rule_relativeTime\", \"rules\": {\"relativeTime\": {\"from\": \"tomorrow\"}, "
                               "\"timezone\": \"UTC\", \"expected\": {\"time\": \"{Year}-{Month0D}-{Day0D}\"}}}", &err);
    CU_ASSERT_EQUAL(c.calls, 0);
    time_t t = time(NULL) + 86400;
    struct tm tm;
    gmtime_r(&t, &tm);
    char want[32];
    strftime(want, sizeof want, "%Y-%m-%d", &tm);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(value_of(art), "expected"), "time")), want);
    json_decref(art);
    /* a guest whose date says nothing */
    c = (canned){.out = "no date here\n"};
    CU_ASSERT_PTR_NULL(run_spec(&c, "{\"type\": \"rule_relativeTime\", \"rules\": {\"relativeTime\": {\"from\": "
                                    "\"tomorrow\"}, \"expected\": {\"time\": \"{Year}\"}}}", &err));
    CU_ASSERT_STRING_EQUAL(err.msg, "rule_relativeTime: the guest's `date` gave no date (status 0)");
}

#define TREE_WITH(url)                                                                                           \
    "{\"AT\": \"<desktop-frame><application name=\\\"Google Chrome\\\"><entry name=\\\"Address and search "       \
    "bar\\\">" url "</entry></application></desktop-frame>\"}"

/* url_path_parse and split_list: what OSWorld-Verified's functions answer for the same URLs. */
static void test_url_parse_getters(void)
{
    em_err err = {0};
    static const struct {
        const char *bar, *want;
    } cases[] = {
        {"macys.com/shop/mens-clothing/mens-casual-shirts/Men_regular_size_t,Price_discount_range,Sleeve_length/L,"
         "50_PERCENT_%20off%20%26%20more,Short%20Sleeve?id=20626",
         "{\"Men_regular_size_t\":\"L\",\"Price_discount_range\":\"50_PERCENT_ off & more\",\"Sleeve_length\":"
         "\"Short Sleeve\",\"mens_clothing\":true,\"shirts\":true,\"short_sleeve\":true}"},
        {"macys.com/shop/womens/Product_department,Price_discount_range/Shirts , 30_PERCENT_ off %26 more|"
         "50_PERCENT_ off %26 more;jsessionid=1/x",
         "{\"Men_regular_size_t\":null,\"Price_discount_range\":\"not_50_PERCENT_ off & more\",\"mens_clothing\":"
         "null,\"shirts\":true,\"short_sleeve\":null}"},
        {"macys.com/shop/womens/Product_department,Price_discount_range/Shirts/x;y=1,2",
         "{\"Men_regular_size_t\":null,\"Price_discount_range\":\"not_50_PERCENT_ off & more\",\"mens_clothing\":"
         "null,\"shirts\":null,\"short_sleeve\":null}"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        char *out = xasprintf(TREE_WITH("%s"), cases[i].bar);
        canned c = {.out = out};
        json_t *art = run_spec(&c, "{\"type\": \"url_path_parse\", \"goto_prefix\": \"https://www.\", \"parse_keys\": "
                                   "[\"mens_clothing\", \"shirts\", \"Men_regular_size_t\", \"Price_discount_range\", "
                                   "\"short_sleeve\", \"Sleeve_length\"]}", &err);
        char *got = compact(value_of(art));
        if (strcmp(got, cases[i].want))
            fprintf(stderr, "\n  got:  %s\n  want: %s\n", got, cases[i].want);
        CU_ASSERT_STRING_EQUAL(got, cases[i].want);
        free(got);
        json_decref(art);
        free(out);
    }
    canned c = {.out = TREE_WITH("apple.com/shop/compare?modelList=iphone-15-pro-max,iphone-14-pro-max&x=1")};
    json_t *art = run_spec(&c, "{\"type\": \"active_tab_url_parse\", \"goto_prefix\": \"https://www.\", \"parse_keys\": "
                               "[\"modelList\", \"none\"], \"split_list\": true}", &err);
    char *got = compact(value_of(art));
    CU_ASSERT_STRING_EQUAL(got, "{\"modelList\":[\"iphone-15-pro-max\",\"iphone-14-pro-max\"],\"none\":[\"\"]}");
    free(got);
    json_decref(art);
}

static void expect_check_error(const char *spec_text, const char *want)
{
    em_err err = {0};
    json_t *spec = json_loads(spec_text, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(spec);
    CU_ASSERT_EQUAL(getter_check(spec, &err), -1);
    if (strcmp(err.msg, want))
        fprintf(stderr, "\n  got:  %s\n  want: %s\n", err.msg, want);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
    json_decref(spec);
}

/* The page getters: what they ask envmgr-guest and how its answers become OSWorld's values. */
static void test_page_getters(void)
{
    em_err err = {0};
    /* active_tab_html_parse: the address bar's URL, then the queries in that tab */
    canned c = {.seq = {TREE_WITH("kohls.com/search?S=4")},
                .out = "{\"value\": {\"toys\": true, \"is_other_exist\": false}, \"matched\": true, \"url\": "
                       "\"https://www.kohls.com/search?S=4\"}"};
    json_t *art = run_spec(&c, "{\"type\": \"active_tab_html_parse\", \"goto_prefix\": \"https://www.\", \"category\": "
                               "\"class&url\", \"class_multiObject_li\": {\"crumb\": [\"Toys\"]}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_EQUAL(c.calls, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, " chrome-html-parse --url https://www.kohls.com/search?S=4 --spec {"));
    CU_ASSERT_TRUE(json_is_true(json_object_get(value_of(art), "toys")));
    json_decref(art);
    /* no address bar: OSWorld's None, and the tab is not asked */
    c = (canned){.out = "{\"AT\": \"<desktop-frame/>\"}"};
    art = run_spec(&c, "{\"type\": \"active_tab_html_parse\", \"category\": \"xpath\", \"xpathObject\": {\"//a\": \"a\"}}",
                   &err);
    CU_ASSERT_TRUE(json_is_null(value_of(art)));
    CU_ASSERT_EQUAL(c.calls, 1);
    json_decref(art);
    expect_check_error("{\"type\": \"active_tab_html_parse\", \"category\": \"css\"}",
                       "category: expected \"class\", \"label\", \"xpath\", \"input\" or \"class&url\"");
    expect_check_error("{\"type\": \"active_tab_html_parse\", \"category\": \"class\", \"class_multiObject\": {\"c\": "
                       "{\"first\": \"k\"}}}",
                       "class_multiObject.c: `first` is not an index");
    expect_check_error("{\"type\": \"active_tab_html_parse\", \"category\": \"class&url\", \"class_multiObject\": {\"c\": "
                       "{\"0\": \"k\"}}}",
                       "class_multiObject.c: expected an array of strings");
    expect_check_error("{\"type\": \"active_tab_html_parse\", \"category\": \"input\", \"inputObject\": {\"//i\": 3}}",
                       "inputObject.//i: expected the result's key (a string)");

    /* chrome_appearance_mode_ui and enable_safe_browsing */
    c = (canned){.out = "{\"mode\": \"dark\", \"from\": \"Preferences\"}"};
    art = run_spec(&c, "{\"type\": \"chrome_appearance_mode_ui\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(value_of(art)), "dark");
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, " chrome-appearance "));
    json_decref(art);
    c = (canned){.out = "{\"safe_browsing\": true, \"enhanced_safe_browsing\": false}"};
    art = run_spec(&c, "{\"type\": \"enable_safe_browsing\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(value_of(art)), "true");
    json_decref(art);
    c = (canned){.out = "{\"error\": \"no Chrome profile\"}", .code = 1};
    art = run_spec(&c, "{\"type\": \"enable_safe_browsing\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(value_of(art)), "false"); /* OSWorld's value then */
    json_decref(art);

    c = (canned){.out = "{\"mode\": \"dark\"}"};
    art = run_spec(&c, "{\"type\": \"chrome_color_scheme\"}", &err);
    CU_ASSERT_STRING_EQUAL(json_string_value(value_of(art)), "dark");
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, " chrome-color-scheme "));
    json_decref(art);
    c = (canned){.out = TREE_WITH("macys.com/shop/mens-clothing/x")};
    art = run_spec(&c, "{\"type\": \"macys_product_url_parse\", \"parse_keys\": []}", &err);
    CU_ASSERT_TRUE(json_is_true(json_object_get(value_of(art), "mens_clothing")));
    json_decref(art);

    /* page_info: the page's three fields; a page that does not load is an error naming why */
    c = (canned){.out = "{\"title\": \"Cart\", \"url\": \"https://s.com/cart/\", \"content\": \"<html></html>\", "
                        "\"content_truncated\": false}"};
    art = run_spec(&c, "{\"type\": \"page_info\", \"url\": \"https://s.com/cart/\"}", &err);
    char *got = compact(value_of(art));
    CU_ASSERT_STRING_EQUAL(got, "{\"content\":\"<html></html>\",\"title\":\"Cart\",\"url\":\"https://s.com/cart/\"}");
    CU_ASSERT_PTR_NOT_NULL(strstr(c.argv_all, " chrome-page-info --url https://s.com/cart/ --timeout 60 "));
    free(got);
    json_decref(art);
    c = (canned){.out = "{\"error\": \"https://s.com/cart/ did not load in the guest's browser: net::ERR_TUNNEL_"
                        "CONNECTION_FAILED\"}", .code = 1};
    CU_ASSERT_PTR_NULL(run_spec(&c, "{\"type\": \"page_info\", \"url\": \"https://s.com/cart/\"}", &err));
    CU_ASSERT_STRING_EQUAL(err.msg, "page_info: https://s.com/cart/ did not load in the guest's browser: "
                                    "net::ERR_TUNNEL_CONNECTION_FAILED");
    expect_check_error("{\"type\": \"page_info\", \"url\": \"javascript:alert(1)\"}",
                       "url: `javascript:alert(1)`: expected an http(s) or file URL");

    /* pdf_from_url: the PDF saved under dest */
    char *b64 = base64_encode("%PDF-1.4 test", 13);
    char *out = xasprintf("{\"url\": \"https://a.org/\", \"pdf_base64\": \"%s\", \"size\": 13}", b64);
    c = (canned){.out = out};
    art = run_spec(&c, "{\"type\": \"pdf_from_url\", \"path\": \"https://a.org/\", \"dest\": \"gold.pdf\"}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "type")), "file");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(art, "size")), 13);
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(art, "path")), "/gold.pdf"));
    json_decref(art);
    free(out);
    free(b64);

    /* info_from_website: the values, or the task's backups when reading fails in the guest */
    const char *spec = "{\"type\": \"info_from_website\", \"url\": \"https://scholar.example/u\", \"infos\": [{\"action\": "
                       "\"inner_text\", \"selector\": \"#n\"}, {\"action\": \"click_and_attribute\", \"selector\": "
                       "[\"a\", \"#b\"], \"attribute\": \"href\"}], \"backups\": [\"Yann\", \"http://x\"]}";
    c = (canned){.out = "{\"infos\": [\"Yann LeCun\", \"https://hal.science/d\"]}"};
    art = run_spec(&c, spec, &err);
    got = compact(value_of(art));
    CU_ASSERT_STRING_EQUAL(got, "[\"Yann LeCun\",\"https://hal.science/d\"]");
    CU_ASSERT_PTR_NULL(json_object_get(art, "backups_because"));
    free(got);
    json_decref(art);
    c = (canned){.out = "{\"error\": \"no element #n within 10 s\"}", .code = 1};
    art = run_spec(&c, spec, &err);
    got = compact(value_of(art));
    CU_ASSERT_STRING_EQUAL(got, "[\"Yann\",\"http://x\"]");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "backups_because")),
                           "info_from_website: no element #n within 10 s");
    free(got);
    json_decref(art);
    expect_check_error("{\"type\": \"info_from_website\", \"url\": \"https://a.org/\", \"infos\": [{\"action\": "
                       "\"hover\", \"selector\": \"a\"}]}",
                       "infos[0].action: expected inner_text, attribute, click_and_inner_text or click_and_attribute");
    expect_check_error("{\"type\": \"info_from_website\", \"url\": \"https://a.org/\", \"infos\": [{\"action\": "
                       "\"click_and_inner_text\", \"selector\": \"a\"}]}",
                       "infos[0].selector: expected a list of CSS selectors (click each, read the last)");
    expect_check_error("{\"type\": \"info_from_website\", \"url\": \"https://a.org/\", \"infos\": [{\"action\": "
                       "\"attribute\", \"selector\": \"a\"}]}",
                       "infos[0].attribute: missing");
}

static CU_TestInfo tests[] = {
    {"toolbelt answers: missing, timeout, reported error, not JSON, ok", test_toolbelt_answer},
    {"the address bar in an OSWorld-shaped tree", test_address_bar},
    {"url_query_pick and url_dash_part as OSWorld's Python", test_url_pieces},
    {"app and browser getters give OSWorld's shapes", test_getters_shapes},
    {"rule_relativeTime answers what OSWorld-Verified answers", test_relative_time},
    {"url_path_parse and split_list as OSWorld-Verified", test_url_parse_getters},
    {"page getters: html parse, appearance, page_info, pdf, website info", test_page_getters},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("getters_apps", tests);
}

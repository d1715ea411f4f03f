/* Metrics (each one scoring 1 and scoring 0), the script metric with the
 * real example script, getters driven through an em_env_ops that records
 * what it is asked and answers with canned data, and OSWorld scoring. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/png.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "evaluator/metrics_builtin.h"
#include "evaluator/score.h"
#include "envmgr/task/task.h"
#include "tests/unit/helpers/cunit_main.h"

/* ---- fixtures ---- */

static const char *dir_in_tmp(const char *name, char *buf, size_t len)
{
    if (!buf[0]) {
        char *p = xasprintf("%s/%s", test_tmpdir(), name);
        em_err err = {0};
        mkdir_p(p, 0755, &err);
        char *real = realpath(p, NULL);
        snprintf(buf, len, "%s", real);
        free(real);
        free(p);
    }
    return buf;
}

static const char *task_dir(void)
{
    static char d[512];
    return dir_in_tmp("task", d, sizeof d);
}

static const char *art_dir(void)
{
    static char d[512];
    return dir_in_tmp("artifacts", d, sizeof d);
}

static char *in_task(const char *name)
{
    return xasprintf("%s/%s", task_dir(), name);
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(path, text, strlen(text), mode, &err), 0);
}

static json_t *text_art(const char *s)
{
    return json_pack("{s:s,s:s}", "type", "text", "value", s);
}

static json_t *json_art(const char *json)
{
    json_error_t je;
    json_t *v = json_loads(json, JSON_DECODE_ANY, &je);
    if (!v)
        fprintf(stderr, "\n  bad test JSON: %s: %s\n", json, je.text);
    return json_pack("{s:s,s:o}", "type", "json", "value", v);
}

static json_t *file_art(const char *path)
{
    return json_pack("{s:s,s:s}", "type", "file", "path", path);
}

static json_t *opts(const char *json)
{
    return json ? json_loads(json, 0, NULL) : NULL;
}

/* Run func and check the outcome (METRIC_SCORED or METRIC_EVALUATOR_ERROR), the score and, when
 * given, the exact reason. Steals result, expected, options. */
static void expect_outcome(const metric_ctx *ctx, const char *func, json_t *result, json_t *expected,
                           json_t *options, int want_rc, double want, const char *want_reason)
{
    double score = -1;
    char *reason = NULL;
    em_err err = {0};
    int rc = metric_run(ctx, func, result, expected, options, &score, &reason, &err);
    if (rc != want_rc)
        fprintf(stderr, "\n  %s: outcome %d (want %d): %s\n", func, rc, want_rc, rc < 0 ? err.msg : reason);
    CU_ASSERT_EQUAL(rc, want_rc);
    CU_ASSERT_PTR_NOT_NULL(reason);
    if (fabs(score - want) > 1e-9 || (want_reason && reason && strcmp(reason, want_reason)))
        fprintf(stderr, "\n  %s: score %g (want %g)\n  reason: %s\n  want:   %s\n", func, score, want,
                reason ? reason : "(none)", want_reason ? want_reason : "(any)");
    CU_ASSERT_DOUBLE_EQUAL(score, want, 1e-9);
    if (want_reason && reason)
        CU_ASSERT_STRING_EQUAL(reason, want_reason);
    free(reason);
    json_decref(result);
    json_decref(expected);
    json_decref(options);
}

static void expect_score_ctx(const metric_ctx *ctx, const char *func, json_t *result, json_t *expected,
                             json_t *options, double want, const char *want_reason)
{
    expect_outcome(ctx, func, result, expected, options, METRIC_SCORED, want, want_reason);
}

static void expect_score(const char *func, json_t *result, json_t *expected, json_t *options, double want,
                         const char *want_reason)
{
    metric_ctx ctx = {.task_dir = task_dir(), .artifact_dir = art_dir(), .agent_exit = "done"};
    expect_score_ctx(&ctx, func, result, expected, options, want, want_reason);
}

/* An evaluator_error: no score (0), the reason says what failed. */
static void expect_error(const char *func, json_t *result, json_t *expected, json_t *options, const char *want_reason)
{
    metric_ctx ctx = {.task_dir = task_dir(), .artifact_dir = art_dir(), .agent_exit = "done"};
    expect_outcome(&ctx, func, result, expected, options, METRIC_EVALUATOR_ERROR, 0, want_reason);
}

/* ---- metrics ---- */

static void test_exact_match(void)
{
    expect_score("exact_match", text_art("true\n"), json_art("{\"expected\": \"true\\n\"}"), NULL, 1,
                 "exact_match: result equals \"true\\n\"");
    expect_score("exact_match", text_art("false\n"), json_art("{\"expected\": \"true\\n\"}"), NULL, 0,
                 "exact_match: got \"false\\n\", expected \"true\\n\"");
    /* parsed JSON compares as Python compares it: 1 == 1.0, key order does not matter */
    expect_score("exact_match", json_art("{\"a\": 1, \"b\": [1, 2]}"),
                 json_art("{\"expected\": {\"b\": [1.0, 2], \"a\": 1.0}}"), NULL, 1, NULL);
    expect_score("exact_match", json_art("[1, 2]"), json_art("{\"expected\": [2, 1]}"), NULL, 0, NULL);
    /* a file compares by its contents; an expected value without "expected" is the value itself */
    char *f = in_task("exact.txt");
    write_text(f, "42", 0644);
    expect_score("exact_match", file_art(f), text_art("42"), NULL, 1, NULL);
    free(f);
    expect_score("exact_match", NULL, json_art("{\"expected\": 1}"), NULL, 0, "exact_match: result: no artifact");
    expect_score("exact_match", file_art("/nonexistent/x"), json_art("{\"expected\": 1}"), NULL, 0,
                 "exact_match: result: open `/nonexistent/x`: No such file or directory");
    /* the same for the expected side is the task's fault: no score, for every built-in metric */
    static const char *const builtins[] = {"exact_match", "check_include_exclude", "match_in_list", "is_in_list",
                                           "literal_match", "fuzzy_match", "compare_text_file",
                                           "check_direct_json_object"};
    for (size_t i = 0; i < ARRAY_LEN(builtins); i++) {
        char *want = xasprintf("%s: expected: open `/nonexistent/x`: No such file or directory", builtins[i]);
        expect_error(builtins[i], text_art("{}"), file_art("/nonexistent/x"), NULL, want);
        free(want);
    }
}

static void test_include_exclude(void)
{
    const char *rules = "{\"include\": [\"spotify\"], \"exclude\": [\"not found\"]}";
    expect_score("check_include_exclude", text_art("/usr/bin/spotify\n"), json_art(rules), NULL, 1,
                 "check_include_exclude: all 1 included strings found, none of 1 excluded");
    expect_score("check_include_exclude", text_art("spotify not found\n"), json_art(rules), NULL, 0,
                 "check_include_exclude: \"not found\" is in the result");
    expect_score("check_include_exclude", text_art(""), json_art(rules), NULL, 0,
                 "check_include_exclude: \"spotify\" is not in the result");
    expect_score("check_include_exclude", text_art("x"), json_art("{\"include\": [], \"exclude\": []}"), NULL, 1,
                 NULL);
    expect_score("check_include_exclude", text_art("x"), json_art("[\"x\"]"), NULL, 0,
                 "check_include_exclude: expected rules {include: [...], exclude: [...]}, got array");
    expect_score("check_include_exclude", text_art("x"), json_art("{\"include\": [1]}"), NULL, 0,
                 "check_include_exclude: rules.include[0] is not a string");
}

static void test_lists(void)
{
    expect_score("match_in_list", text_art("b"), json_art("{\"expected\": [\"a\", \"b\"]}"), NULL, 1,
                 "match_in_list: \"b\" is in the list");
    expect_score("match_in_list", text_art("c"), json_art("{\"expected\": [\"a\", \"b\"]}"), NULL, 0,
                 "match_in_list: \"c\" is not one of the 2 expected values");
    expect_score("match_in_list", text_art("a"), json_art("{\"expected\": \"abc\"}"), NULL, 0,
                 "match_in_list: the expected value must be a list, got string");

    expect_score("is_in_list", json_art("[\"a\", \"b\"]"), json_art("{\"expected\": \"a\"}"), NULL, 1,
                 "is_in_list: \"a\" is in the result");
    expect_score("is_in_list", json_art("[\"a\", \"b\"]"), json_art("{\"expected\": \"z\"}"), NULL, 0,
                 "is_in_list: \"z\" is not in the result");
    expect_score("is_in_list", text_art("one two"), json_art("{\"expected\": \"two\"}"), NULL, 1, NULL);
    expect_score("is_in_list", json_art("5"), json_art("{\"expected\": 5}"), NULL, 0,
                 "is_in_list: the result must be a list or text, got integer");
}

static void test_literal_match(void)
{
    expect_score("literal_match", text_art("Hello"), json_art("{\"expected\": \"hello\"}"),
                 opts("{\"ignore_case\": true}"), 1, "literal_match: result equals \"hello\"");
    expect_score("literal_match", text_art("Hello"), json_art("{\"expected\": \"hello\"}"), NULL, 0,
                 "literal_match: got \"Hello\", expected \"hello\"");
    expect_score("literal_match", text_art("x"), json_art("\"x\""), opts("{\"type\": \"str\"}"), 1, NULL);
    expect_score("literal_match", json_art("[\"A\", 1]"), json_art("{\"expected\": [\"a\", \"1\"]}"),
                 opts("{\"type\": \"list\", \"ignore_case\": true}"), 1, "literal_match: lists are equal");
    expect_score("literal_match", json_art("[\"a\", \"b\"]"), json_art("{\"expected\": [\"a\", \"c\"]}"),
                 opts("{\"type\": \"list\"}"), 0, NULL);
    expect_score("literal_match", text_art("a"), json_art("{\"expected\": [\"a\"]}"), opts("{\"type\": \"list\"}"), 0,
                 "literal_match: got \"a\", expected the list [\"a\"]");
}

static void test_fuzzy_match(void)
{
    /* rapidfuzz: fuzz.ratio("kitten", "sitting") == 61.538..., fuzz.ratio("this is a test", "this is a test!") == 96.55... */
    CU_ASSERT_DOUBLE_EQUAL(metric_fuzzy_ratio("kitten", 6, "sitting", 7), 8.0 / 13, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(metric_fuzzy_ratio("this is a test", 14, "this is a test!", 15), 28.0 / 29, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(metric_fuzzy_ratio("", 0, "", 0), 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(metric_fuzzy_ratio("abc", 3, "", 0), 0.0, 1e-12);
    /* code points, not bytes: "café" vs "cafe" share 3 of 4 + 4 */
    CU_ASSERT_DOUBLE_EQUAL(metric_fuzzy_ratio("caf\xc3\xa9", 5, "cafe", 4), 6.0 / 8, 1e-12);
    char *big = xmalloc(METRIC_FUZZY_MAX + 2);
    memset(big, 'a', METRIC_FUZZY_MAX + 1);
    CU_ASSERT_EQUAL(metric_fuzzy_ratio(big, METRIC_FUZZY_MAX + 1, "a", 1), -1);
    free(big);

    expect_score("fuzzy_match", text_art("hello world"), json_art("{\"expected\": \"hello world\"}"), NULL, 1,
                 "fuzzy_match: ratio 1.0000");
    expect_score("fuzzy_match", text_art("abc"), json_art("{\"expected\": \"xyz\"}"), NULL, 0,
                 "fuzzy_match: ratio 0.0000");
    expect_score("fuzzy_match", text_art("kitten"), json_art("{\"expected\": \"sitting\"}"), NULL, 8.0 / 13, NULL);
    expect_score("fuzzy_match", text_art("this is a test"), json_art("{\"expected\": \"this is a test!\"}"),
                 opts("{\"threshold\": 0.9}"), 1, "fuzzy_match: ratio 0.9655 >= threshold 0.9");
    expect_score("fuzzy_match", text_art("kitten"), json_art("{\"expected\": \"sitting\"}"),
                 opts("{\"threshold\": 0.9}"), 0, "fuzzy_match: ratio 0.6154 < threshold 0.9");
}

static void test_compare_text_file(void)
{
    char *a = in_task("a.txt"), *b = in_task("b.txt"), *c = in_task("c.txt");
    write_text(a, "Hello  World\n\tline two\n", 0644);
    write_text(b, "Hello  World\n\tline two\n", 0644);
    write_text(c, "  hello world line   TWO", 0644);
    expect_score("compare_text_file", file_art(a), file_art(b), NULL, 1,
                 "compare_text_file: the texts are equal (23 bytes)");
    expect_score("compare_text_file", file_art(a), file_art(c), NULL, 0,
                 "compare_text_file: the texts differ at byte 0: got \"Hello  World\\n\\tline two\\n\", expected "
                 "\"  hello world line   TWO\"");
    expect_score("compare_text_file", file_art(a), file_art(c), opts("{\"ignore_blanks\": true}"), 0, NULL);
    expect_score("compare_text_file", file_art(a), file_art(c), opts("{\"ignore_case\": true}"), 0, NULL);
    expect_score("compare_text_file", file_art(a), file_art(c),
                 opts("{\"ignore_blanks\": true, \"ignore_case\": true}"), 1, NULL);
    expect_score("compare_text_file", NULL, file_art(b), NULL, 0, "compare_text_file: result: no artifact");
    expect_score("compare_text_file", text_art("x"), json_art("{\"nope\": 1}"), NULL, 0,
                 "compare_text_file: the texts differ at byte 0: got \"x\", expected \"{\\\"nope\\\":1}\"");
    free(a);
    free(b);
    free(c);
}

static void test_direct_json_object(void)
{
    /* command output in Python's repr style, as OSWorld tasks get it */
    expect_score("check_direct_json_object", text_art("  {'a': 1, 'b': 'x', 'c': [1, 2]}\n"),
                 json_art("{\"expected\": {\"a\": 1, \"b\": \"x\"}}"), NULL, 1,
                 "check_direct_json_object: all 2 keys match");
    expect_score("check_direct_json_object", text_art("{'a': 1}"), json_art("{\"expected\": {\"a\": 2}}"), NULL, 0,
                 "check_direct_json_object: key `a`: got 1, expected 2");
    expect_score("check_direct_json_object", json_art("{\"a\": 1}"), json_art("{\"expected\": {\"b\": 1}}"), NULL, 0,
                 "check_direct_json_object: key `b`: got null, expected 1");
    expect_score("check_direct_json_object", json_art("{\"l\": [3, 1, 2]}"),
                 json_art("{\"expected\": {\"l\": [1, 2, 3]}, \"ignore_list_order\": true}"), NULL, 1, NULL);
    expect_score("check_direct_json_object", json_art("{\"l\": [3, 1, 2]}"), json_art("{\"expected\": {\"l\": [1, 2, 3]}}"),
                 NULL, 0, NULL);
    /* expect_in_result: a list of acceptable values, or a substring */
    const char *in = "{\"expected\": {\"tabs\": [\"docs\", \"mail\"], \"title\": \"Inbox\"}, \"expect_in_result\": true}";
    expect_score("check_direct_json_object", json_art("{\"tabs\": [\"news\", \"mail\"], \"title\": \"Inbox (3)\"}"),
                 json_art(in), NULL, 1, NULL);
    expect_score("check_direct_json_object", json_art("{\"tabs\": [\"news\"], \"title\": \"Inbox (3)\"}"), json_art(in),
                 NULL, 0, "check_direct_json_object: key `tabs`: got [\"news\"], expected it to contain [\"docs\",\"mail\"]");
    expect_score("check_direct_json_object", text_art("not json"), json_art("{\"expected\": {}}"), NULL, 0,
                 "check_direct_json_object: the result is not JSON: invalid token near 'not'");
    expect_score("check_direct_json_object", text_art("[1]"), json_art("{\"expected\": {}}"), NULL, 0,
                 "check_direct_json_object: the result is not a JSON object (array)");
}

static void write_png(const char *path, int w, int h, uint32_t fill, int odd_x, int odd_y, uint32_t odd)
{
    uint8_t *px = xcalloc((size_t)w * h, 4);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t c = (x == odd_x && y == odd_y) ? odd : fill;
            uint8_t *p = px + ((size_t)y * w + x) * 4;
            p[0] = (uint8_t)(c >> 16);
            p[1] = (uint8_t)(c >> 8);
            p[2] = (uint8_t)c;
        }
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(png_write_rgbx(path, px, w, h, (size_t)w * 4, &err), 0);
    free(px);
}

static void test_compare_images(void)
{
    char *a = in_task("a.png"), *b = in_task("b.png"), *c = in_task("c.png"), *d = in_task("d.png"),
         *small = in_task("small.png"), *notpng = in_task("not.png");
    write_png(a, 4, 4, 0x336699, -1, -1, 0);
    write_png(b, 4, 4, 0x336699, -1, -1, 0);
    write_png(c, 4, 4, 0x336699, 1, 2, 0xffffff); /* one pixel of 16 differs a lot */
    write_png(d, 4, 4, 0x336699, 1, 2, 0x33669e); /* one pixel differs by 5 in blue */
    write_png(small, 2, 2, 0x336699, -1, -1, 0);
    write_text(notpng, "GIF89a", 0644);
    expect_score("compare_images_exact", file_art(a), file_art(b), NULL, 1,
                 "compare_images_exact: 0 of 16 pixels differ (0.0000%, allowed 0.0000%)");
    expect_score("compare_images_exact", file_art(a), file_art(c), NULL, 0,
                 "compare_images_exact: 1 of 16 pixels differ (6.2500%, allowed 0.0000%)");
    expect_score("compare_images_exact", file_art(a), file_art(c), opts("{\"max_diff_fraction\": 0.1}"), 1, NULL);
    expect_score("compare_images_exact", file_art(a), file_art(d), NULL, 0, NULL);
    expect_score("compare_images_exact", file_art(a), file_art(d), opts("{\"tolerance\": 5}"), 1, NULL);
    expect_score("compare_images_exact", file_art(a), file_art(small), NULL, 0, "compare_images_exact: sizes differ: 4x4 vs 2x2");
    /* a screenshot artifact's region is compared, not the whole image */
    json_t *region = json_pack("{s:s,s:s,s:[iiii]}", "type", "file", "path", c, "region", 2, 0, 2, 2);
    expect_score("compare_images_exact", region, file_art(small), NULL, 1, NULL);
    region = json_pack("{s:s,s:s,s:[iiii]}", "type", "file", "path", c, "region", 3, 3, 2, 2);
    expect_score("compare_images_exact", region, file_art(small), NULL, 0,
                 "compare_images_exact: result: region is outside the 4x4 image");
    /* What the agent left cannot be decoded: its failure, 0. The reference cannot be: the task's, no score. */
    char *want = xasprintf("compare_images_exact: result: `%s`: png: not a PNG file", notpng);
    expect_score("compare_images_exact", file_art(notpng), file_art(a), NULL, 0, want);
    free(want);
    expect_score("compare_images_exact", text_art("x"), file_art(a), NULL, 0, "compare_images_exact: result: not a file artifact");
    want = xasprintf("compare_images_exact: expected: `%s`: png: not a PNG file", notpng);
    expect_error("compare_images_exact", file_art(a), file_art(notpng), NULL, want);
    free(want);
    expect_error("compare_images_exact", file_art(a), text_art("x"), NULL,
                 "compare_images_exact: expected: not a file artifact");
    region = json_pack("{s:s,s:s,s:[iiii]}", "type", "file", "path", small, "region", 1, 1, 4, 4);
    expect_error("compare_images_exact", file_art(a), region, NULL,
                 "compare_images_exact: expected: region is outside the 2x2 image");
    free(a);
    free(b);
    free(c);
    free(d);
    free(small);
    free(notpng);
}

static void test_infeasible(void)
{
    metric_ctx fail = {.agent_exit = "fail"}, done = {.agent_exit = "done"};
    expect_score_ctx(&fail, "infeasible", NULL, NULL, NULL, 1, "infeasible: the agent answered FAIL");
    expect_score_ctx(&done, "infeasible", NULL, NULL, NULL, 0,
                     "infeasible: the task is infeasible but the agent ended with `done`, not FAIL");
    expect_score_ctx(NULL, "infeasible", NULL, NULL, NULL, 0,
                     "infeasible: the task is infeasible but the agent ended with `(unknown)`, not FAIL");
}

static void test_metric_api(void)
{
    double score = 5;
    char *reason = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(metric_run(NULL, "compare_tables", NULL, NULL, NULL, &score, &reason, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "metric: unknown metric `compare_tables`");
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    CU_ASSERT_PTR_NULL(reason);
    CU_ASSERT_EQUAL(metric_run(NULL, NULL, NULL, NULL, NULL, &score, &reason, &err), -1);
    /* options are checked at run time too: a bad one scores 0, it does not fail */
    expect_score("fuzzy_match", text_art("a"), json_art("\"a\""), opts("{\"threshold\": \"x\"}"), 0,
                 "fuzzy_match: options.threshold: expected a number, got string");
    CU_ASSERT_TRUE(metric_known("exact_match"));
    CU_ASSERT_FALSE(metric_known("compare_tables"));
    /* the registry's metrics: compare_table takes an optional expected value, compare_pdfs needs one */
    CU_ASSERT_TRUE(metric_known("compare_table"));
    CU_ASSERT_TRUE(metric_needs_result("compare_table"));
    CU_ASSERT_FALSE(metric_needs_expected("compare_table"));
    CU_ASSERT_TRUE(metric_needs_expected("compare_pdfs"));
    CU_ASSERT_TRUE(metric_known("compare_images"));       /* OSWorld's, the script's */
    CU_ASSERT_TRUE(metric_known("compare_images_exact")); /* envmgr's, in C */
    CU_ASSERT_FALSE(metric_needs_expected("infeasible"));
    CU_ASSERT_FALSE(metric_needs_result("infeasible"));
    CU_ASSERT_TRUE(metric_needs_result("script"));
    CU_ASSERT_FALSE(metric_needs_expected("script"));
    json_t *o = opts("{\"tolerance\": 3, \"max_diff_fraction\": 0.5}");
    CU_ASSERT_EQUAL(metric_check_options("compare_images_exact", o, &err), 0);
    json_decref(o);
    o = opts("{\"tolerance\": 3.5}");
    CU_ASSERT_EQUAL(metric_check_options("compare_images_exact", o, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "tolerance: expected an integer, got number");
    json_decref(o);
    o = opts("{\"path\": \"x.py\", \"anything\": [1]}"); /* script options pass through */
    CU_ASSERT_EQUAL(metric_check_options("script", o, &err), 0);
    json_decref(o);
    CU_ASSERT_EQUAL(metric_check_options("script", NULL, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "path: missing");
}

/* ---- script ---- */

static char *task_script(const char *name, const char *body)
{
    char *p = in_task(name);
    write_text(p, body, 0755);
    return p;
}

static void test_script_example(void)
{
    /* the real evaluator/scripts/file_contains.py, found by name */
    char *f = in_task("report.txt");
    write_text(f, "total: 42\nstatus: done\n", 0644);
    expect_score("script", file_art(f), json_art("{\"expected\": [\"total: 42\", \"done\"]}"),
                 opts("{\"path\": \"file_contains.py\"}"), 1,
                 "script `file_contains.py`: \"file_contains: all 2 strings found\"");
    expect_score("script", file_art(f), json_art("{\"expected\": [\"total: 43\"]}"),
                 opts("{\"path\": \"file_contains.py\"}"), 0,
                 "script `file_contains.py`: \"file_contains: 1 of 1 strings missing, first 'total: 43'\"");
    expect_score("script", text_art("abc"), NULL, opts("{\"path\": \"file_contains.py\", \"needles\": [\"b\"]}"), 1,
                 NULL);
    expect_score("script", NULL, NULL, opts("{\"path\": \"file_contains.py\", \"needles\": [\"b\"]}"), 0,
                 "script `file_contains.py`: \"file_contains: no result artifact\"");
    free(f);
}

static void test_script_protocol(void)
{
    /* a script shipped with the task runs in the sandbox: cwd a private /tmp, a small environment,
     * none of the host's folders (the task folder included) */
    char *probe = xasprintf("#!/bin/sh\n"
                            "cat >/dev/null\n"
                            "[ \"$(pwd -P)\" = /tmp ] || exit 9\n"
                            "[ \"$HOME\" = /tmp ] || exit 8\n"
                            "[ -z \"$SECRET_TOKEN\" ] || exit 7\n"
                            "[ -e '%s' ] && exit 6\n"
                            "[ -e '%s' ] && exit 5\n"
                            "echo '{\"score\": 0.5, \"reason\": \"half\"}'\n",
                            task_dir(), art_dir());
    char *s = task_script("half.sh", probe);
    setenv("SECRET_TOKEN", "x", 1);
    expect_score("script", text_art("x"), NULL, opts("{\"path\": \"half.sh\"}"), 0.5, "script `half.sh`: \"half\"");
    unsetenv("SECRET_TOKEN");
    free(s);
    free(probe);

    /* a file artifact is read-only in the sandbox at /in/<side>/<n>.<ext>; a missing one is null */
    char *f = in_task("data.csv");
    write_text(f, "a,b\n", 0600);
    s = task_script("paths.sh", "#!/bin/sh\n"
                                "in=$(cat)\n"
                                "case \"$in\" in *'\"path\":\"/in/result/0.csv\"'*) ;; *) exit 9;; esac\n"
                                "case \"$in\" in *'\"expected\":{\"path\":null'*|*'\"path\":null'*) ;; *) exit 8;; esac\n"
                                "[ \"$(cat /in/result/0.csv)\" = a,b ] || exit 7\n"
                                "echo x >> /in/result/0.csv 2>/dev/null && exit 6\n"
                                "echo '{\"score\": 1, \"reason\": \"ok\"}'\n");
    expect_score("script", file_art(f), json_pack("{s:s,s:s}", "type", "file", "path", "/nonexistent/b.csv"),
                 opts("{\"path\": \"paths.sh\"}"), 1, "script `paths.sh`: \"ok\"");
    free(s);
    free(f);

    /* anything but {"score": 0..1} after exit 0 is an evaluator_error, never a score */
    s = task_script("junk.sh", "#!/bin/sh\necho 'score: 1'\n");
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"junk.sh\"}"),
                 "script `junk.sh`: expected {\"score\": 0..1, \"reason\": \"...\"} on stdout");
    free(s);
    s = task_script("big.sh", "#!/bin/sh\necho '{\"score\": 2}'\n");
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"big.sh\"}"),
                 "script `big.sh`: score must be a number in 0..1");
    free(s);
    s = task_script("refuses.sh", "#!/bin/sh\necho '{\"error\": \"cannot read the result\"}'\nexit 3\n");
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"refuses.sh\"}"),
                 "script `refuses.sh`: cannot read the result");
    free(s);
    s = task_script("fails.sh", "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
                                "echo 'KeyError: result' >&2\nexit 3\n");
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"fails.sh\"}"),
                 "script `fails.sh`: exited with status 3: KeyError: result");
    free(s);
    s = task_script("chatty.sh", "#!/bin/sh\nhead -c 70000 /dev/zero | tr '\\0' x\n");
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"chatty.sh\"}"),
                 "script `chatty.sh`: printed more than 65536 bytes");
    free(s);
    /* a script that never reads its (large) input must not SIGPIPE us */
    s = task_script("deaf.sh", "#!/bin/sh\necho '{\"score\": 1, \"reason\": \"ok\"}'\n");
    char *huge = xmalloc(4 << 20);
    memset(huge, 'a', (4 << 20) - 1);
    huge[(4 << 20) - 1] = '\0';
    expect_score("script", text_art(huge), NULL, opts("{\"path\": \"deaf.sh\"}"), 1, NULL);
    free(huge);
    free(s);
    /* not executable, missing, escaping the folders: the task is broken, there is no score */
    s = task_script("noexec.sh", "#!/bin/sh\necho '{\"score\": 1}'\n");
    chmod(s, 0644);
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"noexec.sh\"}"),
                 "script `noexec.sh`: not an executable file");
    free(s);
    char *want = xasprintf("script `nope.py`: not found in %s/evaluator/scripts or the task folder", ENVMGR_SOURCE_DIR);
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"nope.py\"}"), want);
    free(want);
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"../artifacts/x.sh\"}"),
                 "script `../artifacts/x.sh`: `../artifacts/x.sh` must not contain `..`");
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"/bin/true\"}"), NULL);
}

/* Whether a process whose command line matches the pattern still runs. Write the pattern so it
 * does not match itself ("slee[p] 31"): the shell running pgrep has it in its command line. */
static bool process_alive(const char *needle)
{
    char *cmd = xasprintf("pgrep -f -- '%s' >/dev/null", needle);
    int rc = system(cmd);
    free(cmd);
    return rc == 0;
}

static void test_script_timeout(void)
{
    /* the whole sandbox dies at the deadline, background children included */
    char *s = task_script("slow.sh", "#!/bin/sh\nsleep 31.25 &\nsleep 31.5\n");
    double t0 = now_ms();
    expect_error("script", text_art("x"), NULL, opts("{\"path\": \"slow.sh\", \"timeout_s\": 0.5}"),
                 "script `slow.sh`: timed out after 0.5 s");
    CU_ASSERT(now_ms() - t0 < 5000);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = !process_alive("slee[p] 31.25") && !process_alive("slee[p] 31.5");
        if (!gone)
            sleep_ms(10);
    }
    CU_ASSERT_TRUE(gone);
    free(s);
}

/* ---- getters, through an env that records calls ---- */

typedef struct rec {
    int exec_calls, read_calls, shot_calls;
    char argv[16][128];
    int argc;
    double timeout;
    size_t cap;
    char path[256];
    const char *out; /* canned exec output */
    size_t out_len;
    const char *err_text; /* canned stderr; NULL: none */
    int exit_code;
    unsigned flags; /* of the last exec */
    const char *file; /* canned file contents; NULL: read fails */
    size_t file_len;
} rec;

static int rec_exec(void *ctx, const char *const *argv, unsigned flags, double timeout_s, size_t out_cap, char **out,
                    size_t *out_len, char **err_out, int *exit_code, em_err *err)
{
    rec *r = ctx;
    r->exec_calls++;
    r->flags = flags;
    for (r->argc = 0; argv[r->argc] && r->argc < 16; r->argc++)
        snprintf(r->argv[r->argc], sizeof r->argv[0], "%s", argv[r->argc]);
    r->timeout = timeout_s;
    r->cap = out_cap;
    *out = xmalloc(r->out_len + 1);
    memcpy(*out, r->out ? r->out : "", r->out_len);
    (*out)[r->out_len] = '\0';
    *out_len = r->out_len;
    if (err_out)
        *err_out = xstrdup(r->err_text ? r->err_text : "");
    *exit_code = r->exit_code;
    return 0;
}

static int rec_read(void *ctx, const char *path, size_t cap, char **data, size_t *len, em_err *err)
{
    rec *r = ctx;
    r->read_calls++;
    r->cap = cap;
    snprintf(r->path, sizeof r->path, "%s", path);
    if (!r->file)
        return em_fail(err, "guest: open `%s`: No such file or directory", path);
    *data = xmalloc(r->file_len + 1);
    memcpy(*data, r->file, r->file_len);
    (*data)[r->file_len] = '\0';
    *len = r->file_len;
    return 0;
}

static int rec_shot(void *ctx, const char *host_png, em_err *err)
{
    rec *r = ctx;
    r->shot_calls++;
    snprintf(r->path, sizeof r->path, "%s", host_png);
    uint8_t px[4 * 4 * 4] = {0};
    return png_write_rgbx(host_png, px, 4, 4, 16, err);
}

static em_env_ops rec_ops(rec *r)
{
    return (em_env_ops){.ctx = r, .exec = rec_exec, .read_file = rec_read, .screenshot_png = rec_shot,
                        .screen_w = 1280, .screen_h = 800};
}

static json_t *run_getter(const em_env_ops *ops, const char *spec_json, em_err *err)
{
    json_t *spec = json_loads(spec_json, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL(spec);
    json_t *art = NULL;
    int rc = getter_run(ops, spec, art_dir(), task_dir(), &art, err);
    json_decref(spec);
    CU_ASSERT_TRUE(rc == 0 ? art != NULL : art == NULL);
    return art;
}

static void getter_fails(const em_env_ops *ops, const char *spec_json, const char *want)
{
    em_err err = {0};
    json_t *art = run_getter(ops, spec_json, &err);
    CU_ASSERT_PTR_NULL(art);
    if (strcmp(err.msg, want))
        fprintf(stderr, "\n  got:  %s\n  want: %s\n", err.msg, want);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
    json_decref(art);
}

static const char *art_str(json_t *art, const char *key)
{
    return json_string_value(json_object_get(art, key));
}

static void test_getters_host_side(void)
{
    rec r = {0};
    em_env_ops ops = rec_ops(&r);
    em_err err = {0};

    json_t *art = run_getter(&ops, "{\"type\": \"rule\", \"rules\": {\"expected\": [1, \"a\"]}}", &err);
    json_t *want = json_loads("{\"type\": \"json\", \"value\": {\"expected\": [1, \"a\"]}}", 0, NULL);
    CU_ASSERT_TRUE(json_equal(art, want));
    json_decref(want);
    json_decref(art);

    char *f = in_task("files/expected.txt");
    em_err e2 = {0};
    mkdir_p(task_dir(), 0755, &e2);
    char *files = in_task("files");
    mkdir(files, 0755);
    free(files);
    write_text(f, "expected contents\n", 0644);
    char sha[SHA256_HEX_LEN + 1];
    sha256_hex("expected contents\n", 18, sha);
    const char *types[] = {"local_file", "cache_file"};
    for (int i = 0; i < 2; i++) {
        char *spec = xasprintf("{\"type\": \"%s\", \"path\": \"files/expected.txt\"}", types[i]);
        art = run_getter(&ops, spec, &err);
        free(spec);
        CU_ASSERT_PTR_NOT_NULL_FATAL(art);
        CU_ASSERT_STRING_EQUAL(art_str(art, "type"), "file");
        CU_ASSERT_STRING_EQUAL(art_str(art, "path"), f);
        CU_ASSERT_STRING_EQUAL(art_str(art, "sha256"), sha);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(art, "size")), 18);
        json_decref(art);
    }
    /* an absolute path inside the task folder is fine too */
    char *spec = xasprintf("{\"type\": \"local_file\", \"path\": \"%s\"}", f);
    art = run_getter(&ops, spec, &err);
    CU_ASSERT_PTR_NOT_NULL(art);
    json_decref(art);
    free(spec);

    /* refusals: `..`, absolute paths elsewhere, symlinks out, folders, missing files */
    getter_fails(&ops, "{\"type\": \"local_file\", \"path\": \"../artifacts/x\"}",
                 "getter: path: `../artifacts/x` must not contain `..`");
    getter_fails(&ops, "{\"type\": \"cache_file\", \"path\": \"files/../../x\"}",
                 "getter: path: `files/../../x` must not contain `..`");
    char *w = xasprintf("local_file: `/etc/hostname` is outside the task folder `%s`", task_dir());
    getter_fails(&ops, "{\"type\": \"local_file\", \"path\": \"/etc/hostname\"}", w);
    free(w);
    char *link = in_task("files/escape");
    unlink(link);
    CU_ASSERT_EQUAL(symlink("/etc/hostname", link), 0);
    getter_fails(&ops, "{\"type\": \"local_file\", \"path\": \"files/escape\"}",
                 "local_file: `files/escape` resolves outside the task folder");
    free(link);
    getter_fails(&ops, "{\"type\": \"local_file\", \"path\": \"files\"}", "local_file: `files` is not a regular file");
    getter_fails(&ops, "{\"type\": \"cache_file\", \"path\": \"files/none.txt\"}",
                 "cache_file `files/none.txt`: not in the episode's cache (nothing saved it there) nor in the task "
                 "folder");
    CU_ASSERT_EQUAL(r.exec_calls + r.read_calls + r.shot_calls, 0); /* host-side getters never touch the env */

    /* host-side getters need no env at all */
    art = run_getter(NULL, "{\"type\": \"local_file\", \"path\": \"files/expected.txt\"}", &err);
    CU_ASSERT_PTR_NOT_NULL(art);
    json_decref(art);
    free(f);
}

static void test_getters_guest_side(void)
{
    rec r = {0};
    em_env_ops ops = rec_ops(&r);
    em_err err = {0};

    /* vm_file: one read with the 16 MiB cap, written under a sanitized name inside the artifact folder */
    r.file = "guest data";
    r.file_len = 10;
    json_t *art = run_getter(&ops, "{\"type\": \"vm_file\", \"path\": \"/home/user/out.txt\", \"dest\": "
                                   "\"../../evil\"}",
                             &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_EQUAL(r.read_calls, 1);
    CU_ASSERT_STRING_EQUAL(r.path, "/home/user/out.txt");
    CU_ASSERT_EQUAL(r.cap, GETTER_FILE_CAP);
    char *want = xasprintf("%s/_.._evil", art_dir());
    CU_ASSERT_STRING_EQUAL(art_str(art, "path"), want);
    CU_ASSERT_STRING_EQUAL(art_str(art, "guest_path"), "/home/user/out.txt");
    char *data = NULL;
    size_t len;
    CU_ASSERT_EQUAL(read_file_capped(want, 100, &data, &len, &err), 0);
    CU_ASSERT_STRING_EQUAL(data, "guest data");
    free(data);
    free(want);
    json_decref(art);
    art = run_getter(&ops, "{\"type\": \"vm_file\", \"path\": \"/home/user/.config/app.ini\"}", &err);
    want = xasprintf("%s/app.ini", art_dir());
    CU_ASSERT_STRING_EQUAL(art_str(art, "path"), want);
    free(want);
    json_decref(art);
    r.file = NULL;
    getter_fails(&ops, "{\"type\": \"vm_file\", \"path\": \"/nope\"}",
                 "vm_file `/nope`: guest: open `/nope`: No such file or directory");

    /* vm_command_line: a string runs through sh -c; an array runs as it is */
    r.out = "hello\n";
    r.out_len = 6;
    r.exit_code = 0;
    art = run_getter(&ops, "{\"type\": \"vm_command_line\", \"command\": \"cat /tmp/x | wc -l\"}", &err);
    CU_ASSERT_EQUAL(r.argc, 3);
    CU_ASSERT_STRING_EQUAL(r.argv[0], "/bin/sh");
    CU_ASSERT_STRING_EQUAL(r.argv[1], "-c");
    CU_ASSERT_STRING_EQUAL(r.argv[2], "cat /tmp/x | wc -l");
    CU_ASSERT_DOUBLE_EQUAL(r.timeout, GETTER_TIMEOUT_S, 1e-9);
    CU_ASSERT_EQUAL(r.cap, GETTER_OUTPUT_CAP);
    json_t *want_art = json_loads("{\"type\": \"text\", \"value\": \"hello\\n\", \"exit_code\": 0}", 0, NULL);
    CU_ASSERT_TRUE(json_equal(art, want_art));
    json_decref(want_art);
    json_decref(art);
    r.exit_code = 2;
    art = run_getter(&ops, "{\"type\": \"vm_command_line\", \"command\": [\"ls\", \"-a b\"], \"timeout\": 5}", &err);
    CU_ASSERT_EQUAL(r.argc, 2);
    CU_ASSERT_STRING_EQUAL(r.argv[1], "-a b");
    CU_ASSERT_DOUBLE_EQUAL(r.timeout, 5, 1e-9);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(art, "exit_code")), 2);
    json_decref(art);
    art = run_getter(&ops, "{\"type\": \"vm_command_line\", \"command\": [\"echo $0\", \"a\"], \"shell\": true}", &err);
    CU_ASSERT_EQUAL(r.argc, 4);
    CU_ASSERT_STRING_EQUAL(r.argv[2], "echo $0");
    json_decref(art);
    /* guest output is untrusted: NUL and invalid UTF-8 become U+FFFD */
    r.out = "a\0b\xff";
    r.out_len = 4;
    art = run_getter(&ops, "{\"type\": \"vm_command_line\", \"command\": \"x\"}", &err);
    CU_ASSERT_STRING_EQUAL(art_str(art, "value"), "a\xef\xbf\xbd" "b\xef\xbf\xbd");
    json_decref(art);

    /* list_directory_names (list_directory's first shape): find with NUL-separated names, sorted */
    r.exit_code = 0;
    r.out = "b.txt\0a b\0.hidden\0";
    r.out_len = 18;
    art = run_getter(&ops, "{\"type\": \"list_directory_names\", \"path\": \"/home/user\"}", &err);
    CU_ASSERT_STRING_EQUAL(r.argv[0], "find");
    CU_ASSERT_STRING_EQUAL(r.argv[2], "/home/user");
    CU_ASSERT_STRING_EQUAL(r.argv[8], "%f\\0");
    want_art = json_loads("{\"type\": \"json\", \"value\": [\".hidden\", \"a b\", \"b.txt\"]}", 0, NULL);
    CU_ASSERT_TRUE(json_equal(art, want_art));
    json_decref(want_art);
    json_decref(art);
    r.exit_code = 1;
    getter_fails(&ops, "{\"type\": \"list_directory_names\", \"path\": \"/nope\"}",
                 "list_directory `/nope`: find exited with status 1");

    /* list_directory: OSWorld's tree from `find -printf %Y%P\0`, children sorted by name */
    r.exit_code = 0;
    r.out = "fb.txt\0dsub\0fsub/x.jpg\0dsub/deep\0fa.txt\0";
    r.out_len = 40;
    art = run_getter(&ops, "{\"type\": \"list_directory\", \"path\": \"~/Desktop/\"}", &err);
    CU_ASSERT_STRING_EQUAL(r.argv[4], "/home/user/Desktop");
    want_art = json_loads("{\"type\": \"json\", \"value\": {\"type\": \"directory\", \"name\": \"Desktop\", \"children\": ["
                          "{\"type\": \"file\", \"name\": \"a.txt\"}, {\"type\": \"file\", \"name\": \"b.txt\"},"
                          "{\"type\": \"directory\", \"name\": \"sub\", \"children\": [{\"type\": \"directory\", \"name\": "
                          "\"deep\", \"children\": []}, {\"type\": \"file\", \"name\": \"x.jpg\"}]}]}}", 0, NULL);
    CU_ASSERT_TRUE(json_equal(art, want_art));
    json_decref(want_art);
    json_decref(art);
    r.exit_code = 3;
    getter_fails(&ops, "{\"type\": \"list_directory\", \"path\": \"/etc/passwd\"}",
                 "list_directory `/etc/passwd`: not a directory");

    /* getter commands run as the desktop user; as_root is envmgr's way to ask for root */
    r.exit_code = 0;
    r.out = "x";
    r.out_len = 1;
    art = run_getter(&ops, "{\"type\": \"vm_command_line\", \"command\": \"id\", \"shell\": \"true\"}", &err);
    CU_ASSERT_EQUAL(r.flags, 0);
    json_decref(art);
    art = run_getter(&ops, "{\"type\": \"vm_command_line\", \"command\": \"id\", \"as_root\": true}", &err);
    CU_ASSERT_EQUAL(r.flags, EM_EXEC_ROOT);
    json_decref(art);
    /* vm_command_error: the command's stderr through a wrapper */
    art = run_getter(&ops, "{\"type\": \"vm_command_error\", \"command\": [\"ls\", \"/x\"]}", &err);
    CU_ASSERT_STRING_EQUAL(r.argv[2], "\"$@\" 2>&1 >/dev/null");
    CU_ASSERT_STRING_EQUAL(r.argv[4], "ls");
    json_decref(art);

    /* vm_screen_size from the env; vm_window_size from xdotool's geometry */
    art = run_getter(&ops, "{\"type\": \"vm_screen_size\"}", &err);
    want_art = json_loads("{\"type\": \"json\", \"value\": {\"width\": 1280, \"height\": 800}}", 0, NULL);
    CU_ASSERT_TRUE(json_equal(art, want_art));
    json_decref(want_art);
    json_decref(art);
    r.out = "WINDOW=1\nX=0\nY=0\nWIDTH=640\nHEIGHT=480\nSCREEN=0\n";
    r.out_len = strlen(r.out);
    art = run_getter(&ops, "{\"type\": \"vm_window_size\", \"app_class_name\": \"vlc\"}", &err);
    want_art = json_loads("{\"type\": \"json\", \"value\": {\"width\": 640, \"height\": 480}}", 0, NULL);
    CU_ASSERT_TRUE(json_equal(art, want_art));
    json_decref(want_art);
    json_decref(art);

    /* vm_window_title */
    r.exit_code = 0;
    r.out = "Terminal - user@host\n";
    r.out_len = strlen(r.out);
    art = run_getter(&ops, "{\"type\": \"vm_window_title\"}", &err);
    CU_ASSERT_STRING_EQUAL(r.argv[1], "DISPLAY=:0");
    CU_ASSERT_STRING_EQUAL(r.argv[2], "xdotool");
    CU_ASSERT_STRING_EQUAL(art_str(art, "value"), "Terminal - user@host");
    json_decref(art);
    r.exit_code = 1;
    getter_fails(&ops, "{\"type\": \"vm_window_title\"}",
                 "vm_window_title: xdotool exited with status 1 (no active window?)");

    /* screenshot: a PNG in the artifact folder, region recorded */
    art = run_getter(&ops, "{\"type\": \"screenshot\", \"region\": [10, 20, 30, 40]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_EQUAL(r.shot_calls, 1);
    CU_ASSERT_STRING_EQUAL(art_str(art, "path"), r.path);
    CU_ASSERT_EQUAL(strncmp(r.path, art_dir(), strlen(art_dir())), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(json_object_get(art, "region"), 3)), 40);
    CU_ASSERT_EQUAL(strlen(art_str(art, "sha256")), 64);
    json_decref(art);
    art = run_getter(&ops, "{\"type\": \"screenshot\"}", &err); /* a second one gets its own name */
    CU_ASSERT_PTR_NOT_NULL(strstr(art_str(art, "path"), "/screenshot-2.png"));
    json_decref(art);
    getter_fails(&ops, "{\"type\": \"screenshot\", \"region\": [1200, 0, 100, 10]}",
                 "screenshot: region [1200, 0, 100, 10] is outside the 1280x800 screen");

    /* honest about what is not there yet, and about a missing env */
    getter_fails(&ops, "{\"type\": \"egress_log\"}", "egress_log: no egress record for this evaluation (the getter works inside an episode)");
    getter_fails(NULL, "{\"type\": \"vm_file\", \"path\": \"/x\"}", "vm_file: no env to run it in");
    em_env_ops partial = {.ctx = &r};
    getter_fails(&partial, "{\"type\": \"vm_window_title\"}", "vm_window_title: no env to run it in");
    getter_fails(&ops, "{\"type\": \"nope\"}",
                 "getter: type: unknown getter `nope`");
}

static void test_safe_name(void)
{
    const char *cases[][2] = {{"report.txt", "report.txt"}, {"../../etc/passwd", "_.._etc_passwd"},
                              {".bashrc", "bashrc"},        {"..", "file"},
                              {"", "file"},                 {"a b/c\\d", "a_b_c_d"},
                              {"caf\xc3\xa9.txt", "caf__.txt"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *s = getter_safe_name(cases[i][0]);
        CU_ASSERT_STRING_EQUAL(s, cases[i][1]);
        free(s);
    }
    char *long_name = xmalloc(301);
    memset(long_name, 'n', 300);
    long_name[300] = '\0';
    char *s = getter_safe_name(long_name);
    CU_ASSERT_EQUAL(strlen(s), 100);
    free(s);
    free(long_name);
}

/* ---- scoring ---- */

static task *load_task(const char *evaluator)
{
    char *text = xasprintf("{\"id\": \"score\", \"instruction\": \"x\", \"evaluator\": %s}", evaluator);
    task *t = NULL;
    em_err err = {0};
    if (task_parse(text, strlen(text), task_dir(), &t, &err) < 0)
        fprintf(stderr, "\n  task: %s\n", err.msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    free(text);
    return t;
}

/* Evaluate and check score and reason; returns details (caller decrefs). */
static json_t *expect_eval(const em_env_ops *ops, const char *evaluator, const char *agent_exit, double want,
                           const char *want_reason)
{
    task *t = load_task(evaluator);
    double score = -1;
    char *reason = NULL;
    json_t *details = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(evaluate_task(ops, &t->eval, t->dir, art_dir(), agent_exit, &score, &reason, &details, &err), 0);
    if (fabs(score - want) > 1e-9 || (want_reason && strcmp(reason, want_reason)))
        fprintf(stderr, "\n  score %g (want %g)\n  reason: %s\n  want:   %s\n", score, want, reason,
                want_reason ? want_reason : "(any)");
    CU_ASSERT_DOUBLE_EQUAL(score, want, 1e-9);
    if (want_reason)
        CU_ASSERT_STRING_EQUAL(reason, want_reason);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(details, "score")), want, 1e-9);
    free(reason);
    task_free(t);
    return details;
}

static json_t *detail(json_t *details, size_t i)
{
    return json_array_get(json_object_get(details, "metrics"), i);
}

#define R_TRUE "{\"type\": \"rule\", \"rules\": {\"expected\": \"yes\"}}"
#define R_FALSE "{\"type\": \"rule\", \"rules\": {\"expected\": \"no\"}}"
#define CMD "{\"type\": \"vm_command_line\", \"command\": \"echo yes\"}"

static void test_score_single(void)
{
    rec r = {.out = "yes", .out_len = 3};
    em_env_ops ops = rec_ops(&r);
    json_t *d = expect_eval(&ops, "{\"func\": \"exact_match\", \"result\": " CMD ", \"expected\": " R_TRUE "}", "done",
                            1, "exact_match: result equals \"yes\"");
    CU_ASSERT_EQUAL(r.exec_calls, 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "conj")), "and");
    json_t *m = detail(d, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(m, "func")), "exact_match");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(m, "result"), "value")), "yes");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(m, "expected"), "type")), "json");
    json_decref(d);

    d = expect_eval(&ops, "{\"func\": \"exact_match\", \"result\": " CMD ", \"expected\": " R_FALSE "}", "done", 0,
                    "exact_match: got \"yes\", expected \"no\"");
    json_decref(d);
}

static void test_score_and_or(void)
{
    rec r = {.out = "yes", .out_len = 3};
    em_env_ops ops = rec_ops(&r);
    /* and: stops at the first 0 */
    json_t *d = expect_eval(&ops,
                            "{\"func\": [\"exact_match\", \"exact_match\", \"exact_match\"],"
                            " \"result\": [" CMD ", " CMD ", " CMD "], \"expected\": [" R_TRUE ", " R_FALSE ", " R_TRUE
                            "]}",
                            "done", 0, "and: metric 2 of 3 decided: exact_match: got \"yes\", expected \"no\"");
    CU_ASSERT_EQUAL(r.exec_calls, 2);
    CU_ASSERT_TRUE(json_is_true(json_object_get(detail(d, 2), "skipped")));
    CU_ASSERT_PTR_NULL(json_object_get(detail(d, 1), "skipped"));
    json_decref(d);
    /* and: the mean when nothing is 0 */
    d = expect_eval(&ops,
                    "{\"func\": [\"exact_match\", \"fuzzy_match\"], \"result\": [" CMD ", " CMD "],"
                    " \"expected\": [" R_TRUE ", {\"type\": \"rule\", \"rules\": {\"expected\": \"yeah\"}}]}",
                    "done", (1 + 4.0 / 7) / 2, "mean of 2 metrics: all scored above 0"); /* LCS("yes", "yeah") = 2 */
    json_decref(d);
    /* or: stops at the first 1 */
    r.exec_calls = 0;
    d = expect_eval(&ops,
                    "{\"func\": [\"exact_match\", \"exact_match\", \"exact_match\"], \"conj\": \"or\","
                    " \"result\": [" CMD ", " CMD ", " CMD "], \"expected\": [" R_FALSE ", " R_TRUE ", " R_FALSE "]}",
                    "done", 1, "or: metric 2 of 3 decided: exact_match: result equals \"yes\"");
    CU_ASSERT_EQUAL(r.exec_calls, 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "conj")), "or");
    CU_ASSERT_TRUE(json_is_true(json_object_get(detail(d, 2), "skipped")));
    json_decref(d);
    /* or: the best score when nothing is 1 */
    d = expect_eval(&ops,
                    "{\"func\": [\"exact_match\", \"fuzzy_match\"], \"conj\": \"or\", \"result\": [" CMD ", " CMD "],"
                    " \"expected\": [" R_FALSE ", {\"type\": \"rule\", \"rules\": {\"expected\": \"yeah\"}}]}",
                    "done", 4.0 / 7, "best of 2 metrics: fuzzy_match: ratio 0.5714");
    json_decref(d);
}

/* A command getter whose stderr says the image lacks what it reads (a GSettings schema, a program in
 * a pipe) is flagged, whatever the score; one that says a file is missing is not (the agent's). */
static void test_score_getter_stderr_flag(void)
{
    rec r = {.out = "", .out_len = 0, .exit_code = 1, .err_text = "No such schema \u201corg.gnome.shell\u201d\n"};
    em_env_ops ops = rec_ops(&r);
    const char *gs = "{\"type\": \"vm_command_line\", \"command\": \"gsettings get org.gnome.shell favorite-apps\"}";
    char *ev = xasprintf("{\"func\": [\"exact_match\", \"exact_match\"], \"conj\": \"or\", \"result\": [%s, %s],"
                         " \"expected\": [" R_TRUE ", {\"type\": \"rule\", \"rules\": {\"expected\": \"\"}}]}",
                         gs, gs);
    json_t *d = expect_eval(&ops, ev, "done", 1, NULL); /* OSWorld's score: the empty output matches "" */
    json_t *flags = json_object_get(d, "getter_flags");
    CU_ASSERT_EQUAL(json_array_size(flags), 2); /* both metrics read the schema: both flagged */
    const char *why = json_string_value(json_object_get(json_array_get(flags, 0), "why"));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(flags, 0), "path")), "evaluator.result[0]");
    CU_ASSERT_PTR_NOT_NULL(why);
    if (why && !strstr(why, "vm_command_line: a GSettings schema the image lacks (stderr: `No such schema"))
        fprintf(stderr, "\n  why: %s\n", why);
    CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "vm_command_line: a GSettings schema the image lacks (stderr: `No such schema") : NULL);
    CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "exit status 1") : NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(detail(d, 0), "result"), "stderr")),
                           "No such schema \u201corg.gnome.shell\u201d\n");
    json_decref(d);
    free(ev);
    /* a pipe whose first program is missing: exit 0 from its last, flagged all the same */
    r.exit_code = 0;
    r.err_text = "sh: 1: pactl: not found\n";
    d = expect_eval(&ops, "{\"func\": \"exact_match\", \"result\": " CMD ", \"expected\": " R_TRUE "}", "done", 0, NULL);
    why = json_string_value(json_object_get(json_array_get(json_object_get(d, "getter_flags"), 0), "why"));
    CU_ASSERT_PTR_NOT_NULL(why ? strstr(why, "a program the image lacks (stderr: `sh: 1: pactl: not found`, exit status 0)") : NULL);
    json_decref(d);
    /* a file the agent was to make: its failure, not flagged */
    r.exit_code = 1;
    r.err_text = "cat: /home/user/out.txt: No such file or directory\n";
    d = expect_eval(&ops, "{\"func\": \"exact_match\", \"result\": " CMD ", \"expected\": " R_TRUE "}", "done", 0, NULL);
    CU_ASSERT_PTR_NULL(json_object_get(d, "getter_flags"));
    json_decref(d);
}

static void test_score_failures(void)
{
    rec r = {.out = "yes", .out_len = 3};
    em_env_ops ops = rec_ops(&r);
    /* a getter failure scores that metric 0 with the reason; the run does not fail */
    json_t *d = expect_eval(&ops, "{\"func\": \"exact_match\", \"result\": {\"type\": \"egress_log\"}, \"expected\": " R_TRUE "}",
                            "done", 0, "evaluator.result: egress_log: no egress record for this evaluation (the getter works inside an episode)");
    CU_ASSERT_TRUE(json_is_null(json_object_get(detail(d, 0), "result")));
    json_decref(d);
    d = expect_eval(&ops,
                    "{\"func\": [\"exact_match\", \"exact_match\"], \"conj\": \"or\", \"result\": [" CMD ", " CMD "],"
                    " \"expected\": [{\"type\": \"local_file\", \"path\": \"missing.txt\"}, " R_TRUE "]}",
                    "done", 1, NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(detail(d, 0), "reason")),
                           "evaluator.expected[0]: local_file: `missing.txt`: No such file or directory");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(detail(d, 0), "status")), "evaluator_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "status")), "scored"); /* the later 1 decided "or" */
    json_decref(d);
    /* an expected side that cannot be had is the evaluator's failure, not the agent's: no score */
    d = expect_eval(&ops,
                    "{\"func\": \"exact_match\", \"result\": " CMD ","
                    " \"expected\": {\"type\": \"local_file\", \"path\": \"missing.txt\"}}",
                    "done", 0, "evaluator.expected: local_file: `missing.txt`: No such file or directory");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "status")), "evaluator_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(detail(d, 0), "status")), "evaluator_error");
    json_decref(d);
    d = expect_eval(NULL, "{\"func\": \"exact_match\", \"result\": " CMD ", \"expected\": " R_TRUE "}", "done", 0,
                    "evaluator.result: vm_command_line: no env to run it in");
    json_decref(d);

    /* FAIL on a feasible task scores 0 without looking at anything */
    r.exec_calls = 0;
    d = expect_eval(&ops, "{\"func\": \"exact_match\", \"result\": " CMD ", \"expected\": " R_TRUE "}", "fail", 0,
                    "the agent answered FAIL (infeasible) but the task is feasible");
    CU_ASSERT_EQUAL(r.exec_calls, 0);
    CU_ASSERT_TRUE(json_is_true(json_object_get(detail(d, 0), "skipped")));
    json_decref(d);

    /* infeasible tasks want FAIL */
    d = expect_eval(&ops, "{\"func\": \"infeasible\"}", "fail", 1, "infeasible: the agent answered FAIL");
    json_decref(d);
    d = expect_eval(&ops, "{\"func\": \"infeasible\"}", "done", 0, NULL);
    json_decref(d);

    /* programmer errors */
    task *t = load_task("{\"func\": \"infeasible\"}");
    double score;
    char *reason;
    json_t *details;
    em_err err = {0};
    CU_ASSERT_EQUAL(evaluate_task(&ops, &t->eval, t->dir, NULL, "done", &score, &reason, &details, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "evaluate_task: no artifact folder");
    CU_ASSERT_EQUAL(evaluate_task(&ops, NULL, NULL, art_dir(), "done", &score, &reason, &details, &err), -1);
    task_free(t);
}

static void test_score_with_script(void)
{
    /* the example script, end to end: a guest file checked by file_contains.py */
    rec r = {.file = "name=envmgr\nversion=1\n", .file_len = 23};
    em_env_ops ops = rec_ops(&r);
    json_t *d = expect_eval(&ops,
                            "{\"func\": \"script\", \"result\": {\"type\": \"vm_file\", \"path\": \"/etc/app.conf\"},"
                            " \"expected\": {\"type\": \"rule\", \"rules\": {\"expected\": [\"name=envmgr\"]}},"
                            " \"options\": {\"path\": \"file_contains.py\"}}",
                            "done", 1, "script `file_contains.py`: \"file_contains: all 1 strings found\"");
    json_decref(d);
}

static const char *status_of(json_t *j)
{
    return json_string_value(json_object_get(j, "status"));
}

static void test_score_evaluator_error(void)
{
    /* a crashing script is no score: "and" stops there, "or" can still be decided by a later 1 */
    rec r = {.out = "yes", .out_len = 3};
    em_env_ops ops = rec_ops(&r);
    char *s = task_script("crash.sh", "#!/bin/sh\necho 'boom' >&2\nexit 1\n");
#define CRASH "{\"path\": \"crash.sh\"}"
    json_t *d = expect_eval(&ops, "{\"func\": \"script\", \"result\": " CMD ", \"options\": " CRASH "}", "done", 0,
                            "script `crash.sh`: exited with status 1: boom");
    CU_ASSERT_STRING_EQUAL(status_of(d), "evaluator_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(d, "evaluator_error")),
                           "script `crash.sh`: exited with status 1: boom");
    CU_ASSERT_STRING_EQUAL(status_of(detail(d, 0)), "evaluator_error");
    json_decref(d);

    /* and / or around the crash: the evaluator, the score, the reason, the status */
    static const struct {
        const char *evaluator;
        double score;
        const char *reason, *status;
    } cases[] = {
        {"{\"func\": [\"exact_match\", \"script\", \"exact_match\"], \"result\": [" CMD ", " CMD ", " CMD
         "], \"expected\": [" R_TRUE ", null, " R_TRUE "], \"options\": [{}, " CRASH ", {}]}",
         0, "and: metric 2 of 3: script `crash.sh`: exited with status 1: boom", "evaluator_error"},
        /* and: an earlier 0 decided before the script ran */
        {"{\"func\": [\"exact_match\", \"script\"], \"result\": [" CMD ", " CMD "], \"expected\": [" R_FALSE
         ", null], \"options\": [{}, " CRASH "]}",
         0, NULL, "scored"},
        /* or: a later 1 decides; without one, the task is an evaluator_error */
        {"{\"func\": [\"script\", \"exact_match\"], \"conj\": \"or\", \"result\": [" CMD ", " CMD
         "], \"expected\": [null, " R_TRUE "], \"options\": [" CRASH ", {}]}",
         1, "or: metric 2 of 2 decided: exact_match: result equals \"yes\"", "scored"},
        {"{\"func\": [\"script\", \"exact_match\"], \"conj\": \"or\", \"result\": [" CMD ", " CMD
         "], \"expected\": [null, " R_FALSE "], \"options\": [" CRASH ", {}]}",
         0, "or: metric 1 of 2: script `crash.sh`: exited with status 1: boom", "evaluator_error"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        d = expect_eval(&ops, cases[i].evaluator, "done", cases[i].score, cases[i].reason);
        CU_ASSERT_STRING_EQUAL(status_of(d), cases[i].status);
        if (i == 0)
            CU_ASSERT_TRUE(json_is_true(json_object_get(detail(d, 2), "skipped")));
        json_decref(d);
    }
#undef CRASH
    free(s);
}

/* OSWorld's vm_file multi/gives, `~`, cache_file reading the episode's cache, rule_relativeTime. */
static void test_getters_osworld(void)
{
    rec r = {0};
    em_env_ops ops = rec_ops(&r);
    em_err err = {0};
    r.file = "data";
    r.file_len = 4;
    json_t *art = run_getter(&ops, "{\"type\": \"vm_file\", \"path\": \"~/Desktop/a.txt\", \"dest\": \"a.txt\"}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_STRING_EQUAL(r.path, "/home/user/Desktop/a.txt");
    json_decref(art);
    /* multi with two gives: a list artifact */
    art = run_getter(&ops, "{\"type\": \"vm_file\", \"multi\": true, \"path\": [\"/a\", \"/b\", \"/c\"], \"dest\": "
                           "[\"m1\", \"m2\", \"m3\"], \"gives\": [0, 2]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_STRING_EQUAL(art_str(art, "type"), "list");
    json_t *items = json_object_get(art, "items");
    CU_ASSERT_EQUAL(json_array_size(items), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(json_array_get(items, 1), "path")), "/m3"));
    CU_ASSERT_EQUAL(r.read_calls, 4);
    json_decref(art);
    /* a file the guest lacks is null in the list (OSWorld's None), an error alone */
    r.file = NULL;
    art = run_getter(&ops, "{\"type\": \"vm_file\", \"multi\": true, \"path\": [\"/a\", \"/b\"], \"dest\": [\"n1\", "
                           "\"n2\"], \"gives\": [0, 1]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_TRUE(json_is_null(json_array_get(json_object_get(art, "items"), 0)));
    json_decref(art);

    /* cache_file: what execute's stdout (or a vm_file dest) left in the episode's cache */
    char *p = xasprintf("%s/wmctrl.out", art_dir());
    CU_ASSERT_EQUAL(write_file_atomic(p, "win\n", 4, 0644, &err), 0);
    art = run_getter(&ops, "{\"type\": \"cache_file\", \"path\": \"wmctrl.out\"}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_STRING_EQUAL(art_str(art, "path"), p);
    json_decref(art);
    free(p);

    /* rule_relativeTime: "tomorrow" from the guest's date (tests/unit/test_getters_apps.c has every phrase) */
    r.out = "2026-12-31\n";
    r.out_len = strlen(r.out);
    art = run_getter(&ops, "{\"type\": \"rule_relativeTime\", \"rules\": {\"relativeTime\": {\"from\": \"tomorrow\"}, "
                           "\"expected\": {\"time\": \"{Year}-{Month0D}-{Day0D} {DoW}\"}}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_STRING_EQUAL(r.argv[0], "date");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(
                               json_object_get(json_object_get(art, "value"), "expected"), "time")), "2027-01-01 Fri");
    json_decref(art);
    art = run_getter(&ops, "{\"type\": \"rule_relativeTime\", \"rules\": {\"relativeTime\": {\"from\": \"next Monday\", "
                           "\"to\": \"next Friday\"}, \"expected\": {\"from\": \"{DoW}\", \"to\": \"{DoW}\"}}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    json_t *exp = json_object_get(json_object_get(art, "value"), "expected");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(exp, "from")), "Mon");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(exp, "to")), "Fri");
    json_decref(art);
}


/* A file written by Python (pptx_fixture, openpyxl) from the code given, read back. */
static char *python_fixture(const char *name, const char *code, size_t *len)
{
    em_err err = {0};
    char *py = xasprintf("%s/%s.py", art_dir(), name), *out = xasprintf("%s/%s", art_dir(), name);
    char *src = xasprintf("import sys\nsys.path.insert(0, '%s/tests/metrics')\nfrom pptx_fixture import *\n"
                          "out = sys.argv[1]\n%s\n", ENVMGR_SOURCE_DIR, code);
    CU_ASSERT_EQUAL(write_file_atomic(py, src, strlen(src), 0600, &err), 0);
    char *cmd = xasprintf("/usr/bin/python3 %s %s", py, out);
    CU_ASSERT_EQUAL(system(cmd), 0);
    char *data = NULL;
    CU_ASSERT_EQUAL(read_file_capped(out, 1 << 20, &data, len, &err), 0);
    unlink(py);
    unlink(out);
    free(cmd);
    free(src);
    free(py);
    free(out);
    return data;
}

/* A Python-written fixture served as the guest's file by r (caller frees the returned bytes). */
static char *serve_fixture(rec *r, const char *name, const char *code)
{
    size_t n;
    char *data = python_fixture(name, code, &n);
    r->file = data;
    r->file_len = n;
    return data;
}

/* audio_in_slide, background_image_in_slide, content_from_vm_file: the guest file parsed by
 * getter_run.py in the evaluator sandbox, its answer saved or handed on. */
static void test_getters_documents(void)
{
    rec r = {0};
    em_env_ops ops = rec_ops(&r);
    em_err err = {0};
    char *deck = serve_fixture(&r, "deck.pptx",
                               "write_pptx(out, [[sp(2, [para(run('t'))], ph='type=\"title\"')]] * 2,"
                               " media={'m.mp3': b'ID3 audio bytes'},"
                               " extra_rels={0: [('rId7', 'audio', '../media/m.mp3')]})");
    json_t *art = run_getter(&ops, "{\"type\": \"audio_in_slide\", \"ppt_file_path\": \"~/Desktop/deck.pptx\", "
                                   "\"slide_index\": 0, \"dest\": \"song.mp3\"}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    CU_ASSERT_STRING_EQUAL(r.path, "/home/user/Desktop/deck.pptx");
    CU_ASSERT_STRING_EQUAL(art_str(art, "member"), "ppt/media/m.mp3");
    char *audio = NULL;
    size_t alen;
    CU_ASSERT_EQUAL(read_file_capped(art_str(art, "path"), 1024, &audio, &alen, &err), 0);
    CU_ASSERT_TRUE(alen == 15 && !memcmp(audio, "ID3 audio bytes", 15));
    CU_ASSERT_PTR_NOT_NULL(strstr(art_str(art, "path"), "/song.mp3"));
    free(audio);
    json_decref(art);
    /* a slide without audio, one without a picture background: OSWorld's None */
    art = run_getter(&ops, "{\"type\": \"audio_in_slide\", \"ppt_file_path\": \"/d.pptx\", \"slide_index\": \"1\", "
                           "\"dest\": \"a.mp3\"}", &err);
    CU_ASSERT_TRUE(json_is_null(json_object_get(art, "value")));
    json_decref(art);
    art = run_getter(&ops, "{\"type\": \"background_image_in_slide\", \"ppt_file_path\": \"/d.pptx\", \"slide_index\": "
                           "0, \"dest\": \"bg.png\"}", &err);
    CU_ASSERT_TRUE(json_is_null(json_object_get(art, "value")));
    json_decref(art);
    free(deck);
    /* a pptx the guest lacks: None too */
    r.file = NULL;
    art = run_getter(&ops, "{\"type\": \"audio_in_slide\", \"ppt_file_path\": \"/gone.pptx\", \"slide_index\": 0, "
                           "\"dest\": \"a.mp3\"}", &err);
    CU_ASSERT_TRUE(json_is_null(json_object_get(art, "value")));
    json_decref(art);
    /* not a zip: an evaluator error from the sandbox, naming the getter */
    r.file = "plain text";
    r.file_len = 10;
    getter_fails(&ops, "{\"type\": \"audio_in_slide\", \"ppt_file_path\": \"/d.pptx\", \"slide_index\": 0, \"dest\": "
                       "\"a.mp3\"}",
                 "audio_in_slide: ppt_file_path: not a zip container: File is not a zip file");

    /* a zip bomb (300 MiB of zeros in a few hundred KiB): refused before anything inflates it */
    char *bomb = serve_fixture(&r, "bomb.pptx",
                               "import zipfile\nwith zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as z:\n"
                               "    z.writestr('ppt/slides/_rels/slide1.xml.rels', b'\\0' * (300 << 20))");
    art = run_getter(&ops, "{\"type\": \"audio_in_slide\", \"ppt_file_path\": \"/d.pptx\", \"slide_index\": 0, "
                           "\"dest\": \"a.mp3\"}", &err);
    CU_ASSERT_PTR_NULL(art);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "audio_in_slide: ppt_file_path: zip member 'ppt/slides/_rels/slide1.xml.rels' "
                                           "inflates "));
    free(bomb);

    char *book = serve_fixture(&r, "r.xlsx",
                               "from openpyxl import Workbook\nwb = Workbook()\n"
                               "for row in (['Name', 'Papers'], ['Ada', 3], ['Yann LeCun', 372]):\n"
                               "    wb.active.append(row)\nwb.save(out)");
    art = run_getter(&ops, "{\"type\": \"content_from_vm_file\", \"path\": \"/home/user/Desktop/r.xlsx\", \"file_type\": "
                           "\"xlsx\", \"file_content\": \"last_row\"}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(art);
    char *v = json_dumps(json_object_get(art, "value"), JSON_COMPACT);
    CU_ASSERT_STRING_EQUAL(v, "[\"Yann LeCun\",\"372\"]");
    free(v);
    json_decref(art);
    free(book);
    getter_fails(&ops, "{\"type\": \"content_from_vm_file\", \"path\": \"/r.csv\", \"file_type\": \"csv\", "
                       "\"file_content\": \"last_row\"}",
                 "getter: file_type: expected \"xlsx\" (the only type OSWorld reads)");
}

static CU_TestInfo tests[] = {
    {"exact_match", test_exact_match},
    {"check_include_exclude", test_include_exclude},
    {"match_in_list and is_in_list", test_lists},
    {"literal_match", test_literal_match},
    {"fuzzy_match", test_fuzzy_match},
    {"compare_text_file", test_compare_text_file},
    {"check_direct_json_object", test_direct_json_object},
    {"compare_images_exact", test_compare_images},
    {"infeasible", test_infeasible},
    {"metric_run API", test_metric_api},
    {"script: the example file_contains.py", test_script_example},
    {"script: protocol and failures", test_script_protocol},
    {"script: timeout kills the process group", test_script_timeout},
    {"getters: rule, local_file, cache_file, refusals", test_getters_host_side},
    {"getters: guest side through recorded ops", test_getters_guest_side},
    {"getters: OSWorld's multi, ~, cache_file, relative time", test_getters_osworld},
    {"getters: documents read in the evaluator sandbox", test_getters_documents},
    {"getters: safe artifact names", test_safe_name},
    {"score: one metric", test_score_single},
    {"score: and / or", test_score_and_or},
    {"score: failures and FAIL", test_score_failures},
    {"score: a getter's stderr names what the image lacks: flagged", test_score_getter_stderr_flag},
    {"score: script end to end", test_score_with_script},
    {"score: evaluator_error is no score", test_score_evaluator_error},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("metrics", tests);
}

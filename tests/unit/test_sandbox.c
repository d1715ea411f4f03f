/* The evaluator sandbox (artifacts → values, bwrap runs, failure texts) and the registry
 * (validation, option checks, the catalog). The hostile inputs are
 * tests/integration/test_evaluator_sandbox.sh's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "evaluator/metrics_builtin.h"
#include "evaluator/registry.h"
#include "evaluator/sandbox.h"
#include "helpers/cunit_main.h"

static char *tmp_file(const char *name, const char *text, mode_t mode)
{
    char *p = xasprintf("%s/%s", test_tmpdir(), name);
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(p, text, strlen(text), mode, &err), 0);
    return p;
}

static json_t *file_art(const char *path)
{
    return json_pack("{s:s,s:s,s:s}", "type", "file", "path", path, "sha256", "x");
}

/* Compact JSON of v (decref'd), for comparing whole values. */
static char *dump(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
    json_decref(v);
    return s;
}

static void expect_json(json_t *v, const char *want)
{
    char *s = dump(v);
    if (strcmp(s, want))
        fprintf(stderr, "\n  got:  %s\n  want: %s\n", s, want);
    CU_ASSERT_STRING_EQUAL(s, want);
    free(s);
}

static void test_osworld_values(void)
{
    char *xlsx = tmp_file("report.xlsx", "x", 0600), *odd = tmp_file("noext", "y", 0600);
    sandbox sb;
    sandbox_init(&sb);
    json_t *a = file_art(xlsx);
    expect_json(sandbox_osworld_value(&sb, a, "result"), "\"/in/result/0.xlsx\"");
    expect_json(sandbox_osworld_value(&sb, a, "expected"), "\"/in/expected/0.xlsx\"");
    json_decref(a);
    CU_ASSERT_EQUAL(sb.nbinds, 2);
    CU_ASSERT_STRING_EQUAL(sb.binds[0].host, xlsx);
    CU_ASSERT_STRING_EQUAL(sb.binds[1].inside, "/in/expected/0.xlsx");
    /* a list of files: a list of paths; a file without an extension keeps none; a missing one is None */
    a = json_pack("[o,o,o]", file_art(xlsx), file_art(odd), file_art("/nonexistent/x.docx"));
    expect_json(sandbox_osworld_value(&sb, a, "result"), "[\"/in/result/1.xlsx\",\"/in/result/2\",null]");
    json_decref(a);
    /* text, json (a rule), nothing */
    a = json_pack("{s:s,s:s}", "type", "text", "value", "hello");
    expect_json(sandbox_osworld_value(&sb, a, "result"), "\"hello\"");
    json_decref(a);
    a = json_pack("{s:s,s:{s:[i]}}", "type", "json", "value", "expected", 1);
    expect_json(sandbox_osworld_value(&sb, a, "expected"), "{\"expected\":[1]}");
    json_decref(a);
    expect_json(sandbox_osworld_value(&sb, NULL, "expected"), "null");
    /* the `script` metric gets the artifact, its path replaced */
    a = file_art(xlsx);
    expect_json(sandbox_script_artifact(&sb, a, "result"), "{\"path\":\"/in/result/3.xlsx\",\"sha256\":\"x\",\"type\":\"file\"}");
    json_decref(a);
    a = file_art("/nonexistent/y.txt");
    expect_json(sandbox_script_artifact(&sb, a, "result"), "{\"path\":null,\"sha256\":\"x\",\"type\":\"file\"}");
    json_decref(a);
    CU_ASSERT_PTR_NULL(sandbox_script_artifact(&sb, NULL, "result"));
    CU_ASSERT_EQUAL(sb.nbinds, 5);
    sandbox_free(&sb);
    free(xlsx);
    free(odd);
}

static int run_sh(const sandbox *sb, const char *script, const char *input, double timeout_s, spawn_result *r)
{
    const char *const argv[] = {"/bin/sh", "-c", script, NULL};
    em_err err = {0};
    int rc = sandbox_run(sb, argv, input, input ? strlen(input) : 0, timeout_s, r, &err);
    if (rc < 0)
        fprintf(stderr, "\n  sandbox_run: %s\n", err.msg);
    return rc;
}

static void test_runs(void)
{
    em_err err = {0};
    if (sandbox_check(&err) < 0) {
        fprintf(stderr, "\n  %s\n", err.msg);
        CU_FAIL_FATAL("the evaluator sandbox cannot run here");
    }
    char *in = tmp_file("in.txt", "secret-free input\n", 0600);
    char *host_only = tmp_file("host-only.txt", "must stay invisible\n", 0644);
    sandbox sb;
    sandbox_init(&sb);
    sandbox_add(&sb, in, "/in/result/0.txt");
    spawn_result r;
    /* stdin in, stdout out; the bound file readable and read-only; nothing else of the host */
    char *script = xasprintf("cat; cat /in/result/0.txt; echo x >> /in/result/0.txt 2>/dev/null && echo WROTE; "
                             "[ -e '%s' ] && echo SEES_HOST; [ -e /etc/shadow ] && echo SHADOW; "
                             "echo hi > /tmp/ok && cat /tmp/ok; touch /x 2>/dev/null && echo ROOT_RW; pwd",
                             host_only);
    CU_ASSERT_EQUAL_FATAL(run_sh(&sb, script, "from stdin\n", 10, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.out, "from stdin\nsecret-free input\nhi\n/tmp\n");
    CU_ASSERT(WIFEXITED(r.status));
    spawn_result_free(&r);
    free(script);

    /* the environment is cleared */
    setenv("ENVMGR_TEST_SECRET", "leak", 1);
    CU_ASSERT_EQUAL_FATAL(run_sh(&sb, "env | sort | tr '\\n' ' '", NULL, 10, &r), 0);
    CU_ASSERT_PTR_NULL(strstr(r.out, "ENVMGR_TEST_SECRET"));
    CU_ASSERT_PTR_NOT_NULL(strstr(r.out, "HOME=/tmp"));
    unsetenv("ENVMGR_TEST_SECRET");
    spawn_result_free(&r);

    /* the exit status comes through; a signal is named; the deadline kills it */
    CU_ASSERT_EQUAL_FATAL(run_sh(&sb, "echo oops >&2; exit 4", NULL, 10, &r), 0);
    char *why = sandbox_failure(&r, 10);
    CU_ASSERT_STRING_EQUAL(why, "exited with status 4: oops");
    free(why);
    spawn_result_free(&r);
    CU_ASSERT_EQUAL_FATAL(run_sh(&sb, "kill -SEGV $$", NULL, 10, &r), 0);
    why = sandbox_failure(&r, 10);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "killed by signal 11"));
    free(why);
    spawn_result_free(&r);
    double t0 = now_ms();
    CU_ASSERT_EQUAL_FATAL(run_sh(&sb, "sleep 20", NULL, 0.3, &r), 0);
    CU_ASSERT_TRUE(r.timed_out);
    CU_ASSERT(now_ms() - t0 < 5000);
    why = sandbox_failure(&r, 0.3);
    CU_ASSERT_STRING_EQUAL(why, "timed out after 0.3 s");
    free(why);
    spawn_result_free(&r);

    /* a bind whose source vanished is the sandbox's failure, not the program's */
    sandbox_add(&sb, "/nonexistent/file.txt", "/in/result/1.txt");
    const char *const argv[] = {"/bin/true", NULL};
    CU_ASSERT_EQUAL(sandbox_run(&sb, argv, NULL, 0, 5, &r, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "evaluator sandbox: "));
    sandbox_free(&sb);
    free(in);
    free(host_only);
}

static void test_failure_texts(void)
{
    spawn_result r = {.out = "", .errs = "line 1\nMemoryError\n", .err_len = 19};
    r.status = 24; /* as waitpid: killed by SIGXCPU */
    char *why = sandbox_failure(&r, 2.5);
    CU_ASSERT_STRING_EQUAL(why, "killed by SIGXCPU (CPU limit of 3 s): MemoryError");
    free(why);
    r.status = (128 + SIGXFSZ) << 8; /* bwrap's exit status for a child killed by SIGXFSZ */
    why = sandbox_failure(&r, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "killed by SIGXFSZ (file size limit"));
    free(why);
    r.overflow = true;
    why = sandbox_failure(&r, 2);
    CU_ASSERT_STRING_EQUAL(why, "printed more than 65536 bytes");
    free(why);
}

static void reg_err(const char *text, const char *want)
{
    json_t *r = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(registry_parse(text, strlen(text), &r, &err), -1);
    CU_ASSERT_PTR_NULL(r);
    if (!strstr(err.msg, want))
        fprintf(stderr, "\n  got:  %s\n  want: ...%s...\n", err.msg, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
}

#define ENTRY(x, opts) "{\"family\": \"tables\", \"expected\": " x ", \"options\": " opts ", \"summary\": \"s\", \"osworld\": \"o\"}"

static void test_registry_parse(void)
{
    json_t *r = NULL;
    em_err err = {0};
    const char *ok = "{\"m\": " ENTRY("\"optional\"", "{\"rules\": \"list, required: ...\", \"n\": \"int, default 0\"}") "}";
    CU_ASSERT_EQUAL_FATAL(registry_parse(ok, strlen(ok), &r, &err), 0);
    json_t *m = json_object_get(r, "m");
    CU_ASSERT_EQUAL(registry_expects(m), REG_EXPECTED_OPTIONAL);
    json_t *o = json_loads("{\"rules\": [], \"n\": 3, \"other\": 1}", 0, NULL);
    CU_ASSERT_EQUAL(registry_check_options(m, o, &err), 0);
    json_decref(o);
    o = json_loads("{\"rules\": [], \"n\": 3.5}", 0, NULL);
    CU_ASSERT_EQUAL(registry_check_options(m, o, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "n: expected an integer, got number");
    json_decref(o);
    CU_ASSERT_EQUAL(registry_check_options(m, NULL, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "rules: missing");
    json_decref(r);

    reg_err("[1]", "registry.json: expected an object of metrics");
    reg_err("{\"m\": 1", "registry.json: line 1:");
    reg_err("{\"bad name\": " ENTRY("true", "{}") "}", "`bad name`: a metric name is");
    reg_err("{\"m\": " ENTRY("1", "{}") "}", "registry.json: m.expected: expected true, false or \"optional\"");
    reg_err("{\"m\": " ENTRY("true", "[]") "}", "registry.json: m.options: expected an object, got array");
    reg_err("{\"m\": " ENTRY("true", "{\"x\": 1}") "}", "registry.json: m.options.x: expected a string");
    reg_err("{\"m\": {\"expected\": true, \"options\": {}}}", "registry.json: m.family: expected a string");
    reg_err("{\"m\": " ENTRY("true", "{}") ", \"m\": " ENTRY("true", "{}") "}", "duplicate object key");
}

static json_t *catalog_entry(json_t *cat, const char *name)
{
    size_t i;
    json_t *m;
    json_array_foreach(cat, i, m) if (!strcmp(json_string_value(json_object_get(m, "name")), name)) return m;
    return NULL;
}

static void test_registry_of_this_build(void)
{
    CU_ASSERT_PTR_NULL(registry_error());
    CU_ASSERT_PTR_NOT_NULL_FATAL(registry_get());
    CU_ASSERT(json_object_size(registry_get()) >= 100);
    json_t *cat = metric_catalog();
    json_t *t = catalog_entry(cat, "compare_table"), *img = catalog_entry(cat, "compare_images"),
           *exact = catalog_entry(cat, "compare_images_exact");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t, "source")), "script");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t, "family")), "tables");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t, "expected")), "optional");
    CU_ASSERT_PTR_NOT_NULL_FATAL(img);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(img, "source")), "script");
    CU_ASSERT_PTR_NOT_NULL_FATAL(exact);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(exact, "source")), "builtin");
    /* sorted, each name once */
    for (size_t i = 1; i < json_array_size(cat); i++)
        CU_ASSERT(strcmp(json_string_value(json_object_get(json_array_get(cat, i - 1), "name")),
                         json_string_value(json_object_get(json_array_get(cat, i), "name"))) < 0);
    json_decref(cat);
}

static CU_TestInfo tests[] = {
    {"artifacts become OSWorld's values; files bound at /in/<side>/<n>.<ext>", test_osworld_values},
    {"runs: stdin/stdout, read-only inputs, no host files, clean env, status, signal, deadline", test_runs},
    {"failure texts name the limit", test_failure_texts},
    {"registry.json is validated; options are checked by their documented type", test_registry_parse},
    {"this build's registry loads; the catalog merges it with the C table", test_registry_of_this_build},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("sandbox", tests);
}

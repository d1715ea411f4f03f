/* Suites without a VM: task lists and shards, results.jsonl under crashes,
 * summaries, junit.xml, compare, merge, the default env count, and gc's
 * choices over fake run and cache directories. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "envmgr/suite/report_compare.h"
#include "envmgr/suite/report_merge.h"
#include "envmgr/suite/report_summary.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/base/sha256.h"
#include "envmgr/suite/suite.h"
#include "envmgr/env/gc.h"
#include "envmgr/suite/suite_host.h"
#include "envmgr/suite/suite_worker.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

#define DATA_SUITE ENVMGR_SOURCE_DIR "/tests/data/suite"

static char *tmp_path(const char *name)
{
    return xasprintf("%s/%s", test_tmpdir(), name);
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    char *text = NULL;
    em_err err = {0};
    if (read_file_capped(path, 1 << 24, &text, NULL, &err) < 0)
        return NULL;
    return text;
}

/* ---- shards and task lists ---- */

static void test_parse_shard(void)
{
    em_err err = {0};
    int k = 0, n = 0;
    CU_ASSERT_EQUAL(suite_parse_shard("1/2", &k, &n, &err), 0);
    CU_ASSERT(k == 1 && n == 2);
    CU_ASSERT_EQUAL(suite_parse_shard("7/7", &k, &n, &err), 0);
    const char *bad[] = {"0/2", "3/2", "a/b", "2", "/2", "1/", "1/0", "-1/2", "1/2/3", ""};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        em_err e2 = {0};
        CU_ASSERT_EQUAL(suite_parse_shard(bad[i], &k, &n, &e2), -1);
        CU_ASSERT_EQUAL(e2.code, EM_EXIT_USAGE);
        CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, "--shard"));
    }
}

static void test_shards_partition(void)
{
    for (int n = 1; n <= 7; n++)
        for (size_t i = 0; i < 50; i++) {
            int owners = 0;
            for (int k = 1; k <= n; k++)
                owners += suite_in_shard(i, k, n);
            CU_ASSERT_EQUAL(owners, 1);
        }
    /* round robin: shard sizes differ by at most one */
    int sizes[3] = {0};
    for (size_t i = 0; i < 10; i++)
        for (int k = 1; k <= 3; k++)
            sizes[k - 1] += suite_in_shard(i, k, 3);
    CU_ASSERT(sizes[0] == 4 && sizes[1] == 3 && sizes[2] == 3);
}

static void test_load_data_suite(void)
{
    em_err err = {0};
    suite *s = NULL;
    CU_ASSERT_EQUAL_FATAL(suite_load(DATA_SUITE, 1, 1, false, NULL, &s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(s->ntasks, 4);
    CU_ASSERT_EQUAL(s->total, 4);
    const char *ids[] = {"count-files", "kernel-name", "slow-marker", "terminal-echo"};
    const char *domains[] = {"shell", "system", "system", "shell"};
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_STRING_EQUAL(s->tasks[i].id, ids[i]);
        CU_ASSERT_STRING_EQUAL(s->tasks[i].domain, domains[i]);
        CU_ASSERT_STRING_EQUAL(s->tasks[i].image, "desktop");
        CU_ASSERT(s->tasks[i].episode_timeout_s > 0);
    }
    /* The index lists the same tasks: same ids, same domains, same order. */
    suite *x = NULL;
    CU_ASSERT_EQUAL_FATAL(suite_load(DATA_SUITE "/test_all.json", 1, 1, false, NULL, &x, &err), 0);
    CU_ASSERT_EQUAL_FATAL(x->ntasks, 4);
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_STRING_EQUAL(x->tasks[i].id, ids[i]);
        CU_ASSERT_STRING_EQUAL(x->tasks[i].domain, domains[i]);
        CU_ASSERT_STRING_EQUAL(x->tasks[i].path, s->tasks[i].path);
    }
    suite_free(x);
    /* Shards: disjoint, together the whole, the same every time. */
    suite *a = NULL, *b = NULL, *a2 = NULL;
    CU_ASSERT_EQUAL_FATAL(suite_load(DATA_SUITE, 1, 2, false, NULL, &a, &err), 0);
    CU_ASSERT_EQUAL_FATAL(suite_load(DATA_SUITE, 2, 2, false, NULL, &b, &err), 0);
    CU_ASSERT_EQUAL_FATAL(suite_load(DATA_SUITE, 1, 2, false, NULL, &a2, &err), 0);
    CU_ASSERT_EQUAL(a->ntasks + b->ntasks, 4);
    CU_ASSERT(a->total == 4 && b->total == 4);
    CU_ASSERT_STRING_EQUAL(a->tasks[0].id, "count-files");
    CU_ASSERT_STRING_EQUAL(a->tasks[1].id, "slow-marker");
    CU_ASSERT_STRING_EQUAL(b->tasks[0].id, "kernel-name");
    CU_ASSERT_STRING_EQUAL(b->tasks[1].id, "terminal-echo");
    CU_ASSERT_EQUAL_FATAL(a2->ntasks, a->ntasks);
    for (size_t i = 0; i < a->ntasks; i++)
        CU_ASSERT_STRING_EQUAL(a2->tasks[i].id, a->tasks[i].id);
    json_t *meta = suite_meta_new(b, "agent --x", 3);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(meta, "shard")), "2/2");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(meta, "repeat")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(meta, "suite_tasks")), 4);
    CU_ASSERT_EQUAL(json_array_size(json_object_get(meta, "tasks")), 2);
    json_decref(meta);
    suite_free(a);
    suite_free(b);
    suite_free(a2);
    suite_free(s);
}

#define TASK_JSON "{\"id\":\"%s\",\"instruction\":\"x\",\"evaluator\":{\"func\":\"infeasible\"}}"

static void test_load_errors_and_flat_domains(void)
{
    _cleanup_free_ char *dir = tmp_path("flat"), *sub = tmp_path("flat/inner");
    mkdir(dir, 0755);
    mkdir(sub, 0755);
    char text[256];
    _cleanup_free_ char *p1 = xasprintf("%s/one.json", dir), *p2 = xasprintf("%s/two.json", sub);
    snprintf(text, sizeof text, TASK_JSON, "b-task");
    put(p1, text);
    snprintf(text, sizeof text, TASK_JSON, "a-task");
    put(p2, text);
    em_err err = {0};
    suite *s = NULL;
    CU_ASSERT_EQUAL_FATAL(suite_load(dir, 1, 1, false, NULL, &s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(s->ntasks, 2);
    CU_ASSERT_STRING_EQUAL(s->tasks[0].id, "a-task");
    CU_ASSERT_STRING_EQUAL(s->tasks[0].domain, "inner");
    CU_ASSERT_STRING_EQUAL(s->tasks[1].domain, "flat"); /* a file at the top takes the suite's name */
    suite_free(s);
    /* Two files, one id: refused, naming both. */
    snprintf(text, sizeof text, TASK_JSON, "b-task");
    put(p2, text);
    CU_ASSERT_EQUAL(suite_load(dir, 1, 1, false, NULL, &s, &err), -1);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "used twice"));
    /* A bad task fails a --strict load, before any VM; without --strict it stays, unsupported, with why. */
    put(p2, "{\"id\":\"c\"}");
    em_err e2 = {0};
    CU_ASSERT_EQUAL(suite_load(dir, 1, 1, true, NULL, &s, &e2), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, "two.json"));
    CU_ASSERT_EQUAL_FATAL(suite_load(dir, 1, 1, false, NULL, &s, &e2), 0);
    CU_ASSERT_EQUAL_FATAL(s->ntasks, 2);
    CU_ASSERT_EQUAL(suite_unsupported(s), 1);
    CU_ASSERT_STRING_EQUAL(s->tasks[1].id, "c");
    CU_ASSERT_STRING_EQUAL(s->tasks[1].unsupported, "instruction: missing");
    suite_free(s);
    em_err e3 = {0};
    CU_ASSERT_EQUAL(suite_load("/nonexistent/suite", 1, 1, false, NULL, &s, &e3), -1);
}

static void test_keys_and_dirs(void)
{
    char *k0 = suite_episode_key("t", 0), *k3 = suite_episode_key("t", 3);
    char *d1 = suite_episode_dir("t", 0, 1), *d2 = suite_episode_dir("t", 2, 3);
    CU_ASSERT_STRING_EQUAL(k0, "t");
    CU_ASSERT_STRING_EQUAL(k3, "t#3");
    CU_ASSERT_STRING_EQUAL(d1, "traces/t");
    CU_ASSERT_STRING_EQUAL(d2, "traces/t/rep-2");
    free(k0);
    free(k3);
    free(d1);
    free(d2);
}

/* ---- results.jsonl ---- */

static json_t *line(const char *id, const char *domain, int rep, double score, bool final, double secs, int steps,
                    const char *cause, const char *reason)
{
    return json_pack("{s:s, s:s, s:i, s:i, s:b, s:f, s:f, s:i, s:s, s:s, s:s}", "task_id", id, "domain", domain,
                     "repeat", rep, "attempt", 0, "final", final, "score", score, "duration_s", secs, "steps", steps,
                     "exit_cause", cause, "reason", reason, "trace", "traces/x/trace");
}

static void append(int fd, json_t *l)
{
    em_err err = {0};
    CU_ASSERT_EQUAL(results_append(fd, l, &err), 0);
    json_decref(l);
}

static void test_results_crash_safety(void)
{
    _cleanup_free_ char *path = tmp_path("results.jsonl");
    unlink(path);
    em_err err = {0};
    int fd;
    size_t dropped = 99, skipped = 99;
    json_t *lines;
    CU_ASSERT_EQUAL(results_read(path, &lines, &skipped, &err), 0); /* missing: empty */
    CU_ASSERT_EQUAL(json_array_size(lines), 0);
    json_decref(lines);
    CU_ASSERT_EQUAL_FATAL(results_open_append(path, &fd, &dropped, &err), 0);
    CU_ASSERT_EQUAL(dropped, 0);
    append(fd, line("a", "d", 0, 1, true, 1, 1, "done", ""));
    append(fd, line("b", "d", 0, 0, true, 2, 2, "fail", "multi\nline"));
    /* A crash in the middle of a write: half a line, no newline. */
    CU_ASSERT_EQUAL(write(fd, "{\"task_id\":\"c\",\"sc", 18), 18);
    close(fd);
    CU_ASSERT_EQUAL(results_read(path, &lines, &skipped, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(lines), 2);
    CU_ASSERT_EQUAL(skipped, 1);
    json_decref(lines);
    /* Reopening cuts the partial line; the next line lands on a line of its own. */
    CU_ASSERT_EQUAL_FATAL(results_open_append(path, &fd, &dropped, &err), 0);
    CU_ASSERT_EQUAL(dropped, 18);
    append(fd, line("c", "d", 0, 1, true, 3, 3, "done", ""));
    close(fd);
    CU_ASSERT_EQUAL(results_read(path, &lines, &skipped, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(lines), 3);
    CU_ASSERT_EQUAL(skipped, 0);
    json_decref(lines);
    _cleanup_free_ char *text = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_EQUAL(text[strlen(text) - 1], '\n');
    size_t nl = 0;
    for (char *p = text; *p; p++)
        nl += *p == '\n';
    CU_ASSERT_EQUAL(nl, 3); /* a reason with a newline stays on one line (JSON escapes it) */
    /* A file that is nothing but a partial line. */
    put(path, "{\"task_id\":");
    CU_ASSERT_EQUAL_FATAL(results_open_append(path, &fd, &dropped, &err), 0);
    CU_ASSERT_EQUAL(dropped, 11);
    close(fd);
    struct stat st;
    CU_ASSERT(stat(path, &st) == 0 && st.st_size == 0);
    /* Garbage lines in the middle are skipped, not fatal. */
    put(path, "not json\n{\"no_task_id\":1}\n{\"task_id\":\"z\",\"score\":1}\n\n");
    CU_ASSERT_EQUAL(results_read(path, &lines, &skipped, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(lines), 1);
    CU_ASSERT_EQUAL(skipped, 2);
    json_decref(lines);
}

static void test_results_final(void)
{
    json_t *lines = json_array();
    json_array_append_new(lines, line("a", "d", 0, 0, false, 1, 1, "env_error", "qemu died"));
    json_array_append_new(lines, line("a", "d", 0, 1, true, 1, 1, "done", ""));
    json_array_append_new(lines, line("b", "d", 0, 0, false, 1, 1, "env_error", "interrupted"));
    json_array_append_new(lines, line("c", "d", 1, 0.5, true, 1, 1, "done", ""));
    json_t *old = json_pack("{s:s, s:f}", "task_id", "e", "score", 1.0); /* no "final": a final line */
    json_array_append_new(lines, old);
    json_t *f = results_final(lines);
    CU_ASSERT_EQUAL(json_object_size(f), 3);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(json_object_get(f, "a"), "score")), 1.0);
    CU_ASSERT_PTR_NULL(json_object_get(f, "b"));
    CU_ASSERT_PTR_NOT_NULL(json_object_get(f, "c#1"));
    CU_ASSERT_PTR_NOT_NULL(json_object_get(f, "e"));
    json_decref(f);
    json_decref(lines);
}

/* ---- summary and junit ---- */

static json_t *meta_for(const char *const *ids, const char *const *domains, size_t n, int repeat)
{
    json_t *tasks = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(tasks, json_pack("{s:s, s:s, s:s}", "id", ids[i], "domain", domains[i], "path", "x"));
    return json_pack("{s:s, s:s, s:s, s:i, s:o, s:I}", "suite", "/s", "agent", "ag", "shard", "1/1", "repeat", repeat,
                     "tasks", tasks, "suite_tasks", (json_int_t)n);
}

static void test_p50(void)
{
    double a[] = {5, 1, 3};
    CU_ASSERT_DOUBLE_EQUAL(report_p50(a, 3), 3, 1e-9);
    double b[] = {4, 1, 3, 2};
    CU_ASSERT_DOUBLE_EQUAL(report_p50(b, 4), 2.5, 1e-9);
    double c[] = {7};
    CU_ASSERT_DOUBLE_EQUAL(report_p50(c, 1), 7, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(report_p50(NULL, 0), 0, 1e-9);
    CU_ASSERT(report_passed(1.0) && report_passed(0.9999999999) && !report_passed(0.99));
}

static void test_summary(void)
{
    const char *ids[] = {"a", "b", "c", "d"}, *doms[] = {"x", "x", "y", "y"};
    json_t *meta = meta_for(ids, doms, 4, 1);
    json_t *lines = json_array();
    json_array_append_new(lines, line("a", "x", 0, 1, true, 10, 4, "done", ""));
    json_array_append_new(lines, line("b", "x", 0, 0, true, 20, 6, "fail", "no"));
    json_array_append_new(lines, line("c", "y", 0, 1, true, 30, 2, "done", ""));
    json_t *final = results_final(lines);
    json_t *s = report_summary(meta, final);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "expected_episodes")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "finished_episodes")), 3);
    CU_ASSERT(json_is_false(json_object_get(s, "complete")));
    json_t *all = json_object_get(s, "all"), *x = json_object_get(json_object_get(s, "domains"), "x");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "tasks")), 3);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "pass_rate")), 2.0 / 3, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "p50_episode_s")), 20, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(x, "pass_rate")), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(x, "mean_score")), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(x, "mean_steps")), 5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(x, "p50_episode_s")), 15, 1e-9);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s, "agent")), "ag");
    /* The table has a row per domain and an "all" row. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_table(f, s);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "DOMAIN"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\nx "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\ny "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\nall "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "3 of 4 episodes finished"));
    free(buf);
    json_decref(s);
    json_decref(final);
    json_decref(lines);
    json_decref(meta);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* An evaluator_error is counted apart: not a pass, not a 0 in the mean; JUnit calls it an error. */
static void test_evaluator_errors(void)
{
    const char *ids[] = {"a", "b", "c"}, *doms[] = {"x", "x", "x"};
    json_t *meta = meta_for(ids, doms, 3, 1);
    json_t *lines = json_array();
    json_array_append_new(lines, line("a", "x", 0, 1, true, 10, 4, "done", ""));
    json_array_append_new(lines, line("b", "x", 0, 0, true, 20, 6, "done", ""));
    json_t *broken = line("c", "x", 0, 0, true, 30, 2, "done", "compare_table: timed out after 180 s");
    json_object_set_new(broken, "status", json_string("evaluator_error"));
    json_array_append_new(lines, broken);
    json_t *final = results_final(lines);
    json_t *s = report_summary(meta, final);
    json_t *all = json_object_get(s, "all");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "episodes")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "evaluator_errors")), 1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "pass_rate")), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "mean_score")), 0.5, 1e-9);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_table(f, s);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "1 ended in evaluator_error"));
    free(buf);
    char *xml = report_junit(meta, final, "/runs/r1");
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\""));
    CU_ASSERT_EQUAL(count(xml, "<error "), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "evaluator_error (done): compare_table: timed out after 180 s"));
    free(xml);
    json_decref(s);
    json_decref(final);
    json_decref(lines);
    json_decref(meta);
}

/* An episode with no score (cause: env_error after its retries, or setup_error) is counted under
 * counter, left out of the pass rate and the mean (both were counted as 0s before), a JUnit error. */
static void check_unscored(const char *cause, const char *counter, const char *table_says)
{
    const char *ids[] = {"a", "b", "c"}, *doms[] = {"x", "x", "x"};
    json_t *meta = meta_for(ids, doms, 3, 1);
    json_t *lines = json_array();
    json_array_append_new(lines, line("a", "x", 0, 1, true, 10, 4, "done", ""));
    json_array_append_new(lines, line("b", "x", 0, 0, true, 20, 6, "done", ""));
    json_array_append_new(lines, line("c", "x", 0, 0, false, 30, 2, cause, "qemu died"));
    json_array_append_new(lines, line("c", "x", 0, 0, true, 30, 2, cause, "trace: refusing to write"));
    json_t *final = results_final(lines);
    json_t *c = json_object_get(final, "c");
    CU_ASSERT(!report_scored(c));
    CU_ASSERT(report_env_error(c) == !strcmp(cause, "env_error"));
    CU_ASSERT(report_setup_error(c) == !strcmp(cause, "setup_error"));
    CU_ASSERT(report_scored(json_object_get(final, "b")));
    json_t *s = report_summary(meta, final);
    json_t *all = json_object_get(s, "all");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "episodes")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, counter)), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "env_errors")) +
                        json_integer_value(json_object_get(all, "setup_errors")),
                    1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "pass_rate")), 0.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "mean_score")), 0.5, 1e-9);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_table(f, s);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, table_says));
    free(buf);
    char *xml = report_junit(meta, final, "/runs/r1");
    _cleanup_free_ char *elem =
        xasprintf("<error message=\"%s: trace: refusing to write\" type=\"%s\">", cause, cause);
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, elem));
    free(xml);
    json_decref(s);
    json_decref(final);
    json_decref(lines);
    json_decref(meta);
}

static void test_env_errors(void)
{
    check_unscored("env_error", "env_errors", "1 ended in env_error after retries (crashed, not scored");
}

/* A task's setup that could not run here (an asset gone, a verification never passing) was no
 * score, yet counted as a 0 in the pass rate until it was counted apart like a crash. */
static void test_setup_errors(void)
{
    check_unscored("setup_error", "setup_errors", "1 ended in setup_error (the task's setup could not run here: not scored");
}

static void test_xml_escape(void)
{
    char *e = report_xml_escape("a<b>&\"c'\x01\x1b\t\n\xef\xbf\xbe");
    CU_ASSERT_STRING_EQUAL(e, "a&lt;b&gt;&amp;&quot;c&apos;\\x01\\x1b\t\n\\ufffe");
    free(e);
}

static void test_junit(void)
{
    const char *ids[] = {"a", "b", "c"}, *doms[] = {"x", "x", "y"};
    json_t *meta = meta_for(ids, doms, 3, 1);
    json_t *lines = json_array();
    json_array_append_new(lines, line("a", "x", 0, 1, true, 10, 4, "done", ""));
    json_array_append_new(lines, line("b", "x", 0, 0, true, 20, 6, "fail", "want <ok> & got \"x\"\x02"));
    json_t *final = results_final(lines);
    char *xml = report_junit(meta, final, "/runs/r1");
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "<testsuites name=\"/s\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""));
    CU_ASSERT_EQUAL(count(xml, "<testcase "), 3);
    CU_ASSERT_EQUAL(count(xml, "<testsuite "), 2);
    CU_ASSERT_EQUAL(count(xml, "<failure "), 1);
    CU_ASSERT_EQUAL(count(xml, "<skipped "), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "want &lt;ok&gt; &amp; got &quot;x&quot;\\x02"));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "trace: /runs/r1/traces/x/trace"));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "classname=\"y\" name=\"c\""));
    CU_ASSERT_PTR_NULL(strchr(xml, '\x02'));
    free(xml);
    json_decref(final);
    json_decref(lines);
    json_decref(meta);
}

static void test_write_all(void)
{
    _cleanup_free_ char *dir = tmp_path("run-w"), *rp = xasprintf("%s/results.jsonl", dir),
                        *mp = xasprintf("%s/suite.json", dir);
    mkdir(dir, 0755);
    const char *ids[] = {"a"}, *doms[] = {"x"};
    json_t *meta = meta_for(ids, doms, 1, 1);
    _cleanup_free_ char *mt = json_dumps(meta, 0);
    put(mp, mt);
    json_decref(meta);
    em_err err = {0};
    int fd;
    CU_ASSERT_EQUAL_FATAL(results_open_append(rp, &fd, NULL, &err), 0);
    append(fd, line("a", "x", 0, 0, false, 1, 1, "env_error", "qemu died"));
    append(fd, line("a", "x", 0, 1, true, 1, 1, "done", ""));
    close(fd);
    json_t *extra = json_pack("{s:i}", "envs", 2), *summary = NULL;
    CU_ASSERT_EQUAL_FATAL(report_write_all(dir, extra, &summary, &err), 0);
    CU_ASSERT(json_is_true(json_object_get(summary, "complete")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(summary, "envs")), 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(summary, "retried_attempts")), 1);
    json_decref(extra);
    json_decref(summary);
    _cleanup_free_ char *sp = xasprintf("%s/summary.json", dir), *jp = xasprintf("%s/junit.xml", dir);
    json_t *back = json_load_file(sp, 0, NULL);
    CU_ASSERT(json_is_object(back));
    json_decref(back);
    _cleanup_free_ char *xml = slurp(jp);
    CU_ASSERT(xml && strstr(xml, "failures=\"0\""));
}

/* ---- compare ---- */

/* What report_compare prints for two runs' lines (results_final of each), its counts in *c. */
static char *compare_out(json_t *base_lines, json_t *new_lines, double tolerance, report_cmp *c)
{
    json_t *bf = results_final(base_lines), *nf = results_final(new_lines);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_compare(bf, nf, tolerance, f, c);
    fclose(f);
    json_decref(bf);
    json_decref(nf);
    return buf;
}

/* One final line per row: task, repeat, score, exit cause, reason. */
typedef struct cmp_row {
    const char *id;
    int rep;
    double score;
    const char *cause, *reason;
} cmp_row;

static json_t *cmp_lines(const cmp_row *rows, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, line(rows[i].id, "d", rows[i].rep, rows[i].score, true, 1, 1, rows[i].cause, rows[i].reason));
    return a;
}

static void test_compare(void)
{
    const cmp_row base[] = {{"same", 0, 1, "done", ""},       {"drop", 0, 1, "done", ""}, {"small-drop", 0, 1, "done", ""},
                            {"gone", 0, 1, "done", ""},       {"up", 0, 0, "fail", ""}};
    const cmp_row now[] = {{"same", 0, 1, "done", ""},         {"drop", 0, 0, "max_steps", "ran out"},
                           {"small-drop", 0, 0.9, "done", ""}, {"up", 0, 1, "done", ""},
                           {"fresh", 0, 1, "done", ""}};
    json_t *bl = cmp_lines(base, ARRAY_LEN(base)), *nl = cmp_lines(now, ARRAY_LEN(now));
    report_cmp c;
    char *buf = compare_out(bl, nl, 1e-9, &c);
    CU_ASSERT_EQUAL(c.regressed, 2);
    CU_ASSERT_EQUAL(c.missing, 1);
    CU_ASSERT_EQUAL(c.improved, 1);
    CU_ASSERT_EQUAL(c.added, 1);
    CU_ASSERT_EQUAL(c.unchanged, 1);
    /* Regressions first, the biggest drop first; the reason is shown. */
    CU_ASSERT_EQUAL(strncmp(buf, "REGRESSED  drop", 15), 0);
    char *second = strchr(buf, '\n') + 1;
    CU_ASSERT_EQUAL(strncmp(second, "REGRESSED  small-drop", 21), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "(max_steps: ran out)"));
    CU_ASSERT(strstr(buf, "MISSING") < strstr(buf, "IMPROVED"));
    CU_ASSERT(strstr(buf, "IMPROVED") < strstr(buf, "NEW"));
    free(buf);
    /* A tolerance hides small changes. */
    free(compare_out(bl, nl, 0.2, &c));
    CU_ASSERT_EQUAL(c.regressed, 1);
    /* Identical runs: nothing changed. */
    free(compare_out(bl, bl, 1e-9, &c));
    CU_ASSERT(c.regressed == 0 && c.missing == 0 && c.improved == 0 && c.added == 0 && c.unchanged == 5);
    json_decref(bl);
    json_decref(nl);
}

/* A repeat without a score (crashed, setup_error, evaluator_error) is no 0: it neither lowers a
 * task's mean nor turns into a regression or an improvement; a task scored before and not now
 * fails the gate as NO SCORE, with its cause. */
static void test_compare_unscored(void)
{
    const cmp_row base[] = {{"lost", 0, 1, "done", ""},
                            {"back", 0, 0, "setup_error", "asset gone"},
                            {"both", 0, 0, "env_error", "qemu died"},
                            {"mixed", 0, 1, "done", ""}};
    const cmp_row now[] = {{"lost", 0, 0, "setup_error", "asset gone"}, {"back", 0, 1, "done", ""},
                           {"both", 0, 0, "setup_error", "asset gone"}, {"mixed", 0, 1, "done", ""},
                           {"mixed", 1, 0, "env_error", "qemu died"}};
    json_t *bl = cmp_lines(base, ARRAY_LEN(base)), *nl = cmp_lines(now, ARRAY_LEN(now));
    report_cmp c;
    char *buf = compare_out(bl, nl, 1e-9, &c);
    CU_ASSERT_EQUAL(c.regressed, 0); /* "lost" was a 0 before: a regression from 1.00 */
    CU_ASSERT_EQUAL(c.improved, 0);  /* "back" was an improvement from 0.00 */
    CU_ASSERT_EQUAL(c.now_unscored, 1);
    CU_ASSERT_EQUAL(c.scored_again, 1);
    CU_ASSERT_EQUAL(c.unscored, 1);
    CU_ASSERT_EQUAL(c.unchanged, 1); /* "mixed": its crashed repeat is left out of the mean */
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "NO SCORE   lost"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "1.00 -> -      (setup_error: asset gone)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "SCORED     back"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(buf, "no score (crashed, setup_error or evaluator_error in every repeat): 1 in both, 1 now, 1 no longer"));
    free(buf);
    json_decref(bl);
    json_decref(nl);
}

/* ---- merge ---- */

static void make_shard(const char *dir, int k, int n, const char *const *ids, size_t count_ids, size_t finished)
{
    mkdir(dir, 0755);
    const char *doms[] = {"d", "d", "d", "d"};
    json_t *meta = meta_for(ids, doms, count_ids, 1);
    char shard[16];
    snprintf(shard, sizeof shard, "%d/%d", k, n);
    json_object_set_new(meta, "shard", json_string(shard));
    _cleanup_free_ char *mt = json_dumps(meta, 0), *mp = xasprintf("%s/suite.json", dir),
                        *rp = xasprintf("%s/results.jsonl", dir);
    put(mp, mt);
    json_decref(meta);
    unlink(rp);
    em_err err = {0};
    int fd;
    CU_ASSERT_EQUAL_FATAL(results_open_append(rp, &fd, NULL, &err), 0);
    for (size_t i = 0; i < finished; i++) {
        _cleanup_free_ char *tdir = xasprintf("%s/traces/%s", dir, ids[i]);
        em_err e2 = {0};
        mkdir_p(tdir, 0755, &e2);
        append(fd, line(ids[i], "d", 0, 1, true, 1, 1, "done", ""));
    }
    close(fd);
}

/* Flagged episodes (issue 29): counted in the summary and said under the table, whatever their score. */
static void test_flagged(void)
{
    const char *ids[] = {"a", "b"}, *doms[] = {"x", "x"};
    json_t *meta = meta_for(ids, doms, 2, 1);
    json_t *lines = json_array();
    json_t *fl = line("a", "x", 0, 1, true, 10, 4, "done", "");
    json_object_set_new(fl, "flagged", json_true());
    json_array_append_new(lines, fl);
    json_array_append_new(lines, line("b", "x", 0, 1, true, 10, 4, "done", ""));
    json_t *final = results_final(lines);
    json_t *s = report_summary(meta, final);
    json_t *all = json_object_get(s, "all");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "flagged")), 1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "pass_rate")), 1.0, 1e-9); /* a flag is no score */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_table(f, s);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "FLAGGED"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "; 1 flagged ("));
    free(buf);
    json_decref(s);
    json_decref(final);
    json_decref(lines);
    json_decref(meta);
}

/* Unsupported tasks: neither a pass nor a 0 in the summary, skipped in JUnit, apart in compare. */
static void test_unsupported(void)
{
    const char *ids[] = {"a", "u"}, *doms[] = {"x", "x"};
    json_t *meta = meta_for(ids, doms, 2, 1);
    json_t *lines = json_array();
    json_array_append_new(lines, line("a", "x", 0, 1, true, 10, 4, "done", ""));
    json_array_append_new(lines, line("u", "x", 0, 0, true, 0, 0, "unsupported", "unknown metric `m`"));
    json_t *final = results_final(lines);
    json_t *s = report_summary(meta, final);
    json_t *all = json_object_get(s, "all");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "unsupported")), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(all, "episodes")), 1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "pass_rate")), 1.0, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(all, "mean_score")), 1.0, 1e-9);
    CU_ASSERT(json_is_true(json_object_get(s, "complete")));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_print_table(f, s);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "1 unsupported (not scored"));
    free(buf);
    char *xml = report_junit(meta, final, "/runs/r1");
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "skipped=\"1\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "<skipped message=\"unsupported: unknown metric `m`\"/>"));
    CU_ASSERT_PTR_NOT_NULL(strstr(xml, "failures=\"0\""));
    free(xml);
    /* compare: a task unsupported in the new run is listed apart, never a regression */
    json_t *nl = json_array();
    json_array_append_new(nl, line("a", "x", 0, 0, true, 10, 4, "unsupported", "getter `g` needs an app"));
    json_array_append_new(nl, line("u", "x", 0, 1, true, 10, 4, "done", ""));
    json_t *nf = results_final(nl);
    f = open_memstream(&buf, &len);
    report_cmp c;
    report_compare(final, nf, 1e-9, f, &c);
    fclose(f);
    CU_ASSERT_EQUAL(c.regressed, 0);
    CU_ASSERT_EQUAL(c.now_unsupported, 1);
    CU_ASSERT_EQUAL(c.now_supported, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "UNSUPPORTED  a"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "unsupported (not scored): 0 in both, 1 now, 1 no longer"));
    free(buf);
    json_decref(nf);
    json_decref(nl);
    json_decref(s);
    json_decref(final);
    json_decref(lines);
    json_decref(meta);
}

static void test_merge(void)
{
    _cleanup_free_ char *s1 = tmp_path("shard1"), *s2 = tmp_path("shard2"), *out = tmp_path("merged");
    const char *i1[] = {"a", "c"}, *i2[] = {"b", "d"};
    make_shard(s1, 1, 2, i1, 2, 2);
    make_shard(s2, 2, 2, i2, 2, 2);
    const char *dirs[] = {s2, s1};
    em_err err = {0};
    json_t *summary = NULL;
    report_merge_info info;
    CU_ASSERT_EQUAL_FATAL(report_merge(dirs, 2, out, &summary, &info, &err), 0);
    CU_ASSERT(info.complete);
    CU_ASSERT_EQUAL(info.shards_n, 2);
    CU_ASSERT_EQUAL(info.shards_found, 2);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(summary, "all"), "episodes")), 4);
    json_decref(summary);
    json_t *meta = NULL;
    CU_ASSERT_EQUAL_FATAL(report_read_meta(out, false, &meta, &err), 0);
    json_t *tasks = json_object_get(meta, "tasks");
    CU_ASSERT_EQUAL_FATAL(json_array_size(tasks), 4);
    const char *want[] = {"a", "b", "c", "d"};
    for (size_t i = 0; i < 4; i++)
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(tasks, i), "id")), want[i]);
    json_decref(meta);
    _cleanup_free_ char *link = xasprintf("%s/traces/c", out);
    struct stat st;
    CU_ASSERT(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CU_ASSERT(stat(link, &st) == 0 && S_ISDIR(st.st_mode));
    /* Merging again (into the same output) works and gives the same lines. */
    CU_ASSERT_EQUAL(report_merge(dirs, 2, out, NULL, &info, &err), 0);
    _cleanup_free_ char *rp = xasprintf("%s/results.jsonl", out);
    json_t *lines = NULL;
    CU_ASSERT_EQUAL(results_read(rp, &lines, NULL, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(lines), 4);
    json_decref(lines);
    /* A missing shard: written, but incomplete. */
    const char *one[] = {s1};
    _cleanup_free_ char *out2 = tmp_path("merged2");
    CU_ASSERT_EQUAL(report_merge(one, 1, out2, NULL, &info, &err), 0);
    CU_ASSERT_FALSE(info.complete);
    /* An unfinished shard: incomplete. */
    make_shard(s2, 2, 2, i2, 2, 1);
    CU_ASSERT_EQUAL(report_merge(dirs, 2, out, NULL, &info, &err), 0);
    CU_ASSERT_FALSE(info.complete);
    /* The same shard twice, the output among the inputs, and another agent are refused. */
    const char *twice[] = {s1, s1};
    em_err e1 = {0}, e2 = {0};
    CU_ASSERT_EQUAL(report_merge(twice, 2, out, NULL, &info, &e1), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e1.msg, "twice"));
    const char *self[] = {s1, out};
    CU_ASSERT_EQUAL(report_merge(self, 2, out, NULL, &info, &e2), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, "also an input"));
}

/* ---- host ---- */

static void test_default_envs(void)
{
    char why[256];
    host_facts h = {.cores = 2, .mem_total_mib = 24576, .mem_avail_mib = 22000};
    CU_ASSERT_EQUAL(suite_default_envs(&h, 1024, 1, false, 100, why, sizeof why), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "2 cores"));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "TCG"));
    CU_ASSERT_EQUAL(suite_default_envs(&h, 1024, 1, true, 100, why, sizeof why), 4);
    CU_ASSERT_EQUAL(suite_default_envs(&h, 1024, 1, false, 1, why, sizeof why), 1); /* one episode */
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "capped"));
    host_facts big = {.cores = 64, .mem_total_mib = 16384, .mem_avail_mib = 8000};
    CU_ASSERT_EQUAL(suite_default_envs(&big, 1024, 1, false, 100, why, sizeof why), 5); /* memory bound */
    host_facts tiny = {.cores = 1, .mem_total_mib = 512, .mem_avail_mib = 300};
    CU_ASSERT_EQUAL(suite_default_envs(&tiny, 1024, 1, false, 100, why, sizeof why), 1); /* at least one */
    /* a guest of 2 vCPUs keeps 2 cores busy under TCG, and never fewer than one env */
    CU_ASSERT_EQUAL(suite_default_envs(&h, 1024, 2, false, 100, why, sizeof why), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "2 vCPUs"));
    CU_ASSERT_EQUAL(suite_default_envs(&h, 1024, 2, true, 100, why, sizeof why), 2);
    CU_ASSERT_EQUAL(suite_default_envs(&tiny, 256, 4, false, 100, why, sizeof why), 1);
    host_facts real;
    em_err err = {0};
    CU_ASSERT_EQUAL(host_read(&real, &err), 0);
    CU_ASSERT(real.cores >= 1 && real.mem_total_mib > 0 && real.mem_avail_mib > 0);
    long rss, pss;
    CU_ASSERT_EQUAL(suite_proc_mem(getpid(), &rss, &pss), 0);
    CU_ASSERT(rss > 0 && pss > 0);
}

/* ---- gc ---- */

static void test_env_owner(void)
{
    CU_ASSERT_EQUAL(suite_env_owner("suite-123-0"), 123);
    CU_ASSERT_EQUAL(suite_env_owner("suite-99999-12"), 99999);
    const char *no[] = {"suite-abc-0", "suite-123-", "suite-123", "suite-123-0x", "other", "suite--1-0", "suite-1-0"};
    for (size_t i = 0; i < ARRAY_LEN(no); i++)
        CU_ASSERT_EQUAL(suite_env_owner(no[i]), 0);
    CU_ASSERT_FALSE(suite_owner_alive(getpid())); /* alive, but not an envmgr */
    CU_ASSERT_FALSE(suite_owner_alive(0));
}

static pid_t dead_pid(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(0);
    waitpid(p, NULL, 0);
    return p;
}

static void make_golden(const char *root, const char *key, const char *image_sha)
{
    _cleanup_free_ char *dir = xasprintf("%s/%s", root, key), *meta = xasprintf("%s/golden.json", dir),
                        *ram = xasprintf("%s/ram.bin", dir), *lock = xasprintf("%s/%s.lock", root, key);
    em_err err = {0};
    mkdir_p(dir, 0755, &err);
    char text[256];
    snprintf(text, sizeof text, "{\"image_sha256\":\"%s\",\"pointer\":[1,2]}", image_sha);
    put(meta, text);
    put(ram, "0123456789");
    chmod(ram, 0444);
    put(lock, "");
}

static void test_gc(void)
{
    /* Point every root at scratch directories (the path getters cache their values on first use). */
    _cleanup_free_ char *run = tmp_path("gc-run"), *cache = tmp_path("gc-cache"), *images = tmp_path("gc-images"),
                        *gold = xasprintf("%s/golden", cache), *img = xasprintf("%s/desk", images);
    setenv("ENVMGR_RUN_DIR", run, 1);
    setenv("ENVMGR_CACHE_DIR", cache, 1);
    setenv("ENVMGR_IMAGE_DIR", images, 1);
    em_err err = {0};
    mkdir_p(run, 0700, &err);
    mkdir_p(gold, 0755, &err);
    mkdir_p(img, 0755, &err);
    const char *manifest = "{\"format\":1}";
    _cleanup_free_ char *mpath = xasprintf("%s/manifest.json", img);
    put(mpath, manifest);
    char live_sha[65];
    sha256_hex(manifest, strlen(manifest), live_sha);
    make_golden(gold, "keep0000", live_sha);
    make_golden(gold, "gone0000", "1111111111111111111111111111111111111111111111111111111111111111");
    make_golden(gold, "busy0000", "2222222222222222222222222222222222222222222222222222222222222222");
    _cleanup_free_ char *build = xasprintf("%s/half0000.build", gold), *half_lock = xasprintf("%s/half0000.lock", gold);
    mkdir(build, 0755);
    put(half_lock, "");
    /* A builder holds busy0000's lock. */
    _cleanup_free_ char *busy_lock = xasprintf("%s/busy0000.lock", gold);
    int bfd = open(busy_lock, O_RDWR);
    CU_ASSERT(bfd >= 0 && flock(bfd, LOCK_EX) == 0);

    /* Run directories: a dead env (old), one just created, a suite env of a dead owner, one busy. */
    pid_t gone = dead_pid();
    char suite_env[64], suite_busy[64];
    snprintf(suite_env, sizeof suite_env, "suite-%d-0", (int)gone);
    snprintf(suite_busy, sizeof suite_busy, "suite-%d-1", (int)gone);
    const char *names[] = {"old-dead", "just-made", suite_env, suite_busy};
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        _cleanup_free_ char *d = xasprintf("%s/%s", run, names[i]), *lock = xasprintf("%s/lock", d);
        mkdir(d, 0700);
        put(lock, "");
    }
    _cleanup_free_ char *old = xasprintf("%s/old-dead", run);
    struct utimbuf ut = {.actime = time(NULL) - 3600, .modtime = time(NULL) - 3600};
    utime(old, &ut);
    _cleanup_free_ char *sb_lock = xasprintf("%s/%s/lock", run, suite_busy);
    int sfd = open(sb_lock, O_RDWR);
    CU_ASSERT(sfd >= 0 && flock(sfd, LOCK_EX) == 0);

    /* A dry run removes nothing. */
    gc_opts dry = {.dry_run = true};
    gc_stats st;
    FILE *devnull = fopen("/dev/null", "w");
    CU_ASSERT_EQUAL(suite_gc(&dry, devnull, &st, &err), 0);
    CU_ASSERT_EQUAL(st.envs, 2);
    CU_ASSERT_EQUAL(st.goldens, 2);
    _cleanup_free_ char *gone_dir = xasprintf("%s/gone0000", gold);
    CU_ASSERT_EQUAL(access(gone_dir, F_OK), 0);
    CU_ASSERT_EQUAL(access(old, F_OK), 0);

    /* only_owner touches that owner's suite envs and nothing else. */
    gc_opts own = {.only_owner = gone};
    CU_ASSERT_EQUAL(suite_gc(&own, devnull, &st, &err), 0);
    CU_ASSERT_EQUAL(st.envs, 1);
    CU_ASSERT_EQUAL(st.goldens, 0);
    CU_ASSERT_EQUAL(access(old, F_OK), 0);
    _cleanup_free_ char *se = xasprintf("%s/%s", run, suite_env);
    CU_ASSERT_NOT_EQUAL(access(se, F_OK), 0);

    gc_opts all = {0};
    CU_ASSERT_EQUAL(suite_gc(&all, devnull, &st, &err), 0);
    CU_ASSERT_EQUAL(st.envs, 1);    /* old-dead */
    CU_ASSERT_EQUAL(st.goldens, 2); /* gone0000 and the unfinished build */
    CU_ASSERT_EQUAL(st.busy, 2);    /* the locked suite env and the locked golden */
    CU_ASSERT(st.golden_mib > 0);
    CU_ASSERT_NOT_EQUAL(access(old, F_OK), 0);
    _cleanup_free_ char *young = xasprintf("%s/just-made", run), *sbusy = xasprintf("%s/%s", run, suite_busy);
    CU_ASSERT_EQUAL(access(young, F_OK), 0);
    CU_ASSERT_EQUAL(access(sbusy, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(gone_dir, F_OK), 0);
    _cleanup_free_ char *gone_lock = xasprintf("%s/gone0000.lock", gold), *keep = xasprintf("%s/keep0000", gold),
                        *busy = xasprintf("%s/busy0000", gold);
    CU_ASSERT_NOT_EQUAL(access(gone_lock, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(build, F_OK), 0);
    CU_ASSERT_EQUAL(access(keep, F_OK), 0);
    CU_ASSERT_EQUAL(access(busy, F_OK), 0);
    /* --keep-golden leaves the (now unlocked) golden alone; --all-suite takes the locked suite env. */
    close(bfd);
    close(sfd);
    gc_opts kg = {.keep_golden = true, .all_suite = true};
    CU_ASSERT_EQUAL(suite_gc(&kg, devnull, &st, &err), 0);
    CU_ASSERT_EQUAL(st.goldens, 0);
    CU_ASSERT_EQUAL(access(busy, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(sbusy, F_OK), 0);
    fclose(devnull);
}

/* ---- the worker channel ---- */

static void test_chan(void)
{
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    suite_chan c = {.fd = sv[0]};
    /* Nothing there yet; then half a line; then the rest and a second line; garbage is skipped. */
    suite_chan_fill(&c);
    CU_ASSERT_FALSE(c.eof);
    CU_ASSERT_PTR_NULL(suite_chan_next(&c));
    CU_ASSERT_EQUAL(write(sv[1], "{\"type\":\"re", 11), 11);
    suite_chan_fill(&c);
    CU_ASSERT_PTR_NULL(suite_chan_next(&c));
    const char *rest = "ady\"}\nnot json\n[1]\n";
    CU_ASSERT_EQUAL(write(sv[1], rest, strlen(rest)), (ssize_t)strlen(rest));
    json_t *m = json_pack("{s:s, s:i}", "type", "result", "job", 7);
    CU_ASSERT_EQUAL(suite_chan_send(sv[1], m), 0);
    json_decref(m);
    suite_chan_fill(&c);
    json_t *a = suite_chan_next(&c), *b = suite_chan_next(&c);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a, "type")), "ready");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(b, "job")), 7);
    CU_ASSERT_PTR_NULL(suite_chan_next(&c));
    json_decref(a);
    json_decref(b);
    /* The peer goes away: eof, and sending to it fails without a SIGPIPE. */
    close(sv[1]);
    suite_chan_fill(&c);
    CU_ASSERT(c.eof);
    int sv2[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv2), 0);
    close(sv2[1]);
    json_t *x = json_pack("{s:s}", "type", "job");
    CU_ASSERT_EQUAL(suite_chan_send(sv2[0], x), -1);
    json_decref(x);
    close(sv2[0]);
    close(sv[0]);
    suite_chan_release(&c);
    /* A worker's forwarded warning may quote a guest: it reaches the terminal with no controls. */
    json_t *log = json_pack("{s:s, s:s}", "type", "log", "text", "envmgr: \x1b]0;pwned\x07\x1b[2J \u202e evil\n");
    char *text = suite_log_text(log);
    CU_ASSERT_PTR_NULL(strchr(text, 0x1b));
    CU_ASSERT_PTR_NULL(strchr(text, '\n'));
    CU_ASSERT_PTR_NULL(strstr(text, "\xe2\x80\xae"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "pwned"));
    free(text);
    json_decref(log);
    log = json_pack("{s:s}", "type", "log");
    text = suite_log_text(log);
    CU_ASSERT_STRING_EQUAL(text, "?");
    free(text);
    json_decref(log);
    json_t *r = suite_synth_result("t", EXIT_ENV_ERROR, "qemu died", 1.5);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "exit_cause")), "env_error");
    CU_ASSERT_EQUAL(json_number_value(json_object_get(r, "score")), 0.0);
    json_decref(r);
}

static CU_TestInfo tests[] = {
    {"--shard K/N parsing", test_parse_shard},
    {"shards partition the task list", test_shards_partition},
    {"the data suite: folder, index and shards agree", test_load_data_suite},
    {"load errors and domains of a flat folder", test_load_errors_and_flat_domains},
    {"episode keys and directories", test_keys_and_dirs},
    {"results.jsonl survives a crash mid-write", test_results_crash_safety},
    {"final lines per episode", test_results_final},
    {"p50 and passing", test_p50},
    {"summary by domain and the table", test_summary},
    {"XML escaping", test_xml_escape},
    {"evaluator_error: counted apart in the summary, a JUnit error", test_evaluator_errors},
    {"env_error: not a 0 in the pass rate, a JUnit error", test_env_errors},
    {"setup_error: not a 0 in the pass rate, a JUnit error", test_setup_errors},
    {"compare: a repeat without a score is no 0, a task no longer scored fails the gate", test_compare_unscored},
    {"junit.xml", test_junit},
    {"summary.json and junit.xml written from a run directory", test_write_all},
    {"unsupported tasks in summary, JUnit and compare", test_unsupported},
    {"flagged episodes in the summary", test_flagged},
    {"compare: regressions first", test_compare},
    {"merge of shards", test_merge},
    {"default number of envs", test_default_envs},
    {"suite env names and owners", test_env_owner},
    {"gc: dead envs, dead owners, stale golden states", test_gc},
    {"the worker channel", test_chan},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    /* The image root is read once per process (paths.h) and planning any task reads it: test_gc's
     * scratch root must be the one from the start. */
    _cleanup_free_ char *images = tmp_path("gc-images");
    setenv("ENVMGR_IMAGE_DIR", images, 1);
    return run_suite("suite", tests);
}

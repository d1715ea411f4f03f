/* Evaluator-sandbox figures (make bench; figures, not pass/fail): what the sandbox adds to a no-op
 * metric (a `script` that prints its score at once, p50 over N runs, against the same script started
 * without the sandbox; goal <= 50 ms), and the time of the five most-used evaluator scripts on
 * small fixtures (tests/tools/metric_fixtures.py), each through metric_run as an episode runs it.
 *
 *   build/bench/sandbox_bench [-n RUNS]      (default 15 no-op runs, 5 per metric)
 *
 * Each figure is the median and the fastest run: on a busy machine the fastest is closer to what
 * the sandbox costs. Run as root it includes setpriv and the copies of the inputs (sandbox.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "evaluator/metrics_builtin.h"
#include "evaluator/sandbox.h"

#ifndef ENVMGR_SOURCE_DIR
#define ENVMGR_SOURCE_DIR "."
#endif

static void line(const char *what, const char *value)
{
    printf("%-44s %-28s [%s]\n", what, value, "sandbox");
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v (sorted in place); *lo gets the fastest run (the figure on an idle machine). */
static double p50(double *v, int n, double *lo)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    if (lo)
        *lo = v[0];
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static json_t *file_art(const char *dir, const char *name)
{
    char *p = xasprintf("%s/%s", dir, name);
    json_t *a = json_pack("{s:s,s:s}", "type", "file", "path", p);
    free(p);
    return a;
}

/* p50 of runs of one metric in ms; -1 when a run did not score (the message is printed). */
static double time_metric(const metric_ctx *ctx, const char *func, json_t *result, json_t *expected, json_t *options,
                          int runs, double *score, double *lo)
{
    double *t = xcalloc((size_t)runs, sizeof *t);
    for (int i = 0; i < runs; i++) {
        char *reason = NULL;
        em_err err = {0};
        double t0 = now_ms();
        int rc = metric_run(ctx, func, result, expected, options, score, &reason, &err);
        t[i] = now_ms() - t0;
        if (rc != METRIC_SCORED) {
            fprintf(stderr, "sandbox_bench: %s: %s\n", func, rc < 0 ? err.msg : reason);
            free(reason);
            free(t);
            return -1;
        }
        free(reason);
    }
    double m = p50(t, runs, lo);
    free(t);
    return m;
}

/* The same no-op script started directly, for the difference the sandbox makes. */
static double time_plain(const char *script, int runs, double *lo)
{
    double *t = xcalloc((size_t)runs, sizeof *t);
    const char *const argv[] = {script, NULL};
    spawn_opts so = {.argv = argv};
    spawn_io io = {.input = "{}", .input_len = 2, .out_cap = 4096, .err_cap = 4096, .timeout_ms = 10000};
    for (int i = 0; i < runs; i++) {
        spawn_result r;
        em_err err = {0};
        double t0 = now_ms();
        if (spawn_run(&so, &io, &r, &err) == 0)
            spawn_result_free(&r);
        t[i] = now_ms() - t0;
    }
    double m = p50(t, runs, lo);
    free(t);
    return m;
}

int main(int argc, char **argv)
{
    int runs = 15;
    if (argc == 3 && !strcmp(argv[1], "-n"))
        runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : runs;
    char dir[] = "/tmp/envmgr-sandbox-bench.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("sandbox_bench: mkdtemp");
        return 1;
    }
    em_err err = {0};
    if (sandbox_check(&err) < 0) {
        fprintf(stderr, "sandbox_bench: %s\n", err.msg);
        rmdir(dir);
        return 1;
    }
    /* fixtures */
    const char *const gen[] = {SANDBOX_PYTHON, ENVMGR_SOURCE_DIR "/tests/tools/metric_fixtures.py", dir, NULL};
    spawn_opts so = {.argv = gen};
    spawn_io io = {.out_cap = 4096, .err_cap = 4096, .timeout_ms = 120000};
    spawn_result r;
    if (spawn_run(&so, &io, &r, &err) < 0 || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        fprintf(stderr, "sandbox_bench: writing the fixtures failed: %s\n", err.msg[0] ? err.msg : r.errs);
        if (!err.msg[0])
            spawn_result_free(&r);
        remove_tree(dir, &err);
        return 1;
    }
    spawn_result_free(&r);

    /* the no-op metric */
    char *noop = xasprintf("%s/noop.sh", dir);
    static const char body[] = "#!/bin/sh\necho '{\"score\": 1, \"reason\": \"noop\"}'\n";
    write_file_atomic(noop, body, strlen(body), 0755, &err);
    metric_ctx ctx = {.task_dir = dir};
    json_t *text = json_pack("{s:s,s:s}", "type", "text", "value", "x");
    json_t *opts = json_pack("{s:s}", "path", "noop.sh");
    double score, v[2], lo[2];
    v[0] = time_metric(&ctx, "script", text, NULL, opts, runs, &score, &lo[0]);
    v[1] = time_plain(noop, runs, &lo[1]);
    char buf[64], what[64];
    snprintf(buf, sizeof buf, "p50 %.0f ms (unsandboxed %.0f ms)", v[0], v[1]);
    snprintf(what, sizeof what, "no-op script metric (n=%d)", runs);
    line(what, buf);
    snprintf(buf, sizeof buf, "p50 %.0f ms, fastest %.0f ms", v[0] - v[1], lo[0] - lo[1]);
    line(geteuid() == 0 ? "sandbox start overhead, as root (goal 50 ms)" : "sandbox start overhead (goal <= 50 ms)", buf);
    json_decref(opts);
    json_decref(text);

    /* the five most-used evaluator scripts */
    static const struct {
        const char *func, *result, *expected, *options, *text;
    } m[] = {
        {"compare_table", "ok.xlsx", "same.xlsx", "{\"rules\": [{\"type\": \"sheet_data\", \"sheet_idx0\": 0, "
                                                  "\"sheet_idx1\": \"EI0\"}]}", NULL},
        {"compare_pptx_files", "ok.pptx", "same.pptx", NULL, NULL},
        {"compare_docx_files", "ok.docx", "same.docx", NULL, NULL},
        {"compare_pdfs", "ok.pdf", "same.pdf", NULL, NULL},
        {"is_expected_url_pattern_match", NULL, NULL, NULL, "https://www.example.com/a?q=1"},
    };
    int mruns = runs / 3 > 0 ? runs / 3 : 1;
    for (size_t i = 0; i < ARRAY_LEN(m); i++) {
        json_t *res = m[i].text ? json_pack("{s:s,s:s}", "type", "text", "value", m[i].text) : file_art(dir, m[i].result);
        json_t *exp = m[i].text ? json_pack("{s:s,s:{s:[s]}}", "type", "json", "value", "expected", "example\\.com/a")
                                : file_art(dir, m[i].expected);
        json_t *o = m[i].options ? json_loads(m[i].options, 0, NULL) : NULL;
        double fastest, ms = time_metric(&ctx, m[i].func, res, exp, o, mruns, &score, &fastest);
        snprintf(what, sizeof what, "%s (n=%d)", m[i].func, mruns);
        if (ms < 0)
            snprintf(buf, sizeof buf, "failed (see above)");
        else
            snprintf(buf, sizeof buf, "p50 %.0f ms, fastest %.0f ms", ms, fastest);
        line(what, buf);
        json_decref(res);
        json_decref(exp);
        json_decref(o);
    }
    free(noop);
    remove_tree(dir, &err);
    return 0;
}

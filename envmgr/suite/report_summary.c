#include "envmgr/suite/report_summary.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/suite/suite.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

bool report_passed(double score)
{
    return score >= 1.0 - 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double report_p50(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* Running totals of one domain (or of all). */
typedef struct tally {
    json_t *tasks;  /* set of task ids */
    size_t episodes, passed, env_errors, setup_errors, evaluator_errors, unsupported, flagged;
    double score_sum, steps_sum;
    double *times;
    size_t ntimes;
} tally;

bool report_evaluator_error(json_t *line)
{
    const char *status = json_string_value(json_object_get(line, "status"));
    return status && !strcmp(status, "evaluator_error");
}

static bool cause_is(json_t *line, exit_cause cause)
{
    return exit_cause_from_name(json_string_value(json_object_get(line, "exit_cause"))) == cause;
}

bool report_env_error(json_t *line)
{
    return cause_is(line, EXIT_ENV_ERROR);
}

bool report_setup_error(json_t *line)
{
    return cause_is(line, EXIT_SETUP_ERROR);
}

bool report_scored(json_t *line)
{
    return !cause_is(line, EXIT_UNSUPPORTED) && !report_evaluator_error(line) && !report_env_error(line) &&
           !report_setup_error(line);
}

static void tally_add(tally *t, json_t *line)
{
    if (!t->tasks)
        t->tasks = json_object();
    json_object_set_new(t->tasks, json_string_value(json_object_get(line, "task_id")), json_true());
    if (cause_is(line, EXIT_UNSUPPORTED)) { /* neither a pass nor a 0: counted apart */
        t->unsupported++;
        return;
    }
    double score = num(line, "score");
    t->episodes++;
    /* not scored, neither a pass nor a 0 in the mean: the evaluator failed, or the episode crashed */
    t->evaluator_errors += report_evaluator_error(line);
    t->env_errors += report_env_error(line);
    t->setup_errors += report_setup_error(line);
    t->flagged += json_is_true(json_object_get(line, "flagged"));
    if (report_scored(line)) {
        t->passed += report_passed(score);
        t->score_sum += score;
    }
    t->steps_sum += num(line, "steps");
    t->times = xrealloc(t->times, (t->ntimes + 1) * sizeof *t->times);
    t->times[t->ntimes++] = num(line, "duration_s");
}

static json_t *tally_json(tally *t)
{
    double n = t->episodes ? (double)t->episodes : 1;
    size_t scored = t->episodes - t->evaluator_errors - t->env_errors - t->setup_errors;
    double ns = scored ? (double)scored : 1;
    json_t *o = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I}", "tasks", (json_int_t)json_object_size(t->tasks),
                          "episodes", (json_int_t)t->episodes, "passed", (json_int_t)t->passed, "pass_rate",
                          scored ? (double)t->passed / ns : 0.0, "mean_score", t->score_sum / ns, "mean_steps",
                          t->steps_sum / n, "p50_episode_s", report_p50(t->times, t->ntimes), "env_errors",
                          (json_int_t)t->env_errors, "evaluator_errors", (json_int_t)t->evaluator_errors);
    json_object_set_new(o, "setup_errors", json_integer((json_int_t)t->setup_errors));
    json_object_set_new(o, "unsupported", json_integer((json_int_t)t->unsupported));
    json_object_set_new(o, "flagged", json_integer((json_int_t)t->flagged));
    json_decref(t->tasks);
    free(t->times);
    memset(t, 0, sizeof *t);
    return o;
}

static size_t expected_episodes(json_t *meta)
{
    json_int_t rep = json_integer_value(json_object_get(meta, "repeat"));
    return json_array_size(json_object_get(meta, "tasks")) * (size_t)(rep > 0 ? rep : 1);
}

json_t *report_summary(json_t *meta, json_t *final)
{
    json_t *by_domain = json_object();
    tally all = {0};
    const char *key;
    json_t *line;
    /* Domains as tallies kept in a JSON object of pointers would be awkward:
     * collect lines per domain first, then tally each list. */
    json_object_foreach(final, key, line)
    {
        const char *d = json_string_value(json_object_get(line, "domain"));
        d = d ? d : "-";
        json_t *list = json_object_get(by_domain, d);
        if (!list) {
            list = json_array();
            json_object_set_new(by_domain, d, list);
        }
        json_array_append(list, line);
        tally_add(&all, line);
    }
    json_t *domains = json_object();
    json_t *list;
    json_object_foreach(by_domain, key, list)
    {
        tally t = {0};
        size_t i;
        json_array_foreach(list, i, line)
        tally_add(&t, line);
        json_object_set_new(domains, key, tally_json(&t));
    }
    json_decref(by_domain);
    size_t expected = meta ? expected_episodes(meta) : json_object_size(final);
    if (expected < json_object_size(final))
        expected = json_object_size(final);
    json_t *s = json_pack("{s:i, s:I, s:I, s:b, s:o, s:o}", "format", SUITE_FORMAT, "expected_episodes",
                          (json_int_t)expected, "finished_episodes", (json_int_t)json_object_size(final), "complete",
                          json_object_size(final) >= expected, "all", tally_json(&all), "domains", domains);
    const char *copy[] = {"suite", "agent", "shard", "repeat", "suite_tasks"};
    for (size_t i = 0; meta && i < ARRAY_LEN(copy); i++) {
        json_t *v = json_object_get(meta, copy[i]);
        if (v)
            json_object_set(s, copy[i], v);
    }
    return s;
}

static void row(FILE *out, const char *name, json_t *t)
{
    sbuf b = {0};
    sbuf_add_visible(&b, name, 24);
    fprintf(out, "%-24s %6lld %8lld %9.1f%% %10.3f %10.1f %10.1f s %11lld %8lld\n", b.s ? b.s : "",
            json_integer_value(json_object_get(t, "tasks")), json_integer_value(json_object_get(t, "episodes")),
            100 * num(t, "pass_rate"), num(t, "mean_score"), num(t, "mean_steps"), num(t, "p50_episode_s"),
            json_integer_value(json_object_get(t, "unsupported")), json_integer_value(json_object_get(t, "flagged")));
    sbuf_release(&b);
}

void report_print_table(FILE *out, json_t *summary)
{
    fprintf(out, "%-24s %6s %8s %10s %10s %10s %12s %11s %8s\n", "DOMAIN", "TASKS", "EPISODES", "PASS RATE", "MEAN SCORE",
            "MEAN STEPS", "P50 EPISODE", "UNSUPPORTED", "FLAGGED");
    const char *key;
    json_t *t;
    json_object_foreach(json_object_get(summary, "domains"), key, t)
    row(out, key, t);
    row(out, "all", json_object_get(summary, "all"));
    long long fin = json_integer_value(json_object_get(summary, "finished_episodes"));
    long long exp = json_integer_value(json_object_get(summary, "expected_episodes"));
    long long errs = json_integer_value(json_object_get(json_object_get(summary, "all"), "env_errors"));
    fprintf(out, "%lld of %lld episodes finished%s", fin, exp, fin < exp ? " (incomplete: --resume runs the rest)" : "");
    if (errs)
        fprintf(out, "; %lld ended in env_error after retries (crashed, not scored: the pass rate and mean score "
                     "leave them out; suite run exits 1)",
                errs);
    long long setup_errs = json_integer_value(json_object_get(json_object_get(summary, "all"), "setup_errors"));
    if (setup_errs)
        fprintf(out, "; %lld ended in setup_error (the task's setup could not run here: not scored, the pass rate and "
                     "mean score leave them out; suite run exits 1)",
                setup_errs);
    long long eval_errs = json_integer_value(json_object_get(json_object_get(summary, "all"), "evaluator_errors"));
    if (eval_errs)
        fprintf(out, "; %lld ended in evaluator_error (not scored: pass rate and mean score leave them out)", eval_errs);
    long long unsup = json_integer_value(json_object_get(json_object_get(summary, "all"), "unsupported"));
    if (unsup)
        fprintf(out, "; %lld unsupported (not scored: the pass rate and mean score leave them out)", unsup);
    long long flagged = json_integer_value(json_object_get(json_object_get(summary, "all"), "flagged"));
    if (flagged)
        fprintf(out, "; %lld flagged (a setup step or getter failed for the image's or the task's reasons: "
                     "results.jsonl \"flags\" says which)", flagged);
    fputc('\n', out);
}

char *report_xml_escape(const char *s)
{
    sbuf b = {0};
    sbuf_add(&b, "", 0);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '&': sbuf_puts(&b, "&amp;"); break;
        case '<': sbuf_puts(&b, "&lt;"); break;
        case '>': sbuf_puts(&b, "&gt;"); break;
        case '"': sbuf_puts(&b, "&quot;"); break;
        case '\'': sbuf_puts(&b, "&apos;"); break;
        default:
            if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
                sbuf_printf(&b, "\\x%02x", *p); /* not allowed in XML 1.0, even as a reference */
            else if (*p == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) {
                sbuf_printf(&b, "\\u%s", p[2] == 0xbe ? "fffe" : "ffff");
                p += 2;
            } else
                sbuf_add(&b, (const char *)p, 1);
        }
    }
    return sbuf_steal(&b);
}

static void xml_attr(sbuf *b, const char *name, const char *value)
{
    _cleanup_free_ char *v = report_xml_escape(value ? value : "");
    sbuf_printf(b, " %s=\"%s\"", name, v);
}

static bool is_unsupported(json_t *line)
{
    return exit_cause_from_name(json_string_value(json_object_get(line, "exit_cause"))) == EXIT_UNSUPPORTED;
}

/* One testcase entry: either a final line or a placeholder for an episode that never finished. */
typedef struct tc {
    char *key, *domain, *task_id;
    int repeat;
    json_t *line; /* borrowed, NULL: not run */
} tc;

static int cmp_tc(const void *a, const void *b)
{
    const tc *x = a, *y = b;
    int c = strcmp(x->domain, y->domain);
    if (c)
        return c;
    c = strcmp(x->task_id, y->task_id);
    return c ? c : (x->repeat > y->repeat) - (x->repeat < y->repeat);
}

char *report_junit(json_t *meta, json_t *final, const char *dir_abs)
{
    /* Every episode: the expected ones (suite.json) and whatever finished. */
    json_int_t repeats = meta ? json_integer_value(json_object_get(meta, "repeat")) : 1;
    repeats = repeats > 0 ? repeats : 1;
    size_t cap = json_object_size(final) + (meta ? json_array_size(json_object_get(meta, "tasks")) : 0) *
                                               (size_t)repeats,
           n = 0;
    tc *cases = xcalloc(cap ? cap : 1, sizeof *cases);
    json_t *seen = json_object();
    const char *key;
    json_t *line;
    json_object_foreach(final, key, line)
    {
        const char *d = json_string_value(json_object_get(line, "domain"));
        cases[n] = (tc){xstrdup(key), xstrdup(d ? d : "-"),
                        xstrdup(json_string_value(json_object_get(line, "task_id"))),
                        (int)json_integer_value(json_object_get(line, "repeat")), line};
        json_object_set_new(seen, key, json_true());
        n++;
    }
    size_t i;
    json_t *t;
    json_array_foreach(meta ? json_object_get(meta, "tasks") : NULL, i, t)
    {
        const char *id = json_string_value(json_object_get(t, "id"));
        const char *d = json_string_value(json_object_get(t, "domain"));
        for (int r = 0; id && r < repeats; r++) {
            char *k = suite_episode_key(id, r);
            if (json_object_get(seen, k) || n == cap) {
                free(k);
                continue;
            }
            cases[n++] = (tc){k, xstrdup(d ? d : "-"), xstrdup(id), r, NULL};
        }
    }
    json_decref(seen);
    qsort(cases, n, sizeof *cases, cmp_tc);

    /* Totals per domain, then the document. */
    size_t tests = n, failures = 0, errors = 0, skipped = 0;
    double time = 0;
    for (i = 0; i < n; i++) {
        if (!cases[i].line || is_unsupported(cases[i].line))
            skipped++;
        else {
            errors += !report_scored(cases[i].line);
            failures += report_scored(cases[i].line) && !report_passed(num(cases[i].line, "score"));
            time += num(cases[i].line, "duration_s");
        }
    }
    sbuf b = {0};
    sbuf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites");
    const char *suite_name = meta ? json_string_value(json_object_get(meta, "suite")) : NULL;
    xml_attr(&b, "name", suite_name ? suite_name : "envmgr suite");
    sbuf_printf(&b, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n", tests, failures,
                errors, skipped, time);
    for (size_t start = 0; start < n;) {
        size_t end = start;
        size_t f = 0, e = 0, s = 0;
        double tt = 0;
        while (end < n && !strcmp(cases[end].domain, cases[start].domain)) {
            if (!cases[end].line || is_unsupported(cases[end].line))
                s++;
            else {
                e += !report_scored(cases[end].line);
                f += report_scored(cases[end].line) && !report_passed(num(cases[end].line, "score"));
                tt += num(cases[end].line, "duration_s");
            }
            end++;
        }
        sbuf_puts(&b, "  <testsuite");
        xml_attr(&b, "name", cases[start].domain);
        sbuf_printf(&b, " tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n", end - start, f,
                    e, s, tt);
        for (size_t k = start; k < end; k++) {
            tc *c = &cases[k];
            sbuf_puts(&b, "    <testcase");
            xml_attr(&b, "classname", c->domain);
            xml_attr(&b, "name", repeats > 1 ? c->key : c->task_id);
            sbuf_printf(&b, " time=\"%.3f\">\n", c->line ? num(c->line, "duration_s") : 0.0);
            if (!c->line) {
                sbuf_puts(&b, "      <skipped message=\"not run: the suite was interrupted or this shard is "
                              "incomplete\"/>\n");
            } else if (is_unsupported(c->line)) {
                const char *reason = json_string_value(json_object_get(c->line, "reason"));
                _cleanup_free_ char *msg = xasprintf("unsupported: %s", reason ? reason : "?");
                sbuf_puts(&b, "      <skipped");
                xml_attr(&b, "message", msg);
                sbuf_puts(&b, "/>\n");
            } else {
                double score = num(c->line, "score");
                const char *cause = json_string_value(json_object_get(c->line, "exit_cause"));
                const char *reason = json_string_value(json_object_get(c->line, "reason"));
                bool eval_error = report_evaluator_error(c->line), error = !report_scored(c->line);
                if (error || !report_passed(score)) {
                    /* JUnit's error: the evaluator broke or the episode crashed, so the test could not be judged */
                    const char *elem = error ? "error" : "failure";
                    _cleanup_free_ char *msg =
                        eval_error ? xasprintf("evaluator_error (%s): %s", cause ? cause : "?", reason ? reason : "")
                        : error    ? xasprintf("%s: %s", cause ? cause : "?", reason ? reason : "")
                                   : xasprintf("score %.2f (%s): %s", score, cause ? cause : "?",
                                               reason && *reason ? reason : "no reason given");
                    _cleanup_free_ char *body = report_xml_escape(msg);
                    sbuf_printf(&b, "      <%s", elem);
                    xml_attr(&b, "message", msg);
                    xml_attr(&b, "type", eval_error ? "evaluator_error" : cause ? cause : "failure");
                    sbuf_printf(&b, ">%s</%s>\n", body, elem);
                }
                const char *trace = json_string_value(json_object_get(c->line, "trace"));
                _cleanup_free_ char *abs = !trace ? xstrdup("(none)")
                                           : trace[0] == '/' || !dir_abs ? xstrdup(trace)
                                                                         : xasprintf("%s/%s", dir_abs, trace);
                _cleanup_free_ char *out = xasprintf("trace: %s\nscore: %.3f\nexit_cause: %s\nsteps: %lld\n", abs,
                                                     score, cause ? cause : "?",
                                                     json_integer_value(json_object_get(c->line, "steps")));
                _cleanup_free_ char *esc = report_xml_escape(out);
                sbuf_printf(&b, "      <system-out>%s</system-out>\n", esc);
            }
            sbuf_puts(&b, "    </testcase>\n");
        }
        sbuf_puts(&b, "  </testsuite>\n");
        start = end;
    }
    sbuf_puts(&b, "</testsuites>\n");
    for (i = 0; i < n; i++) {
        free(cases[i].key);
        free(cases[i].domain);
        free(cases[i].task_id);
    }
    free(cases);
    return sbuf_steal(&b);
}

int report_read_meta(const char *dir, bool missing_ok, json_t **meta, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" SUITE_META_FILE, dir), *text = NULL;
    *meta = NULL;
    if (missing_ok && access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    size_t len;
    if (read_file_capped(path, 64u << 20, &text, &len, err) < 0)
        return -1;
    json_error_t je;
    *meta = json_loadb(text, len, 0, &je);
    if (!json_is_object(*meta)) {
        json_decref(*meta);
        *meta = NULL;
        return em_fail(err, "`%s` is damaged: %s", path, je.text);
    }
    return 0;
}

int report_write_all(const char *dir, json_t *extra, json_t **summary_out, em_err *err)
{
    char abs[PATH_MAX];
    if (!realpath(dir, abs))
        return em_fail_errno(err, "`%s`", dir);
    json_t *meta = NULL, *lines = NULL;
    if (report_read_meta(abs, true, &meta, err) < 0)
        return -1;
    _cleanup_free_ char *rpath = xasprintf("%s/" SUITE_RESULTS_FILE, abs);
    if (results_read(rpath, &lines, NULL, err) < 0) {
        json_decref(meta);
        return -1;
    }
    json_t *final = results_final(lines);
    json_t *summary = report_summary(meta, final);
    size_t retried = 0, i;
    json_t *line;
    json_array_foreach(lines, i, line)
    retried += json_is_false(json_object_get(line, "final"));
    json_object_set_new(summary, "retried_attempts", json_integer((json_int_t)retried));
    if (extra)
        json_object_update(summary, extra);
    _cleanup_free_ char *spath = xasprintf("%s/" SUITE_SUMMARY_FILE, abs), *jpath = xasprintf("%s/" SUITE_JUNIT_FILE, abs);
    _cleanup_free_ char *xml = report_junit(meta, final, abs);
    int rc = json_save(spath, summary, JSON_INDENT(2), 0644, err);
    if (rc == 0)
        rc = write_file_atomic(jpath, xml, strlen(xml), 0644, err);
    json_decref(meta);
    json_decref(lines);
    json_decref(final);
    if (rc == 0 && summary_out)
        *summary_out = summary;
    else
        json_decref(summary);
    return rc;
}

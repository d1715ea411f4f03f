/* The audit's findings (report_audit.h), from results lines only: the runs themselves are ordinary
 * suite runs, so each one keeps its traces, summary and JUnit for a closer look. */
#include "envmgr/suite/report_audit.h"

#include <stdarg.h>
#include <string.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/util.h"
#include "envmgr/suite/report_summary.h"

/* task id -> its final line (repeat 1) in a results_final object */
static json_t *by_task(json_t *final, const char *id)
{
    const char *key;
    json_t *line;
    json_object_foreach(final, key, line) {
        const char *tid = json_string_value(json_object_get(line, "task_id"));
        if (tid && !strcmp(tid, id))
            return line;
    }
    return NULL;
}

static void add(json_t *findings, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(json_t *findings, const char *kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char detail[1024];
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    json_array_append_new(findings, json_pack("{s:s, s:s}", "kind", kind, "detail", detail));
}

static const char *str(json_t *line, const char *k)
{
    const char *v = json_string_value(json_object_get(line, k));
    return v ? v : "";
}

/* What one run says of a task, whatever the agent: it crashed, its evaluator failed, it was flagged. */
static void run_findings(json_t *findings, const char *run, json_t *line)
{
    if (!line) {
        add(findings, "missing", "%s: no result (the run did not finish it)", run);
        return;
    }
    exit_cause c = exit_cause_from_name(str(line, "exit_cause"));
    if (c == EXIT_ENV_ERROR || c == EXIT_SETUP_ERROR)
        add(findings, "crashed", "%s: %s: %s", run, str(line, "exit_cause"), str(line, "reason"));
    else if (report_evaluator_error(line))
        add(findings, "evaluator_error", "%s: %s", run, str(line, "reason"));
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(line, "flags"), i, f) {
        const char *where = json_string_value(json_object_get(f, "path"));
        add(findings, "flagged", "%s: %s%s%s", run, where ? where : str(f, "phase"), where ? ": " : " step: ",
            str(f, "why"));
    }
}

json_t *report_audit(const suite *s, json_t *done_final, json_t *fail_final, json_t *solutions_final,
                     json_t *solved)
{
    json_t *tasks = json_object();
    size_t audited = 0, with = 0, unsupported = 0;
    for (size_t i = 0; i < s->ntasks; i++) {
        const suite_task *t = &s->tasks[i];
        json_t *entry = json_object(), *findings = json_array();
        json_object_set_new(tasks, t->id, entry);
        if (t->unsupported) {
            json_object_set_new(entry, "unsupported", json_string(t->unsupported));
            json_decref(findings);
            unsupported++;
            continue;
        }
        audited++;
        json_t *done = by_task(done_final, t->id), *fail = by_task(fail_final, t->id);
        run_findings(findings, "done", done);
        if (t->infeasible)
            run_findings(findings, "fail", fail);
        double sd = json_number_value(json_object_get(done, "score"));
        if (done && !t->infeasible && report_scored(done) && sd > 0)
            add(findings, "pre_satisfied", "a feasible task scores %.2f with nothing done: %s", sd, str(done, "reason"));
        if (done && t->infeasible && report_scored(done) && sd > 0)
            add(findings, "infeasible_passes_done", "scores %.2f when the agent answers DONE", sd);
        if (fail && t->infeasible && report_scored(fail) && json_number_value(json_object_get(fail, "score")) < 1)
            add(findings, "infeasible_fails_fail", "scores %.2f when the agent answers FAIL: %s",
                json_number_value(json_object_get(fail, "score")), str(fail, "reason"));
        if (solutions_final && json_object_get(solved, t->id)) {
            json_t *sol = by_task(solutions_final, t->id);
            if (!sol)
                add(findings, "solution_below_1", "solutions: no result");
            else if (json_number_value(json_object_get(sol, "score")) < 1)
                add(findings, "solution_below_1", "the reference solution scores %.2f (%s): %s",
                    json_number_value(json_object_get(sol, "score")), str(sol, "exit_cause"), str(sol, "reason"));
        }
        with += json_array_size(findings) > 0;
        json_object_set_new(entry, "findings", findings);
    }
    return json_pack("{s:o, s:I, s:I, s:I}", "tasks", tasks, "audited", (json_int_t)audited, "with_findings",
                     (json_int_t)with, "unsupported", (json_int_t)unsupported);
}

void report_audit_print(FILE *out, json_t *audit)
{
    const char *id;
    json_t *entry;
    size_t i;
    json_t *f;
    fprintf(out, "%-40s %-24s %s\n", "TASK", "FINDING", "DETAIL");
    json_object_foreach(json_object_get(audit, "tasks"), id, entry) {
        sbuf b = {0};
        sbuf_add_visible(&b, id, 40);
        json_array_foreach(json_object_get(entry, "findings"), i, f) {
            sbuf d = {0};
            sbuf_add_visible(&d, json_string_value(json_object_get(f, "detail")), 300);
            fprintf(out, "%-40s %-24s %s\n", b.s, json_string_value(json_object_get(f, "kind")), d.s ? d.s : "");
            sbuf_release(&d);
        }
        const char *why = json_string_value(json_object_get(entry, "unsupported"));
        if (why) {
            sbuf d = {0};
            sbuf_add_visible(&d, why, 300);
            fprintf(out, "%-40s %-24s %s\n", b.s, "unsupported", d.s ? d.s : "");
            sbuf_release(&d);
        }
        sbuf_release(&b);
    }
    fprintf(out, "%lld tasks audited: %lld with findings; %lld unsupported here (not run)\n",
            json_integer_value(json_object_get(audit, "audited")),
            json_integer_value(json_object_get(audit, "with_findings")),
            json_integer_value(json_object_get(audit, "unsupported")));
}

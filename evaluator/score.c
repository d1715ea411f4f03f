#include "score.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "evaluator/metrics_builtin.h"

/* Reasons quote paths and guest text cut at byte limits: keep the JSON valid. */
static json_t *reason_json(const char *r)
{
    return r ? getter_text_json(r, strlen(r)) : json_string("?");
}

/* "evaluator.result" for a single func, "evaluator.result[i]" for a list. */
static char *entry_path(const eval_spec *t, const char *key, size_t i)
{
    return t->nmetrics > 1 ? xasprintf("evaluator.%s[%zu]", key, i) : xasprintf("evaluator.%s", key);
}

/* A getter that could not do its job for reasons that are the image's or the task's, never the
 * agent's: said in details.getter_flags even when the score hides it (conj "or", a later metric). */
static void flag(json_t *flags, const char *path, const char *why)
{
    json_array_append_new(flags, json_pack("{s:s, s:o}", "path", path, "why", reason_json(why)));
}

/* What a command getter's stderr says when what it reads is not on the image or its session, so
 * its output is OSWorld's value for "nothing" whatever the agent did: the score stays OSWorld's,
 * the episode is flagged. Only words that name the image's lack, never a file the agent was to
 * make (`No such file` is the agent's failure as often as the image's). */
static const struct {
    const char *needle, *what;
} stderr_signs[] = {
    {"No such schema", "a GSettings schema the image lacks"},
    {"No such key", "a GSettings key the image's schema lacks"},
    {": not found", "a program the image lacks"},
    {"command not found", "a program the image lacks"},
    {"error while loading shared libraries", "a library the image lacks"},
    {"Cannot autolaunch D-Bus", "no D-Bus session"},
    {"Failed to connect to bus", "no D-Bus (systemd) bus"},
    {"Connection failure", "no sound server (PulseAudio)"},
    {"cannot open display", "no X display"},
};

static void flag_stderr(json_t *flags, const char *path, json_t *spec, json_t *art)
{
    const char *e = json_string_value(json_object_get(art, "stderr"));
    for (size_t i = 0; e && i < ARRAY_LEN(stderr_signs); i++) {
        const char *at = strstr(e, stderr_signs[i].needle);
        if (!at)
            continue;
        /* the stderr line that says it, as the command printed it */
        const char *bol = at, *eol = strchr(at, '\n');
        while (bol > e && bol[-1] != '\n')
            bol--;
        int n = (int)((eol ? eol : at + strlen(at)) - bol);
        _cleanup_free_ char *msg =
            xasprintf("%s: %s (stderr: `%.*s`, exit status %d): its output is empty whatever the agent did",
                      json_string_value(json_object_get(spec, "type")), stderr_signs[i].what, n > 300 ? 300 : n, bol,
                      (int)json_integer_value(json_object_get(art, "exit_code")));
        flag(flags, path, msg);
        return;
    }
}

/* Fetch one side; on failure *art stays NULL and *why says what went wrong. */
static void fetch(const em_env_ops *ops, const eval_spec *t, json_t *spec, const char *key, size_t i,
                  const char *artifact_dir, const char *task_dir, json_t *flags, json_t **art, char **why)
{
    *art = NULL;
    if (!spec)
        return;
    em_err e = {0};
    _cleanup_free_ char *path = entry_path(t, key, i);
    if (getter_run(ops, spec, artifact_dir, task_dir, art, &e) < 0) {
        *why = xasprintf("%s: %s", path, e.msg);
        return;
    }
    /* A command getter whose program is not on the image (the shell's 126/127): its output is
     * empty whatever the agent did. */
    json_int_t code = json_integer_value(json_object_get(*art, "exit_code"));
    if (code == 126 || code == 127) {
        _cleanup_free_ char *msg =
            xasprintf("%s: the command could not run (exit status %d: %s on the image)", json_string_value(json_object_get(spec, "type")),
                      (int)code, code == 127 ? "a program it names is not" : "a program it names cannot run");
        flag(flags, path, msg);
    } else {
        flag_stderr(flags, path, spec, *art);
    }
}

/* Returns METRIC_SCORED or METRIC_EVALUATOR_ERROR (then *reason is the error). */
static int run_metric(const em_env_ops *ops, const eval_spec *t, size_t i, const char *artifact_dir, const char *task_dir,
                      const char *agent_exit, json_t *detail, json_t *flags, double *score, char **reason)
{
    int outcome = METRIC_SCORED;
    const eval_metric *m = &t->metrics[i];
    json_t *result = NULL, *expected = NULL;
    char *why = NULL;
    *score = 0;
    *reason = NULL;
    /* What the agent left cannot be read: its failure, scored 0. */
    fetch(ops, t, m->result, "result", i, artifact_dir, task_dir, flags, &result, &why);
    if (!why) {
        fetch(ops, t, m->expected, "expected", i, artifact_dir, task_dir, flags, &expected, &why);
        /* The reference cannot be had (a missing asset, a broken rule): no score, rather than a 0
         * that blames the agent. */
        if (why)
            outcome = METRIC_EVALUATOR_ERROR;
    }
    if (why) {
        *reason = why;
    } else {
        metric_ctx ctx = {.task_dir = task_dir, .artifact_dir = artifact_dir, .agent_exit = agent_exit};
        em_err e = {0};
        outcome = metric_run(&ctx, m->func, result, expected, m->options, score, reason, &e);
        if (outcome < 0) {
            outcome = METRIC_SCORED;
            *score = 0;
            *reason = xasprintf("%s: %s", m->func, e.msg);
        }
    }
    if (outcome == METRIC_EVALUATOR_ERROR)
        json_object_set_new(detail, "status", json_string("evaluator_error"));
    json_object_set_new(detail, "score", json_real(*score));
    json_object_set_new(detail, "reason", reason_json(*reason));
    json_object_set_new(detail, "result", result ? result : json_null());
    json_object_set_new(detail, "expected", expected ? expected : json_null());
    return outcome;
}

int evaluate_task(const em_env_ops *ops, const eval_spec *t, const char *task_dir, const char *artifact_dir,
                  const char *agent_exit, double *score, char **reason, json_t **details, em_err *err)
{
    if (!t || !score || !reason || !details)
        return em_fail(err, "evaluate_task: missing argument");
    *score = 0;
    *reason = NULL;
    *details = NULL;
    if (!artifact_dir || !*artifact_dir)
        return em_fail(err, "evaluate_task: no artifact folder");
    if (t->nmetrics == 0)
        return em_fail(err, "evaluate_task: the task has no metric");

    json_t *metrics = json_array(), *flags = json_array();
    *details = json_pack("{s:s,s:o}", "conj", t->conj_or ? "or" : "and", "metrics", metrics);

    if (!t->infeasible && exit_cause_from_name(agent_exit) == EXIT_FAIL) {
        *reason = xstrdup("the agent answered FAIL (infeasible) but the task is feasible");
        for (size_t i = 0; i < t->nmetrics; i++)
            json_array_append_new(metrics, json_pack("{s:s,s:b}", "func", t->metrics[i].func, "skipped", 1));
    } else {
        double sum = 0, best = -1;
        size_t ran = 0, decided = SIZE_MAX, failed = SIZE_MAX;
        char *best_reason = NULL; /* the deciding metric's reason, else the best one's */
        char *error = NULL;       /* the first evaluator_error */
        for (size_t i = 0; i < t->nmetrics; i++) {
            json_t *d = json_pack("{s:s}", "func", t->metrics[i].func);
            json_array_append_new(metrics, d);
            if (decided != SIZE_MAX || (!t->conj_or && failed != SIZE_MAX)) {
                json_object_set_new(d, "skipped", json_true());
                continue;
            }
            double s;
            char *r;
            if (run_metric(ops, t, i, artifact_dir, task_dir, agent_exit, d, flags, &s, &r) == METRIC_EVALUATOR_ERROR) {
                /* no score: "and" cannot be decided any more; "or" still can, by a later 1, so it is
                 * flagged whatever the final score */
                _cleanup_free_ char *path = t->nmetrics > 1 ? xasprintf("evaluator.func[%zu]", i) : xstrdup("evaluator.func");
                flag(flags, path, r);
                if (failed == SIZE_MAX) {
                    failed = i;
                    error = r;
                } else {
                    free(r);
                }
                continue;
            }
            ran++;
            sum += s;
            bool decides = t->conj_or ? s == 1 : s == 0;
            if (s > best || decides) {
                best = s;
                free(best_reason);
                best_reason = r;
            } else {
                free(r);
            }
            if (decides)
                decided = i;
        }
        if (failed != SIZE_MAX && decided == SIZE_MAX) {
            *score = 0;
            json_object_set_new(*details, "status", json_string("evaluator_error"));
            *reason = t->nmetrics == 1 ? xstrdup(error)
                                       : xasprintf("%s: metric %zu of %zu: %s", t->conj_or ? "or" : "and", failed + 1,
                                                   t->nmetrics, error);
            json_object_set_new(*details, "evaluator_error", reason_json(*reason));
            free(best_reason);
        } else {
            if (!t->conj_or)
                *score = decided != SIZE_MAX ? 0 : sum / (double)ran;
            else
                *score = best;
            if (t->nmetrics == 1)
                *reason = best_reason;
            else {
                *reason = decided != SIZE_MAX
                              ? xasprintf("%s: metric %zu of %zu decided: %s", t->conj_or ? "or" : "and", decided + 1,
                                          t->nmetrics, best_reason)
                              : xasprintf("%s of %zu metrics: %s", t->conj_or ? "best" : "mean", t->nmetrics,
                                          t->conj_or ? best_reason : "all scored above 0");
                free(best_reason);
            }
        }
        free(error);
    }
    if (json_array_size(flags))
        json_object_set(*details, "getter_flags", flags);
    json_decref(flags);
    if (!json_object_get(*details, "status"))
        json_object_set_new(*details, "status", json_string("scored"));
    json_object_set_new(*details, "score", json_real(*score));
    json_object_set_new(*details, "reason", reason_json(*reason));
    return 0;
}

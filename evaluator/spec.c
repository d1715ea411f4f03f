#include "evaluator/spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "evaluator/metrics_builtin.h"

void eval_spec_free(eval_spec *s)
{
    for (size_t i = 0; s->metrics && i < s->nmetrics; i++)
        free(s->metrics[i].func);
    free(s->metrics);
    memset(s, 0, sizeof *s);
}

/* evaluator.<key> for metric i: an object (or null) when func is a string,
 * an array parallel to func when it is a list. */
static int entry(json_t *ev, const char *key, bool is_list, size_t n, size_t i, json_t **out, char *path, em_err *err)
{
    json_t *v = json_object_get(ev, key);
    *out = NULL;
    jfield_path(path, "evaluator", key);
    if (!v)
        return 0;
    if (is_list) {
        if (!json_is_array(v))
            return em_fail_input(err, "%s: expected an array of %zu items (one per func), got %s", path, n, json_type_name(v));
        if (json_array_size(v) != n)
            return em_fail_input(err, "%s: expected %zu items (one per func), got %zu", path, n, json_array_size(v));
        snprintf(path, JFIELD_PATH_MAX, "evaluator.%s[%zu]", key, i);
        v = json_array_get(v, i);
    }
    if (json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return em_fail_input(err, "%s: expected an object, got %s", path, json_type_name(v));
    *out = v;
    return 0;
}

static void problem_if(int rc, eval_problem_fn problem, void *ctx, em_err *err)
{
    if (rc < 0 && problem)
        problem(ctx, err);
}

/* The getters are checked even when the metric is unknown: every problem in one pass. */
static int parse_metric(json_t *ev, bool is_list, size_t n, size_t i, eval_metric *m, bool known,
                        eval_problem_fn problem, void *ctx, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    const char *name = m->func;
    if (entry(ev, "result", is_list, n, i, &m->result, p, err) < 0)
        return -1; /* result is not parallel to func: the same for every entry */
    if (!m->result && known && metric_needs_result(name))
        problem_if(em_fail_input(err, "%s: missing (metric `%s` needs a result)", p, name), problem, ctx, err);
    if (m->result && getter_check(m->result, err) < 0)
        problem_if(em_prefix(err, "%s.", p), problem, ctx, err);

    if (entry(ev, "expected", is_list, n, i, &m->expected, p, err) < 0)
        return -1;
    if (!m->expected && known && metric_needs_expected(name))
        problem_if(em_fail_input(err, "%s: missing (metric `%s` needs an expected value)", p, name), problem, ctx,
                   err);
    if (m->expected && getter_check(m->expected, err) < 0)
        problem_if(em_prefix(err, "%s.", p), problem, ctx, err);

    if (entry(ev, "options", is_list, n, i, &m->options, p, err) < 0)
        return -1;
    if (known && metric_check_options(name, m->options, err) < 0)
        problem_if(em_prefix(err, "%s.", p), problem, ctx, err);
    return 0;
}

int eval_spec_parse(json_t *ev, eval_spec *out, eval_problem_fn problem, void *ctx, em_err *err)
{
    memset(out, 0, sizeof *out);
    if (!ev)
        return em_fail_input(err, "evaluator: missing");
    if (!json_is_object(ev))
        return em_fail_input(err, "evaluator: expected an object, got %s", json_type_name(ev));
    json_t *func = json_object_get(ev, "func");
    if (!func)
        return em_fail_input(err, "evaluator.func: missing");
    bool is_list = json_is_array(func);
    if (!is_list && !json_is_string(func))
        return em_fail_input(err, "evaluator.func: expected a string or an array of strings, got %s", json_type_name(func));
    size_t n = is_list ? json_array_size(func) : 1;
    if (n == 0)
        return em_fail_input(err, "evaluator.func: empty");

    const char *conj = "and";
    if (jfield_str(ev, "evaluator", "conj", false, &conj, err) < 0)
        return -1;
    if (!conj)
        conj = "and";
    if (strcmp(conj, "and") && strcmp(conj, "or"))
        return em_fail_input(err, "evaluator.conj: expected \"and\" or \"or\", got `%.32s`", conj);
    out->conj_or = !strcmp(conj, "or");

    out->metrics = xcalloc(n, sizeof *out->metrics);
    for (size_t i = 0; i < n; i++) {
        char p[JFIELD_PATH_MAX];
        json_t *f = is_list ? json_array_get(func, i) : func;
        if (is_list)
            jfield_index(p, "evaluator.func", i);
        else
            jfield_path(p, "evaluator", "func");
        if (!json_is_string(f)) {
            problem_if(em_fail_input(err, "%s: expected a string, got %s", p, json_type_name(f)), problem, ctx, err);
            continue;
        }
        const char *name = json_string_value(f);
        bool known = metric_known(name);
        if (!known)
            problem_if(em_fail_input(err, "%s: unknown metric `%.64s`%s", p, name, metric_unknown_hint()), problem,
                       ctx, err);
        eval_metric *m = &out->metrics[out->nmetrics++];
        m->func = xstrdup(name);
        if (!strcmp(name, "infeasible"))
            out->infeasible = true;
        if (parse_metric(ev, is_list, n, i, m, known, problem, ctx, err) < 0)
            return -1;
    }
    return 0;
}

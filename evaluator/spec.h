/* What the evaluator needs of a task: its `evaluator` section without the postconfig steps (which
 * are setup steps, run by the episode before evaluation). The task format (envmgr/task) hands the
 * section here to be parsed; evaluate_task reads only this, so the evaluator knows nothing of
 * setup steps, network policy or limits. */
#ifndef ENVMGR_EVAL_SPEC_H
#define ENVMGR_EVAL_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

/* One evaluator entry: func(result, expected, options). */
typedef struct eval_metric {
    char *func;
    json_t *result;      /* getter spec, NULL when absent (infeasible); borrowed from the document */
    json_t *expected;    /* getter spec or NULL (borrowed) */
    json_t *options;     /* object or NULL (borrowed) */
} eval_metric;

typedef struct eval_spec {
    eval_metric *metrics;
    size_t nmetrics;
    bool conj_or;        /* evaluator.conj == "or" */
    bool infeasible;     /* an evaluator func is "infeasible" */
} eval_spec;

/* Called with each problem that leaves the rest of the section readable (an unknown metric, a bad
 * getter, bad options), so a checker can list them all; err holds the message. */
typedef void (*eval_problem_fn)(void *ctx, em_err *err);

/* Parse the evaluator object ev (messages name "evaluator.<field>"): -1 when its shape is wrong
 * (func missing, entries not parallel to func), else 0 with each lesser problem passed to
 * problem. out keeps pointers into ev: ev must outlive it. */
int eval_spec_parse(json_t *ev, eval_spec *out, eval_problem_fn problem, void *ctx, em_err *err);
void eval_spec_free(eval_spec *s);

#endif

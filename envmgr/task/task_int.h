/* What the task format's files share (envmgr/task/ only): the parse context that collects
 * every problem and warning of a document, and the parts one file parses for another. The public
 * interface is task.h. Files by job: task.c (the document: load, check, free, top-level fields),
 * task_steps.c (setup and postconfig steps), task_policy.c (network policy and limits),
 * task_subst.c (OSWorld's placeholders), task_list.c (a suite's task files). */
#ifndef ENVMGR_TASK_INT_H
#define ENVMGR_TASK_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/task/task.h"

#define SCREEN_SIDE_MAX 16384

typedef struct pctx {
    task *t;
    bool warn; /* collect warnings (off when re-parsing after substitution) */
    /* Every problem, not only the first: a part that fails is recorded and parsing goes on with
     * the next independent part (field, step, evaluator entry), so `envmgr task check` can list
     * them all. The first one is what task_parse reports. */
    char **problems;
    size_t nproblems;
    em_err first;
} pctx;

#define PROBLEMS_MAX 200

/* rc < 0: record err's message as a problem; always 0, so the caller goes on. */
int task_keep(pctx *c, int rc, em_err *err);
/* Warn about keys not in `known` (space separated, with spaces around). */
void task_warn_unknown(pctx *c, json_t *obj, const char *base, const char *known);
/* A flag that OSWorld's files may spell as the string "true" or "false". */
int task_get_boolish(json_t *obj, const char *base, const char *key, bool dflt, bool *out, em_err *err);
void task_strv_free(char **v, size_t n);
/* A task id (also a folder or domain name of an index): letters, digits, `.`, `_`, `-`. */
bool task_valid_id(const char *s);
void task_problems_free(pctx *c);

/* Steps (task_steps.c): config or evaluator.postconfig at `path`; absent is no steps. */
int task_parse_steps(pctx *c, json_t *arr, const char *path, task_step **out, size_t *n, em_err *err);
void task_steps_free(task_step *v, size_t n);
/* config and evaluator (again after a substitution): the first problem in err, -1 when any. */
int task_parse_config_and_evaluator(pctx *c, em_err *err);

/* network and limits (task_policy.c). */
int task_parse_network(task *t, json_t *root, em_err *err);
int task_parse_limits(task *t, json_t *root, em_err *err);

#endif

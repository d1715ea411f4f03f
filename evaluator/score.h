/* Scoring an episode, with OSWorld's semantics:
 *
 * - A task whose evaluator has no `infeasible` func scores 0 when the agent
 *   ended with FAIL (it gave up on a feasible task); nothing is fetched.
 * - Each evaluator entry runs its result getter, its expected getter, then
 *   its metric. A getter or metric failure scores that entry 0 with the
 *   reason; it never fails the whole evaluation.
 * - conj "and" (default): the mean of the scores, stopping at the first 0
 *   (the task scores 0). conj "or": the best score, stopping at the first 1.
 * - A metric that ends in evaluator_error (metrics_builtin.h: a script crashed, hit
 *   a limit, answered {"error"}) has no score. With "and" the evaluation
 *   stops there and the task is an evaluator_error, unless an earlier metric
 *   already decided 0; with "or" a later 1 still decides, else the task is
 *   an evaluator_error.
 *
 * Postconfig steps are run by the caller before evaluate_task. */
#ifndef ENVMGR_SCORE_H
#define ENVMGR_SCORE_H

#include <jansson.h>

#include "envmgr/base/err.h"
#include "evaluator/env_ops.h"
#include "evaluator/spec.h"

/* ev: the task's evaluator spec; task_dir: its folder (local_file, scripts shipped with it), or
 * NULL. agent_exit is how the episode ended ("done",
 * "fail", "timeout", "max_steps", ...; NULL when unknown). On success
 * *score is 0..1, *reason one line (malloc'd) and *details a new object:
 *   {"conj": "and"|"or", "score": s, "reason": "...",
 *    "status": "scored"|"evaluator_error", "evaluator_error": "..." (only then),
 *    "metrics": [{"func", "score", "reason", "status"?: "evaluator_error",
 *                 "result": artifact|null, "expected": artifact|null} | {"func", "skipped": true}]}
 * With status "evaluator_error", *score is 0 and is not a score: *reason is the error.
 * Returns negative only for programmer errors (NULL task, no artifact_dir). */
int evaluate_task(const em_env_ops *ops, const eval_spec *ev, const char *task_dir, const char *artifact_dir,
                  const char *agent_exit, double *score, char **reason, json_t **details, em_err *err);

#endif

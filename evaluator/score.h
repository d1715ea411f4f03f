/* Scoring an episode, with OSWorld's semantics:
 *
 * - A task whose evaluator has no `infeasible` func scores 0 when the agent
 *   ended with FAIL (it gave up on a feasible task); nothing is fetched.
 * - Each evaluator entry runs its result getter, its expected getter, then
 *   its metric. A getter or metric failure scores that entry 0 with the
 *   reason; it never fails the whole evaluation.
 * - conj "and" (default): the mean of the scores, stopping at the first 0
 *   (the task scores 0). conj "or": the best score, stopping at the first 1.
 *
 * Postconfig steps are run by the caller before evaluate_task. */
#ifndef ENVMGR_SCORE_H
#define ENVMGR_SCORE_H

#include <jansson.h>

#include "envmgr/base/err.h"
#include "evaluator/env_ops.h"
#include "evaluator/task.h"

/* task_dir NULL means t->dir. agent_exit is how the episode ended ("done",
 * "fail", "timeout", "max_steps", ...; NULL when unknown). On success
 * *score is 0..1, *reason one line (malloc'd) and *details a new object:
 *   {"conj": "and"|"or", "score": s, "reason": "...",
 *    "metrics": [{"func", "score", "reason", "result": artifact|null,
 *                 "expected": artifact|null} | {"func", "skipped": true}]}
 * Returns negative only for programmer errors (NULL task, no artifact_dir). */
int evaluate_task(const em_env_ops *ops, const task *t, const char *task_dir, const char *artifact_dir,
                  const char *agent_exit, double *score, char **reason, json_t **details, em_err *err);

#endif

/* One episode: restore the clean state, run the task's setup, let the agent
 * act until DONE/FAIL/limits, run postconfig and the evaluator, record every
 * step in a trace and write result.json. */
#ifndef ENVMGR_EPISODE_H
#define ENVMGR_EPISODE_H

#include <jansson.h>
#include <stdbool.h>

#include "env.h"
#include "evaluator/task.h"

typedef struct episode_opts {
    const char *agent_cmd;
    const char *out_dir;    /* result.json, agent.log, artifacts/ */
    const char *trace_dir;  /* NULL: out_dir/trace */
    bool fresh;             /* the env was just restored: skip the initial reset */
    double settle_ms;       /* after each action, wait for two identical frames this far apart */
} episode_opts;

/* Runs the episode in e. Returns 0 when the episode ran (whatever its score
 * or exit cause); *result is the result.json object. Returns -1 only when
 * nothing could be recorded (bad arguments, output directory unusable,
 * interrupted). */
int episode_run(env *e, const task *t, const char *task_path, const episode_opts *o, json_t **result, em_err *err);

#endif

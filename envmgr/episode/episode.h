/* One episode: restore the clean state, run the task's setup, let the agent
 * act until DONE/FAIL/limits, run postconfig and the evaluator, record every
 * step in a trace and write result.json. */
#ifndef ENVMGR_EPISODE_H
#define ENVMGR_EPISODE_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/env/env.h"
#include "envmgr/episode/observation.h"
#include "envmgr/task/task.h"

typedef struct episode_opts {
    const char *agent_cmd;  /* the operator's command line (run through /bin/sh -c) */
    const char *const *agent_argv; /* or an argv envmgr built (no shell); NULL-terminated */
    const char *out_dir;    /* result.json, agent.log, artifacts/ */
    const char *trace_dir;  /* NULL: out_dir/trace */
    bool fresh;             /* the env was just restored: skip the initial reset */
    double settle_ms;       /* after each action, wait for a still screen and an idle guest this long */
    double late_probe_ms;   /* > 0: a measurement: after each observation let the guest run this long
                             * and count the observations a later frame contradicts (late_change) */
    obs_kind observation;   /* what each observation holds (observation.h); default the screen */
    const char *const *agent_env;  /* the operator's --agent-env names passed on to the agent (NULL-terminated) */
    bool agent_sandbox_off;        /* --agent-sandbox=off: the agent sees envmgr's run and cache folders */
    const char *const *agent_show; /* folders the agent reads besides the frames (a replay's recorded trace) */
    bool video;                    /* --video: out_dir/recording.mp4 from the finished trace (result.json "video") */
    const json_t *from_state;      /* the env was just restored from this saved state ({name, id, ...}; with
                                    * fresh): the trace header says so and the task's setup is not run again */
} episode_opts;

/* An episode driven step by step (the HTTP API's reset/step/evaluate), with
 * the same per-step logic episode_run's agent loop uses: replies are
 * validated in full before anything reaches the guest, executed action by
 * action with screen settling, and every step is recorded in the trace. */
typedef struct episode episode;

typedef struct episode_step_out {
    bool refused;             /* nothing reached the guest; error says why */
    bool ended;               /* the episode is over (episode_exit_cause says why) */
    int actions;              /* actions this reply executed */
    char error[EM_ERR_MAX];   /* refusal, or the env error that ended the episode; "" otherwise */
    char agent_error[EM_ERR_MAX]; /* the agent's pyautogui code failed in the guest (the episode goes on); "" */
} episode_step_out;

/* Reset e (unless o->fresh), open the trace, run the task's config steps and
 * let the screen settle. task_path may be NULL (an inline task); task_sha256
 * NULL means t->sha256 (the bytes t was parsed from). A failed setup step does not fail the call: the
 * episode is then already ended with exit cause env_error. */
int episode_begin(env *e, const task *t, const char *task_path, const char *task_sha256, const episode_opts *o,
                  episode **out, em_err *err);
/* The same over an env given as operations (episode_env.h): what the unit tests drive. */
struct episode_env;
int episode_begin_with(const struct episode_env *ev, const task *t, const char *task_path, const char *task_sha256,
                       const episode_opts *o, episode **out, em_err *err);
/* A fresh frame: stored in the trace, kept as the frame the next reply acts
 * on. sha (65 bytes) names it; the PNG is trace_dir/frames/<sha>.png. */
int episode_observe(episode *ep, char sha[65], em_err *err);
/* The accessibility tree the last observation read (observation a11y_tree or
 * screenshot_a11y_tree): its sha256, the file trace_dir/a11y/<sha>.xml; NULL otherwise. */
const char *episode_observed_tree(const episode *ep);
/* One reply: a computer_13 action object or {"pyautogui": code}. agent_ms is
 * how long the agent took (recorded). Returns -1 only when the trace cannot
 * be written or on interrupt; refusals and env failures come back in *out. */
int episode_step(episode *ep, json_t *reply, double agent_ms, episode_step_out *out, em_err *err);
/* What the last reply's tool expects back (action_reply_answer: Anthropic's tool_result, OpenAI's
 * computer_call_output) on the observation just taken; NULL for other spaces and refused replies. */
int episode_answer(const episode *ep, json_t **answer, em_err *err);
/* End the episode now (if it has not ended) with this cause. */
void episode_end(episode *ep, exit_cause cause, const char *why);
/* NULL while the episode runs. */
exit_cause episode_exit_cause(const episode *ep); /* EXIT_NONE while it runs */
/* Why it ended early (agent or env trouble), or NULL. */
const char *episode_reason(const episode *ep);
int episode_steps(const episode *ep);
/* How long episode_begin took to reset the env (or to restore the task's cached setup instead). */
double episode_reset_ms(const episode *ep);
const char *episode_trace_dir(const episode *ep);
/* Postconfig, evaluator, trace trailer, result.json; frees ep (also on failure).
 * An episode still running ends with exit_cause `cause` first. */
int episode_finish(episode *ep, exit_cause cause, json_t **result, em_err *err);
/* Free without evaluating: the trace stays readable, marked incomplete. */
void episode_abandon(episode *ep);

/* Whether agents get their sandbox (agent_sandbox.h), as the trace header's agent_sandbox says it:
 * "bwrap", "off (--agent-sandbox=off)" or "none (why)"; caller frees. Decided once per process and
 * said once on stderr when the host cannot give it: a suite asks before it forks its workers. */
char *episode_agent_sandbox(bool off, bool *boxed);


/* Runs the episode in e. Returns 0 when the episode ran (whatever its score
 * or exit cause); *result is the result.json object. Returns -1 only when
 * nothing could be recorded (bad arguments, output directory unusable,
 * interrupted). */
int episode_run(env *e, const task *t, const char *task_path, const episode_opts *o, json_t **result, em_err *err);
int episode_run_with(const struct episode_env *ev, const task *t, const char *task_path, const episode_opts *o,
                     json_t **result, em_err *err);

#endif

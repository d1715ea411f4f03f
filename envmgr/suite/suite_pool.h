/* `envmgr suite run`: a suite's episodes over a pool of warm envs.
 *
 * One worker process per env (fork; libvncclient and QMP handles are not
 * thread-safe, and a crashed worker takes nothing else down). A worker boots
 * its env suite-<pid>-<k> once, then runs the episodes the parent hands it
 * over a socketpair, one at a time; each episode starts from the env's
 * clean snapshot (restored in ~0.1-0.2 s). The parent owns everything
 * shared: the queue, DIR/results.jsonl (one write() + fsync per line), the
 * progress display, the watchdog and the env teardown.
 *
 * Failures:
 *  - a QEMU that dies mid-episode: the episode ends in env_error (the
 *    episode runner sees the sockets close); the line is recorded with
 *    final=false, the worker restores its env from the snapshot (or
 *    recreates it), and the episode goes back to the front of the queue
 *    (retries times, default 1);
 *  - a QEMU (or worker) that hangs: the watchdog (the task's
 *    episode_timeout_s + a margin) kills the QEMU, which unblocks the
 *    worker; a worker still silent after a grace period is killed, its env
 *    torn down and a new worker started for the slot;
 *  - SIGINT/SIGTERM: no more episodes start, workers abort theirs (the
 *    library's interrupted() flag), every env goes down, results so far stay;
 *  - kill -9: workers die with the parent (PR_SET_PDEATHSIG) and take their
 *    envs down; if they were killed too, `envmgr gc` or the next --resume
 *    reaps the envs of the dead owner. */
#ifndef ENVMGR_SUITE_POOL_H
#define ENVMGR_SUITE_POOL_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"
#include "envmgr/episode/observation.h"
#include "envmgr/episode/settle.h"
#include "envmgr/suite/suite.h"

#define SUITE_EXIT_INTERRUPTED 130
#define SUITE_WATCHDOG_MARGIN_S 300.0  /* past the task's episode_timeout_s: reset, setup, evaluation */
#define SUITE_WORKER_GRACE_S 30.0      /* at most, after the watchdog killed QEMU, before the worker is killed */
#define SUITE_SPAWN_TRIES 3            /* a slot whose env fails to start this often in a row is dropped */

typedef struct pool_opts {
    const char *agent;       /* agent command (sh -c) */
    const char *out_dir;     /* DIR */
    const char *accel;       /* auto, kvm, tcg */
    int envs;                /* 0: the host's default (suite_default_envs) */
    int repeat;              /* episodes per task, >= 1 */
    int retries;             /* retries of an episode that ended in env_error */
    double settle_ms;
    obs_kind observation;    /* what the agent's observations hold (observation.h) */
    bool video;              /* each episode's recording.mp4 (--video) */
    const char *const *agent_env; /* the operator's --agent-env names (NULL-terminated; may be NULL) */
    bool agent_sandbox_off;  /* --agent-sandbox=off */
    double watchdog_s;       /* > 0: this per-episode limit instead of timeout + margin */
    double watchdog_margin_s;
    bool resume;
    int progress;            /* -1: a progress line when stderr is a terminal; 0: plain lines; 1: progress line */
    const struct netpolicy *net; /* the envs' network policy: the operator's limit maxima (NULL: defaults) */
} pool_opts;
/* The defaults suite run and suite audit start from. */
#define POOL_OPTS_DEFAULTS                                                                                            \
    {.accel = "auto", .repeat = 1, .retries = 1, .settle_ms = SETTLE_DEFAULT_MS,                                   \
     .watchdog_margin_s = SUITE_WATCHDOG_MARGIN_S, .progress = -1}

/* Run (or, with resume, finish) the suite into o->out_dir. Returns 0 when
 * every episode is over, -1 otherwise (err says why; code
 * SUITE_EXIT_INTERRUPTED after SIGINT/SIGTERM). summary.json and junit.xml
 * are written in both cases; *summary (optional) gets the summary. */
int suite_run(const suite *s, const pool_opts *o, json_t **summary, em_err *err);

#endif

/* Task setup and postconfig steps, run in the guest: commands (as the
 * desktop user, as OSWorld's in-guest server runs them), files copied in,
 * windows activated or closed, waits for the screen. */
#ifndef ENVMGR_SETUP_H
#define ENVMGR_SETUP_H

#include <jansson.h>

#include "envmgr/env/env.h"
#include "envmgr/task/task.h"

/* A step ran but its own check failed (execute_with_verification, execute's `check`, an asset
 * that cannot be had, a browser step on an image without a browser): the episode ends as
 * setup_error, not env_error (the env is fine; retrying would fail the same way). */
#define SETUP_FAILED (-2)

/* Run one step. *detail receives facts for the trace (exit code, capped output, "tolerated":
 * why, when the step failed the way OSWorld goes on after); cache_dir is the episode's cache
 * (execute's stdout/stderr files, read by cache_file); deadline_ms: 0, or the now_ms() time the
 * episode ends, which an asset's fetch may not outlive. Returns 0, SETUP_FAILED, or -1 when the
 * step could not be carried out (the env failed). */
int setup_run_step(env *e, const task *t, const task_step *s, const char *cache_dir, double deadline_ms,
                   json_t **detail, em_err *err);

/* Wait until the screen has not changed for stable_ms (or, with a reference,
 * until the region matches it within tolerance), at most timeout_s. The
 * reference is t's file, resolved again here (task_file_path). */
int setup_wait_screen(env *e, const task *t, const task_step *s, em_err *err);

/* How a wait for the screen ended, recorded per step in the trace. */
typedef struct settle_info {
    double ms;        /* how long it took */
    bool settled;     /* false: the upper bound ended it */
    const char *why;  /* "settled", or what kept it from settling: "screen changing", "guest busy",
                       * "disk busy" */
} settle_info;

#define SETTLE_BUSY_MAX 0.25 /* a guest whose vCPUs ran more than this share of the window is working */

/* Wait until the screen has not changed for a whole window of settle_ms AND the guest's vCPUs were
 * idle AND its disk untouched over that window (a menu or dialog that an application has not
 * started drawing yet keeps the guest busy, or waiting for its disk, so a still screen alone is
 * not enough); a change restarts the wait. At most
 * max_ms. Returns 0 either way (a screen that never settles is not an error); info may be NULL. */
int screen_settle(env *e, double settle_ms, double max_ms, settle_info *info, em_err *err);

#endif

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

#endif

/* OSWorld's results tree from a suite run: what OSWorld's own run loop (lib_run_single) leaves
 * per episode, so the scripts and viewers that read OSWorld results read envmgr's too. */
#ifndef ENVMGR_EXPORT_OSWORLD_H
#define ENVMGR_EXPORT_OSWORLD_H

#include <stddef.h>

#include "envmgr/base/err.h"

typedef struct export_osworld_info {
    size_t episodes; /* exported */
    size_t skipped;  /* final lines with no trace (env_error, unsupported) */
} export_osworld_info;

/* For each final episode of run_dir/results.jsonl, out_dir/<domain>/<task id>/ (rep-<r>/ below it
 * with --repeat) with traj.jsonl (a line per agent reply: step_num, action_timestamp, action,
 * response, reward, done, info, screenshot_file), step_<n>_<timestamp>.png (the screen after it),
 * result.txt (the score, when the episode was scored) and recording.mp4. An episode folder that
 * exists already is an error (nothing is overwritten). */
int export_osworld(const char *run_dir, const char *out_dir, export_osworld_info *info, em_err *err);

#endif

/* Replaying a recorded episode: the same image, the same task setup, every
 * recorded action with its timing, and each frame after an action compared
 * with the recorded one; then the evaluator again. It reproduced only when
 * every frame matched (exactly, or within the tolerance) and the score is
 * the same. */
#ifndef ENVMGR_REPLAY_H
#define ENVMGR_REPLAY_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/env/env.h"

#define REPLAY_TOLERANCE_DEFAULT 0.002 /* fraction of pixels that may differ */

typedef struct replay_opts {
    const char *trace_dir;
    const char *out_dir;      /* the replay's own trace, result and divergence frames */
    const char *self_exe;     /* envmgr itself, to start the replay agent */
    const char *task_path;    /* the operator's --task; NULL: the task the trace carries */
    double tolerance;
    long until;               /* replay only the first N actions (-1: all) */
    bool fast, force;
} replay_opts;

/* Checks the trace (refuses a tampered one), the task file and the image
 * (refuses others unless force), then replays in e. *report: the comparison. */
int replay_run(env *e, bool fresh, const replay_opts *o, json_t **report, em_err *err);

#endif

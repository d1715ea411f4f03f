/* What an observation holds (OSWorld's observation types): the screen, the accessibility tree,
 * or both. The tree comes from the guest toolbelt (`envmgr-guest a11y-tree`, the apps image),
 * read while the guest runs, and is stored in the trace content-addressed like frames. */
#ifndef ENVMGR_OBSERVATION_H
#define ENVMGR_OBSERVATION_H

#include <stdbool.h>

#include "envmgr/base/err.h"

struct episode_env;
struct trace_writer;

typedef enum {
    OBS_SCREENSHOT = 0,       /* "screenshot" (the default) */
    OBS_A11Y_TREE,            /* "a11y_tree" */
    OBS_SCREENSHOT_A11Y_TREE, /* "screenshot_a11y_tree" */
} obs_kind;

/* OSWorld's name → kind; an unknown name is a usage error listing the three. */
int obs_kind_parse(const char *name, obs_kind *k, em_err *err);
const char *obs_kind_name(obs_kind k);
static inline bool obs_has_tree(obs_kind k) { return k != OBS_SCREENSHOT; }
static inline bool obs_has_screenshot(obs_kind k) { return k != OBS_A11Y_TREE; }

/* The desktop's accessibility tree now, into the trace (a11y/<sha>.xml); sha names it. Errors
 * name the cause: an image without the toolbelt, a dump that failed. */
int obs_fetch_tree(const struct episode_env *ev, struct trace_writer *tw, char sha[65], em_err *err);

#endif

/* The episode plan: what every front end (envmgr run, suite run, the HTTP API) settles the same
 * way before a VM starts. Today: which image a task runs on, by one rule, and whether that image
 * has the applications the task is about. docs/architecture.md, "The episode plan". */
#ifndef ENVMGR_EPISODE_PLAN_H
#define ENVMGR_EPISODE_PLAN_H

#include <stdbool.h>

#include "envmgr/base/err.h"
#include "envmgr/task/task.h"

/* The operator's image choice (--image NAME [--force-image] on run, suite run and serve). */
typedef struct plan_image_choice {
    const char *image; /* for tasks that name none (OSWorld's never do); NULL: the default image */
    bool force;        /* this image even for tasks that name another */
} plan_image_choice;

/* The image t runs on: the operator's forced one, else the task's own `image`, else the
 * operator's default, else IMAGE_DEFAULT; into *image (caller frees). Refused (an input error, one
 * line) when the image is not built, or lacks an application t's related_apps names; the line
 * names the apps and the built images that have them ("related_apps: chrome, gimp: not on image
 * `desktop`; image `apps` has them (--image apps)"). */
int plan_image(const task *t, const plan_image_choice *op, char **image, em_err *err);

/* Whether the image has every application t's related_apps names; the same refusal as plan_image.
 * For an env that already runs (--env, an API env, a suite's warm env): episode_prepare_task. */
struct manifest;
int plan_check_apps(const task *t, const struct manifest *m, em_err *err);

#endif

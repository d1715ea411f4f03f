/* The episode plan: what every front end (envmgr run, suite run, the HTTP API, replay) settles the
 * same way, and the only place that decides it: which image a task runs on (one rule), whether
 * that image has the applications the task is about, the task's network section and limits
 * against the operator's or the env's policy and maxima, and OSWorld's placeholders for the
 * env's screen and user. The task is read once (task_load; its hash is task.sha256): the plan
 * settles that one reading, for a planned env and again for the env that runs.
 * docs/architecture.md, "The episode plan". */
#ifndef ENVMGR_EPISODE_PLAN_H
#define ENVMGR_EPISODE_PLAN_H

#include <stdbool.h>

#include "envmgr/base/err.h"
#include "envmgr/env/env.h"
#include "envmgr/net/netpolicy.h"
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

/* Whether a task runs on an image with guest interface `iface` ("envmgr", "qga", "none"; docs/images.md):
 * 0, or an input error naming the first setup step, getter or postconfig step the interface cannot
 * run and why (none: anything inside the guest; qga: what needs envmgr's toolbelt or desktop user,
 * not commands and files). plan_image refuses with it before any VM starts. */
int plan_guest_refusal(const task *t, const char *iface, const char *image, em_err *err);

/* The built image whose manifest.json has this sha256 (what a trace's header names), or NULL: the
 * image a replay runs on. Caller frees. */
char *plan_image_with_manifest(const char *manifest_sha256);

/* The policy t runs under in an env whose policy is `current` now: the task's network section with
 * the operator's private rules and maxima (netpolicy_for_task), refused (an input error naming the
 * field) when it asks past them. The one place a task's network is worked out, for run, suite,
 * serve, replay and `up --task`. */
int plan_network(const netpolicy *current, const task *t, netpolicy *out, em_err *err);

/* Settle t for an env under policy net (NULL: the defaults) with screen and password v (NULL: no
 * substitution): the task's network section and limits against net's rules and maxima (an input
 * error naming the field), then OSWorld's placeholders (task_substitute, from the document as
 * read, so it may be called again for another env). */
int plan_settle(task *t, const netpolicy *net, const task_vars *v, em_err *err);

/* Before a temporary env starts: the image (plan_image), and t settled for it under the operator's
 * policy op_net (the --allow-private rules and --max-* maxima the env will get; NULL: defaults)
 * with the image's screen size, so bad input costs nothing. *image: caller frees. */
int plan_new_env(task *t, const plan_image_choice *op, const netpolicy *op_net, char **image, em_err *err);

/* For the env t runs in (a temporary one once it is up, --env, an API env, a suite's warm env):
 * its image's apps (plan_image's refusal), its network policy, its screen and its user's password. */
int plan_for_env(env *e, task *t, em_err *err);

#endif

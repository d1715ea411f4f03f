/* OSWorld's vocabulary as envmgr knows it: the metric names (the setup types and getters live
 * in task.c's and getters.c's own tables), for `envmgr task pieces` and docs/osworld.md. */
#ifndef ENVMGR_OSWORLD_H
#define ENVMGR_OSWORLD_H

#include <stddef.h>

/* Every OSWorld metric name, sorted. */
const char *const *osworld_metric_names(size_t *n);

/* The Debian package that provides an app a task's related_apps names ("chrome" -> "chromium",
 * "libreoffice calc" -> "libreoffice-calc", case-insensitive), or NULL for names that ask for no
 * application of their own ("os", "terminal", "image", "pdf", ...). */
const char *osworld_app_package(const char *app);

#endif

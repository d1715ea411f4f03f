/* Where envmgr keeps things: run directories (sockets, overlays, pids),
 * the cache (golden states, accel verdict) and the images. Each can be
 * moved with an environment variable. */
#ifndef ENVMGR_PATHS_H
#define ENVMGR_PATHS_H

#include "envmgr/base/err.h"

/* The image envs boot when nothing names one: the small desktop CI and the demo use. */
#define IMAGE_DEFAULT "desktop"

/* ENVMGR_RUN_DIR, else /run/envmgr (root) or $XDG_RUNTIME_DIR/envmgr or /tmp/envmgr-UID. */
const char *paths_run_root(void);
/* ENVMGR_CACHE_DIR, else /var/cache/envmgr (root) or ~/.cache/envmgr. */
const char *paths_cache_root(void);
/* Saved states (docs/states.md): ENVMGR_STATE_DIR, else <cache root>/states. Caller frees. */
char *paths_state_root(void);
/* envmgr's read-only data files (image recipes and outputs, evaluator scripts): ENVMGR_DATA_DIR,
 * else <prefix>/share/envmgr for an installed <prefix>/bin/envmgr, else the checkout a build-tree
 * binary lives in. Never the path the binary was built at. */
const char *paths_data_dir(void);
/* The envmgr binary that helper processes (egress proxy and relays, QEMU's log keeper) run:
 * ENVMGR_HELPER_BIN, else this program, else (a test program) the checkout's bin/envmgr. */
const char *paths_envmgr_bin(void);
/* ENVMGR_IMAGE_DIR, else <data>/vm-images/out. */
const char *paths_image_root(void);
/* Directory of an image given by name ("desktop") or path (contains '/'). Caller frees. */
char *paths_image_dir(const char *image);
/* Run directory of an env (caller frees). */
char *paths_env_dir(const char *name);
/* Create the run root (0700) if missing, and refuse one that another user could have planted or
 * can write into (paths_check_private_dir). */
int paths_ensure_run_root(em_err *err);
/* A directory that is ours alone: not a symbolic link, owned by this user, not writable by group
 * or others. Without XDG_RUNTIME_DIR the run root is /tmp/envmgr-UID, which anyone could create
 * first; files in an env's directory (its network extras name a program to run) must be ours. */
int paths_check_private_dir(const char *path, const char *what, em_err *err);

#endif

/* `envmgr gc`: what crashed or killed envmgr commands leave behind.
 *  - run directories whose QEMU is dead (an env killed from outside, a host
 *    reboot); an env whose lock is held is in use and left alone;
 *  - suite envs (suite-<pid>-<k>) whose owning envmgr is gone (kill -9),
 *    with their QEMU; with all_suite, every suite env;
 *  - golden-state builder directories (.golden-<pid>) of dead builders;
 *  - work folders of `image import` and `image rm` (.import-NAME.<pid>.*, .rm-NAME.<pid>) in the image
 *    root whose envmgr is gone;
 *  - golden states in the cache whose image manifest no longer exists (each
 *    holds a guest-RAM file of the image's memory size), unless a QEMU still
 *    maps it or a builder holds its lock;
 *  - saved states over the cache's cap, least recently used first, and those
 *    whose golden state is gone (state/states.h). */
#ifndef ENVMGR_ENV_GC_H
#define ENVMGR_ENV_GC_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

/* Envs a suite process owns are named SUITE_ENV_PREFIX "<owner pid>-<k>": gc needs the name
 * to tell whose they are, so the convention lives here, below the suite layer. */
#define SUITE_ENV_PREFIX "suite-"

typedef struct gc_opts {
    bool all_suite;    /* suite envs even when their owner still runs */
    bool keep_golden;  /* leave the golden states alone */
    bool keep_states;  /* leave the saved states alone */
    long state_cap_mib; /* < 0: ENVMGR_STATE_CAP_MIB or the default */
    bool dry_run;      /* say what would go, remove nothing */
    pid_t only_owner;  /* > 0: only the suite envs of this owner (which must be gone); nothing else */
} gc_opts;

typedef struct gc_stats {
    size_t envs;        /* run directories removed */
    size_t qemus;       /* live QEMUs stopped */
    size_t goldens;     /* golden states removed */
    double golden_mib;  /* their size on disk */
    size_t states;      /* saved states evicted */
    double state_mib;
    size_t busy;        /* left alone because in use */
    size_t overlays;    /* overlays on disk whose run directory is gone (vm/overlay.h) */
    double overlay_mib;
    size_t cgroups;     /* env cgroups with no process left (vm/cgroup.h) */
    size_t qemu_users;  /* QEMU user ids claimed by run directories that are gone (vm/runas.h) */
} gc_stats;

int suite_gc(const gc_opts *o, FILE *log, gc_stats *st, em_err *err);

/* suite-<pid>-<k> -> pid; 0 for any other name. */
pid_t suite_env_owner(const char *name);
/* The process runs and is an envmgr (a reused pid does not count). */
bool suite_owner_alive(pid_t pid);

#endif

/* The golden state of an image: booted once to a ready desktop, then frozen
 * as (disk overlay, RAM file, device state). Every env starts from it and
 * every reset returns to it:
 *   golden.qcow2  the disk as the booted desktop left it (backing of every env overlay)
 *   ram.bin       guest RAM, written by the builder through a shared mapping;
 *                 envs map it privately (copy-on-write), so it loads instantly
 *                 and idle envs share its pages
 *   state.bin     device state (migration stream with x-ignore-shared: no RAM)
 * An overlay created with `qemu-img create -b` does not see the base's
 * internal snapshots, which is why the state lives in files. */
#ifndef ENVMGR_GOLDEN_H
#define ENVMGR_GOLDEN_H

#include <jansson.h>
#include <sys/types.h>

#include "envmgr/base/err.h"
#include "envmgr/vm/manifest.h"

typedef struct golden {
    char *dir, *disk, *ram, *state;
    char key[65];
    int pointer_x, pointer_y; /* where the pointer was when the state was saved */
    json_t *meta;
} golden;

/* The cache key of a golden state: the image's manifest sha256, its disk's path, the accelerator and
 * the QEMU version. */
void golden_key(const manifest *m, const char *accel, const char *qemu_version, char key[65]);
/* Find the golden state for (image, accel, QEMU version), building it if missing.
 * Concurrent callers wait for one builder (flock). */
int golden_ensure(const manifest *m, const char *accel, golden **out, em_err *err);
/* The golden state already built in dir (what an env's env.json names), its golden.json checked. */
int golden_open(const char *dir, golden **out, em_err *err);
void golden_free(golden *g);

/* Start a QEMU in env_dir from the golden state with a fresh overlay. Returns
 * when the restored guest runs; its agent answers about a second later under TCG,
 * and the first command that needs the agent sets the guest clock (env.c). */
int golden_start_clone(const golden *g, const manifest *m, const char *accel, const char *env_dir, const char *name,
                       pid_t *pid, em_err *err);

#endif

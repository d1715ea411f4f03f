/* The env handle: one running desktop guest and its run directory. Every
 * layer above (CLI, episode runner, HTTP API) talks to an env, never to
 * QEMU. The CLI is stateless: the run directory holds everything (overlay,
 * pid, QMP/VNC/agent sockets, env.json, pointer state), and a handle holds
 * an exclusive lock on it while open. */
#ifndef ENVMGR_ENV_H
#define ENVMGR_ENV_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/err.h"
#include "envmgr/vm/guest.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/base/png.h"
#include "envmgr/vm/vnc.h"

typedef struct env env;

typedef struct env_up_opts {
    const char *name;
    const char *image;  /* name under the image root, or a directory */
    const char *accel;  /* auto, kvm, tcg */
    const netpolicy *net; /* NULL: network mode none (netpolicy.h) */
    const char *from_state; /* a saved state (envmgr state save) to start from instead of the
                               golden state: it names the image (image is ignored) */
} env_up_opts;

typedef struct env_timings {
    double golden_ms;   /* up: finding (or building) the golden state */
    double stop_ms;     /* reset: stopping the old QEMU */
    double restore_ms;  /* QEMU start + state load, until the guest runs */
    double flat_ms;     /* of restore_ms: readying a saved state's RAM file (0: it was ready) */
    bool ram_served;    /* ... by starting the server of its RAM (states.h), not by building its flat file */
} env_timings;

int env_up(const env_up_opts *o, env **out, env_timings *t, em_err *err);
/* Open an existing env; fails with a clear message when its QEMU is gone. */
int env_open(const char *name, env **out, em_err *err);
/* The same for an operation that replaces the env's QEMU (reset, state restore): an env whose QEMU
 * died opens too, and comes back from the golden state or the state restored. */
int env_open_to_restart(const char *name, env **out, em_err *err);
void env_close(env *e);
/* Stop QEMU (if any) and remove the run directory. Works on dead envs. */
int env_down(const char *name, em_err *err);
/* Back to the golden state: a fresh overlay and a fresh QEMU from the saved state. */
int env_reset(env *e, env_timings *t, em_err *err);
/* Saved states (docs/states.md, state/states.h). Save the env now as state `name` (since: what was done
 * since its parent, recorded in state.json; borrowed, may be NULL); *info (may be NULL) gets
 * {name, parent, mib, save_ms, paused_ms, ...}. The guest runs on (or stays paused) after. */
int env_state_save(env *e, const char *name, json_t *since, json_t **info, em_err *err);
/* Restore state `name` (saved from an env of the same golden state) into this env: a fresh QEMU,
 * like a reset. */
int env_state_restore(env *e, const char *name, env_timings *t, em_err *err);
/* Build state `name`'s flat RAM file now (docs/states.md), so that its first restore need not:
 * for states saved to be restored (the setup cache's). *ms: the build's time (0: it was there). */
int env_state_prepare(env *e, const char *name, double *ms, em_err *err);
/* The id of the golden state the env runs on (sha256 of its golden.json). */
int env_golden_id(const env *e, char id[65], em_err *err);
/* The id of the saved state the env runs on (the last restored; NULL: none). */
const char *env_state_id(const env *e);
/* The env's network policy, and a new one that takes effect at the next
 * env_reset (*changed: it differs from the current one). */
int env_network(const env *e, netpolicy *p, em_err *err);
int env_set_network(env *e, const netpolicy *p, bool *changed, em_err *err);

const char *env_name(const env *e);
const char *env_dir(const env *e);
const char *env_accel(const env *e);
const char *env_image_sha256(const env *e);
int env_width(const env *e);
/* The image the env runs (its manifest: name, packages, boot). */
const struct manifest *env_manifest(const env *e);
int env_height(const env *e);
/* The image user's password (manifest_user_password); caller frees. */
char *env_user_password(const env *e);

/* PNG of a fresh frame. The returned buffer belongs to the env (valid until the next call).
 * An unchanged frame reuses the previous encoding. */
int env_screenshot(env *e, const png_buf **png, em_err *err);
/* Fresh frame as RGBX pixels (stride width*4), owned by the env. */
int env_frame(env *e, const uint8_t **pixels, em_err *err);
/* The frame the env's VNC session holds now, without asking QEMU for a fresher one, and its hash
 * (equal hashes: equal pixels). */
int env_frame_held(env *e, const uint8_t **pixels, uint64_t *hash, em_err *err);
/* How long the guest's vCPUs have run and waited for a host CPU (ns): with the wall time, how busy
 * the guest is whatever else the host runs. */
int env_vcpu_time(env *e, uint64_t *run_ns, uint64_t *wait_ns, em_err *err);
/* The boundaries its QEMU runs under, read from the process (vm_boundaries); never NULL. */
json_t *env_boundaries(env *e);
/* Disk requests the guest made so far (vm_block_ops). */
int env_block_ops(env *e, uint64_t *ops, em_err *err);
/* A disk request of the guest is with the host's disk now (a QEMU thread waits for it). */
bool env_io_waiting(env *e);
/* Pause the guest (its clocks stand still) or resume it; a guest that is not running (powered
 * off) is left alone. */
int env_hold(env *e, bool hold, em_err *err);
/* *off: the guest powered itself off (QEMU runs with -no-shutdown, so it stays, stopped). */
int env_guest_off(env *e, bool *off, em_err *err);
int env_act(env *e, const action *a, em_err *err);
/* The vCPUs' run time (env_vcpu_time) when the last env_act began; -1 when none began on this QEMU. */
int env_act_vcpu_start(env *e, uint64_t *run_ns);
int env_guest(env *e, guest **g, em_err *err);
/* An operation on e failed with *err: when e's QEMU is gone, *err says that instead (and whether the
 * server of its saved state's RAM died first), not what the socket saw. Returns -1. */
int env_failed(env *e, em_err *err);
/* 1 with why in *err when e's QEMU is gone (waiting up to wait_ms for one that is exiting: its
 * sockets close before it is reaped), else 0. */
int env_gone(env *e, double wait_ms, em_err *err);
int env_vnc(env *e, vnc_session **v, em_err *err);
/* The screen pixel the pointer is on (where the last action left it; kept across commands). */
int env_pointer(env *e, int *x, int *y, em_err *err);

/* One object per env in the run root: name, status (running/dead), pid, image, accel, created. */
int env_list(json_t **out, em_err *err);

#endif

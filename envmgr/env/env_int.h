/* Inside the env handle: what env.c and env_state.c (saved states) share. Not for other folders. */
#ifndef ENVMGR_ENV_INT_H
#define ENVMGR_ENV_INT_H

#include "envmgr/env/env.h"
#include "envmgr/state/states.h"
#include "envmgr/state/golden.h"
#include "envmgr/vm/manifest.h"
#include "envmgr/vm/vm.h"

#define ENV_META "env.json"

struct env {
    char *name, *dir;
    uint64_t act_run_ns;        /* the vCPUs' run time when the last action began (env_act_vcpu_start) */
    pid_t act_pid;              /* ... of this QEMU (0: no action yet)  */
    json_t *meta;
    manifest *image;
    golden *gold;
    state **chain;              /* the saved state the next start restores (root first), or NULL: golden */
    size_t nchain;
    pid_t pid;
    int lockfd;
    vnc_session *vnc;
    guest *ga;
    uint64_t png_hash;
    bool png_valid;
    png_buf png;
    pid_t vcpu_pid;             /* the QEMU the thread ids below belong to */
    pid_t vcpu_tids[VM_VCPUS_MAX];
    size_t nvcpu;
    bool running_known;         /* this process knows the guest is not paused */
    bool input_drain_gave_up;   /* the last input drain waited in vain (env.c: input_drain) */
    int state_hold_fd;          /* a restore's hold on its state (state_hold) until it is recorded, or -1 */
};

/* The pointer's VNC position now (vnc_pointer_wire: what a saved state keeps). */
void env_pointer_wire(env *e, int *x, int *y);
/* Stop the env's QEMU and start a fresh one from e->chain (or the golden state): what reset and a
 * state restore share. what names the operation in errors. */
int env_restart(env *e, env_timings *t, const char *what, em_err *err);

/* env_state.c: e->chain becomes state `name`'s chain, checked against the golden state e runs on
 * (e->gold, or for a new env the golden state of e->image under accel, opened here). */
int env_state_use(env *e, const char *name, const char *accel, em_err *err);
/* Start e's QEMU from e->chain (savestate_start; *flat_ms: readying the state's RAM file, if it
 * was not, and *served whether by starting its server). */
int env_state_start(env *e, const char *accel, double *flat_ms, bool *served, em_err *err);
/* Once its guest runs: e is on that state (e->meta "state", written by the caller's env_write_meta;
 * the state's last use and its users). */
int env_state_record(env *e, em_err *err);
/* e no longer runs on a state (reset to the golden state, or down). */
void env_state_leave(env *e);
/* Let go of the hold env_state_use took on the state (once it is recorded, or the restore failed). */
void env_state_unhold(env *e);

#endif

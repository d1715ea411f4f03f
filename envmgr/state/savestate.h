/* A running env saved as files, and a new QEMU started from them: the golden state's mechanism
 * applied to any moment of an env. A state holds only what differs from its parent (the state
 * the env was restored from, or the golden state):
 *   disk.qcow2   the env's overlay as it was: what the guest wrote to its disk since the parent,
 *                backed by the parent's disk layer (golden.qcow2 at the root)
 *   ram.delta    the RAM pages that differ from the parent's view, and the VGA memory (ramdelta.h);
 *                the pages come from QEMU's process (procmem.h), which maps the golden RAM file
 *                (or its state's flat RAM file) privately, so only the pages the guest wrote are
 *                candidates
 *   devices.bin  device state without any RAM (QMP xen-save-devices-state: a migration would carry
 *                all of guest RAM, since x-ignore-shared leaves out shared mappings only)
 * A restore is a fresh QEMU started with -incoming on the state's flat RAM file (ramflat.h: the
 * golden RAM file with the chain's deltas applied), mapped privately like a reset maps the golden
 * one: the device state comes in, then the VGA memory (the frame the guest showed), then it runs. */
#ifndef ENVMGR_STATE_SAVESTATE_H
#define ENVMGR_STATE_SAVESTATE_H

#include <stdint.h>
#include <sys/types.h>

#include "envmgr/base/err.h"
#include "envmgr/state/golden.h"
#include "envmgr/vm/manifest.h"
#include "envmgr/state/ramdelta.h"

#define SAVESTATE_DISK "disk.qcow2"
#define SAVESTATE_RAM "ram.delta"
#define SAVESTATE_DEVICES "devices.bin"

typedef struct savestate_stats {
    ramdelta_stats delta;
    uint64_t written_pages; /* RAM pages the guest had written since its restore (candidates) */
    uint64_t disk_bytes, devices_bytes;
    double paused_ms;       /* how long the guest stood still for the save */
} savestate_stats;

/* Save the QEMU of env_dir (pid; running or paused, left as it was) into the files above in
 * out_dir (which exists). ram_file is the file QEMU maps as its RAM: the golden RAM file, or the
 * flat file of the state it was restored from. chain holds the RAM deltas of that state's chain,
 * root first, and is empty for the golden state; a page the guest has not written since is the
 * chain's, not this state's. */
int savestate_write(const golden *g, const manifest *m, const char *env_dir, pid_t pid, const char *ram_file,
                    ramdelta *const *chain, size_t n, const char *out_dir, savestate_stats *st, em_err *err);

/* Start a QEMU in env_dir from the state in state_dir: its RAM the flat file ram_file, its VGA
 * memory from self (the state's own delta), a fresh overlay on its disk layer. Returns when the
 * guest runs, as golden_start_clone does. */
int savestate_start(const manifest *m, const char *accel, const char *env_dir, const char *name, const char *state_dir,
                    const char *ram_file, ramdelta *self, pid_t *pid, em_err *err);

#endif

/* Where an env's copy-on-write disk (and its egress log) lives. The run directory is often a
 * tmpfs (/run, a $XDG_RUNTIME_DIR): an overlay there grows in the host's RAM with every block the
 * guest writes, up to the image's virtual size, and the egress log with every connection. Then
 * they go to the cache's disk instead (`overlays/`), each with a note of its owner, so down and gc
 * can always remove them; the overlay also gets a link in the run directory. */
#ifndef ENVMGR_VM_OVERLAY_H
#define ENVMGR_VM_OVERLAY_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

#define VM_OVERLAY "overlay.qcow2" /* in the run directory: the overlay, or a link to it */
#define VM_OVERLAY_DIR "overlays"  /* under the cache root */

/* The path QEMU opens for env_dir's overlay (caller frees); it prepares the link when the
 * overlay lives on disk elsewhere. */
int vm_overlay_place(const char *env_dir, char **path, em_err *err);
/* A growing file of env_dir on the cache's disk: its path (<hash><suffix>; caller frees), or NULL
 * when env_dir is on disk itself. vm_spill_claim notes the owner (before the file is made);
 * vm_spill_remove removes the file, its `.prev` and the note. */
char *vm_spill_path(const char *env_dir, const char *suffix);
int vm_spill_claim(const char *env_dir, const char *path, em_err *err);
void vm_spill_remove(const char *path);
/* Remove env_dir's overlay when it lives elsewhere (the run directory itself goes with remove_tree). */
void vm_overlay_remove(const char *env_dir);
/* Overlays elsewhere whose run directory is gone (a reboot wiped the tmpfs): their paths, one
 * per line, removed unless dry_run; *bytes what they held. Returns how many. */
int vm_overlay_orphans(bool dry_run, char **list, double *mib);

#endif

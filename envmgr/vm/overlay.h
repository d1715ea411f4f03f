/* Where an env's copy-on-write disk lives. The run directory is often a tmpfs (/run, a
 * $XDG_RUNTIME_DIR): an overlay there grows in the host's RAM with every block the guest writes,
 * up to the image's virtual size. Then the overlay goes to the cache's disk instead, with a link
 * in the run directory and a note of its owner, so down and gc can always remove it. */
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
/* Remove env_dir's overlay when it lives elsewhere (the run directory itself goes with remove_tree). */
void vm_overlay_remove(const char *env_dir);
/* Overlays elsewhere whose run directory is gone (a reboot wiped the tmpfs): their paths, one
 * per line, removed unless dry_run; *bytes what they held. Returns how many. */
int vm_overlay_orphans(bool dry_run, char **list, double *mib);

#endif

/* A saved state's RAM as one file, the way the golden state keeps its own (ram.bin): the golden
 * RAM file's pages with the chain's RAM deltas applied. A restore maps it privately exactly as a
 * reset maps ram.bin, so it writes no page into QEMU, and every env from one state shares the
 * file's page-cache pages. It is derived data, built from a verified golden RAM file and verified
 * deltas: the golden file's data is copied (copy_file_range: its holes stay holes), then each
 * delta page written over it, a page of zeros punched out as a hole. On a file system with
 * reflink (XFS reflink=1, Btrfs) copy_file_range shares the golden file's extents, so the file
 * owns only the pages written over them (the apps image: 265 MiB of 3 GiB, against 789 MiB on
 * ext4, where, without reflink, the copy costs the golden file's data again). */
#ifndef ENVMGR_STATE_RAMFLAT_H
#define ENVMGR_STATE_RAMFLAT_H

#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"
#include "envmgr/state/ramdelta.h"

typedef struct ramflat_stats {
    uint64_t copied_bytes; /* the golden file's data copied */
    uint64_t delta_pages;  /* pages written (or punched) over it */
    uint64_t disk_bytes;   /* the file's own blocks: extents no other file shares (base/owned.h), as mapped
                            * when the build returns: a page written over a shared extent counts from
                            * its writeback on (XFS), so read the figure again after a sync */
    uint64_t shared_bytes; /* its extents shared with another file (the golden RAM file's, with reflink) */
} ramflat_stats;

/* The golden RAM file (open as golden_fd) and every delta of the chain are of the image's RAM size
 * (what ramflat_build and the RAM server, ramfs.h, take as their inputs). */
int ramflat_inputs_check(int golden_fd, const char *golden_ram, uint64_t ram_bytes, ramdelta *const *chain, size_t n,
                         em_err *err);

/* Write the flat RAM file at path (which must not exist; removed again on failure): golden_ram
 * (ram_bytes long) with chain[0..n) (root first) applied. */
int ramflat_build(const char *golden_ram, uint64_t ram_bytes, ramdelta *const *chain, size_t n, const char *path,
                  ramflat_stats *st, em_err *err);

#endif

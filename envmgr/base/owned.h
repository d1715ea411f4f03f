/* The disk space a file really owns. st_blocks counts an extent shared with another file (a reflink
 * copy on XFS or Btrfs: copy_file_range, FICLONE) as if the file owned it; removing the file frees
 * only the extents no other file shares. */
#ifndef ENVMGR_BASE_OWNED_H
#define ENVMGR_BASE_OWNED_H

#include <stdbool.h>
#include <stdint.h>

#include "envmgr/base/err.h"

/* The bytes of fd's extents that no other file shares (FIEMAP without FIEMAP_EXTENT_SHARED). With
 * sync, the file's dirty pages are written back first (FIEMAP_FLAG_SYNC); without, a page written
 * over a shared extent and not yet written back may still count as shared (XFS maps its new block
 * at writeback). Data only: st_blocks also counts the file's map (ext4's extent-tree blocks, 4 KiB
 * per ~340 extents) and XFS's CoW preallocation around pages written over shared extents (up to
 * its cowextsize, which XFS reclaims in the background). A file system without FIEMAP (tmpfs)
 * shares nothing: st_blocks. *shared gets the shared bytes (NULL: not wanted). */
int file_owned_bytes(int fd, bool sync, uint64_t *owned, uint64_t *shared, em_err *err);

/* Whether dir's file system shares extents between files (reflink: FICLONE of one unnamed temp
 * file, O_TMPFILE, into another; nothing is left behind). *yes false when it refuses; an error when
 * dir cannot hold a temp file (missing, not writable). */
int dir_has_reflink(const char *dir, bool *yes, em_err *err);

#endif

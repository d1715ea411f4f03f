/* copy_file_range that also copies between file systems: the kernel refuses that (EXDEV: a state
 * folder on another file system than the env's run folder or the golden states), and then the
 * bytes go through a buffer. Within one file system copy_file_range stays the kernel's, which
 * shares extents where the file system has reflink (XFS, Btrfs). */
#ifndef ENVMGR_BASE_COPYRANGE_H
#define ENVMGR_BASE_COPYRANGE_H

#include <stddef.h>
#include <sys/types.h>

/* As copy_file_range(in, in_off, out, out_off, len, 0): the bytes copied (0 at in's end, fewer than
 * len is fine: call again), -1 with errno. NULL offsets use and advance the files' positions. */
ssize_t copy_range(int in, off_t *in_off, int out, off_t *out_off, size_t len);

#endif

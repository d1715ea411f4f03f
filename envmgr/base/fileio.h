/* Files: capped reads, atomic writes, trees, paths inside a folder. */
#ifndef ENVMGR_BASE_FILEIO_H
#define ENVMGR_BASE_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

/* Each data extent [off, end) of fd below len, in order, its holes skipped (SEEK_DATA/SEEK_HOLE; a
 * file system without them reports all of it as data). fn failing (-1, err set) stops the walk.
 * what names the file in errors. */
typedef int (*file_extent_fn)(void *ctx, uint64_t off, uint64_t end, em_err *err);
int file_data_extents(int fd, const char *what, uint64_t len, file_extent_fn fn, void *ctx, em_err *err);

/* mkdir -p with mode for every created component. */
int mkdir_p(const char *path, mode_t mode, em_err *err);
/* rm -rf without following symbolic links; a missing path is fine. */
int remove_tree(const char *path, em_err *err);

/* The largest JSON document envmgr reads whole from its own state and metadata files. */
#define JSON_DOC_MAX ((size_t)1 << 20)

#define FILE_NOFOLLOW 1 /* refuse a symbolic link as the last component */
/* Read a regular file whole into *out (NUL-terminated one past *len; free()). The open does not
 * block (a FIFO is refused, not waited on), and a file over max bytes, or growing past it while
 * read, is an input error, never a truncation. */
int read_file_flags(const char *path, size_t max, int flags, char **out, size_t *len, em_err *err);
int read_file_capped(const char *path, size_t max, char **out, size_t *len, em_err *err);
/* All of fd to its end, at most max bytes (more is an error naming what); hint sizes the first buffer
 * (0: 64 KiB). *out is NUL-terminated. */
int read_fd_capped(int fd, const char *what, size_t max, size_t hint, char **out, size_t *len, em_err *err);
/* Replace path with data: a unique temp file (O_EXCL|O_NOFOLLOW) beside it, fsync, rename, fsync
 * of the folder. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, em_err *err);
/* Open (creating) the lock file path and take its flock (exclusive, or shared), waiting at most
 * wait_ms for another process that holds it, interruptible (Ctrl-C); *fd holds the lock until
 * closed. what names the wait in errors ("the golden-state build"). */
int lock_file_wait(const char *path, bool shared, double wait_ms, const char *what, int *fd, em_err *err);
/* The same, where a lock another process holds is an answer, not an error: 1 locked, 0 held by
 * another process after wait_ms (no error set), -1 failed. */
int lock_file_try(const char *path, bool shared, double wait_ms, const char *what, int *fd, em_err *err);

/* p (relative to dir, or absolute under it) as an absolute path inside dir. `..` components are
 * refused; with must_exist the path is resolved (symbolic links included) and must stay inside
 * dir's real path. *abs is malloc'd. */
int path_inside(const char *dir, const char *p, bool must_exist, char **abs, em_err *err);

#endif

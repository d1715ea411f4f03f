/* A saved state's RAM served as one read-only file over FUSE, instead of written out as a flat
 * RAM file (ramflat.h). Each read is answered from the verified chain of deltas (the last delta
 * holding a page wins) and else from the golden RAM file, so the state costs no disk beyond its
 * own files on any file system (ext4 has no reflink: a written flat file there costs the golden
 * file's data again, about a quarter of guest RAM for the apps image). QEMU maps the file
 * privately as it maps a flat file, and the kernel keeps its pages in one page cache that every
 * env from the state shares.
 *
 * One server per state, a process of its own (`envmgr __ramfs`), outliving the envmgr that
 * started it: it mounts <state>/ram.mnt, whose one file is named by the state's id, and leaves
 * when no file of it has been open for idle_s seconds (a mapping holds it open) and it gets the
 * state's flat.lock exclusively, so never under a restore that is starting from it. A lazy
 * unmount (state removal, gc) lets it run until the last QEMU mapping it is gone. */
#ifndef ENVMGR_STATE_RAMFS_H
#define ENVMGR_STATE_RAMFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define RAMFS_MNT "ram.mnt" /* in the state's folder */
#define RAMFS_WARM "ram.warm" /* in the state's folder: its server's warm-up ended (ramfs_opts) */

typedef struct ramfs_opts {
    const char *mountpoint;
    const char *file_name;       /* the one file in it: the state's id */
    const char *golden_ram;      /* the golden RAM file */
    uint64_t ram_bytes;
    const char *const *deltas;   /* the chain's ram.delta files, root first */
    size_t ndeltas;
    const char *lock_path;       /* the state's flat.lock */
    /* Once mounted, the server reads every page that holds data (the deltas' pages, the golden
     * file's data) through its own mount, so the kernel caches them before the guest faults on
     * them one by one; then it creates this file (removed at its start and exit). */
    const char *warm_path;
    double idle_s;               /* leave after this long with nothing open */
} ramfs_opts;

/* Serve until unmounted or idle (the server's main). ready_fd gets "ok\n" once mounted, or the
 * error's line; it is closed either way. */
int ramfs_serve(const ramfs_opts *o, int ready_fd, em_err *err);

/* The `envmgr __ramfs` command line: parse it into o (pointing into argv) and serve. */
int ramfs_main(int argc, char **argv);

/* Whether this host can serve one: /dev/fuse opens, and root (a plain mount) or fusermount3. */
bool ramfs_available(void);

/* Start a server for o in its own session (it outlives the caller); returns once it is mounted,
 * or with the error it reported. Its stdout and stderr go to log_path (appended). */
int ramfs_start(const ramfs_opts *o, const char *log_path, em_err *err);

/* The served file, when a live server of this very file (name, size) is mounted at o's
 * mountpoint: true. A dead mount (its server killed) is not live. */
bool ramfs_live(const char *mountpoint, const char *file_name, uint64_t ram_bytes);

/* A FUSE mount whose server is gone (killed) is at mountpoint. */
bool ramfs_dead(const char *mountpoint);

/* Detach whatever is mounted at mountpoint (lazily: QEMUs mapping the file keep it until they
 * end) and remove the folder. Nothing mounted: just the folder. */
int ramfs_unmount(const char *mountpoint, em_err *err);

#endif

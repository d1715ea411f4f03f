/* Saved states in the operator's cache: <state root>/<name>/ (paths_state_root) holds a state's
 * files (state/savestate.h) and state.json, its record:
 *   {"format": "envmgr-state-v1", "name", "id" (random, 32 hex), "created", "envmgr_version",
 *    "golden": {"key", "dir", "id" (sha256 of its golden.json: a rebuilt golden state is another)},
 *    "image", "image_sha256", "accel", "memory_mb", "width", "height",
 *    "parent": null (the golden state) or {"name", "id"}, "since": what was done since the parent,
 *    "pointer": [x, y], "files": {file: {"bytes", "sha256"}}, "ram": {...}, "timings": {...}}
 * A state is used only through its chain (state_chain_load): each state up to the golden state,
 * each parent the very one its child was saved from (ids), every file checked against its sha256
 * before a QEMU reads it. Checking hashes every restore would cost more than the restore, so a
 * check leaves verified.json, the files' identity and times (device, inode, size, mtime, ctime);
 * a file whose facts differ from it (any write changes its ctime) is hashed again, and a state
 * whose file does not match is refused, never run.
 * The cache has a size cap (ENVMGR_STATE_CAP_MIB, default 20 GiB): a save, and `envmgr gc`, evict
 * least recently used states first (the mtime of `used`, touched by every save and restore),
 * never one another state was saved from, nor one an env was restored from and still runs on
 * (users/<hash>: the env's run directory). */
#ifndef ENVMGR_STATE_STATES_H
#define ENVMGR_STATE_STATES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "envmgr/base/err.h"
#include "envmgr/state/ramdelta.h"

#define STATE_FORMAT "envmgr-state-v1"
/* Names the setup cache gives its states (episode/setup_cache.h): envmgr's alone, so no client can
 * save a moment of its choosing where a task's setup is looked up. */
#define STATE_SETUP_PREFIX "setup-"
#define STATE_DEPTH_MAX 64
#define STATE_CAP_MIB_DEFAULT 20480

typedef struct state {
    char *name, *dir;
    json_t *meta;                   /* state.json */
    const char *id;                 /* the fields below are meta's */
    const char *parent, *parent_id; /* NULL: saved from the golden state */
    const char *golden_dir, *golden_key, *golden_id, *image, *image_sha256, *accel;
    int pointer_x, pointer_y;
    double last_used; /* seconds since the epoch */
} state;

/* state.json of state `name`, its fields checked (not its files: state_verify). */
int state_load(const char *name, state **out, em_err *err);
void state_free(state *s);
/* Every file of s against its sha256 (verified.json spares the hashing of files unchanged since). */
int state_verify(const state *s, em_err *err);
/* name and its ancestors, root first, each loaded, linked by id and verified. */
int state_chain_load(const char *name, state ***chain, size_t *n, em_err *err);
void state_chain_free(state **chain, size_t n);
/* The id of the golden state in golden_dir (sha256 of its golden.json). */
int state_golden_id(const char *golden_dir, char id[65], em_err *err);

/* A name a user (CLI, HTTP client) may save under: a valid name, not the setup cache's. */
int state_check_user_name(const char *name, em_err *err);
/* A new state: state_begin makes a private folder for its files (the name must be free);
 * state_commit hashes them, completes meta (format, name, id, created, envmgr_version, files),
 * writes state.json and moves the folder in place; state_abort removes it. */
int state_begin(const char *name, char **tmp_dir, em_err *err);
int state_commit(const char *tmp_dir, const char *name, json_t *meta, em_err *err);
void state_abort(const char *tmp_dir);

/* One object per state: name, parent, created, mib, last_used, users (envs), children, image,
 * golden key, golden_ok (its golden state is still the one), since; a damaged one: name and error. */
int state_list(json_t **out, em_err *err);
/* Remove a state; refused while another state or a running env depends on it. A restore from it
 * that is under way (state_hold) is waited for first, and then runs on it, so the removal is refused. */
int state_remove(const char *name, em_err *err);
/* A restore's hold on state `name`, taken before the env's old QEMU stops and kept until the env is
 * recorded as its user (state_claim): removal waits for it, eviction passes the state by. Fails
 * (EM_EXIT_USAGE) when the state does not exist or was removed while this waited. *fd: close it to
 * let go. */
int state_hold(const char *name, int *fd, em_err *err);
/* A save or restore used s now (LRU); env_dir runs on it (claim) or no longer (release). */
void state_touch(const state *s);
int state_claim(const state *s, const char *env_dir, em_err *err);
void state_release(const char *name, const char *env_dir);

/* The flat RAM file of state s (state/ramflat.h; state_flat.c), to map as the guest's RAM: checked
 * against its stamp, built from golden_ram and the chain's deltas (root first, s's last; all
 * verified by state_chain_load) when missing or not the one built. *path is malloc'd; *lock_fd
 * (close it once QEMU has opened the file) keeps gc and rebuilds off it meanwhile; *built_ms: the
 * time a build took (0: it was ready). */
int state_flat_ready(const state *s, const char *golden_ram, uint64_t ram_bytes, ramdelta *const *deltas, size_t n,
                     char **path, int *lock_fd, double *built_ms, em_err *err);

/* What a restore of the chain's last state maps as the guest's RAM (state_ram.c): the state's RAM
 * served over FUSE (state/ramfs.h) where this host can (ENVMGR_STATE_RAM: auto, served, file), else
 * its flat RAM file (state_flat_ready). As state_flat_ready: *path, *lock_fd (close it once QEMU
 * has the file open), *ms the time a server's start or a build took; *served: it is served. */
int state_ram_ready(state *const *chain, size_t n, const char *golden_ram, uint64_t ram_bytes,
                    ramdelta *const *deltas, char **path, int *lock_fd, double *ms, bool *served, em_err *err);
/* ENVMGR_STATE_RAM: auto (the default: served where ramfs_available, else the file), served, file. */
typedef enum { STATE_RAM_AUTO, STATE_RAM_SERVED, STATE_RAM_FILE } state_ram_mode;
int state_ram_mode_of(state_ram_mode *m, em_err *err);
/* ENVMGR_STATE_RAM and ENVMGR_STATE_RAM_IDLE_S are valid (checked before an env is stopped for a
 * restore, so a bad setting loses nothing). */
int state_ram_settings_check(em_err *err);

/* The cap in bytes: ENVMGR_STATE_CAP_MIB, else the default. */
int state_cap_bytes(uint64_t *cap, em_err *err);
/* Evict states whose golden state is gone, then states over cap (least recently used first), never
 * `keep` nor a state something depends on, and leftovers of interrupted saves; one line each on
 * log (may be NULL). */
int state_evict(uint64_t cap, const char *keep, bool dry_run, FILE *log, size_t *count, double *mib, em_err *err);

/* What state_evict decides, on rows alone (unit-tested): evict[i] for the rows to remove,
 * drop_flat[i] for the flat RAM files to remove first (least recently used first, never a pinned
 * state's), before any state goes. */
typedef struct state_row {
    const char *name, *parent;
    uint64_t bytes;      /* its own files */
    uint64_t flat_bytes; /* its flat RAM file (derived, rebuilt when gone) */
    double last_used;
    bool pinned; /* in use, or kept */
    bool stale;  /* its golden state is gone or was rebuilt: it can never run again */
} state_row;
void state_pick_evictions(const state_row *rows, size_t n, uint64_t cap, bool *evict, bool *drop_flat);

#endif

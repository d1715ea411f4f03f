/* The store of saved states: who runs on each, when each was last used, listing, removal, and
 * eviction under the cache's cap (states.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/owned.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/state/states.h"
#include "envmgr/state/states_int.h"
#include "envmgr/state/ramfs.h"
#include "envmgr/state/savestate.h"

#define HOLD_WAIT_MS 60000.0   /* a removal in progress is quick: a rename */
#define REMOVE_WAIT_MS 120000.0 /* a restore building a flat RAM file may take seconds */

/* ---- the use lock: restores hold it shared, a removal takes it exclusively ---- */

/* The lock lfd holds is still the file at lock: a removal renames the state's folder away, and a
 * restore that waited for that removal must not go on with the state's files gone. */
static bool lock_still_there(int lfd, const char *lock)
{
    struct stat held, now;
    return fstat(lfd, &held) == 0 && stat(lock, &now) == 0 && held.st_dev == now.st_dev &&
           held.st_ino == now.st_ino;
}

/* Lock state `name` (shared: a restore; exclusive: a removal) within wait_ms. 1: locked, 0: busy
 * (only when wait_ms is 0), -1: failed (EM_EXIT_USAGE: no such state). */
static int lock_state(const char *name, bool shared, double wait_ms, int *fd, em_err *err)
{
    *fd = -1;
    if (check_name("state", name, err) < 0)
        return -1;
    _cleanup_free_ char *dir = state_dir(name), *lock = xasprintf("%s/" STATE_USE_LOCK, dir),
                        *rec = xasprintf("%s/" STATE_JSON, dir);
    struct stat st;
    if (stat(rec, &st) < 0)
        return em_fail_input(err, "state `%s` does not exist (envmgr state ls lists them)", name);
    int lfd;
    int got = lock_file_try(lock, shared, wait_ms, shared ? "the removal of a state" : "a restore from a state",
                            &lfd, err);
    if (got < 0 && stat(rec, &st) < 0) /* its folder was renamed away meanwhile */
        return em_fail_input(err, "state `%s` does not exist (envmgr state ls lists them)", name);
    if (got < 0)
        return em_prefix(err, "state `%s`: ", name);
    if (got == 0 && wait_ms > 0)
        return em_fail(err, "state `%s`: waited %.0f s for %s", name, wait_ms / 1000,
                       shared ? "its removal by another envmgr" : "a restore from it");
    if (got == 0)
        return 0;
    if (!lock_still_there(lfd, lock)) {
        close(lfd);
        return em_fail_input(err, "state `%s` was removed (envmgr state ls lists the states)", name);
    }
    *fd = lfd;
    return 1;
}

int state_hold(const char *name, int *fd, em_err *err)
{
    return lock_state(name, true, HOLD_WAIT_MS, fd, err) < 0 ? -1 : 0;
}

/* ---- users, LRU ---- */

void state_touch(const state *s)
{
    _cleanup_free_ char *used = xasprintf("%s/" STATE_USED, s->dir);
    utimensat(AT_FDCWD, used, NULL, 0);
}

static char *user_note(const char *dir, const char *env_dir)
{
    char h[65];
    sha256_hex(env_dir, strlen(env_dir), h);
    return xasprintf("%s/" STATE_USERS "/%.24s", dir, h);
}

int state_claim(const state *s, const char *env_dir, em_err *err)
{
    _cleanup_free_ char *users = xasprintf("%s/" STATE_USERS, s->dir), *note = user_note(s->dir, env_dir);
    if (mkdir_p(users, 0700, err) < 0 || write_file_atomic(note, env_dir, strlen(env_dir), 0600, err) < 0)
        return em_prefix(err, "state `%s`: ", s->name);
    return 0;
}

void state_release(const char *name, const char *env_dir)
{
    em_err ignored;
    if (!name || check_name("state", name, &ignored) < 0)
        return;
    _cleanup_free_ char *dir = state_dir(name), *note = user_note(dir, env_dir);
    unlink(note);
}

/* The run directories of envs still on state `name` (their env.json names it); stale notes go. */
static json_t *users_of(const char *dir, const char *name)
{
    json_t *list = json_array();
    _cleanup_free_ char *users = xasprintf("%s/" STATE_USERS, dir);
    DIR *d = opendir(users);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *note = xasprintf("%s/%s", users, de->d_name), *env_dir = NULL, *text = NULL;
        if (read_file_flags(note, 4096, FILE_NOFOLLOW, &env_dir, NULL, NULL) < 0)
            continue;
        _cleanup_free_ char *meta_path = xasprintf("%s/env.json", env_dir);
        json_t *meta = NULL;
        if (read_file_capped(meta_path, JSON_DOC_MAX, &text, NULL, NULL) == 0)
            meta = json_loads(text, 0, NULL);
        const char *on = state_str(json_object_get(meta, "state"), "name");
        if (on && !strcmp(on, name))
            json_array_append_new(list, json_string(env_dir));
        else
            unlink(note); /* its env is gone, or on another state */
        json_decref(meta);
    }
    if (d)
        closedir(d);
    return list;
}

/* What removing the files would free: the extents no other file shares (base/owned.h). With reflink
 * a flat RAM file shares the golden RAM file's data, which stays. A state's disk.qcow2 is copied
 * from the env's overlay: when the env's run directory is on the states' file system, two saves of
 * one env may share extents, which then count in neither state until one is removed. */
static uint64_t blocks_of(const char *dir, const char *const *names, size_t n)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        uint64_t owned;
        em_err ignored;
        if (fd >= 0 && file_owned_bytes(fd, false, &owned, NULL, &ignored) == 0)
            total += owned;
    }
    return total;
}

/* The state's own files, and its flat RAM file (derived: rebuilt when gone), on disk. */
static uint64_t disk_bytes(const char *dir)
{
    const char *names[] = {STATE_JSON, SAVESTATE_DISK, SAVESTATE_RAM, SAVESTATE_DEVICES};
    return blocks_of(dir, names, ARRAY_LEN(names));
}

static uint64_t flat_bytes(const char *dir)
{
    const char *names[] = {STATE_FLAT};
    return blocks_of(dir, names, ARRAY_LEN(names));
}

/* ---- listing, removing, evicting ---- */

static bool pid_of_leftover(const char *name, const char *prefix, pid_t *pid)
{
    size_t pl = strlen(prefix);
    const char *dash = strrchr(name, '-');
    long v;
    if (strncmp(name, prefix, pl) || !dash || parse_int(dash + 1, 1, 1 << 30, &v) < 0)
        return false;
    *pid = (pid_t)v;
    return true;
}

int state_list(json_t **out, em_err *err)
{
    json_t *list = json_array();
    _cleanup_free_ char *root = paths_state_root();
    DIR *d = opendir(root);
    *out = list;
    if (!d)
        return errno == ENOENT ? 0 : em_fail_errno(err, "open `%s`", root);
    struct dirent *de;
    json_t *names = json_array();
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            json_array_append_new(names, json_string(de->d_name));
    closedir(d);
    size_t i;
    json_t *nm;
    json_t *children = json_object();
    json_array_foreach(names, i, nm)
    {
        const char *name = json_string_value(nm);
        state *s = NULL;
        em_err lerr = {0};
        if (state_load(name, &s, &lerr) < 0) {
            json_array_append_new(list, json_pack("{s:s, s:s}", "name", name, "error", lerr.msg));
            continue;
        }
        json_t *row = json_pack("{s:s, s:o, s:O, s:f, s:f, s:f, s:o, s:s, s:s, s:O}", "name", name, "parent",
                                s->parent ? json_string(s->parent) : json_null(), "created",
                                json_object_get(s->meta, "created") ?: json_null(), "mib",
                                (double)disk_bytes(s->dir) / (1 << 20), "flat_mib",
                                (double)flat_bytes(s->dir) / (1 << 20), "last_used", s->last_used, "users",
                                users_of(s->dir, name), "image", s->image, "golden_key", s->golden_key, "since",
                                json_object_get(s->meta, "since") ?: json_null());
        char gid[65];
        em_err gerr;
        json_object_set_new(row, "golden_ok",
                            json_boolean(state_golden_id(s->golden_dir, gid, &gerr) == 0 && !strcmp(gid, s->golden_id)));
        if (s->parent) {
            json_t *c = json_object_get(children, s->parent);
            if (!c)
                json_object_set_new(children, s->parent, c = json_array());
            json_array_append_new(c, json_string(name));
        }
        json_array_append_new(list, row);
        state_free(s);
    }
    json_t *row;
    json_array_foreach(list, i, row)
    {
        json_t *c = json_object_get(children, state_str(row, "name"));
        json_object_set_new(row, "children", c ? json_incref(c) : json_array());
    }
    json_decref(children);
    json_decref(names);
    return 0;
}

/* Who depends on row i: a message naming them, or NULL. */
static char *dependents(json_t *row)
{
    json_t *c = json_object_get(row, "children"), *u = json_object_get(row, "users");
    if (json_array_size(c))
        return xasprintf("state `%s` was saved from it", json_string_value(json_array_get(c, 0)));
    if (json_array_size(u))
        return xasprintf("the env in %s runs on it", json_string_value(json_array_get(u, 0)));
    return NULL;
}

static json_t *find_row(json_t *list, const char *name)
{
    size_t i;
    json_t *row;
    json_array_foreach(list, i, row) if (!strcmp(state_str(row, "name") ?: "", name)) return row;
    return NULL;
}

/* Out of sight at once (a rename), then gone. */
static int remove_state_dir(const char *name, em_err *err)
{
    _cleanup_free_ char *root = paths_state_root(), *dir = state_dir(name);
    _cleanup_free_ char *gone = xasprintf("%s/" RM_PREFIX "%s-%d", root, name, (int)getpid());
    remove_tree(gone, NULL);
    if (state_ram_unserve(dir, err) < 0) /* never remove files through a mount */
        return em_prefix(err, "state `%s`: remove: ", name);
    if (rename(dir, gone) < 0)
        return em_fail_errno(err, "state `%s`: remove", name);
    return remove_tree(gone, err);
}

int state_remove(const char *name, em_err *err)
{
    /* under the lock: a restore under way ends first, and its env is then among the users */
    _cleanup_close_ int lfd = -1;
    if (lock_state(name, false, REMOVE_WAIT_MS, &lfd, err) < 0)
        return -1;
    json_t *list;
    if (state_list(&list, err) < 0)
        return -1;
    json_t *row = find_row(list, name);
    _cleanup_free_ char *why = row ? dependents(row) : NULL;
    int rc = 0;
    if (!row)
        rc = em_fail_input(err, "state `%s` does not exist (envmgr state ls lists them)", name);
    else if (why)
        rc = em_fail_input(err, "state `%s` is in use: %s (remove that first)", name, why);
    else
        rc = remove_state_dir(name, err);
    json_decref(list);
    return rc;
}

/* The least recently used row that may go, or n: with flats, a row whose flat RAM file may be
 * removed; else a state that may be evicted (no child of it kept). */
static size_t least_used(const state_row *rows, size_t n, const bool *evict, const bool *drop_flat, bool flats)
{
    size_t best = n;
    for (size_t i = 0; i < n; i++) {
        if (evict[i] || rows[i].pinned || (flats && (drop_flat[i] || !rows[i].flat_bytes)))
            continue;
        bool has_child = false; /* a child still kept needs this one */
        for (size_t j = 0; !flats && j < n && !has_child; j++)
            has_child = !evict[j] && rows[j].parent && !strcmp(rows[j].parent, rows[i].name);
        if (has_child)
            continue;
        if (best == n || rows[i].last_used < rows[best].last_used ||
            (rows[i].last_used == rows[best].last_used && strcmp(rows[i].name, rows[best].name) < 0))
            best = i;
    }
    return best;
}

void state_pick_evictions(const state_row *rows, size_t n, uint64_t cap, bool *evict, bool *drop_flat)
{
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        evict[i] = rows[i].stale && !rows[i].pinned; /* its children are as stale: same golden state */
        drop_flat[i] = false;
        total += evict[i] ? 0 : rows[i].bytes + rows[i].flat_bytes;
    }
    /* flat files first: one costs a rebuild of seconds at the next restore, a state its setup */
    for (size_t best; total > cap && (best = least_used(rows, n, evict, drop_flat, true)) < n;) {
        drop_flat[best] = true;
        total -= rows[best].flat_bytes;
    }
    for (size_t best; total > cap && (best = least_used(rows, n, evict, drop_flat, false)) < n;) {
        evict[best] = true;
        total -= rows[best].bytes + (drop_flat[best] ? 0 : rows[best].flat_bytes);
    }
}

int state_cap_bytes(uint64_t *cap, em_err *err)
{
    const char *e = getenv("ENVMGR_STATE_CAP_MIB");
    long mib = STATE_CAP_MIB_DEFAULT;
    if (e && *e && parse_int(e, 0, 1L << 30, &mib) < 0)
        return em_fail_input(err, "ENVMGR_STATE_CAP_MIB: expected a number of MiB, got `%s`", e);
    *cap = (uint64_t)mib << 20;
    return 0;
}

/* Temp files of flat RAM file builds whose envmgr is gone, and the dead mount of a RAM server that
 * was killed, in the state folder dir. */
static size_t remove_flat_leftovers(const char *dir, bool dry_run, FILE *log)
{
    _cleanup_free_ char *mnt = xasprintf("%s/" RAMFS_MNT, dir);
    size_t dead = ramfs_dead(mnt);
    em_err ignored;
    if (dead && log)
        fprintf(log, "gc: %sdetach %s (the mount of a RAM server that was killed)\n", dry_run ? "would " : "", mnt);
    if (dead && !dry_run)
        state_ram_unserve(dir, &ignored);
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        pid_t pid;
        if (!pid_of_leftover(de->d_name, STATE_FLAT_TMP, &pid) || pid_running(pid))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
        if (log)
            fprintf(log, "gc: %sremove %s (an interrupted build of a flat RAM file)\n", dry_run ? "would " : "", p);
        if (!dry_run)
            unlink(p);
        n++;
    }
    if (d)
        closedir(d);
    return n + dead;
}

/* Folders of saves or removals whose envmgr is gone, and temp files of flat file builds. */
static size_t remove_leftovers(bool dry_run, FILE *log)
{
    _cleanup_free_ char *root = paths_state_root();
    DIR *d = opendir(root);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        pid_t pid;
        if (de->d_name[0] != '.') {
            _cleanup_free_ char *dir = xasprintf("%s/%s", root, de->d_name);
            n += remove_flat_leftovers(dir, dry_run, log);
            continue;
        }
        if ((!pid_of_leftover(de->d_name, NEW_PREFIX, &pid) && !pid_of_leftover(de->d_name, RM_PREFIX, &pid)) ||
            pid_running(pid))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", root, de->d_name);
        if (log)
            fprintf(log, "gc: %sremove %s (an interrupted save or removal)\n", dry_run ? "would " : "", p);
        em_err ignored;
        if (!dry_run && state_ram_unserve(p, &ignored) == 0)
            remove_tree(p, NULL);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* Evict state `name` unless a restore holds it or an env came to run on it since it was picked:
 * 0 removed, 1 kept, 2 removed by another envmgr meanwhile, -1 failed. */
static int evict_one(const char *name, em_err *err)
{
    _cleanup_close_ int lfd = -1;
    int locked = lock_state(name, false, 0, &lfd, err);
    if (locked == 0)
        return 1;
    if (locked < 0 && err->code == EM_EXIT_USAGE) { /* removed by someone else meanwhile */
        em_err_clear(err);
        return 2;
    }
    if (locked < 0)
        return -1;
    _cleanup_free_ char *dir = state_dir(name);
    json_t *users = users_of(dir, name);
    bool used = json_array_size(users) > 0;
    json_decref(users);
    if (used)
        return 1;
    return remove_state_dir(name, err) < 0 ? -1 : 0;
}

int state_evict(uint64_t cap, const char *keep, bool dry_run, FILE *log, size_t *count, double *mib, em_err *err)
{
    *count = 0;
    *mib = 0;
    remove_leftovers(dry_run, log);
    json_t *list;
    if (state_list(&list, err) < 0)
        return em_prefix(err, "states: ");
    size_t n = json_array_size(list);
    state_row *rows = xcalloc(n ? n : 1, sizeof *rows);
    bool *evict = xcalloc(n ? n : 1, sizeof *evict), *drop_flat = xcalloc(n ? n : 1, sizeof *drop_flat);
    for (size_t i = 0; i < n; i++) {
        json_t *row = json_array_get(list, i);
        rows[i].name = state_str(row, "name");
        rows[i].parent = state_str(row, "parent");
        rows[i].bytes = (uint64_t)(json_real_value(json_object_get(row, "mib")) * (1 << 20));
        rows[i].flat_bytes = (uint64_t)(json_real_value(json_object_get(row, "flat_mib")) * (1 << 20));
        rows[i].last_used = json_real_value(json_object_get(row, "last_used"));
        /* a damaged record's dependencies are unknown: keep it (state rm removes it) */
        rows[i].pinned = json_object_get(row, "error") || json_array_size(json_object_get(row, "users")) ||
                         (keep && !strcmp(rows[i].name, keep));
        rows[i].stale = json_is_false(json_object_get(row, "golden_ok"));
    }
    state_pick_evictions(rows, n, cap, evict, drop_flat);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!drop_flat[i] || evict[i])
            continue;
        _cleanup_free_ char *dir = state_dir(rows[i].name);
        if (!dry_run && !state_flat_drop(dir))
            continue; /* a restore holds it right now: it stays */
        if (log)
            fprintf(log, "gc: %sremove the flat RAM file of state %s (%.0f MiB; over the %" PRIu64
                         " MiB cap, least recently used; rebuilt at its next restore)\n",
                    dry_run ? "would " : "", rows[i].name, (double)rows[i].flat_bytes / (1 << 20), cap >> 20);
        *mib += (double)rows[i].flat_bytes / (1 << 20);
    }
    uint64_t left = 0;
    for (size_t i = 0; i < n; i++)
        left += rows[i].bytes + rows[i].flat_bytes;
    left -= (uint64_t)(*mib * (1 << 20));
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!evict[i])
            continue;
        rows[i].bytes += drop_flat[i] ? 0 : rows[i].flat_bytes;
        int kept = dry_run ? 0 : evict_one(rows[i].name, err);
        if (kept < 0)
            rc = -1;
        if (kept != 0) { /* a restore holds it, or an env runs on it now: it stays, and so is said */
            if (log && kept == 1)
                fprintf(log, "gc: kept state %s (%.0f MiB): an env is being restored from it or runs on it\n",
                        rows[i].name, (double)rows[i].bytes / (1 << 20));
            continue;
        }
        if (log && rows[i].stale)
            fprintf(log, "gc: %sevict state %s (%.0f MiB; its golden state is gone)\n", dry_run ? "would " : "",
                    rows[i].name, (double)rows[i].bytes / (1 << 20));
        else if (log)
            fprintf(log, "gc: %sevict state %s (%.0f MiB; over the %" PRIu64 " MiB cap, least recently used)\n",
                    dry_run ? "would " : "", rows[i].name, (double)rows[i].bytes / (1 << 20), cap >> 20);
        (*count)++;
        *mib += (double)rows[i].bytes / (1 << 20);
        left -= rows[i].bytes < left ? rows[i].bytes : left;
    }
    if (rc == 0 && left > cap) /* what is left is in use (envs run on it, states were saved from it) */
        em_warn("envmgr: the saved states take %.0f MiB, over their cap of %" PRIu64
                " MiB: what is left is in use (envmgr state ls shows by whom)",
                (double)left / (1 << 20), cap >> 20);
    free(rows);
    free(evict);
    free(drop_flat);
    json_decref(list);
    return rc;
}

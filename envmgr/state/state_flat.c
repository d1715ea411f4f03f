/* A state's flat RAM file (state/ramflat.h): what a restore maps as the guest's RAM. It is derived
 * data beside the state's record, never part of it: built from the verified golden RAM file and
 * the verified chain of deltas, under the state's flat.lock, into a temp file renamed into place,
 * then stamped (flat.json: the state's id, the boot it was built in, and the file's device, inode,
 * size, mtime and ctime). A file that does not match its stamp (any write changes its ctime; a
 * build of an earlier boot may not have reached the disk, since it is not fsync'd) is removed and
 * built again, never run. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/util.h"
#include "envmgr/state/states.h"
#include "envmgr/state/states_int.h"
#include "envmgr/state/ramflat.h"

#define FLAT_LOCK_WAIT_MS (10 * 60 * 1000.0) /* a build is seconds; this covers a wedged one */

static char *boot_id(void)
{
    char *text = NULL;
    size_t len = 0;
    em_err ignored;
    if (read_file_capped("/proc/sys/kernel/random/boot_id", 128, &text, &len, &ignored) < 0)
        return xstrdup("");
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
        text[--len] = '\0';
    return text;
}

static json_t *stamp_now(const state *s, const char *flat)
{
    struct stat st;
    if (lstat(flat, &st) < 0 || !S_ISREG(st.st_mode))
        return NULL;
    _cleanup_free_ char *boot = boot_id();
    return json_pack("{s:s, s:s, s:[I, I, I, I, I, I, I]}", "state_id", s->id, "boot_id", boot, "facts",
                     (json_int_t)st.st_dev, (json_int_t)st.st_ino, (json_int_t)st.st_size,
                     (json_int_t)st.st_mtim.tv_sec, (json_int_t)st.st_mtim.tv_nsec, (json_int_t)st.st_ctim.tv_sec,
                     (json_int_t)st.st_ctim.tv_nsec);
}

/* The flat file is there and is the one built. */
static bool flat_ok(const state *s, const char *flat, const char *stamp)
{
    _cleanup_free_ char *text = NULL;
    if (read_file_flags(stamp, JSON_DOC_MAX, FILE_NOFOLLOW, &text, NULL, NULL) < 0)
        return false;
    json_t *before = json_loads(text, JSON_REJECT_DUPLICATES, NULL), *now = stamp_now(s, flat);
    bool ok = before && now && json_equal(before, now);
    json_decref(before);
    json_decref(now);
    return ok;
}

/* The flat file, its stamp, and temp files of builds that died (the lock is ours: no build runs). */
static void flat_remove(const char *dir)
{
    const char *names[] = {STATE_FLAT_STAMP, STATE_FLAT};
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);
        unlink(p);
    }
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, STATE_FLAT_TMP, strlen(STATE_FLAT_TMP)))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
}

static int build(const state *s, const char *golden_ram, uint64_t ram_bytes, ramdelta *const *deltas, size_t n,
                 const char *flat, const char *stamp, em_err *err)
{
    flat_remove(s->dir);
    _cleanup_free_ char *tmp = xasprintf("%s/" STATE_FLAT_TMP "%d", s->dir, (int)getpid());
    ramflat_stats st;
    if (ramflat_build(golden_ram, ram_bytes, deltas, n, tmp, &st, err) < 0)
        return -1;
    int rc = 0;
    if (chmod(tmp, 0400) < 0 || rename(tmp, flat) < 0)
        rc = em_fail_errno(err, "flat RAM file `%s`", flat);
    json_t *now = rc == 0 ? stamp_now(s, flat) : NULL; /* after the rename, which changes the ctime */
    if (rc == 0 && !now)
        rc = em_fail(err, "flat RAM file `%s` is gone", flat);
    if (rc == 0)
        rc = json_save(stamp, now, JSON_COMPACT, 0600, err);
    json_decref(now);
    if (rc < 0) {
        unlink(tmp);
        unlink(flat);
    }
    return rc;
}

int state_flat_ready(const state *s, const char *golden_ram, uint64_t ram_bytes, ramdelta *const *deltas, size_t n,
                     char **path, int *lock_fd, double *built_ms, em_err *err)
{
    *path = NULL;
    *lock_fd = -1;
    *built_ms = 0;
    _cleanup_free_ char *flat = xasprintf("%s/" STATE_FLAT, s->dir);
    _cleanup_free_ char *stamp = xasprintf("%s/" STATE_FLAT_STAMP, s->dir);
    _cleanup_free_ char *lock = xasprintf("%s/" STATE_FLAT_LOCK, s->dir);
    /* Shared while QEMU opens it (restores from one state run side by side); exclusive to build
     * it or to remove it (gc), so neither happens under a starting QEMU. */
    for (int tries = 0; tries < 3; tries++) {
        int lfd = -1;
        if (lock_file_wait(lock, true, FLAT_LOCK_WAIT_MS, "the flat RAM file's build", &lfd, err) < 0)
            return em_prefix(err, "state `%s`: ", s->name);
        if (flat_ok(s, flat, stamp)) {
            *path = xstrdup(flat);
            *lock_fd = lfd;
            return 0;
        }
        close(lfd);
        if (lock_file_wait(lock, false, FLAT_LOCK_WAIT_MS, "the flat RAM file's build", &lfd, err) < 0)
            return em_prefix(err, "state `%s`: ", s->name);
        double t0 = now_ms();
        int rc = flat_ok(s, flat, stamp) ? 0 : build(s, golden_ram, ram_bytes, deltas, n, flat, stamp, err);
        *built_ms += now_ms() - t0;
        close(lfd);
        if (rc < 0)
            return em_prefix(err, "state `%s`: ", s->name);
    }
    return em_fail(err, "state `%s`: its flat RAM file was removed as often as it was built", s->name);
}

bool state_flat_drop(const char *dir)
{
    _cleanup_free_ char *lock = xasprintf("%s/" STATE_FLAT_LOCK, dir);
    _cleanup_close_ int lfd = -1;
    em_err ignored;
    if (lock_file_wait(lock, false, 0, "", &lfd, &ignored) < 0)
        return false; /* a restore is starting from it, or building it */
    flat_remove(dir);
    return true;
}

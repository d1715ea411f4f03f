/* What a restore maps as its guest's RAM: the state's RAM served over FUSE (ramfs.h), which
 * costs no disk, where this host can serve it; else the flat RAM file written out (state_flat.c).
 * ENVMGR_STATE_RAM chooses: `auto` (the default: served when /dev/fuse works, else the file),
 * `served`, `file`. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/state/states.h"
#include "envmgr/state/states_int.h"
#include "envmgr/state/ramfs.h"
#include "envmgr/state/savestate.h"

#define LOCK_WAIT_MS (10 * 60 * 1000.0)
#define IDLE_DEFAULT_S 300.0 /* a server keeps its page cache this long after its last env */

int state_ram_mode_of(state_ram_mode *m, em_err *err)
{
    const char *v = getenv("ENVMGR_STATE_RAM");
    if (!v || !*v || !strcmp(v, "auto"))
        *m = STATE_RAM_AUTO;
    else if (!strcmp(v, "served"))
        *m = STATE_RAM_SERVED;
    else if (!strcmp(v, "file"))
        *m = STATE_RAM_FILE;
    else
        return em_fail_input(err, "ENVMGR_STATE_RAM: `%s` is none of auto, served, file", v);
    return 0;
}

static int idle_s(double *out, em_err *err)
{
    const char *v = getenv("ENVMGR_STATE_RAM_IDLE_S");
    *out = IDLE_DEFAULT_S;
    if (v && *v && (parse_double(v, out) < 0 || *out < 0 || *out > 86400))
        return em_fail_input(err, "ENVMGR_STATE_RAM_IDLE_S: `%s` is not a number of seconds from 0 to 86400", v);
    return 0;
}

int state_ram_settings_check(em_err *err)
{
    state_ram_mode m;
    double idle;
    return state_ram_mode_of(&m, err) < 0 || idle_s(&idle, err) < 0 ? -1 : 0;
}

/* Start the state's server at mnt unless a live one serves it (the caller holds its lock exclusively). */
static int serve(state *const *chain, size_t n, const char *golden_ram, uint64_t ram_bytes, const char *mnt,
                 const char *lock, em_err *err)
{
    const state *s = chain[n - 1];
    _cleanup_free_ char *log = xasprintf("%s/" STATE_RAMFS_LOG, s->dir);
    if (ramfs_live(mnt, s->id, ram_bytes))
        return 0;
    if (ramfs_unmount(mnt, err) < 0) /* a dead one: its server was killed */
        return -1;
    char **deltas = xcalloc(n, sizeof *deltas);
    for (size_t i = 0; i < n; i++)
        deltas[i] = xasprintf("%s/" SAVESTATE_RAM, chain[i]->dir);
    _cleanup_free_ char *warm = xasprintf("%s/" RAMFS_WARM, s->dir);
    ramfs_opts o = {.mountpoint = mnt, .file_name = s->id, .golden_ram = golden_ram, .ram_bytes = ram_bytes,
                    .deltas = (const char *const *)deltas, .ndeltas = n, .lock_path = lock, .warm_path = warm};
    int rc = idle_s(&o.idle_s, err);
    if (rc == 0)
        rc = ramfs_start(&o, log, err);
    for (size_t i = 0; i < n; i++)
        free(deltas[i]);
    free(deltas);
    return rc;
}

static int served_ready(state *const *chain, size_t n, const char *golden_ram, uint64_t ram_bytes, char **path,
                        int *lock_fd, double *ms, em_err *err)
{
    const state *s = chain[n - 1];
    _cleanup_free_ char *mnt = xasprintf("%s/" RAMFS_MNT, s->dir), *lock = xasprintf("%s/" STATE_FLAT_LOCK, s->dir);
    /* Shared while QEMU opens the file (a server leaves only under the lock exclusive); exclusive
     * to start the server. */
    for (int tries = 0; tries < 3; tries++) {
        int lfd = -1;
        if (lock_file_wait(lock, true, LOCK_WAIT_MS, "the state's RAM server", &lfd, err) < 0)
            return -1;
        if (ramfs_live(mnt, s->id, ram_bytes)) {
            *path = xasprintf("%s/%s", mnt, s->id);
            *lock_fd = lfd;
            return 0;
        }
        close(lfd);
        if (lock_file_wait(lock, false, LOCK_WAIT_MS, "the state's RAM server", &lfd, err) < 0)
            return -1;
        double t0 = now_ms();
        int rc = serve(chain, n, golden_ram, ram_bytes, mnt, lock, err);
        *ms += now_ms() - t0;
        close(lfd);
        if (rc < 0)
            return -1;
    }
    return em_fail(err, "its RAM server left as often as it was started");
}

int state_ram_ready(state *const *chain, size_t n, const char *golden_ram, uint64_t ram_bytes,
                    ramdelta *const *deltas, char **path, int *lock_fd, double *ms, bool *served, em_err *err)
{
    const state *s = chain[n - 1];
    *path = NULL;
    *lock_fd = -1;
    *ms = 0;
    *served = false;
    state_ram_mode m;
    if (state_ram_mode_of(&m, err) < 0)
        return -1;
    if (m == STATE_RAM_SERVED || (m == STATE_RAM_AUTO && ramfs_available())) {
        if ((*served = served_ready(chain, n, golden_ram, ram_bytes, path, lock_fd, ms, err) == 0))
            return 0;
        if (m == STATE_RAM_SERVED)
            return em_prefix(err, "state `%s`: ", s->name);
        em_warn("envmgr: state `%s`: %s; writing its flat RAM file instead (ENVMGR_STATE_RAM=file says so "
                "at once)",
                s->name, err->msg);
    }
    double built = 0;
    int rc = state_flat_ready(s, golden_ram, ram_bytes, deltas, n, path, lock_fd, &built, err);
    *ms += built;
    return rc;
}

int state_ram_unserve(const char *dir, em_err *err)
{
    _cleanup_free_ char *mnt = xasprintf("%s/" RAMFS_MNT, dir), *lock = xasprintf("%s/" STATE_FLAT_LOCK, dir);
    _cleanup_close_ int lfd = -1;
    if (access(mnt, F_OK) < 0 && errno == ENOENT)
        return 0;
    if (lock_file_wait(lock, false, 0, "a restore", &lfd, err) < 0)
        return em_fail(err, "a restore is starting from it (try again)");
    return ramfs_unmount(mnt, err);
}

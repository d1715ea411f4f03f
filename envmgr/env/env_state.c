/* Saved states of an env: save it as a named state, restore one into it, start it from one
 * (env_up's from_state). The files and the mechanism are state/savestate's, the named store with its
 * chain, integrity and cap state/states'; here an env meets them: which golden state it runs on,
 * which state it was restored from (env.json "state": {name, id}), where its pointer is. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/util.h"
#include "envmgr/env/env_int.h"
#include "envmgr/state/states_int.h"
#include "envmgr/state/ramfs.h"
#include "envmgr/state/savestate.h"

/* The saved state the env runs on (the last restored; NULL: none). */
static const char *env_state_name(const env *e)
{
    return json_string_value(json_object_get(json_object_get(e->meta, "state"), "name"));
}

int env_golden_id(const env *e, char id[65], em_err *err)
{
    return state_golden_id(e->gold->dir, id, err);
}

const char *env_state_id(const env *e)
{
    return json_string_value(json_object_get(json_object_get(e->meta, "state"), "id"));
}

/* The image's golden state for this QEMU and accelerator must be the one the state was saved on. */
static int open_golden(env *e, const state *s, const char *accel, em_err *err)
{
    char *ver = NULL, key[65];
    if (vm_qemu_version(&ver, err) < 0)
        return -1;
    golden_key(e->image, accel, ver, key);
    free(ver);
    if (strcmp(key, s->golden_key))
        return em_fail(err, "state `%s` was saved on another golden state of its image (QEMU, the image or its "
                            "place changed since): it cannot be restored here",
                       s->name);
    return golden_open(s->golden_dir, &e->gold, err);
}

int env_state_use(env *e, const char *name, const char *accel, em_err *err)
{
    state **chain = NULL;
    size_t n = 0;
    /* held before anything is stopped, until the env is its recorded user: a removal waits */
    env_state_unhold(e);
    if (state_ram_settings_check(err) < 0 || state_hold(name, &e->state_hold_fd, err) < 0)
        return -1;
    if (state_chain_load(name, &chain, &n, err) < 0) {
        env_state_unhold(e);
        return -1;
    }
    const state *s = chain[n - 1];
    char id[65];
    int rc = 0;
    if (strcmp(s->image_sha256, e->image->sha256))
        rc = em_fail(err, "state `%s` was saved from another image than this env's (%s)", name, s->image);
    else if (!e->gold)
        rc = open_golden(e, s, accel, err);
    else if (strcmp(e->gold->dir, s->golden_dir))
        rc = em_fail(err, "state `%s` was saved on another golden state than this env's (envmgr up --from-state %s "
                          "starts an env for it)",
                     name, name);
    if (rc == 0 && (rc = state_golden_id(e->gold->dir, id, err)) == 0 && strcmp(id, s->golden_id))
        rc = em_fail(err, "state `%s` was saved on a golden state that was rebuilt since: it cannot be restored",
                     name);
    if (rc < 0) {
        state_chain_free(chain, n);
        env_state_unhold(e);
        return -1;
    }
    state_chain_free(e->chain, e->nchain);
    e->chain = chain;
    e->nchain = n;
    return 0;
}

static void close_deltas(ramdelta **d, size_t n)
{
    for (size_t i = 0; d && i < n; i++)
        ramdelta_close(d[i]);
    free(d);
}

/* The RAM deltas of a chain, root first. */
static int open_deltas(state **chain, size_t n, ramdelta ***out, em_err *err)
{
    ramdelta **d = xcalloc(n ? n : 1, sizeof *d);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *p = xasprintf("%s/" SAVESTATE_RAM, chain[i]->dir);
        if (ramdelta_open(p, &d[i], err) < 0) {
            close_deltas(d, i);
            return em_prefix(err, "state `%s`: ", chain[i]->name);
        }
    }
    *out = d;
    return 0;
}

int env_state_start(env *e, const char *accel, double *flat_ms, bool *served, em_err *err)
{
    state *s = e->chain[e->nchain - 1];
    ramdelta **d = NULL;
    _cleanup_free_ char *flat = NULL;
    _cleanup_close_ int lock = -1;
    if (open_deltas(e->chain, e->nchain, &d, err) < 0)
        return -1;
    int rc = state_ram_ready(e->chain, e->nchain, e->gold->ram, (uint64_t)e->image->memory_mb << 20, d, &flat, &lock,
                             flat_ms, served, err);
    if (rc == 0)
        rc = savestate_start(e->image, accel, e->dir, e->name, s->dir, flat, d[e->nchain - 1], &e->pid, err);
    if (rc == 0) /* a save finds the guest's RAM by the file its QEMU maps */
        json_object_set_new(e->meta, "ram_file", json_string(flat));
    close_deltas(d, e->nchain);
    return rc < 0 ? em_prefix(err, "state `%s`: ", s->name) : 0;
}

int env_state_record(env *e, em_err *err)
{
    const state *s = e->chain[e->nchain - 1];
    const char *prev = env_state_name(e);
    if (prev && strcmp(prev, s->name))
        state_release(prev, e->dir);
    json_object_set_new(e->meta, "state", json_pack("{s:s, s:s}", "name", s->name, "id", s->id));
    state_touch(s);
    return state_claim(s, e->dir, err);
}

int env_state_prepare(env *e, const char *name, double *ms, em_err *err)
{
    *ms = 0;
    state **chain = NULL;
    size_t n = 0;
    ramdelta **d = NULL;
    _cleanup_free_ char *flat = NULL;
    _cleanup_close_ int lock = -1;
    int rc = state_chain_load(name, &chain, &n, err);
    if (rc == 0 && strcmp(chain[n - 1]->golden_dir, e->gold->dir))
        rc = em_fail(err, "state `%s` is of another golden state than env %s", name, e->name);
    if (rc == 0)
        rc = open_deltas(chain, n, &d, err);
    if (rc == 0) {
        bool served;
        rc = state_ram_ready(chain, n, e->gold->ram, (uint64_t)e->image->memory_mb << 20, d, &flat, &lock, ms,
                             &served, err);
        close_deltas(d, n);
    }
    state_chain_free(chain, n);
    return rc;
}

void env_state_unhold(env *e)
{
    if (e->state_hold_fd >= 0)
        close(e->state_hold_fd);
    e->state_hold_fd = -1;
}

void env_state_leave(env *e)
{
    state_release(env_state_name(e), e->dir);
    json_object_del(e->meta, "state");
    json_object_del(e->meta, "ram_file");
    state_chain_free(e->chain, e->nchain);
    e->chain = NULL;
    e->nchain = 0;
}

int env_state_restore(env *e, const char *name, env_timings *t, em_err *err)
{
    if (env_state_use(e, name, env_accel(e), err) < 0)
        return em_prefix(err, "restore %s: ", e->name);
    int rc = env_restart(e, t, "restore", err);
    env_state_unhold(e);
    return rc;
}

/* The chain the env was restored from (none: the golden state), still the very one. */
static int parent_chain(env *e, state ***chain, size_t *n, em_err *err)
{
    *chain = NULL;
    *n = 0;
    const char *parent = env_state_name(e), *id = env_state_id(e);
    if (!parent)
        return 0;
    if (state_chain_load(parent, chain, n, err) < 0)
        return em_prefix(err, "the state this env was restored from: ");
    if (!id || strcmp((*chain)[*n - 1]->id, id)) {
        state_chain_free(*chain, *n);
        *chain = NULL;
        return em_fail(err, "state `%s`, which this env was restored from, was removed and saved again: a save "
                            "needs the very parent (reset the env, or restore a state first)",
                       parent);
    }
    return 0;
}

static json_t *state_record(env *e, state *parent, json_t *since, int px, int py, const savestate_stats *st,
                            double save_ms, const char *golden_id)
{
    json_t *m = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:O, s:[i, i]}", "golden", "key",
                          e->gold->key, "dir", e->gold->dir, "id", golden_id, "image", e->image->dir,
                          "image_sha256", e->image->sha256, "accel", env_accel(e), "memory_mb", e->image->memory_mb,
                          "width", e->image->width, "height", e->image->height, "parent",
                          parent ? json_pack("{s:s, s:s}", "name", parent->name, "id", parent->id) : json_null(),
                          "since", since ? since : json_null(), "pointer", px, py);
    json_object_set_new(m, "ram", json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "written_pages",
                                            (json_int_t)st->written_pages, "delta_pages",
                                            (json_int_t)st->delta.pages[RAMDELTA_RAM], "zero_pages",
                                            (json_int_t)st->delta.zero_pages, "vram_pages",
                                            (json_int_t)st->delta.pages[RAMDELTA_VRAM], "delta_bytes",
                                            (json_int_t)st->delta.bytes, "disk_bytes", (json_int_t)st->disk_bytes));
    /* the files written; the record and its hashes take a little more (env_state_save's info) */
    json_object_set_new(m, "timings", json_pack("{s:f, s:f}", "files_ms", save_ms, "paused_ms", st->paused_ms));
    return m;
}

int env_state_save(env *e, const char *name, json_t *since, json_t **info, em_err *err)
{
    double t0 = now_ms();
    char *tmp = NULL, golden_id[65];
    state **chain = NULL;
    size_t n = 0;
    ramdelta **d = NULL;
    savestate_stats st = {0};
    int px, py, rc = state_begin(name, &tmp, err);
    if (rc == 0)
        rc = parent_chain(e, &chain, &n, err);
    if (rc == 0)
        rc = state_golden_id(e->gold->dir, golden_id, err);
    if (rc == 0)
        rc = open_deltas(chain, n, &d, err);
    env_pointer_wire(e, &px, &py);
    if (rc == 0) {
        /* what its QEMU maps: the RAM file of the state it was restored from (served or flat), else the
         * golden one */
        const char *mapped = json_string_value(json_object_get(e->meta, "ram_file"));
        _cleanup_free_ char *ram = !n        ? xstrdup(e->gold->ram)
                                   : mapped ? xstrdup(mapped)
                                            : xasprintf("%s/" STATE_FLAT, chain[n - 1]->dir);
        rc = savestate_write(e->gold, e->image, e->dir, e->pid, ram, d, n, tmp, &st, err);
        close_deltas(d, n);
    }
    double save_ms = now_ms() - t0;
    json_t *meta = rc == 0 ? state_record(e, n ? chain[n - 1] : NULL, since, px, py, &st, save_ms, golden_id) : NULL;
    if (rc == 0)
        rc = state_commit(tmp, name, meta, err);
    if (rc < 0)
        state_abort(tmp);
    save_ms = now_ms() - t0;
    if (rc == 0 && info)
        *info = json_pack("{s:s, s:o, s:f, s:f, s:f, s:f, s:f, s:O}", "name", name, "parent",
                          n ? json_string(chain[n - 1]->name) : json_null(), "ram_delta_mib",
                          (double)st.delta.bytes / (1 << 20), "disk_mib", (double)st.disk_bytes / (1 << 20),
                          "devices_kib", (double)st.devices_bytes / 1024, "save_ms", save_ms, "paused_ms",
                          st.paused_ms, "ram", json_object_get(meta, "ram"));
    json_decref(meta);
    free(tmp);
    state_chain_free(chain, n);
    if (rc < 0)
        return em_prefix(err, "save %s as `%s`: ", e->name, name);
    uint64_t cap;
    size_t evicted;
    double mib;
    em_err ignored; /* the cap is kept best-effort here; `envmgr gc` reports */
    if (state_cap_bytes(&cap, &ignored) == 0)
        state_evict(cap, name, false, NULL, &evicted, &mib, &ignored);
    return 0;
}

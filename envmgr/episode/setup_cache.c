#include "envmgr/episode/setup_cache.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/net/assets.h"

#define KEY_FORMAT "envmgr-setup-cache-v1"

static void off(setup_cache *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void off(setup_cache *sc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sc->on = false;
    vsnprintf(sc->off, sizeof sc->off, fmt, ap);
    va_end(ap);
}

/* A step's files into the key: task files by content, downloads by the hash their lock pins.
 * false (and why) when one cannot be known before it is copied. */
static bool add_files(const task *t, const task_step *s, asset_lock *lock, sbuf *m, setup_cache *sc)
{
    for (size_t i = 0; i < s->nfiles; i++) {
        const task_file *f = &s->files[i];
        char sha[65];
        em_err ignored;
        if (f->url) {
            const char *pin = json_string_value(json_object_get(json_object_get(lock ? lock->assets : NULL, f->url),
                                                                "sha256"));
            if (!pin) {
                off(sc, "a download no asset lock pins (%s): its bytes may change", f->url);
                return false;
            }
            snprintf(sha, sizeof sha, "%s", pin);
        } else {
            _cleanup_free_ char *real = NULL;
            if (path_inside(t->dir, f->host_path, true, &real, &ignored) < 0 ||
                sha256_file_hex(real, sha, &ignored) < 0) {
                off(sc, "a task file that cannot be read (%s)", f->host_path);
                return false;
            }
        }
        sbuf_printf(m, "file %s %s\n", f->guest_path ? f->guest_path : "", sha);
    }
    return true;
}

/* Steps whose result depends on when they run. */
static const char *time_dependent(const task_step *s)
{
    if (s->type == STEP_UPDATE_BROWSE_HISTORY)
        return "update_browse_history (visit times relative to now)";
    for (size_t i = 0; s->type == STEP_CHROME_OPEN_TABS && i < s->nurls; i++)
        if (url_is_remote(s->urls[i]))
            return "chrome_open_tabs of a web page (its content changes)";
    if (s->type == STEP_OPEN && s->path && url_is_remote(s->path))
        return "open of a web page (its content changes)";
    return NULL;
}

void setup_cache_plan(const task *t, const episode_env *ev, const netpolicy *net, bool from_state, setup_cache *sc)
{
    memset(sc, 0, sizeof *sc);
    const char *mode = getenv("ENVMGR_SETUP_CACHE");
    char golden[65];
    em_err gerr = {0};
    if (from_state)
        return off(sc, "%s", "the episode began from a saved state");
    if (mode && !strcmp(mode, "off"))
        return off(sc, "%s", "the operator turned it off (ENVMGR_SETUP_CACHE=off)");
    if (!t->setup_cache)
        return off(sc, "%s", "the task opts out (\"setup_cache\": false)");
    if (t->nconfig == 0)
        return off(sc, "%s", "the task has no setup");
    if (!ev->golden_id || !ev->state_restore || !ev->state_save)
        return off(sc, "%s", "this env keeps no saved states");
    if (net->mode != NETPOLICY_NONE)
        return off(sc, "%s", "the task has network access: its setup may read the web");
    if (ev->golden_id(ev->ctx, golden, &gerr) < 0)
        return off(sc, "no golden state id: %s", gerr.msg);
    sbuf m = {0};
    sbuf_printf(&m, KEY_FORMAT "\n%s\n%s\n%s %s\n%dx%d\n", ENVMGR_VERSION, golden, ev->image_sha256, ev->accel,
                ev->width, ev->height);
    json_t *pol = netpolicy_to_json(net);
    char *ptext = json_dumps(pol, JSON_SORT_KEYS | JSON_COMPACT);
    sbuf_printf(&m, "network %s\n", ptext ? ptext : "");
    free(ptext);
    json_decref(pol);
    asset_lock *lock = NULL;
    em_err lerr;
    if (asset_lock_for_task(t->dir, &lock, &lerr) < 0)
        lock = NULL; /* a download then needs a pin it does not have */
    sc->on = true;
    for (size_t i = 0; sc->on && i < t->nconfig; i++) {
        const task_step *s = &t->config[i];
        const char *why = time_dependent(s);
        if (why) {
            off(sc, "its setup has %s", why);
            break;
        }
        char *params = json_dumps(s->params, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY);
        sbuf_printf(&m, "step %s %s\n", task_step_type_name(s->type), params ? params : "null");
        free(params);
        if (add_files(t, s, lock, &m, sc) && s->reference) {
            char sha[65];
            em_err ignored;
            if (sha256_file_hex(s->reference, sha, &ignored) < 0)
                off(sc, "a reference image that cannot be read (%s)", s->reference);
            else
                sbuf_printf(&m, "reference %s\n", sha);
        }
    }
    asset_lock_free(lock);
    if (sc->on) {
        sha256_hex(m.s, m.len, sc->key);
        snprintf(sc->name, sizeof sc->name, SETUP_CACHE_PREFIX "%.32s", sc->key);
    }
    sbuf_release(&m);
}

bool setup_cache_restore(const episode_env *ev, setup_cache *sc)
{
    if (!sc->on)
        return false;
    em_err err = {0};
    int rc = ev->state_restore(ev->ctx, sc->name, sc->id, &err);
    if (rc < 0)
        snprintf(sc->refused, sizeof sc->refused, "%s", err.msg[0] ? err.msg : "refused");
    sc->restored = rc == 1;
    return sc->restored;
}

void setup_cache_save(const episode_env *ev, const task *t, const char *task_sha256, setup_cache *sc)
{
    if (!sc->on || sc->restored)
        return;
    json_t *since = json_pack("{s:s, s:s, s:s, s:s, s:i}", "by", "setup cache", "task_id", t->id, "task_sha256",
                              task_sha256, "key", sc->key, "setup_steps", (int)t->nconfig);
    em_err err = {0};
    if (ev->state_save(ev->ctx, sc->name, since, &err) < 0 && err.code != EM_EXIT_USAGE) /* usage: saved meanwhile */
        em_warn("envmgr: setup cache: %s (the next episode of %s runs its setup again)", err.msg, t->id);
    json_decref(since);
}

json_t *setup_cache_json(const setup_cache *sc)
{
    if (!sc->on)
        return json_pack("{s:s}", "off", sc->off);
    json_t *j = json_pack("{s:s, s:s, s:s}", "key", sc->key, "state", sc->name, "used",
                          sc->restored ? "restored" : "ran");
    if (sc->restored)
        json_object_set_new(j, "id", json_string(sc->id));
    if (sc->refused[0])
        json_object_set_new(j, "refused", json_string(sc->refused));
    return j;
}

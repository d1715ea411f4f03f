#include "envmgr/state/states.h"
#include "envmgr/state/states_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/state/savestate.h"


static const char *const state_files[] = {SAVESTATE_DISK, SAVESTATE_RAM, SAVESTATE_DEVICES};

char *state_dir(const char *name)
{
    _cleanup_free_ char *root = paths_state_root();
    return xasprintf("%s/%s", root, name);
}

void state_free(state *s)
{
    if (!s)
        return;
    json_decref(s->meta);
    free(s->name);
    free(s->dir);
    free(s);
}

void state_chain_free(state **chain, size_t n)
{
    for (size_t i = 0; chain && i < n; i++)
        state_free(chain[i]);
    free(chain);
}

const char *state_str(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool hex_of(const char *s, size_t len)
{
    if (!s || strlen(s) != len)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return false;
    return true;
}

/* The fields state.json must have, each of the right kind. */
static int check_meta(state *s, em_err *err)
{
    json_t *m = s->meta, *g = json_object_get(m, "golden"), *p = json_object_get(m, "parent");
    json_t *ptr = json_object_get(m, "pointer"), *files = json_object_get(m, "files");
    const char *name = state_str(m, "name"), *accel = state_str(m, "accel");
    s->id = state_str(m, "id");
    s->golden_dir = state_str(g, "dir");
    s->golden_key = state_str(g, "key");
    s->golden_id = state_str(g, "id");
    s->image = state_str(m, "image");
    s->image_sha256 = state_str(m, "image_sha256");
    s->accel = accel;
    const char *why = NULL;
    if (!json_is_object(m) || strcmp(state_str(m, "format") ?: "", STATE_FORMAT))
        why = "not an " STATE_FORMAT " record";
    else if (!name || strcmp(name, s->name))
        why = "its name is not its folder's";
    else if (!hex_of(s->id, 32))
        why = "no id";
    else if (!s->golden_dir || s->golden_dir[0] != '/' || !hex_of(s->golden_key, 64) || !hex_of(s->golden_id, 64))
        why = "no golden state";
    else if (!s->image || s->image[0] != '/' || !hex_of(s->image_sha256, 64))
        why = "no image";
    else if (!accel || (strcmp(accel, "tcg") && strcmp(accel, "kvm")))
        why = "no accelerator";
    else if (!json_is_null(p) && !(json_is_object(p) && state_str(p, "name") && hex_of(state_str(p, "id"), 32)))
        why = "a parent that is neither null nor {name, id}";
    else if (!json_is_array(ptr) || json_array_size(ptr) != 2 || !json_is_integer(json_array_get(ptr, 0)) ||
             !json_is_integer(json_array_get(ptr, 1)))
        why = "no pointer position";
    else if (!json_is_object(files) || json_object_size(files) != ARRAY_LEN(state_files))
        why = "not the files a state has";
    for (size_t i = 0; !why && i < ARRAY_LEN(state_files); i++)
        if (!hex_of(state_str(json_object_get(files, state_files[i]), "sha256"), 64))
            why = "a file without its sha256";
    if (why)
        return em_fail(err, "state `%s`: %s/" STATE_JSON " is damaged: %s", s->name, s->dir, why);
    em_err perr;
    if (json_is_object(p) && check_name("parent", state_str(p, "name"), &perr) < 0)
        return em_fail(err, "state `%s`: " STATE_JSON " is damaged: %s", s->name, perr.msg);
    s->parent = json_is_object(p) ? state_str(p, "name") : NULL;
    s->parent_id = json_is_object(p) ? state_str(p, "id") : NULL;
    json_int_t x = json_integer_value(json_array_get(ptr, 0)), y = json_integer_value(json_array_get(ptr, 1));
    if (x < 0 || y < 0 || x > 65535 || y > 65535)
        return em_fail(err, "state `%s`: " STATE_JSON " is damaged: a pointer off any screen", s->name);
    s->pointer_x = (int)x;
    s->pointer_y = (int)y;
    return 0;
}

int state_load(const char *name, state **out, em_err *err)
{
    if (check_name("state", name, err) < 0)
        return -1;
    state *s = xcalloc(1, sizeof *s);
    s->name = xstrdup(name);
    s->dir = state_dir(name);
    _cleanup_free_ char *path = xasprintf("%s/" STATE_JSON, s->dir), *text = NULL;
    _cleanup_free_ char *used = xasprintf("%s/" STATE_USED, s->dir);
    struct stat st;
    int rc;
    if (lstat(s->dir, &st) < 0 && errno == ENOENT)
        rc = em_fail_input(err, "state `%s` does not exist (envmgr state ls lists them)", name);
    else if ((rc = read_file_flags(path, JSON_DOC_MAX, FILE_NOFOLLOW, &text, NULL, err)) < 0)
        em_prefix(err, "state `%s`: ", name);
    if (rc == 0) {
        json_error_t je;
        s->meta = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        rc = check_meta(s, err);
    }
    if (rc < 0) {
        state_free(s);
        return -1;
    }
    s->last_used = stat(used, &st) == 0 ? (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9 : 0;
    *out = s;
    return 0;
}

/* ---- integrity ---- */

/* What identifies a file's content short of reading it: a write changes its ctime. */
static json_t *file_facts(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return NULL;
    return json_pack("[I, I, I, I, I, I, I]", (json_int_t)st.st_dev, (json_int_t)st.st_ino, (json_int_t)st.st_size,
                     (json_int_t)st.st_mtim.tv_sec, (json_int_t)st.st_mtim.tv_nsec, (json_int_t)st.st_ctim.tv_sec,
                     (json_int_t)st.st_ctim.tv_nsec);
}

/* The facts of the record and of every file, as verified.json keeps them. */
static json_t *all_facts(const char *dir)
{
    json_t *facts = json_object();
    const char *names[] = {STATE_JSON, SAVESTATE_DISK, SAVESTATE_RAM, SAVESTATE_DEVICES};
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]);
        json_t *f = file_facts(p);
        json_object_set_new(facts, names[i], f ? f : json_null());
    }
    return facts;
}

int state_verify(const state *s, em_err *err)
{
    _cleanup_free_ char *stamp = xasprintf("%s/" STATE_STAMP, s->dir), *text = NULL;
    json_t *now = all_facts(s->dir), *before = NULL;
    if (read_file_flags(stamp, JSON_DOC_MAX, FILE_NOFOLLOW, &text, NULL, NULL) == 0)
        before = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    bool unchanged = before && json_equal(before, now);
    json_decref(before);
    int rc = 0;
    json_t *files = json_object_get(s->meta, "files");
    for (size_t i = 0; !unchanged && rc == 0 && i < ARRAY_LEN(state_files); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", s->dir, state_files[i]);
        char sha[SHA256_HEX_LEN + 1];
        const char *want = state_str(json_object_get(files, state_files[i]), "sha256");
        if (json_is_null(json_object_get(now, state_files[i])))
            rc = em_fail(err, "state `%s`: %s is missing or not a plain file", s->name, state_files[i]);
        else if (sha256_file_hex(p, sha, err) < 0)
            rc = em_prefix(err, "state `%s`: ", s->name);
        else if (!const_time_equal(sha, want))
            rc = em_fail(err, "state `%s`: %s does not match its sha256 in " STATE_JSON
                              " (damaged or tampered with): refusing to run it (envmgr state rm %s)",
                         s->name, state_files[i], s->name);
    }
    if (rc == 0 && !unchanged)
        json_save(stamp, now, JSON_COMPACT, 0600, NULL); /* a stamp that cannot be written costs a hash next time */
    json_decref(now);
    return rc;
}

int state_golden_id(const char *golden_dir, char id[65], em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/golden.json", golden_dir), *text = NULL;
    size_t len = 0;
    if (read_file_capped(path, JSON_DOC_MAX, &text, &len, err) < 0)
        return em_prefix(err, "golden state: ");
    sha256_hex(text, len, id);
    return 0;
}

int state_chain_load(const char *name, state ***out, size_t *n, em_err *err)
{
    *out = NULL;
    *n = 0;
    state **chain = xcalloc(STATE_DEPTH_MAX, sizeof *chain);
    size_t k = 0;
    _cleanup_free_ char *cur = xstrdup(name), *want_id = NULL;
    int rc = 0;
    while (rc == 0 && cur) {
        state *s = NULL;
        if (k == STATE_DEPTH_MAX)
            rc = em_fail(err, "state `%s`: more than %d states between it and the golden state", name,
                         STATE_DEPTH_MAX);
        else if ((rc = state_load(cur, &s, err)) < 0 && k > 0)
            em_prefix(err, "state `%s` was saved from `%s`, which is gone or damaged: ", chain[k - 1]->name, cur);
        if (rc == 0)
            chain[k++] = s;
        if (rc == 0 && want_id && strcmp(s->id, want_id))
            rc = em_fail(err, "state `%s` was saved from another `%s` (ids differ: it was removed and saved "
                              "again): refusing it",
                         chain[k - 2]->name, cur);
        if (rc == 0 && k > 1 && strcmp(s->golden_id, chain[0]->golden_id))
            rc = em_fail(err, "state `%s`: its parent `%s` is of another golden state", chain[k - 2]->name, cur);
        if (rc == 0)
            rc = state_verify(s, err);
        free(cur);
        free(want_id);
        cur = rc == 0 && s->parent ? xstrdup(s->parent) : NULL;
        want_id = rc == 0 && s->parent_id ? xstrdup(s->parent_id) : NULL;
    }
    if (rc < 0) {
        state_chain_free(chain, k);
        return -1;
    }
    for (size_t i = 0; i < k / 2; i++) { /* root first */
        state *t = chain[i];
        chain[i] = chain[k - 1 - i];
        chain[k - 1 - i] = t;
    }
    *out = chain;
    *n = k;
    return 0;
}

/* ---- creating ---- */

int state_check_user_name(const char *name, em_err *err)
{
    if (check_name("state name", name, err) < 0)
        return -1;
    if (!strncmp(name, STATE_SETUP_PREFIX, strlen(STATE_SETUP_PREFIX)))
        return em_fail_input(err, "state name: `%s`: names starting with " STATE_SETUP_PREFIX
                                  " are the setup cache's (docs/states.md)", name);
    return 0;
}

int state_begin(const char *name, char **tmp_dir, em_err *err)
{
    *tmp_dir = NULL;
    if (check_name("state name", name, err) < 0)
        return -1;
    _cleanup_free_ char *root = paths_state_root(), *final = state_dir(name);
    if (mkdir_p(root, 0700, err) < 0)
        return em_prefix(err, "states: ");
    struct stat st;
    if (lstat(final, &st) == 0)
        return em_fail_input(err, "state `%s` exists (envmgr state rm %s removes it)", name, name);
    char *tmp = xasprintf("%s/" NEW_PREFIX "%s-%d", root, name, (int)getpid());
    remove_tree(tmp, NULL);
    if (mkdir(tmp, 0700) < 0) {
        em_fail_errno(err, "states: create `%s`", tmp);
        free(tmp);
        return -1;
    }
    *tmp_dir = tmp;
    return 0;
}

void state_abort(const char *tmp_dir)
{
    if (tmp_dir)
        remove_tree(tmp_dir, NULL);
}

int state_commit(const char *tmp_dir, const char *name, json_t *meta, em_err *err)
{
    unsigned char raw[16];
    char id[33], when[40];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return em_fail_errno(err, "state `%s`: getrandom", name);
    hex_encode(raw, sizeof raw, id);
    iso8601_now(when, sizeof when);
    json_t *files = json_object();
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < ARRAY_LEN(state_files); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", tmp_dir, state_files[i]);
        char sha[SHA256_HEX_LEN + 1];
        struct stat st;
        /* QEMU opens the disk layer as root before it drops to the env's user; nobody writes any */
        if (stat(p, &st) < 0 || chmod(p, i == 0 ? 0444 : 0400) < 0)
            rc = em_fail_errno(err, "state `%s`: `%s`", name, p);
        else if (sha256_file_hex(p, sha, err) == 0)
            json_object_set_new(files, state_files[i], json_pack("{s:I, s:s}", "bytes", (json_int_t)st.st_size,
                                                                 "sha256", sha));
        else
            rc = -1;
    }
    json_object_set_new(meta, "format", json_string(STATE_FORMAT));
    json_object_set_new(meta, "name", json_string(name));
    json_object_set_new(meta, "id", json_string(id));
    json_object_set_new(meta, "created", json_string(when));
    json_object_set_new(meta, "envmgr_version", json_string(ENVMGR_VERSION));
    json_object_set_new(meta, "files", files);
    _cleanup_free_ char *path = xasprintf("%s/" STATE_JSON, tmp_dir), *stamp = xasprintf("%s/" STATE_STAMP, tmp_dir);
    _cleanup_free_ char *used = xasprintf("%s/" STATE_USED, tmp_dir), *final = state_dir(name);
    if (rc == 0)
        rc = json_save(path, meta, JSON_INDENT(2) | JSON_SORT_KEYS, 0400, err);
    if (rc == 0) { /* just hashed: the first restore need not hash again */
        json_t *facts = all_facts(tmp_dir);
        rc = json_save(stamp, facts, JSON_COMPACT, 0600, err);
        json_decref(facts);
    }
    if (rc == 0)
        rc = write_file_atomic(used, "", 0, 0600, err);
    if (rc == 0 && rename(tmp_dir, final) < 0)
        rc = errno == EEXIST || errno == ENOTEMPTY
                 ? em_fail_input(err, "state `%s` exists (saved meanwhile by another envmgr)", name)
                 : em_fail_errno(err, "state `%s`: rename into place", name);
    return rc;
}

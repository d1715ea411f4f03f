/* Getters: evaluator specs → artifacts. Guest-side getters go through
 * em_env_ops; host-side ones (rule, cache_file, local_file) never touch the
 * env. Guest data is capped and names are sanitized before they reach the
 * host file system. */
#include "envmgr/base/json_type.h"
#include "getters.h"
#include "getter_call.h"

#include <errno.h>
#include <math.h>
#include <strings.h>
#include <time.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/util.h"

#define WINDOW_TITLE_TIMEOUT_S 10.0
#define LIST_DIRECTORY_MAX 10000
#define SCREENSHOT_NAMES_MAX 1000

/* ---- untrusted bytes → JSON ---- */

json_t *getter_text_json(const char *s, size_t n)
{
    if (utf8_valid(s, n, true))
        return json_stringn(s, n);
    size_t len;
    _cleanup_free_ char *clean = utf8_sanitize(s, n, &len);
    return json_stringn(clean, len);
}

char *getter_safe_name(const char *name)
{
    char *out = xmalloc(101);
    size_t n = 0;
    for (const char *s = name ? name : ""; *s && n < 100; s++) {
        unsigned char c = (unsigned char)*s;
        if (n == 0 && c == '.')
            continue;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-';
        out[n++] = ok ? (char)c : '_';
    }
    if (n == 0)
        memcpy(out, "file", (n = 4));
    out[n] = '\0';
    return out;
}

/* ---- static checks ---- */

int getter_check_string(json_t *spec, const char *key, bool required, em_err *err)
{
    json_t *v = json_object_get(spec, key);
    if (!v)
        return required ? em_fail_input(err, "%s: missing", key) : 0;
    if (!json_is_string(v))
        return em_fail_input(err, "%s: expected a string, got %s", key, json_type_name(v));
    if (!json_string_length(v))
        return em_fail_input(err, "%s: empty", key);
    return 0;
}

bool getter_flag_true(json_t *v)
{
    return json_is_true(v) || (json_is_string(v) && !strcasecmp(json_string_value(v), "true"));
}

static bool flag_valid(json_t *v)
{
    return !v || json_is_boolean(v) ||
           (json_is_string(v) && (!strcasecmp(json_string_value(v), "true") || !strcasecmp(json_string_value(v), "false")));
}

int getter_check_flag(json_t *spec, const char *key, em_err *err)
{
    json_t *v = json_object_get(spec, key);
    return flag_valid(v) ? 0 : em_fail_input(err, "%s: expected true or false, got %s", key, json_type_name(v));
}

static int check_command(json_t *spec, em_err *err)
{
    json_t *cmd = json_object_get(spec, "command"), *v;
    if (!cmd)
        return em_fail_input(err, "command: missing");
    if (json_is_string(cmd)) {
        if (!json_string_length(cmd))
            return em_fail_input(err, "command: empty");
    } else if (json_is_array(cmd)) {
        if (json_array_size(cmd) == 0)
            return em_fail_input(err, "command: empty");
        size_t i;
        json_array_foreach(cmd, i, v)
        {
            if (!json_is_string(v))
                return em_fail_input(err, "command[%zu]: expected a string, got %s", i, json_type_name(v));
        }
    } else {
        return em_fail_input(err, "command: expected a string or an array of strings, got %s", json_type_name(cmd));
    }
    if (getter_check_flag(spec, "shell", err) < 0)
        return -1;
    if ((v = json_object_get(spec, "as_root")) && !json_is_boolean(v))
        return em_fail_input(err, "as_root: expected true or false, got %s", json_type_name(v));
    if ((v = json_object_get(spec, "timeout"))) {
        double d = json_is_number(v) ? json_number_value(v) : NAN;
        if (!json_is_number(v))
            return em_fail_input(err, "timeout: expected a number, got %s", json_type_name(v));
        if (!(d > 0 && d <= GETTER_TIMEOUT_MAX_S))
            return em_fail_input(err, "timeout: %g is out of range (> 0 and <= %g)", d, GETTER_TIMEOUT_MAX_S);
    }
    return 0;
}

static int check_region(json_t *spec, em_err *err)
{
    json_t *r = json_object_get(spec, "region");
    if (!r)
        return 0;
    if (!json_is_array(r) || json_array_size(r) != 4)
        return em_fail_input(err, "region: expected [x, y, w, h], got %s",
                             json_is_array(r) ? "an array of another size" : json_type_name(r));
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_array_get(r, i);
        json_int_t lo = i < 2 ? 0 : 1;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > 16384)
            return em_fail_input(err, "region[%zu]: expected an integer in %lld..16384", i, (long long)lo);
    }
    return 0;
}

/* vm_file and cloud_file: `path` and `dest` one string each, or (multi) two arrays of the same
 * length; `gives` the indexes handed to the metric (default [0]). cloud_file paths are http(s)
 * URLs (fetched on the host) or files shipped with the task. */
static int check_multi(json_t *spec, bool cloud, em_err *err)
{
    json_t *multi = json_object_get(spec, "multi"), *p = json_object_get(spec, "path"), *d = json_object_get(spec, "dest");
    if (getter_check_flag(spec, "multi", err) < 0)
        return -1;
    size_t n = 1;
    if (getter_flag_true(multi)) {
        if (!json_is_array(p) || !json_array_size(p))
            return em_fail_input(err, "path: expected a non-empty array with multi, got %s", p ? json_type_name(p) : "nothing");
        n = json_array_size(p);
        if (d && (!json_is_array(d) || json_array_size(d) != n))
            return em_fail_input(err, "dest: expected an array of %zu names (one per path)", n);
        for (size_t i = 0; i < n; i++) {
            json_t *pi = json_array_get(p, i), *di = d ? json_array_get(d, i) : NULL;
            if (!json_is_string(pi) || !json_string_length(pi))
                return em_fail_input(err, "path[%zu]: expected a non-empty string", i);
            if (di && (!json_is_string(di) || !json_string_length(di)))
                return em_fail_input(err, "dest[%zu]: expected a non-empty string", i);
        }
    } else if (getter_check_string(spec, "path", true, err) < 0 || getter_check_string(spec, "dest", false, err) < 0) {
        return -1;
    }
    json_t *g = json_object_get(spec, "gives"), *v;
    size_t i;
    if (g && (!json_is_array(g) || !json_array_size(g)))
        return em_fail_input(err, "gives: expected a non-empty array of indexes");
    json_array_foreach(g, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= n)
            return em_fail_input(err, "gives[%zu]: expected an index in 0..%zu", i, n - 1);
    }
    if (cloud && !getter_flag_true(multi)) {
        const char *u = json_string_value(p);
        if (strstr(u, "://") && !url_is_remote(u))
            return em_fail_input(err, "path: `%.200s`: only http(s) URLs or files shipped with the task", u);
    }
    for (i = 0; cloud && getter_flag_true(multi) && i < n; i++) {
        const char *u = json_string_value(json_array_get(p, i));
        if (strstr(u, "://") && !url_is_remote(u))
            return em_fail_input(err, "path[%zu]: `%.200s`: only http(s) URLs or files shipped with the task", i, u);
    }
    return 0;
}

static int check_vm_file(json_t *spec, em_err *err) { return check_multi(spec, false, err); }
static int check_cloud_file(json_t *spec, em_err *err) { return check_multi(spec, true, err); }
static int check_rule(json_t *spec, em_err *err)
{
    return json_object_get(spec, "rules") ? 0 : em_fail_input(err, "rules: missing");
}
int getter_check_nothing(json_t *spec, em_err *err) { return 0; }

static int check_host_file(json_t *spec, em_err *err)
{
    if (getter_check_string(spec, "path", true, err) < 0)
        return -1;
    const char *p = json_string_value(json_object_get(spec, "path"));
    for (const char *s = p; (s = strstr(s, "..")); s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
            return em_fail_input(err, "path: `%.200s` must not contain `..`", p);
    return 0;
}

static int check_guest_dir(json_t *spec, em_err *err)
{
    if (getter_check_string(spec, "path", true, err) < 0)
        return -1;
    const char *p = json_string_value(json_object_get(spec, "path"));
    return p[0] == '/' || p[0] == '~' ? 0 : em_fail_input(err, "path: `%.200s` must be an absolute guest path", p);
}

static int check_egress(json_t *spec, em_err *err)
{
    json_t *v = json_object_get(spec, "verdict");
    const char *vs = json_string_value(v);
    if (v && (!vs || (strcmp(vs, "allowed") && strcmp(vs, "denied") && strcmp(vs, "failed"))))
        return em_fail_input(err, "verdict: expected \"allowed\", \"denied\" or \"failed\"");
    return 0;
}

static int check_window_size(json_t *spec, em_err *err)
{
    return getter_check_string(spec, "app_class_name", true, err);
}

static int run_vm_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_cloud_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_command_line(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_command_error(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_rule(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_time_diff_range(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_cache_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_local_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_screenshot(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_list_directory(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_list_names(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_window_title(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_screen_size(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_window_size(const getter_call *gc, json_t *spec, json_t **art, em_err *err);
static int run_egress_log(const getter_call *gc, json_t *spec, json_t **art, em_err *err);

/* Every getter envmgr runs: the dispatch, and the table docs/osworld.md is generated from. */
static const getter_def getters[] = {
    {"vm_file", check_vm_file, run_vm_file, true,
     "guest file into the episode's cache under `dest`; `~` is the desktop user's home; `multi` and `gives` as "
     "OSWorld (a list artifact, null for a file missing in the guest)"},
    {"cloud_file", check_cloud_file, run_cloud_file, true,
     "http(s) URL fetched on the host through the asset cache (pinned by assets.lock.json); `multi`, `gives`"},
    {"vm_command_line", check_command, run_command_line, false,
     "as the desktop user with its HOME, cwd and session (envmgr's `as_root: true` for root); stdout"},
    {"vm_command_error", check_command, run_command_error, false, "the same, stderr"},
    {"rule", check_rule, run_rule, false, ""},
    {"time_diff_range", getter_check_nothing, run_time_diff_range, false, "the spec's diff_range_in_minutes"},
    {"cache_file", check_host_file, run_cache_file, false,
     "a file of the episode's cache (execute's stdout/stderr, vm_file/cloud_file dests); else the task folder"},
    {"local_file", check_host_file, run_local_file, false, "envmgr's own: a file shipped in the task folder"},
    {"screenshot", check_region, run_screenshot, true, "envmgr's own"},
    {"list_directory", check_guest_dir, run_list_directory, false,
     "OSWorld's tree {type, name, children}, children sorted by name"},
    {"list_directory_names", check_guest_dir, run_list_names, false,
     "envmgr's own: the sorted names in one folder (list_directory's earlier shape)"},
    {"vm_window_title", getter_check_nothing, run_window_title, false, "envmgr's own"},
    {"vm_screen_size", getter_check_nothing, run_screen_size, false, "{width, height} of the env's screen"},
    {"vm_window_size", check_window_size, run_window_size, false,
     "{width, height} of the first window of app_class_name (xdotool)"},
    {"egress_log", check_egress, run_egress_log, false, "envmgr's own"},
};

/* OSWorld's getters envmgr does not run, and why: the load refusal names the piece. */
static const struct {
    const char *name;
    const char *why;
} getters_refused[] = {
    {"googledrive_file", "needs a Google account"},
    {"replay", "not implemented by OSWorld either"},
    {"conference_city_in_order", "reads a CSV file on OSWorld's host, not in the guest"},
    {"gotoRecreationPage_and_get_html_content",
     "never reads the page in OSWorld-Verified: its search-result step is unreachable code, so it always returns "
     "its __EVALUATION_FAILED__ value and the task scores 0 for every agent"},
    {"number_of_search_results", "counts results of a fixed google.com query; no OSWorld-Verified task uses it"},
};

static const getter_def *core_defs(size_t *n)
{
    *n = ARRAY_LEN(getters);
    return getters;
}

/* The getter tables, in lookup order: this file's, the dates', the apps', the browser's, the web pages',
 * the documents'. */
static const getter_def *(*const tables[])(size_t *n) = {core_defs,          getter_time_defs, getter_app_defs,
                                                         getter_chrome_defs, getter_web_defs,  getter_doc_defs};

#define GETTER_PIECES_MAX 128

const getter_piece *getter_pieces(size_t *n)
{
    static getter_piece v[GETTER_PIECES_MAX];
    size_t k = 0;
    for (size_t t = 0; t < ARRAY_LEN(tables); t++) {
        size_t m;
        const getter_def *d = tables[t](&m);
        for (size_t i = 0; i < m && k < GETTER_PIECES_MAX; i++)
            v[k++] = (getter_piece){d[i].name, "supported", d[i].note};
    }
    for (size_t i = 0; i < ARRAY_LEN(getters_refused) && k < GETTER_PIECES_MAX; i++)
        v[k++] = (getter_piece){getters_refused[i].name, getters_refused[i].why, "refused at load"};
    *n = k;
    return v;
}

static const getter_def *getter_find(json_t *spec, em_err *err)
{
    if (!json_is_object(spec)) {
        em_fail_input(err, "type: the spec must be an object, got %s", spec ? json_type_name(spec) : "nothing");
        return NULL;
    }
    json_t *tj = json_object_get(spec, "type");
    if (!tj || !json_is_string(tj)) {
        if (!tj)
            em_fail_input(err, "type: missing");
        else
            em_fail_input(err, "type: expected a string, got %s", json_type_name(tj));
        return NULL;
    }
    const char *type = json_string_value(tj);
    for (size_t t = 0; t < ARRAY_LEN(tables); t++) {
        size_t m;
        const getter_def *d = tables[t](&m);
        for (size_t i = 0; i < m; i++)
            if (!strcmp(d[i].name, type))
                return &d[i];
    }
    for (size_t i = 0; i < ARRAY_LEN(getters_refused); i++)
        if (!strcmp(getters_refused[i].name, type)) {
            em_fail_input(err, "type: getter `%s` %s", type, getters_refused[i].why);
            return NULL;
        }
    em_fail_input(err, "type: unknown getter `%.64s`", type);
    return NULL;
}

getter_need getter_guest_need(const json_t *spec)
{
    static const char *const off_guest[] = {"screenshot", "vm_screen_size", "rule",       "time_diff_range",
                                            "cache_file", "local_file",     "cloud_file", "egress_log"};
    static const char *const agent[] = {"vm_file", "vm_command_line", "vm_command_error", "list_directory",
                                        "list_directory_names"};
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!spec)
        return GETTER_OFF_GUEST;
    for (size_t i = 0; type && i < ARRAY_LEN(off_guest); i++)
        if (!strcmp(type, off_guest[i]))
            return GETTER_OFF_GUEST;
    for (size_t i = 0; type && i < ARRAY_LEN(agent); i++)
        if (!strcmp(type, agent[i]))
            return GETTER_GUEST_AGENT;
    return GETTER_GUEST_TOOLBELT;
}

bool getter_osworld_native(const json_t *spec)
{
    const char *type = json_string_value(json_object_get(spec, "type"));
    return type && (!strcmp(type, "accessibility_tree") || !strcmp(type, "vm_wallpaper") ||
                    !strcmp(type, "vm_window_size"));
}

bool getter_needs_guest(const json_t *spec) { return getter_guest_need(spec) != GETTER_OFF_GUEST; }

int getter_check(json_t *spec, em_err *err)
{
    const getter_def *d = getter_find(spec, err);
    return d ? d->check(spec, err) : -1;
}

/* ---- artifacts ---- */

static json_t *file_artifact(const char *path, const char *sha, size_t size)
{
    return json_pack("{s:s,s:s,s:s,s:I}", "type", "file", "path", path, "sha256", sha, "size", (json_int_t)size);
}

static int need(const em_env_ops *ops, const void *fn, const char *type, em_err *err)
{
    if (!ops || !fn)
        return em_fail(err, "%s: no env to run it in", type);
    return 0;
}

/* The argv of a vm_command_line spec, as task.c builds setup commands. */
static const char **command_argv(json_t *spec, bool stderr_only)
{
    json_t *cmd = json_object_get(spec, "command");
    bool shell = getter_flag_true(json_object_get(spec, "shell"));
    size_t n = json_is_array(cmd) ? json_array_size(cmd) : 1;
    const char **argv = xcalloc(n + 8, sizeof *argv);
    size_t k = 0;
    if (stderr_only) { /* vm_command_error: stderr as the output, stdout dropped */
        argv[k++] = "/bin/sh";
        argv[k++] = "-c";
        argv[k++] = "\"$@\" 2>&1 >/dev/null";
        argv[k++] = "sh";
    }
    if (json_is_string(cmd) || shell) {
        argv[k++] = "/bin/sh";
        argv[k++] = "-c";
    }
    if (json_is_string(cmd)) {
        argv[k++] = json_string_value(cmd);
    } else {
        size_t i;
        json_t *v;
        json_array_foreach(cmd, i, v) argv[k++] = json_string_value(v);
    }
    argv[k] = NULL;
    return argv;
}

char *getter_guest_path(const char *p)
{
    if (p[0] == '~' && (p[1] == '/' || p[1] == '\0'))
        return xasprintf(EM_GUEST_HOME "%s", p + 1);
    return xstrdup(p);
}

int getter_save_bytes(const getter_call *gc, const char *type, const char *dest, const char *data, size_t len,
                      json_t **art, em_err *err)
{
    _cleanup_free_ char *name = getter_safe_name(dest), *host = NULL;
    if (!gc->artifact_dir || !*gc->artifact_dir)
        return em_fail(err, "%s: no artifact folder", type);
    if (mkdir_p(gc->artifact_dir, 0700, err) < 0)
        return em_prefix(err, "%s: ", type);
    host = xasprintf("%s/%s", gc->artifact_dir, name);
    if (write_file_atomic(host, data ? data : "", len, 0600, err) < 0)
        return em_prefix(err, "%s: ", type);
    char sha[SHA256_HEX_LEN + 1];
    sha256_hex(data ? data : "", len, sha);
    *art = file_artifact(host, sha, len);
    return 0;
}

/* One guest file into the cache under dest. missing_ok: a file the guest lacks gives NULL (as
 * OSWorld's None) instead of an error. */
int getter_fetch_vm_file(const getter_call *gc, const char *path_in, const char *dest, bool missing_ok, json_t **art,
                         em_err *err)
{
    const em_env_ops *ops = gc->ops;
    *art = NULL;
    if (need(ops, ops ? (const void *)ops->read_file : NULL, "vm_file", err) < 0)
        return -1;
    _cleanup_free_ char *path = getter_guest_path(path_in);
    if (!dest) {
        const char *slash = strrchr(path, '/');
        dest = slash ? slash + 1 : path;
    }
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if (ops->read_file(ops->ctx, path, GETTER_FILE_CAP, &data, &len, err) < 0) {
        if (missing_ok && strstr(err->msg, "No such file"))
            return 0;
        return em_prefix(err, "vm_file `%.200s`: ", path);
    }
    if (len > GETTER_FILE_CAP)
        return em_fail(err, "vm_file `%.200s`: %zu bytes, more than the limit of %u", path, len, GETTER_FILE_CAP);
    if (getter_save_bytes(gc, "vm_file", dest, data, len, art, err) < 0)
        return -1;
    json_object_set_new(*art, "guest_path", getter_text_json(path, strlen(path)));
    return 0;
}

/* A cloud_file item: an http(s) asset through the host cache, or a file shipped with the task,
 * copied into the cache under dest. */
static int fetch_cloud_file(const getter_call *gc, const char *src, const char *dest, json_t **art, em_err *err)
{
    *art = NULL;
    _cleanup_free_ char *from = NULL;
    if (url_is_remote(src)) {
        if (!gc->ops || !gc->ops->fetch_asset)
            return em_fail(err, "cloud_file `%.200s`: no asset cache here (the getter works on an env)", src);
        if (gc->ops->fetch_asset(gc->ops->ctx, src, gc->task_dir, &from, err) < 0)
            return em_prefix(err, "cloud_file: ");
    } else if (!gc->task_dir) {
        return em_fail(err, "cloud_file: no task folder");
    } else if (path_inside(gc->task_dir, src, true, &from, err) < 0) {
        return em_prefix(err, "cloud_file: ");
    }
    if (!dest) {
        const char *slash = strrchr(src, '/');
        dest = slash ? slash + 1 : src;
    }
    _cleanup_free_ char *name = getter_safe_name(dest), *host = NULL, *data = NULL;
    size_t len;
    if (read_file_capped(from, GETTER_FILE_CAP, &data, &len, err) < 0 || mkdir_p(gc->artifact_dir, 0700, err) < 0)
        return em_prefix(err, "cloud_file `%.200s`: ", src);
    host = xasprintf("%s/%s", gc->artifact_dir, name);
    if (write_file_atomic(host, data, len, 0600, err) < 0)
        return em_prefix(err, "cloud_file: ");
    char sha[SHA256_HEX_LEN + 1];
    sha256_hex(data, len, sha);
    *art = file_artifact(host, sha, len);
    json_object_set_new(*art, "url", json_string(src));
    return 0;
}

typedef int (*item_fn)(const getter_call *gc, const char *src, const char *dest, bool missing_ok, json_t **art,
                       em_err *err);

static int cloud_item(const getter_call *gc, const char *src, const char *dest, bool missing_ok, json_t **art,
                      em_err *err)
{
    return fetch_cloud_file(gc, src, dest, art, err);
}

/* OSWorld's multi/gives: every item is fetched; the metric gets item gives[0] alone, or a list
 * artifact {"type": "list", "items": [...]} of the given ones (null for a file the guest lacks). */
static int run_multi(const getter_call *gc, json_t *spec, item_fn fetch_item, json_t **art, em_err *err)
{
    json_t *p = json_object_get(spec, "path"), *d = json_object_get(spec, "dest");
    if (!getter_flag_true(json_object_get(spec, "multi")))
        return fetch_item(gc, json_string_value(p), json_string_value(d), false, art, err);
    size_t n = json_array_size(p);
    json_t **items = xcalloc(n, sizeof *items);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if ((rc = fetch_item(gc, json_string_value(json_array_get(p, i)), json_string_value(json_array_get(d, i)),
                             true, &items[i], err)) < 0)
            em_prefix(err, "path[%zu]: ", i);
    json_t *gives = json_object_get(spec, "gives");
    if (rc == 0) {
        size_t ng = gives ? json_array_size(gives) : 1;
        json_t *list = json_array();
        for (size_t g = 0; g < ng; g++) {
            size_t k = gives ? (size_t)json_integer_value(json_array_get(gives, g)) : 0;
            json_array_append(list, items[k] ? items[k] : json_null());
        }
        if (ng == 1) {
            *art = json_incref(json_array_get(list, 0));
            if (json_is_null(*art)) {
                json_decref(*art);
                *art = NULL;
                rc = em_fail(err, "vm_file `%.200s`: not in the guest", json_string_value(json_array_get(p, 0)));
            }
            json_decref(list);
        } else {
            *art = json_pack("{s:s, s:o}", "type", "list", "items", list);
        }
    }
    for (size_t i = 0; i < n; i++)
        json_decref(items[i]);
    free(items);
    return rc;
}

static int run_vm_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_multi(gc, spec, getter_fetch_vm_file, art, err);
}

static int run_cloud_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_multi(gc, spec, cloud_item, art, err);
}

/* ops->exec with its caps; errout (may be NULL): the command's stderr too. */
static int exec_in_guest(const em_env_ops *ops, const char *type, const char *const *argv, unsigned flags,
                         double timeout, size_t cap, char **out, size_t *len, char **errout, int *code, em_err *err)
{
    *out = NULL;
    *len = 0;
    *code = -1;
    if (errout)
        *errout = NULL;
    if (need(ops, ops ? (const void *)ops->exec : NULL, type, err) < 0)
        return -1;
    if (ops->exec(ops->ctx, argv, flags, timeout, cap, out, len, errout, code, err) < 0)
        return em_prefix(err, "%s: ", type);
    if (*len > cap)
        *len = cap; /* a misbehaving env does not get to hand us more */
    if (errout && *errout && strlen(*errout) > GETTER_STDERR_CAP)
        (*errout)[GETTER_STDERR_CAP] = '\0';
    return 0;
}

int getter_exec(const em_env_ops *ops, const char *type, const char *const *argv, unsigned flags, double timeout,
                size_t cap, char **out, size_t *len, int *code, em_err *err)
{
    return exec_in_guest(ops, type, argv, flags, timeout, cap, out, len, NULL, code, err);
}

static int exec_capped(const em_env_ops *ops, const char *type, const char *const *argv, unsigned flags,
                       double timeout, char **out, size_t *len, int *code, em_err *err)
{
    return getter_exec(ops, type, argv, flags, timeout, GETTER_OUTPUT_CAP, out, len, code, err);
}

/* vm_command_line / vm_command_error: OSWorld's value is the output alone; the artifact keeps the
 * exit status and (vm_command_line) what the command said on stderr, which the getter's flags read
 * (score.c: a schema the image lacks gives an empty output whatever the agent did). */
static int run_command(const getter_call *gc, json_t *spec, bool stderr_only, json_t **art, em_err *err)
{
    const em_env_ops *ops = gc->ops;
    json_t *tv = json_object_get(spec, "timeout");
    double timeout = tv ? json_number_value(tv) : GETTER_TIMEOUT_S;
    _cleanup_free_ const char **argv = command_argv(spec, stderr_only);
    _cleanup_free_ char *out = NULL, *errout = NULL;
    size_t len;
    int code;
    unsigned flags = json_is_true(json_object_get(spec, "as_root")) ? EM_EXEC_ROOT : 0;
    if (exec_in_guest(ops, stderr_only ? "vm_command_error" : "vm_command_line", argv, flags, timeout,
                      GETTER_OUTPUT_CAP, &out, &len, stderr_only ? NULL : &errout, &code, err) < 0)
        return -1;
    *art = json_pack("{s:s,s:o,s:i}", "type", "text", "value", getter_text_json(out ? out : "", len), "exit_code",
                     code);
    if (errout && *errout)
        json_object_set_new(*art, "stderr", getter_text_json(errout, strlen(errout)));
    return 0;
}

static int run_command_line(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_command(gc, spec, false, art, err);
}

static int run_command_error(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_command(gc, spec, true, art, err);
}

static int run_host_file(json_t *spec, const char *type, const char *task_dir, json_t **art, em_err *err)
{
    const char *path = json_string_value(json_object_get(spec, "path"));
    if (!task_dir)
        return em_fail(err, "%s: no task folder", type);
    _cleanup_free_ char *abs = NULL;
    if (path_inside(task_dir, path, true, &abs, err) < 0)
        return em_prefix(err, "%s: ", type);
    struct stat st;
    if (stat(abs, &st) < 0)
        return em_fail_errno(err, "%s: `%.200s`", type, path);
    if (!S_ISREG(st.st_mode))
        return em_fail_input(err, "%s: `%.200s` is not a regular file", type, path);
    char sha[SHA256_HEX_LEN + 1];
    if (sha256_file_hex(abs, sha, err) < 0)
        return em_prefix(err, "%s: ", type);
    *art = file_artifact(abs, sha, (size_t)st.st_size);
    return 0;
}

static int run_local_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_host_file(spec, "local_file", gc->task_dir, art, err);
}

/* OSWorld's cache_file: a file in the episode's cache (what execute's stdout/stderr, vm_file and
 * cloud_file wrote there, under the same sanitized name); a task that ships the file instead
 * (envmgr's earlier meaning) still finds it in its folder. */
static int run_cache_file(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *path = json_string_value(json_object_get(spec, "path"));
    if (gc->artifact_dir && *gc->artifact_dir) {
        _cleanup_free_ char *name = getter_safe_name(path), *p = xasprintf("%s/%s", gc->artifact_dir, name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            char sha[SHA256_HEX_LEN + 1];
            if (sha256_file_hex(p, sha, err) < 0)
                return em_prefix(err, "cache_file: ");
            *art = file_artifact(p, sha, (size_t)st.st_size);
            return 0;
        }
    }
    if (run_host_file(spec, "cache_file", gc->task_dir, art, err) < 0)
        return em_fail(err, "cache_file `%.200s`: not in the episode's cache (nothing saved it there) nor in the task "
                            "folder", path);
    return 0;
}

static int run_rule(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    *art = json_pack("{s:s,s:O}", "type", "json", "value", json_object_get(spec, "rules"));
    return 0;
}

static int run_time_diff_range(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    json_t *v = json_object_get(spec, "diff_range_in_minutes");
    *art = json_pack("{s:s,s:O}", "type", "json", "value", v ? v : json_null());
    return 0;
}

static int run_screen_size(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    if (!gc->ops || gc->ops->screen_w <= 0)
        return em_fail(err, "vm_screen_size: no env to measure");
    *art = json_pack("{s:s, s:{s:i, s:i}}", "type", "json", "value", "width", gc->ops->screen_w, "height",
                     gc->ops->screen_h);
    return 0;
}

/* On an osworld image: its server's /window_size, {"width", "height"} of the class's window. */
static int server_window_size(const getter_call *gc, const char *cls, json_t **art, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    json_auto_t *body = json_pack("{s:s}", "app_class_name", cls);
    if (getter_server_get(gc, "vm_window_size", "/window_size", body, &data, &len, err) < 0)
        return -1;
    json_auto_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *w = json_object_get(j, "width"), *h = json_object_get(j, "height");
    if (!json_is_integer(w) || !json_is_integer(h) || json_integer_value(w) < 0 || json_integer_value(h) < 0 ||
        json_integer_value(w) > 65535 || json_integer_value(h) > 65535)
        return em_fail(err, "vm_window_size: OSWorld's server /window_size answered no {width, height} for `%.64s`",
                       cls);
    *art = json_pack("{s:s, s:{s:I, s:I}}", "type", "json", "value", "width", json_integer_value(w), "height",
                     json_integer_value(h));
    return 0;
}

static int run_window_size(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *cls = json_string_value(json_object_get(spec, "app_class_name"));
    if (gc->ops && gc->ops->server)
        return server_window_size(gc, cls, art, err);
    const char *argv[] = {"sh", "-c",
                          "w=$(xdotool search --onlyvisible --class \"$1\" | head -n 1) && [ -n \"$w\" ] && "
                          "xdotool getwindowgeometry --shell \"$w\"",
                          "sh", cls, NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(gc->ops, "vm_window_size", argv, 0, WINDOW_TITLE_TIMEOUT_S, &out, &len, &code, err) < 0)
        return -1;
    const char *w = out ? strstr(out, "WIDTH=") : NULL, *h = out ? strstr(out, "HEIGHT=") : NULL;
    if (code != 0 || !w || !h)
        return em_fail(err, "vm_window_size: no visible window of class `%.64s`", cls);
    *art = json_pack("{s:s, s:{s:i, s:i}}", "type", "json", "value", "width", atoi(w + 6), "height", atoi(h + 7));
    return 0;
}

static int run_screenshot(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const em_env_ops *ops = gc->ops;
    const char *artifact_dir = gc->artifact_dir;
    if (need(ops, ops ? (const void *)ops->screenshot_png : NULL, "screenshot", err) < 0)
        return -1;
    json_t *region = json_object_get(spec, "region");
    if (region && ops->screen_w > 0 && ops->screen_h > 0) {
        json_int_t x = json_integer_value(json_array_get(region, 0)), y = json_integer_value(json_array_get(region, 1));
        json_int_t w = json_integer_value(json_array_get(region, 2)), h = json_integer_value(json_array_get(region, 3));
        if (x + w > ops->screen_w || y + h > ops->screen_h)
            return em_fail_input(err, "screenshot: region [%lld, %lld, %lld, %lld] is outside the %dx%d screen",
                                 (long long)x, (long long)y, (long long)w, (long long)h, ops->screen_w, ops->screen_h);
    }
    if (mkdir_p(artifact_dir, 0700, err) < 0)
        return em_prefix(err, "screenshot: ");
    _cleanup_free_ char *host = NULL;
    for (int i = 1; i <= SCREENSHOT_NAMES_MAX && !host; i++) {
        char *p = i == 1 ? xasprintf("%s/screenshot.png", artifact_dir)
                         : xasprintf("%s/screenshot-%d.png", artifact_dir, i);
        if (access(p, F_OK) < 0 && errno == ENOENT)
            host = p;
        else
            free(p);
    }
    if (!host)
        return em_fail(err, "screenshot: more than %d screenshots in `%s`", SCREENSHOT_NAMES_MAX, artifact_dir);
    if (ops->screenshot_png(ops->ctx, host, err) < 0)
        return em_prefix(err, "screenshot: ");
    struct stat st;
    char sha[SHA256_HEX_LEN + 1];
    if (stat(host, &st) < 0)
        return em_fail_errno(err, "screenshot: `%s`", host);
    if (sha256_file_hex(host, sha, err) < 0)
        return em_prefix(err, "screenshot: ");
    *art = file_artifact(host, sha, (size_t)st.st_size);
    if (region)
        json_object_set(*art, "region", region);
    return 0;
}

static int cmp_json_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

static int run_list_names(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const em_env_ops *ops = gc->ops;
    _cleanup_free_ char *path = getter_guest_path(json_string_value(json_object_get(spec, "path")));
    /* -printf %f\0: one NUL-terminated name per entry, whatever bytes the names hold. */
    const char *argv[] = {"find", "-H", path, "-mindepth", "1", "-maxdepth", "1", "-printf", "%f\\0", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(ops, "list_directory", argv, 0, GETTER_TIMEOUT_S, &out, &len, &code, err) < 0)
        return -1;
    if (code != 0)
        return em_fail(err, "list_directory `%.200s`: find exited with status %d", path, code);
    size_t n = 0;
    json_t **names = xcalloc(LIST_DIRECTORY_MAX + 1, sizeof *names);
    for (size_t i = 0; i < len;) {
        const char *end = memchr(out + i, '\0', len - i);
        size_t l = end ? (size_t)(end - (out + i)) : len - i;
        if (n == LIST_DIRECTORY_MAX) {
            for (size_t k = 0; k < n; k++)
                json_decref(names[k]);
            free(names);
            return em_fail(err, "list_directory `%.200s`: more than %d entries", path, LIST_DIRECTORY_MAX);
        }
        if (l)
            names[n++] = getter_text_json(out + i, l);
        i += l + 1;
    }
    qsort(names, n, sizeof *names, cmp_json_str);
    json_t *arr = json_array();
    for (size_t k = 0; k < n; k++)
        json_array_append_new(arr, names[k]);
    free(names);
    *art = json_pack("{s:s,s:o}", "type", "json", "value", arr);
    return 0;
}

/* The episode's egress events (docs/security.md), through the env seam (env/guest_ops.c reads
 * what the episode runner recorded). An optional "verdict" keeps only allowed, denied or failed
 * attempts. */
#define EGRESS_EVENTS_MAX 100000
static int run_egress_log(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *artifact_dir = gc->artifact_dir;
    if (!artifact_dir || !*artifact_dir)
        return em_fail(err, "egress_log: no artifact folder");
    if (!gc->ops || !gc->ops->egress_events)
        return em_fail(err, "egress_log: no egress record for this evaluation (the getter works inside an episode)");
    json_t *events = NULL;
    if (gc->ops->egress_events(gc->ops->ctx, artifact_dir, EGRESS_EVENTS_MAX, &events, err) < 0) {
        json_decref(events);
        return em_prefix(err, "egress_log: ");
    }
    const char *want = json_string_value(json_object_get(spec, "verdict"));
    json_t *kept = json_array();
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        const char *v = json_string_value(json_object_get(ev, "verdict"));
        if (!want || (v && !strcmp(v, want)))
            json_array_append(kept, ev);
    }
    json_decref(events);
    *art = json_pack("{s:s, s:I, s:o}", "type", "json", "count", (json_int_t)json_array_size(kept), "value", kept);
    return 0;
}

static int run_window_title(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const em_env_ops *ops = gc->ops;
    const char *argv[] = {"env", "DISPLAY=:0", "xdotool", "getactivewindow", "getwindowname", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(ops, "vm_window_title", argv, 0, WINDOW_TITLE_TIMEOUT_S, &out, &len, &code, err) < 0)
        return -1;
    if (code != 0)
        return em_fail(err, "vm_window_title: xdotool exited with status %d (no active window?)", code);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r'))
        len--;
    *art = json_pack("{s:s,s:o}", "type", "text", "value", getter_text_json(out ? out : "", len));
    return 0;
}

/* ---- list_directory: OSWorld's tree ---- */

static int cmp_child(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "name")),
                  json_string_value(json_object_get(*(json_t *const *)b, "name")));
}

static void sort_tree(json_t *node)
{
    json_t *ch = json_object_get(node, "children");
    size_t n = json_array_size(ch);
    if (!n)
        return;
    json_t **v = xcalloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(ch, i));
    qsort(v, n, sizeof *v, cmp_child);
    json_array_clear(ch);
    for (size_t i = 0; i < n; i++) {
        sort_tree(v[i]);
        json_array_append_new(ch, v[i]);
    }
    free(v);
}

static json_t *tree_node(bool dir, const char *name, size_t len)
{
    json_t *n = json_pack("{s:s, s:o}", "type", dir ? "directory" : "file", "name", getter_text_json(name, len));
    if (dir)
        json_object_set_new(n, "children", json_array());
    return n;
}

/* {"type": "directory", "name": basename, "children": [...]} with {"type": "file", "name"} leaves,
 * as OSWorld's in-guest server builds it (children sorted by name here, for stable results). */
static int run_list_directory(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *path = getter_guest_path(json_string_value(json_object_get(spec, "path")));
    size_t pl = strlen(path);
    while (pl > 1 && path[pl - 1] == '/')
        path[--pl] = '\0';
    /* %Y: the type, following links (as os.path.isdir); %P: the path below the start. */
    const char *argv[] = {"sh", "-c", "[ -d \"$1\" ] || exit 3; exec find -H \"$1\" -mindepth 1 -printf '%Y%P\\0'",
                          "sh", path, NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(gc->ops, "list_directory", argv, 0, GETTER_TIMEOUT_S, &out, &len, &code, err) < 0)
        return -1;
    if (code == 3)
        return em_fail(err, "list_directory `%.200s`: not a directory", path);
    if (code != 0)
        return em_fail(err, "list_directory `%.200s`: find exited with status %d", path, code);
    const char *base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    json_t *root = tree_node(true, base, strlen(base)), *dirs = json_object();
    json_object_set(dirs, "", root);
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        const char *e = out + i, *end = memchr(e, '\0', len - i);
        size_t l = end ? (size_t)(end - e) : len - i;
        i += l + 1;
        if (l < 2)
            continue;
        if (++n > LIST_DIRECTORY_MAX) {
            rc = em_fail(err, "list_directory `%.200s`: more than %d entries", path, LIST_DIRECTORY_MAX);
            break;
        }
        _cleanup_free_ char *rel = xasprintf("%.*s", (int)(l - 1), e + 1);
        char *slash = strrchr(rel, '/');
        const char *name = slash ? slash + 1 : rel;
        _cleanup_free_ char *parent = slash ? xasprintf("%.*s", (int)(slash - rel), rel) : xstrdup("");
        json_t *pn = json_object_get(dirs, parent);
        if (!pn)
            continue; /* below a folder find could not list (or a name with invalid UTF-8) */
        json_t *node = tree_node(e[0] == 'd', name, strlen(name));
        json_array_append_new(json_object_get(pn, "children"), node);
        if (e[0] == 'd')
            json_object_set(dirs, rel, node);
    }
    json_decref(dirs);
    if (rc < 0) {
        json_decref(root);
        return -1;
    }
    sort_tree(root);
    *art = json_pack("{s:s, s:o}", "type", "json", "value", root);
    return 0;
}

int getter_run(const em_env_ops *ops, json_t *spec, const char *artifact_dir, const char *task_dir,
               json_t **artifact, em_err *err)
{
    *artifact = NULL;
    const getter_def *d = getter_find(spec, err);
    if (!d || d->check(spec, err) < 0)
        return em_prefix(err, "getter: ");
    if (d->writes && (!artifact_dir || !*artifact_dir))
        return em_fail(err, "%s: no artifact folder", d->name);
    getter_call gc = {.ops = ops, .artifact_dir = artifact_dir, .task_dir = task_dir};
    return d->run(&gc, spec, artifact, err);
}

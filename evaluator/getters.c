/* Getters: evaluator specs → artifacts. Guest-side getters go through
 * em_env_ops; host-side ones (rule, cache_file, local_file) never touch the
 * env. Guest data is capped and names are sanitized before they reach the
 * host file system. */
#include "envmgr/base/json_type.h"
#include "getters.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/net/egress_log.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
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

static int check_nonempty_string(json_t *spec, const char *key, bool required, em_err *err)
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
    if ((v = json_object_get(spec, "shell")) && !json_is_boolean(v))
        return em_fail_input(err, "shell: expected true or false, got %s", json_type_name(v));
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

int getter_check(json_t *spec, em_err *err)
{
    if (!json_is_object(spec))
        return em_fail_input(err, "type: the spec must be an object, got %s", spec ? json_type_name(spec) : "nothing");
    json_t *tj = json_object_get(spec, "type");
    if (!tj)
        return em_fail_input(err, "type: missing");
    if (!json_is_string(tj))
        return em_fail_input(err, "type: expected a string, got %s", json_type_name(tj));
    const char *type = json_string_value(tj);
    if (!strcmp(type, "vm_file")) {
        json_t *multi = json_object_get(spec, "multi");
        if (multi && !json_is_false(multi))
            return em_fail_input(err, "multi: several files in one vm_file getter are not supported");
        if (check_nonempty_string(spec, "path", true, err) < 0 || check_nonempty_string(spec, "dest", false, err) < 0)
            return -1;
        return 0;
    }
    if (!strcmp(type, "vm_command_line"))
        return check_command(spec, err);
    if (!strcmp(type, "rule"))
        return json_object_get(spec, "rules") ? 0 : em_fail_input(err, "rules: missing");
    if (!strcmp(type, "cache_file") || !strcmp(type, "local_file")) {
        if (check_nonempty_string(spec, "path", true, err) < 0)
            return -1;
        const char *p = json_string_value(json_object_get(spec, "path"));
        for (const char *s = p; (s = strstr(s, "..")); s += 2)
            if ((s == p || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
                return em_fail_input(err, "path: `%.200s` must not contain `..`", p);
        return 0;
    }
    if (!strcmp(type, "screenshot"))
        return check_region(spec, err);
    if (!strcmp(type, "list_directory")) {
        if (check_nonempty_string(spec, "path", true, err) < 0)
            return -1;
        const char *p = json_string_value(json_object_get(spec, "path"));
        return p[0] == '/' ? 0 : em_fail_input(err, "path: `%.200s` must be an absolute guest path", p);
    }
    if (!strcmp(type, "vm_window_title"))
        return 0;
    if (!strcmp(type, "egress_log")) {
        json_t *v = json_object_get(spec, "verdict");
        const char *vs = json_string_value(v);
        if (v && (!vs || (strcmp(vs, "allowed") && strcmp(vs, "denied") && strcmp(vs, "failed"))))
            return em_fail_input(err, "verdict: expected \"allowed\", \"denied\" or \"failed\"");
        return 0;
    }
    if (!strcmp(type, "cloud_file"))
        return em_fail_input(err,
                             "type: getter `cloud_file` is not supported (tasks get no internet); ship the file with "
                             "the task and use `local_file`");
    return em_fail_input(err,
                         "type: unknown getter `%.64s` (supported: vm_file, vm_command_line, rule, cache_file, "
                         "local_file, screenshot, list_directory, vm_window_title, egress_log)",
                         type);
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
static const char **command_argv(json_t *spec)
{
    json_t *cmd = json_object_get(spec, "command");
    bool shell = json_is_true(json_object_get(spec, "shell"));
    size_t n = json_is_array(cmd) ? json_array_size(cmd) : 1;
    const char **argv = xcalloc(n + 4, sizeof *argv);
    size_t k = 0;
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

static int run_vm_file(const em_env_ops *ops, json_t *spec, const char *artifact_dir, json_t **art, em_err *err)
{
    const char *path = json_string_value(json_object_get(spec, "path"));
    const char *dest = json_string_value(json_object_get(spec, "dest"));
    if (need(ops, ops ? (const void *)ops->read_file : NULL, "vm_file", err) < 0)
        return -1;
    if (!dest) {
        const char *slash = strrchr(path, '/');
        dest = slash ? slash + 1 : path;
    }
    _cleanup_free_ char *data = NULL, *name = getter_safe_name(dest), *host = NULL;
    size_t len = 0;
    if (ops->read_file(ops->ctx, path, GETTER_FILE_CAP, &data, &len, err) < 0)
        return em_prefix(err, "vm_file `%.200s`: ", path);
    if (len > GETTER_FILE_CAP)
        return em_fail(err, "vm_file `%.200s`: %zu bytes, more than the limit of %u", path, len, GETTER_FILE_CAP);
    if (mkdir_p(artifact_dir, 0700, err) < 0)
        return em_prefix(err, "vm_file: ");
    host = xasprintf("%s/%s", artifact_dir, name);
    if (write_file_atomic(host, data ? data : "", len, 0600, err) < 0)
        return em_prefix(err, "vm_file: ");
    char sha[SHA256_HEX_LEN + 1];
    sha256_hex(data ? data : "", len, sha);
    *art = file_artifact(host, sha, len);
    json_object_set_new(*art, "guest_path", getter_text_json(path, strlen(path)));
    return 0;
}

static int exec_capped(const em_env_ops *ops, const char *type, const char *const *argv, double timeout, char **out,
                       size_t *len, int *code, em_err *err)
{
    *out = NULL;
    *len = 0;
    *code = -1;
    if (need(ops, ops ? (const void *)ops->exec : NULL, type, err) < 0)
        return -1;
    if (ops->exec(ops->ctx, argv, timeout, GETTER_OUTPUT_CAP, out, len, code, err) < 0)
        return em_prefix(err, "%s: ", type);
    if (*len > GETTER_OUTPUT_CAP)
        *len = GETTER_OUTPUT_CAP; /* a misbehaving env does not get to hand us more */
    return 0;
}

static int run_command_line(const em_env_ops *ops, json_t *spec, json_t **art, em_err *err)
{
    json_t *tv = json_object_get(spec, "timeout");
    double timeout = tv ? json_number_value(tv) : GETTER_TIMEOUT_S;
    _cleanup_free_ const char **argv = command_argv(spec);
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(ops, "vm_command_line", argv, timeout, &out, &len, &code, err) < 0)
        return -1;
    *art = json_pack("{s:s,s:o,s:i}", "type", "text", "value", getter_text_json(out ? out : "", len), "exit_code",
                     code);
    return 0;
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

static int run_screenshot(const em_env_ops *ops, json_t *spec, const char *artifact_dir, json_t **art, em_err *err)
{
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

static int run_list_directory(const em_env_ops *ops, json_t *spec, json_t **art, em_err *err)
{
    const char *path = json_string_value(json_object_get(spec, "path"));
    /* -printf %f\0: one NUL-terminated name per entry, whatever bytes the names hold. */
    const char *argv[] = {"find", "-H", path, "-mindepth", "1", "-maxdepth", "1", "-printf", "%f\\0", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(ops, "list_directory", argv, GETTER_TIMEOUT_S, &out, &len, &code, err) < 0)
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

/* The episode's egress events (docs/security.md): the episode runner writes
 * them to artifact_dir/.egress.jsonl before the evaluator runs, a name no
 * vm_file getter can produce (sanitized names never start with a dot). An
 * optional "verdict" keeps only allowed, denied or failed attempts. */
#define EGRESS_EVENTS_MAX 100000
static int run_egress_log(json_t *spec, const char *artifact_dir, json_t **art, em_err *err)
{
    if (!artifact_dir || !*artifact_dir)
        return em_fail(err, "egress_log: no artifact folder");
    _cleanup_free_ char *path = xasprintf("%s/.egress.jsonl", artifact_dir);
    if (access(path, F_OK) != 0)
        return em_fail(err, "egress_log: no egress record for this evaluation (the getter works inside an episode)");
    uint64_t off = 0;
    json_t *events = NULL;
    if (egress_log_read(path, &off, EGRESS_EVENTS_MAX, &events, err) < 0) {
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

static int run_window_title(const em_env_ops *ops, json_t **art, em_err *err)
{
    const char *argv[] = {"env", "DISPLAY=:0", "xdotool", "getactivewindow", "getwindowname", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (exec_capped(ops, "vm_window_title", argv, WINDOW_TITLE_TIMEOUT_S, &out, &len, &code, err) < 0)
        return -1;
    if (code != 0)
        return em_fail(err, "vm_window_title: xdotool exited with status %d (no active window?)", code);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r'))
        len--;
    *art = json_pack("{s:s,s:o}", "type", "text", "value", getter_text_json(out ? out : "", len));
    return 0;
}

int getter_run(const em_env_ops *ops, const task *t, json_t *spec, const char *artifact_dir, const char *task_dir,
               json_t **artifact, em_err *err)
{
    *artifact = NULL;
    if (getter_check(spec, err) < 0)
        return em_prefix(err, "getter: ");
    if (!task_dir && t)
        task_dir = t->dir;
    const char *type = json_string_value(json_object_get(spec, "type"));
    bool writes = !strcmp(type, "vm_file") || !strcmp(type, "screenshot");
    if (writes && (!artifact_dir || !*artifact_dir))
        return em_fail(err, "%s: no artifact folder", type);
    if (!strcmp(type, "vm_file"))
        return run_vm_file(ops, spec, artifact_dir, artifact, err);
    if (!strcmp(type, "vm_command_line"))
        return run_command_line(ops, spec, artifact, err);
    if (!strcmp(type, "rule")) {
        *artifact = json_pack("{s:s,s:O}", "type", "json", "value", json_object_get(spec, "rules"));
        return 0;
    }
    if (!strcmp(type, "cache_file") || !strcmp(type, "local_file"))
        return run_host_file(spec, type, task_dir, artifact, err);
    if (!strcmp(type, "screenshot"))
        return run_screenshot(ops, spec, artifact_dir, artifact, err);
    if (!strcmp(type, "list_directory"))
        return run_list_directory(ops, spec, artifact, err);
    if (!strcmp(type, "vm_window_title"))
        return run_window_title(ops, artifact, err);
    if (!strcmp(type, "egress_log"))
        return run_egress_log(spec, artifact_dir, artifact, err);
    return em_fail(err, "getter: unhandled type `%s`", type);
}

/* Setup (config) and postconfig steps: OSWorld's step types and envmgr's own, each validated with
 * the JSON path of a problem. */
#include "envmgr/task/task_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/pyautogui.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

#define STEP_TIMEOUT_DEFAULT_S 120.0
#define STEP_TIMEOUT_MAX_S 3600.0
#define WAIT_SCREEN_TIMEOUT_DEFAULT_S 30.0
#define WAIT_SCREEN_TIMEOUT_MAX_S 600.0

/* ---- setup steps ---- */

/* The step types envmgr runs. `note` is what docs/osworld.md says about each (generated). */
static const struct {
    const char *name;
    task_step_type type;
    const char *known; /* parameters we read */
    const char *note;
} step_types[] = {
    {"execute", STEP_EXECUTE, " command shell timeout stdout stderr until check ",
     "as the desktop user; exit status and output in the trace; a non-zero exit is tolerated and flagged "
     "(`check: true` fails the episode instead); `stdout`/`stderr` saved for `cache_file`; `until` retries"},
    {"command", STEP_COMMAND, " command shell timeout stdout stderr until check ", "OSWorld's older name for execute"},
    {"launch", STEP_LAUNCH, " command shell ", "started in its own session; a desktop application's window is waited for"},
    {"open", STEP_OPEN, " path ", "xdg-open/exo-open as the desktop user"},
    {"upload_file", STEP_UPLOAD_FILE, " files ", "files shipped with the task, through the guest agent"},
    {"download", STEP_DOWNLOAD, " files ",
     "http(s) URLs fetched on the host into the asset cache (pinned by assets.lock.json), then uploaded"},
    {"sleep", STEP_SLEEP, " seconds ", ""},
    {"activate_window", STEP_ACTIVATE_WINDOW, " window_name strict by_class ", "wmctrl; a missing window is flagged"},
    {"close_window", STEP_CLOSE_WINDOW, " window_name strict by_class ", "wmctrl; a missing window is flagged"},
    {"wait_screen", STEP_WAIT_SCREEN, " timeout stable_ms reference region tolerance ", "envmgr's own"},
    {"execute_with_verification", STEP_EXECUTE_WITH_VERIFICATION,
     " command shell timeout verification max_wait_time check_interval ",
     "runs the command, then polls `verification` (window_exists, command_success) until max_wait_time; "
     "a check that never passes ends the episode as setup_error"},
    {"chrome_open_tabs", STEP_CHROME_OPEN_TABS, " urls_to_open ",
     "the guest's browser command (google-chrome, chromium); an image without one is a run-time error naming it"},
    {"chrome_close_tabs", STEP_CHROME_CLOSE_TABS, " urls_to_close ",
     "the browser's remote-debugging port through a guest-side python3 helper; a run-time error without a browser"},
    {"change_wallpaper", STEP_CHANGE_WALLPAPER, " path ", "xfconf-query on every backdrop of the xfce desktop"},
    {"tidy_desktop", STEP_TIDY_DESKTOP, "", "shows the bare desktop (wmctrl -k on); OSWorld never implemented it"},
    {"update_browse_history", STEP_UPDATE_BROWSE_HISTORY, " history ",
     "rows added to the browser profile's History database (sqlite3 in the guest); a run-time error without a "
     "browser profile"},
    {"proxy", STEP_PROXY, " client_password ",
     "OSWorld's web proxy: envmgr does not proxy the guest; the task's `network` allowlist answers and the trace "
     "says so"},
    {"act", STEP_ACT, " action_seq ", "computer_13 actions or pyautogui code, checked at load, run over VNC"},
};

/* OSWorld's step types envmgr refuses at load: one line naming the piece. */
static const struct {
    const char *name;
    const char *why;
} step_refused[] = {
    {"login", "needs a Google account"},
    {"googledrive", "needs a Google account"},
    {"google_doc_from_template", "needs a Google account"},
    {"replay", "not implemented by OSWorld either"},
};

const char *task_step_type_name(task_step_type type)
{
    for (size_t i = 0; i < ARRAY_LEN(step_types); i++)
        if (step_types[i].type == type)
            return step_types[i].name;
    return "?";
}

const task_piece *task_setup_pieces(size_t *n)
{
    static task_piece v[ARRAY_LEN(step_types) + ARRAY_LEN(step_refused)];
    size_t k = 0;
    for (size_t i = 0; i < ARRAY_LEN(step_types); i++)
        v[k++] = (task_piece){step_types[i].name, "supported", step_types[i].note};
    for (size_t i = 0; i < ARRAY_LEN(step_refused); i++)
        v[k++] = (task_piece){step_refused[i].name, step_refused[i].why, "refused at load, counted as unsupported"};
    *n = k;
    return v;
}

static void step_free(task_step *s)
{
    task_strv_free(s->argv, s->argc);
    free(s->path);
    for (size_t i = 0; i < s->nfiles; i++) {
        free(s->files[i].host_path);
        free(s->files[i].url);
        free(s->files[i].guest_path);
    }
    free(s->files);
    free(s->window_name);
    free(s->reference);
    free(s->stdout_name);
    free(s->stderr_name);
    task_strv_free(s->urls, s->nurls);
    json_decref(s->actions);
    memset(s, 0, sizeof *s);
}

void task_steps_free(task_step *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        step_free(&v[i]);
    free(v);
}

static void argv_push(task_step *s, const char *a)
{
    s->argv = xrealloc(s->argv, (s->argc + 2) * sizeof *s->argv);
    s->argv[s->argc++] = xstrdup(a);
    s->argv[s->argc] = NULL;
}

static int parse_command(json_t *params, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX], q[JFIELD_PATH_MAX];
    jfield_path(p, base, "command");
    json_t *cmd = json_object_get(params, "command");
    if (task_get_boolish(params, base, "shell", false, &s->shell, err) < 0)
        return -1;
    if (!cmd)
        return em_fail_input(err, "%s: missing", p);
    if (json_is_string(cmd)) {
        if (!json_string_length(cmd))
            return em_fail_input(err, "%s: empty", p);
        argv_push(s, "/bin/sh");
        argv_push(s, "-c");
        argv_push(s, json_string_value(cmd));
        return 0;
    }
    if (!json_is_array(cmd))
        return em_fail_input(err, "%s: expected a string or an array of strings, got %s", p, json_type_name(cmd));
    if (json_array_size(cmd) == 0)
        return em_fail_input(err, "%s: empty", p);
    size_t i;
    json_t *a;
    json_array_foreach(cmd, i, a)
    {
        if (!json_is_string(a)) {
            jfield_index(q, p, i);
            return em_fail_input(err, "%s: expected a string, got %s", q, json_type_name(a));
        }
    }
    if (!json_string_length(json_array_get(cmd, 0))) {
        jfield_index(q, p, 0);
        return em_fail_input(err, "%s: empty", q);
    }
    if (s->shell) {
        argv_push(s, "/bin/sh");
        argv_push(s, "-c");
    }
    json_array_foreach(cmd, i, a) argv_push(s, json_string_value(a));
    return 0;
}

static int hexdigit(int c)
{
    return isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

/* %XX decoding of a file:// URL path; NULL when it decodes to a NUL byte. */
static char *percent_decode(const char *s)
{
    char *out = xmalloc(strlen(s) + 1), *o = out;
    for (; *s; s++) {
        int h, l;
        if (*s == '%' && (h = hexdigit((unsigned char)s[1])) >= 0 && (l = hexdigit((unsigned char)s[2])) >= 0) {
            if (h == 0 && l == 0) {
                free(out);
                return NULL;
            }
            *o++ = (char)(h * 16 + l);
            s += 2;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return out;
}

int task_file_path(const char *dir, const char *p, bool must_exist, char **abs, em_err *err)
{
    struct stat st;
    if (path_inside(dir, p, false, abs, err) < 0)
        return -1;
    if (!must_exist && lstat(*abs, &st) < 0 && errno == ENOENT)
        return 0; /* not there yet: checked when setup reads it */
    free(*abs);
    return path_inside(dir, p, true, abs, err);
}

static int download_source(const task *t, const char *url, const char *field, task_file *tf, em_err *err)
{
    char **host = &tf->host_path;
    if (url_is_remote(url)) {
        tf->url = xstrdup(url);
        return 0;
    }
    if (!strncmp(url, "file://", 7)) {
        const char *rest = url + 7;
        if (rest[0] != '/')
            return em_fail_input(err, "%s: `%.200s`: a file:// URL must name an absolute path (file:///...)", field,
                                 url);
        _cleanup_free_ char *path = percent_decode(rest);
        if (!path)
            return em_fail_input(err, "%s: `%.200s` decodes to a NUL byte", field, url);
        if (task_file_path(t->dir, path, false, host, err) < 0)
            return em_prefix(err, "%s: ", field);
        return 0;
    }
    if (strstr(url, "://") || !strncmp(url, "data:", 5))
        return em_fail_input(err,
                             "%s: `%.200s`: only http(s) URLs, file:// URLs and files shipped with the task are "
                             "supported",
                             field, url);
    if (task_file_path(t->dir, url, false, host, err) < 0)
        return em_prefix(err, "%s: ", field);
    return 0;
}

static int parse_files(pctx *c, json_t *params, const char *base, bool download, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX], q[JFIELD_PATH_MAX], f[JFIELD_PATH_MAX];
    jfield_path(p, base, "files");
    json_t *files = json_object_get(params, "files");
    if (!files)
        return em_fail_input(err, "%s: missing", p);
    if (!json_is_array(files))
        return em_fail_input(err, "%s: expected an array, got %s", p, json_type_name(files));
    if (json_array_size(files) == 0)
        return em_fail_input(err, "%s: empty", p);
    s->files = xcalloc(json_array_size(files), sizeof *s->files);
    size_t i;
    json_t *fj;
    json_array_foreach(files, i, fj)
    {
        jfield_index(q, p, i);
        if (!json_is_object(fj))
            return em_fail_input(err, "%s: expected an object, got %s", q, json_type_name(fj));
        const char *src, *dst;
        const char *src_key = download ? "url" : "local_path";
        if (jfield_nonempty_str(fj, q, src_key, true, &src, err) < 0 ||
            jfield_nonempty_str(fj, q, "path", true, &dst, err) < 0)
            return -1;
        task_warn_unknown(c, fj, q, download ? " url path " : " local_path path ");
        task_file *tf = &s->files[s->nfiles];
        jfield_path(f, q, src_key);
        if (download) {
            if (download_source(c->t, src, f, tf, err) < 0) {
                free(tf->url);
                tf->url = NULL;
                return -1;
            }
        } else if (task_file_path(c->t->dir, src, false, &tf->host_path, err) < 0) {
            return em_prefix(err, "%s: ", f);
        }
        tf->guest_path = xstrdup(dst);
        s->nfiles++;
    }
    return 0;
}

static int parse_region(json_t *params, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    json_t *r = json_object_get(params, "region");
    if (!r)
        return 0;
    jfield_path(p, base, "region");
    if (!json_is_array(r) || json_array_size(r) != 4)
        return em_fail_input(err, "%s: expected [x, y, w, h], got %s", p,
                             json_is_array(r) ? "an array of another size" : json_type_name(r));
    static const char *const names[] = {"x", "y", "w", "h"};
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_array_get(r, i);
        double d = json_is_number(v) ? json_number_value(v) : -1;
        long lo = i < 2 ? 0 : 1;
        if (!json_is_integer(v) || d < (double)lo || d > SCREEN_SIDE_MAX)
            return em_fail_input(err, "%s[%zu]: %s must be an integer in %ld..%d", p, i, names[i], lo,
                                 SCREEN_SIDE_MAX);
        s->region[i] = (int)d;
    }
    s->has_region = true;
    return 0;
}

/* execute's stdout/stderr: a file name in the episode's cache (OSWorld's cache_dir), read back
 * by the cache_file getter. One plain name: no folders. */
static int parse_cache_name(json_t *params, const char *base, const char *key, char **out, em_err *err)
{
    const char *v;
    if (jfield_str(params, base, key, false, &v, err) < 0)
        return -1;
    if (!v || !*v) /* OSWorld's default is "": not saved */
        return 0;
    char p[JFIELD_PATH_MAX];
    jfield_path(p, base, key);
    if (strchr(v, '/') || !strcmp(v, ".") || !strcmp(v, "..") || v[0] == '.')
        return em_fail_input(err, "%s: `%.64s` must be a plain file name (no `/`, not starting with `.`)", p, v);
    *out = xstrdup(v);
    return 0;
}

static int parse_until(json_t *params, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    json_t *u;
    if (jfield_obj(params, base, "until", &u, err) < 0)
        return -1;
    if (!u || !json_object_size(u))
        return 0;
    jfield_path(p, base, "until");
    long rc;
    const char *str;
    if (jfield_refuse_unknown(u, p, " returncode stdout stderr ", err) < 0 ||
        jfield_int(u, p, "returncode", -255, 255, 0, &rc, err) < 0 || jfield_str(u, p, "stdout", false, &str, err) < 0 ||
        jfield_str(u, p, "stderr", false, &str, err) < 0)
        return -1;
    s->until = u;
    return 0;
}

static int parse_verification(json_t *params, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    json_t *v;
    if (jfield_obj(params, base, "verification", &v, err) < 0)
        return -1;
    if (!v || !json_object_size(v))
        return 0;
    jfield_path(p, base, "verification");
    const char *str;
    if (jfield_refuse_unknown(v, p, " window_exists command_success ", err) < 0 ||
        jfield_nonempty_str(v, p, "window_exists", false, &str, err) < 0 ||
        jfield_nonempty_str(v, p, "command_success", false, &str, err) < 0)
        return -1;
    s->verification = v;
    return 0;
}

static int parse_history(json_t *params, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX], q[JFIELD_PATH_MAX];
    jfield_path(p, base, "history");
    json_t *h = json_object_get(params, "history");
    if (!h)
        return em_fail_input(err, "%s: missing", p);
    if (!json_is_array(h))
        return em_fail_input(err, "%s: expected an array, got %s", p, json_type_name(h));
    size_t i;
    json_t *e;
    json_array_foreach(h, i, e)
    {
        jfield_index(q, p, i);
        const char *str;
        double secs;
        if (!json_is_object(e))
            return em_fail_input(err, "%s: expected an object, got %s", q, json_type_name(e));
        if (jfield_nonempty_str(e, q, "url", true, &str, err) < 0 || jfield_str(e, q, "title", false, &str, err) < 0 ||
            jfield_num(e, q, "visit_time_from_now_in_seconds", 0, false, 100.0 * 365 * 86400, 0, &secs, err) < 0)
            return -1;
    }
    s->history = h;
    return 0;
}

/* act: OSWorld's action_seq, computer_13 objects or pyautogui code strings. */
static int parse_act(json_t *params, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX], q[JFIELD_PATH_MAX];
    jfield_path(p, base, "action_seq");
    json_t *seq = json_object_get(params, "action_seq");
    if (!seq)
        return em_fail_input(err, "%s: missing", p);
    if (!json_is_array(seq))
        return em_fail_input(err, "%s: expected an array of actions, got %s", p, json_type_name(seq));
    s->actions = json_array();
    size_t i;
    json_t *a;
    json_array_foreach(seq, i, a)
    {
        jfield_index(q, p, i);
        if (json_is_string(a)) {
            json_t *acts;
            if (pyautogui_parse(json_string_value(a), &acts, err) < 0)
                return em_prefix(err, "%s: ", q);
            json_array_extend(s->actions, acts);
            json_decref(acts);
        } else if (json_is_object(a)) {
            const char *type;
            action_type known;
            if (jfield_str(a, q, "action_type", true, &type, err) < 0)
                return -1;
            if (!action_type_from_name(type, &known))
                return em_fail_input(err, "%s.action_type: unknown action type `%.32s`", q, type);
            json_array_append(s->actions, a);
        } else {
            return em_fail_input(err, "%s: expected an action object or pyautogui code, got %s", q,
                                 json_type_name(a));
        }
        if (json_array_size(s->actions) > PYAUTOGUI_ACTIONS_MAX)
            return em_fail_input(err, "%s: more than %d actions", p, PYAUTOGUI_ACTIONS_MAX);
    }
    return 0;
}

static int parse_step(pctx *c, json_t *j, const char *base, task_step *s, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    memset(s, 0, sizeof *s);
    if (!json_is_object(j))
        return em_fail_input(err, "%s: expected an object, got %s", base, json_type_name(j));
    const char *type;
    if (jfield_str(j, base, "type", true, &type, err) < 0)
        return -1;
    size_t ti;
    for (ti = 0; ti < ARRAY_LEN(step_types) && strcmp(step_types[ti].name, type); ti++)
        ;
    for (size_t r = 0; ti == ARRAY_LEN(step_types) && r < ARRAY_LEN(step_refused); r++)
        if (!strcmp(step_refused[r].name, type))
            return em_fail_input(err, "%s.type: setup step `%s` %s", base, type, step_refused[r].why);
    if (ti == ARRAY_LEN(step_types))
        return em_fail_input(err, "%s.type: unknown setup step `%.64s`", base, type);
    s->type = step_types[ti].type;
    task_warn_unknown(c, j, base, " type parameters ");

    json_t *params;
    if (jfield_obj(j, base, "parameters", &params, err) < 0)
        return -1;
    s->params = params;
    json_auto_t *empty = NULL;
    if (!params)
        params = empty = json_object();
    jfield_path(p, base, "parameters");
    if (s->type == STEP_WAIT_SCREEN) {
        if (jfield_refuse_unknown(params, p, step_types[ti].known, err) < 0)
            return -1;
    } else {
        task_warn_unknown(c, params, p, step_types[ti].known);
    }

    const char *str;
    long l;
    switch (s->type) {
    case STEP_EXECUTE:
    case STEP_COMMAND:
        if (jfield_num(params, p, "timeout", 0, true, STEP_TIMEOUT_MAX_S, STEP_TIMEOUT_DEFAULT_S, &s->timeout_s, err) <
                0 ||
            jfield_bool(params, p, "check", false, &s->check, err) < 0 || parse_cache_name(params, p, "stdout", &s->stdout_name, err) < 0 ||
            parse_cache_name(params, p, "stderr", &s->stderr_name, err) < 0 || parse_until(params, p, s, err) < 0)
            return -1;
        return parse_command(params, p, s, err);
    case STEP_EXECUTE_WITH_VERIFICATION:
        if (jfield_num(params, p, "timeout", 0, true, STEP_TIMEOUT_MAX_S, STEP_TIMEOUT_DEFAULT_S, &s->timeout_s, err) <
                0 ||
            jfield_num(params, p, "max_wait_time", 0, true, STEP_TIMEOUT_MAX_S, 10, &s->seconds, err) < 0 ||
            jfield_num(params, p, "check_interval", 0, true, 60, 1, &s->check_interval_s, err) < 0 ||
            parse_verification(params, p, s, err) < 0)
            return -1;
        return parse_command(params, p, s, err);
    case STEP_CHROME_OPEN_TABS:
    case STEP_CHROME_CLOSE_TABS: {
        const char *key = s->type == STEP_CHROME_OPEN_TABS ? "urls_to_open" : "urls_to_close";
        char q[JFIELD_PATH_MAX];
        jfield_path(q, p, key);
        if (!json_object_get(params, key))
            return em_fail_input(err, "%s: missing", q);
        if (jfield_str_array(params, p, key, &s->urls, &s->nurls, err) < 0)
            return -1;
        return s->nurls ? 0 : em_fail_input(err, "%s: empty", q);
    }
    case STEP_CHANGE_WALLPAPER:
        if (jfield_nonempty_str(params, p, "path", true, &str, err) < 0)
            return -1;
        s->path = xstrdup(str);
        return 0;
    case STEP_TIDY_DESKTOP:
    case STEP_PROXY:
        return 0;
    case STEP_UPDATE_BROWSE_HISTORY:
        return parse_history(params, p, s, err);
    case STEP_ACT:
        return parse_act(params, p, s, err);
    case STEP_LAUNCH:
        return parse_command(params, p, s, err);
    case STEP_OPEN:
        if (jfield_nonempty_str(params, p, "path", true, &str, err) < 0)
            return -1;
        s->path = xstrdup(str);
        return 0;
    case STEP_UPLOAD_FILE:
    case STEP_DOWNLOAD:
        return parse_files(c, params, p, s->type == STEP_DOWNLOAD, s, err);
    case STEP_SLEEP: {
        char q[JFIELD_PATH_MAX];
        jfield_path(q, p, "seconds");
        if (!json_object_get(params, "seconds"))
            return em_fail_input(err, "%s: missing", q);
        return jfield_num(params, p, "seconds", 0, false, PYAUTOGUI_SLEEP_MAX_S, 0, &s->seconds, err);
    }
    case STEP_ACTIVATE_WINDOW:
    case STEP_CLOSE_WINDOW:
        if (jfield_nonempty_str(params, p, "window_name", true, &str, err) < 0 ||
            jfield_bool(params, p, "strict", false, &s->strict, err) < 0 ||
            jfield_bool(params, p, "by_class", false, &s->by_class, err) < 0)
            return -1;
        s->window_name = xstrdup(str);
        return 0;
    case STEP_WAIT_SCREEN:
        if (jfield_num(params, p, "timeout", 0, true, WAIT_SCREEN_TIMEOUT_MAX_S, WAIT_SCREEN_TIMEOUT_DEFAULT_S,
                    &s->timeout_s, err) < 0 ||
            jfield_int(params, p, "stable_ms", 0, 60000, 1000, &l, err) < 0 ||
            jfield_num(params, p, "tolerance", 0, false, 1, 0.01, &s->tolerance, err) < 0 ||
            jfield_nonempty_str(params, p, "reference", false, &str, err) < 0 || parse_region(params, p, s, err) < 0)
            return -1;
        s->stable_ms = (int)l;
        if (str && task_file_path(c->t->dir, str, false, &s->reference, err) < 0) {
            char q[JFIELD_PATH_MAX];
            jfield_path(q, p, "reference");
            return em_prefix(err, "%s: ", q);
        }
        return 0;
    }
    return em_fail(err, "%s: unhandled step type", base);
}

int task_parse_steps(pctx *c, json_t *arr, const char *path, task_step **out, size_t *n, em_err *err)
{
    *out = NULL;
    *n = 0;
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return em_fail_input(err, "%s: expected an array of steps, got %s", path, json_type_name(arr));
    *out = xcalloc(json_array_size(arr) + 1, sizeof **out);
    size_t i;
    json_t *j;
    json_array_foreach(arr, i, j)
    {
        char p[JFIELD_PATH_MAX];
        jfield_index(p, path, i);
        if (parse_step(c, j, p, &(*out)[*n], err) < 0) {
            step_free(&(*out)[*n]);
            task_keep(c, -1, err);
            continue;
        }
        (*n)++;
    }
    return 0;
}


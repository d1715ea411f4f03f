/* Task file parsing. The document is kept as JSON (getter specs and
 * options travel to getters and metrics as JSON); what a run depends on is
 * checked here and exposed as C fields. Every error names the JSON path. */
#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/task/task.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/pyautogui.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/net/assets.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "evaluator/metrics.h"


#define STEP_TIMEOUT_DEFAULT_S 120.0
#define STEP_TIMEOUT_MAX_S 3600.0
#define SLEEP_MAX_S 3600.0
#define WAIT_SCREEN_TIMEOUT_DEFAULT_S 30.0
#define WAIT_SCREEN_TIMEOUT_MAX_S 600.0
#define SCREEN_SIDE_MAX 16384

typedef struct pctx {
    task *t;
    bool warn; /* collect warnings (off when re-parsing after substitution) */
    /* Every problem, not only the first: a part that fails is recorded and parsing goes on with
     * the next independent part (field, step, evaluator entry), so `envmgr task check` can list
     * them all. The first one is what task_parse reports. */
    char **problems;
    size_t nproblems;
    em_err first;
} pctx;

#define PROBLEMS_MAX 200

/* rc < 0: record err's message as a problem; always 0, so the caller goes on. */
static int keep(pctx *c, int rc, em_err *err)
{
    if (rc == 0)
        return 0;
    if (c->nproblems == 0)
        c->first = *err;
    if (c->nproblems < PROBLEMS_MAX) {
        c->problems = xrealloc(c->problems, (c->nproblems + 1) * sizeof *c->problems);
        c->problems[c->nproblems++] = xstrdup(err->msg);
    }
    return 0;
}

static void warn(pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(pctx *c, const char *fmt, ...)
{
    if (!c->warn)
        return;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    if (!msg)
        return;
    c->t->warnings = xrealloc(c->t->warnings, (c->t->nwarnings + 1) * sizeof *c->t->warnings);
    c->t->warnings[c->t->nwarnings++] = msg;
}

/* ---- typed field access (base/json_field.h): every message is "<json path>: <problem>" ---- */

/* OSWorld's files sometimes spell a flag as the string "true" or "false" (Python passes it on,
 * where any non-empty string is true; envmgr reads the word). */
static int get_boolish(json_t *obj, const char *base, const char *key, bool dflt, bool *out, em_err *err)
{
    json_t *v = json_object_get(obj, key);
    const char *sv = json_string_value(v);
    if (sv && (!strcasecmp(sv, "true") || !strcasecmp(sv, "false"))) {
        *out = !strcasecmp(sv, "true");
        return 0;
    }
    if (sv) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, key);
        return em_fail_input(err, "%s: expected true or false, got `%.32s`", p, sv);
    }
    return jfield_bool(obj, base, key, dflt, out, err);
}

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Warn about keys not in `known` (space separated, with spaces around). */
static void warn_unknown(pctx *c, json_t *obj, const char *base, const char *known)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        if (jfield_known(known, k))
            continue;
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, k);
        warn(c, "unknown field `%s` ignored", p);
    }
}

/* ---- size limits over the whole document ---- */

static int check_sizes(json_t *j, char *path, size_t plen, em_err *err)
{
    const char *shown = plen ? path : "(top level)";
    if (json_is_string(j)) {
        size_t n = json_string_length(j);
        if (n > TASK_STRING_MAX)
            return em_fail_input(err, "%s: string of %zu bytes is longer than the limit of %u", shown, n,
                                 TASK_STRING_MAX);
        return 0;
    }
    if (json_is_array(j)) {
        size_t n = json_array_size(j), i;
        if (n > TASK_ARRAY_MAX)
            return em_fail_input(err, "%s: %zu items, more than the limit of %d", shown, n, TASK_ARRAY_MAX);
        json_t *v;
        json_array_foreach(j, i, v)
        {
            snprintf(path + plen, JFIELD_PATH_MAX - plen, "[%zu]", i);
            if (check_sizes(v, path, strnlen(path, JFIELD_PATH_MAX - 1), err) < 0)
                return -1;
            path[plen] = '\0';
        }
        return 0;
    }
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v)
        {
            if (strlen(k) > TASK_STRING_MAX)
                return em_fail_input(err, "%s: a key is longer than the limit of %u bytes", shown, TASK_STRING_MAX);
            snprintf(path + plen, JFIELD_PATH_MAX - plen, "%s%.64s", plen ? "." : "", k);
            if (check_sizes(v, path, strnlen(path, JFIELD_PATH_MAX - 1), err) < 0)
                return -1;
            path[plen] = '\0';
        }
    }
    return 0;
}

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
    {"launch", STEP_LAUNCH, " command shell ", "started in its own session, not waited for"},
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
    strv_free(s->argv, s->argc);
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
    strv_free(s->urls, s->nurls);
    json_decref(s->actions);
    memset(s, 0, sizeof *s);
}

static void steps_free(task_step *v, size_t n)
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
    if (get_boolish(params, base, "shell", false, &s->shell, err) < 0)
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
        warn_unknown(c, fj, q, download ? " url path " : " local_path path ");
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
    warn_unknown(c, j, base, " type parameters ");

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
        warn_unknown(c, params, p, step_types[ti].known);
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
        return jfield_num(params, p, "seconds", 0, false, SLEEP_MAX_S, 0, &s->seconds, err);
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

static int parse_steps(pctx *c, json_t *arr, const char *path, task_step **out, size_t *n, em_err *err)
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
            keep(c, -1, err);
            continue;
        }
        (*n)++;
    }
    return 0;
}

/* ---- evaluator: the evaluator's own part (evaluator/spec.h), then the postconfig steps ---- */

static void keep_problem(void *ctx, em_err *err) { keep(ctx, -1, err); }

static int parse_evaluator(pctx *c, json_t *root, em_err *err)
{
    task *t = c->t;
    json_t *ev = json_object_get(root, "evaluator");
    if (json_is_object(ev))
        warn_unknown(c, ev, "evaluator", " func result expected options conj postconfig ");
    if (eval_spec_parse(ev, &t->eval, keep_problem, c, err) < 0)
        return -1;
    return parse_steps(c, json_object_get(ev, "postconfig"), "evaluator.postconfig", &t->postconfig, &t->npostconfig,
                       err);
}

/* ---- network ---- */

/* network.limits: what the task asks for (at most the operator's maxima, checked where the task
 * meets an env: netpolicy_check_task); 0 in t->net: not asked, the env's maxima apply. */
static int parse_network_limits(task *t, json_t *net, em_err *err)
{
    json_t *lim;
    long bytes, conns;
    t->net.max_bytes_out = 0;
    t->net.max_conn_per_min = 0;
    t->net.op_max_bytes_out = 0;
    t->net.op_max_conn_per_min = 0;
    if (jfield_obj(net, "network", "limits", &lim, err) < 0)
        return -1;
    if (!lim)
        return 0;
    if (jfield_refuse_unknown(lim, "network.limits", " max_bytes_out max_connections_per_minute ", err) < 0 ||
        jfield_int(lim, "network.limits", "max_bytes_out", 1, NETPOLICY_BYTES_OUT_MAX, 0, &bytes, err) < 0 ||
        jfield_int(lim, "network.limits", "max_connections_per_minute", 1, NETPOLICY_CONN_PER_MIN_MAX, 0, &conns, err) < 0)
        return -1;
    if (t->net.mode == NETPOLICY_NONE)
        return em_fail_input(err, "network.limits: only with network.mode \"allowlist\" (mode none sends nothing)");
    t->net.max_bytes_out = (uint64_t)bytes;
    t->net.max_conn_per_min = (unsigned)conns;
    return 0;
}

static int parse_network(task *t, json_t *root, em_err *err)
{
    json_t *net;
    netpolicy_init(&t->net);
    if (jfield_obj(root, "", "network", &net, err) < 0)
        return -1;
    if (!net)
        return parse_network_limits(t, NULL, err);
    if (jfield_refuse_unknown(net, "network", " mode allow limits ", err) < 0)
        return -1;
    const char *mode;
    if (jfield_str(net, "network", "mode", false, &mode, err) < 0)
        return -1;
    json_t *allow = json_object_get(net, "allow");
    if (allow && !json_is_array(allow))
        return em_fail_input(err, "network.allow: expected an array of \"host:port\" strings, got %s", json_type_name(allow));
    size_t nallow = allow ? json_array_size(allow) : 0;
    if (mode && strcmp(mode, "none") && strcmp(mode, "allowlist"))
        return em_fail_input(err, "network.mode: expected \"none\" or \"allowlist\", got `%.32s`", mode);
    if (mode && !strcmp(mode, "none") && nallow)
        return em_fail_input(err, "network.allow: must be empty when network.mode is \"none\"");
    t->net.mode = (mode ? !strcmp(mode, "allowlist") : nallow > 0) ? NETPOLICY_ALLOWLIST : NETPOLICY_NONE;
    size_t i;
    json_t *e;
    json_array_foreach(allow, i, e)
    {
        char p[JFIELD_PATH_MAX];
        jfield_index(p, "network.allow", i);
        if (!json_is_string(e))
            return em_fail_input(err, "%s: expected a \"host:port\" string, got %s", p, json_type_name(e));
        if (netpolicy_add(&t->net, json_string_value(e), err) < 0)
            return em_prefix(err, "%s: ", p);
    }
    return parse_network_limits(t, net, err);
}

static int parse_limits(task *t, json_t *root, em_err *err)
{
    json_t *lim;
    long steps;
    t->max_steps = 15;
    t->step_timeout_s = 60;
    t->episode_timeout_s = 600;
    t->settle_max_s = TASK_SETTLE_MAX_S;
    if (jfield_obj(root, "", "limits", &lim, err) < 0)
        return -1;
    if (!lim)
        return 0;
    if (jfield_refuse_unknown(lim, "limits", " max_steps step_timeout_s episode_timeout_s settle_max_s ", err) < 0 ||
        jfield_int(lim, "limits", "max_steps", 1, 1000, 15, &steps, err) < 0 ||
        jfield_num(lim, "limits", "step_timeout_s", 0, true, 3600, 60, &t->step_timeout_s, err) < 0 ||
        jfield_num(lim, "limits", "episode_timeout_s", 0, true, 86400, 600, &t->episode_timeout_s, err) < 0 ||
        jfield_num(lim, "limits", "settle_max_s", 0, true, 600, TASK_SETTLE_MAX_S, &t->settle_max_s, err) < 0)
        return -1;
    t->max_steps = (int)steps;
    return 0;
}

/* ---- solution ---- */

static int parse_solution(task *t, json_t *root, em_err *err)
{
    json_t *sol = json_object_get(root, "solution");
    if (!sol)
        return 0;
    if (!json_is_array(sol))
        return em_fail_input(err, "solution: expected an array of actions, got %s", json_type_name(sol));
    t->solution = json_array();
    size_t i;
    json_t *a;
    json_array_foreach(sol, i, a)
    {
        char p[JFIELD_PATH_MAX];
        jfield_index(p, "solution", i);
        if (!json_is_object(a))
            return em_fail_input(err, "%s: expected an action object, got %s", p, json_type_name(a));
        json_t *code = json_object_get(a, "pyautogui");
        if (code) {
            if (!json_is_string(code))
                return em_fail_input(err, "%s.pyautogui: expected a string, got %s", p, json_type_name(code));
            if (json_object_size(a) != 1)
                return em_fail_input(err, "%s: {\"pyautogui\": ...} takes no other fields", p);
            json_t *acts;
            if (pyautogui_parse(json_string_value(code), &acts, err) < 0)
                return em_prefix(err, "%s.pyautogui: ", p);
            json_array_extend(t->solution, acts);
            json_decref(acts);
        } else {
            const char *type;
            if (jfield_str(a, p, "action_type", true, &type, err) < 0)
                return -1;
            action_type known;
            if (!action_type_from_name(type, &known))
                return em_fail_input(err, "%s.action_type: unknown action type `%.32s`", p, type);
            json_array_append(t->solution, a);
        }
        if (json_array_size(t->solution) > PYAUTOGUI_ACTIONS_MAX)
            return em_fail_input(err, "solution: more than %d actions (after expanding pyautogui code)",
                                 PYAUTOGUI_ACTIONS_MAX);
    }
    return 0;
}

/* ---- the whole document ---- */

static bool valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TASK_ID_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

#define TOP_LEVEL_KNOWN                                                                                              \
    " id instruction snapshot source related_apps config evaluator image network limits solution "                  \
    " pause_while_thinking setup_cache "      \
    /* OSWorld's flags: proxy and fixed_ip are read (docs/osworld.md), the others are informational */              \
    " trajectory proxy fixed_ip possibility_of_env_change "

/* Config and evaluator; problems are recorded in c. -1 only when c has problems. */
static int parse_config_and_evaluator(pctx *c, em_err *err)
{
    task *t = c->t;
    size_t before = c->nproblems;
    keep(c, parse_steps(c, json_object_get(t->json, "config"), "config", &t->config, &t->nconfig, err), err);
    keep(c, parse_evaluator(c, t->json, err), err);
    if (c->nproblems > before) {
        *err = c->first;
        return -1;
    }
    return 0;
}

static int parse_id(task *t, json_t *root, em_err *err)
{
    const char *s;
    if (jfield_str(root, "", "id", true, &s, err) < 0)
        return -1;
    if (!valid_id(s))
        return em_fail_input(err, "id: `%.64s%s` must be 1 to %d characters of A-Z a-z 0-9 . _ -", s,
                             strlen(s) > 64 ? "..." : "", TASK_ID_MAX);
    t->id = xstrdup(s);
    return 0;
}

/* OSWorld's "source" is a string, or (in some files) an array of them: kept joined by ", ". */
static int parse_source(task *t, json_t *root, em_err *err)
{
    json_t *v = json_object_get(root, "source");
    if (!v || json_is_string(v)) {
        t->source = v ? xstrdup(json_string_value(v)) : NULL;
        return 0;
    }
    char **items;
    size_t n;
    if (!json_is_array(v))
        return em_fail_input(err, "source: expected a string or an array of strings, got %s", json_type_name(v));
    if (jfield_str_array(root, "", "source", &items, &n, err) < 0)
        return -1;
    sbuf b = {0};
    for (size_t i = 0; i < n; i++)
        sbuf_printf(&b, "%s%s", i ? ", " : "", items[i]);
    t->source = b.s ? b.s : xstrdup("");
    strv_free(items, n);
    return 0;
}

static int parse_image(task *t, json_t *root, em_err *err)
{
    const char *s;
    if (jfield_str(root, "", "image", false, &s, err) < 0 || (s && check_name("image", s, err) < 0))
        return -1;
    t->image = xstrdup(s ? s : IMAGE_DEFAULT);
    t->image_named = s != NULL;
    return 0;
}

static int parse_task(pctx *c, em_err *err)
{
    task *t = c->t;
    json_t *root = t->json;
    const char *s;

    warn_unknown(c, root, "", TOP_LEVEL_KNOWN);
    keep(c, parse_id(t, root, err), err);
    if (!keep(c, jfield_nonempty_str(root, "", "instruction", true, &s, err), err) && s)
        t->instruction = xstrdup(s);
    keep(c, jfield_str(root, "", "snapshot", false, &s, err), err);
    keep(c, parse_source(t, root, err), err);
    keep(c, jfield_str_array(root, "", "related_apps", &t->related_apps, &t->nrelated_apps, err), err);
    keep(c, parse_image(t, root, err), err);
    keep(c, get_boolish(root, "", "proxy", false, &t->osworld_proxy, err), err);
    keep(c, get_boolish(root, "", "fixed_ip", false, &t->fixed_ip, err), err);
    keep(c, get_boolish(root, "", "pause_while_thinking", true, &t->pause_while_thinking, err), err);
    keep(c, get_boolish(root, "", "setup_cache", true, &t->setup_cache, err), err);
    keep(c, parse_network(t, root, err), err);
    keep(c, parse_limits(t, root, err), err);
    parse_config_and_evaluator(c, err);
    keep(c, parse_solution(t, root, err), err);
    if (c->nproblems) {
        *err = c->first;
        return -1;
    }
    return 0;
}

static char *folder_of(const char *base_dir)
{
    char *real = realpath(base_dir && *base_dir ? base_dir : ".", NULL);
    char *d = real ? real : xstrdup(base_dir && *base_dir ? base_dir : ".");
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/')
        d[--n] = '\0';
    return d;
}

static void problems_free(pctx *c)
{
    strv_free(c->problems, c->nproblems);
    c->problems = NULL;
    c->nproblems = 0;
}

/* The document, parsed as far as it goes: *out is NULL only when it is no JSON object (or over
 * a size limit), with err set; otherwise c holds every problem. */
static int parse_doc(const char *json_text, size_t len, const char *base_dir, pctx *c, task **out, em_err *err)
{
    *out = NULL;
    if (len > TASK_FILE_MAX)
        return em_fail_input(err, "task: %zu bytes, more than the limit of %u", len, TASK_FILE_MAX);
    json_error_t je;
    json_t *root = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return em_fail_input(err, "task: invalid JSON at line %d, column %d: %s", je.line, je.column, je.text);
    if (!json_is_object(root)) {
        em_fail_input(err, "task: expected a JSON object, got %s", json_type_name(root));
        json_decref(root);
        return -1;
    }
    char path[JFIELD_PATH_MAX] = "";
    if (check_sizes(root, path, 0, err) < 0) {
        json_decref(root);
        return -1;
    }
    task *t = xcalloc(1, sizeof *t);
    t->json = root;
    t->dir = folder_of(base_dir);
    c->t = t;
    c->warn = true;
    *out = t;
    return parse_task(c, err);
}

int task_parse(const char *json_text, size_t len, const char *base_dir, task **out, em_err *err)
{
    pctx c = {0};
    task *t;
    *out = NULL;
    int rc = parse_doc(json_text, len, base_dir, &c, &t, err);
    problems_free(&c);
    if (rc < 0) {
        task_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

static void push_str(char ***v, size_t *n, char *s)
{
    *v = xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = s;
}

int task_check_file(const char *path, task_check_result *out)
{
    memset(out, 0, sizeof *out);
    _cleanup_free_ char *text = NULL, *copy = xstrdup(path);
    size_t len;
    em_err err = {0};
    if (read_file_capped(path, TASK_FILE_MAX, &text, &len, &err) < 0) {
        push_str(&out->problems, &out->nproblems, xasprintf("task: %s", err.msg));
        return -1;
    }
    pctx c = {0};
    task *t = NULL;
    int rc = parse_doc(text, len, dirname(copy), &c, &t, &err);
    if (!t) {
        push_str(&out->problems, &out->nproblems, xstrdup(err.msg));
        return -1;
    }
    out->problems = c.problems;
    out->nproblems = c.nproblems;
    out->warnings = t->warnings;
    out->nwarnings = t->nwarnings;
    t->warnings = NULL;
    t->nwarnings = 0;
    out->id = t->id ? xstrdup(t->id) : NULL;
    size_t nurls;
    const char **urls = task_asset_urls(t, &nurls);
    for (size_t i = 0; i < nurls; i++)
        push_str(&out->urls, &out->nurls, xstrdup(urls[i]));
    free(urls);
    task_free(t);
    return rc < 0 || out->nproblems ? -1 : 0;
}

void task_check_result_free(task_check_result *r)
{
    if (!r)
        return;
    free(r->id);
    strv_free(r->problems, r->nproblems);
    strv_free(r->warnings, r->nwarnings);
    strv_free(r->urls, r->nurls);
    memset(r, 0, sizeof *r);
}

/* cloud_file's path: one URL, or a list with multi. */
static void getter_urls(json_t *spec, const char ***v, size_t *n)
{
    if (!json_is_object(spec) || strcmp(json_string_value(json_object_get(spec, "type")) ?: "", "cloud_file"))
        return;
    json_t *p = json_object_get(spec, "path");
    size_t k = json_is_array(p) ? json_array_size(p) : 1;
    for (size_t i = 0; i < k; i++) {
        const char *u = json_string_value(json_is_array(p) ? json_array_get(p, i) : p);
        if (u && url_is_remote(u)) {
            *v = xrealloc(*v, (*n + 1) * sizeof **v);
            (*v)[(*n)++] = u;
        }
    }
}

static void step_urls(const task_step *steps, size_t nsteps, const char ***v, size_t *n)
{
    for (size_t i = 0; i < nsteps; i++)
        for (size_t f = 0; f < steps[i].nfiles; f++)
            if (steps[i].files[f].url) {
                *v = xrealloc(*v, (*n + 1) * sizeof **v);
                (*v)[(*n)++] = steps[i].files[f].url;
            }
}

const char **task_asset_urls(const task *t, size_t *n)
{
    const char **v = NULL;
    *n = 0;
    step_urls(t->config, t->nconfig, &v, n);
    step_urls(t->postconfig, t->npostconfig, &v, n);
    for (size_t i = 0; i < t->eval.nmetrics; i++) {
        getter_urls(t->eval.metrics[i].result, &v, n);
        getter_urls(t->eval.metrics[i].expected, &v, n);
    }
    return v;
}

int task_load(const char *path, task **out, em_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    *out = NULL;
    if (read_file_capped(path, TASK_FILE_MAX, &text, &len, err) < 0)
        return em_prefix(err, "task: ");
    _cleanup_free_ char *copy = xstrdup(path);
    if (task_parse(text, len, dirname(copy), out, err) < 0)
        return em_prefix(err, "%s: ", path);
    for (size_t i = 0; i < (*out)->nwarnings; i++)
        fprintf(stderr, "task %s: %s\n", path, (*out)->warnings[i]);
    return 0;
}

void task_free(task *t)
{
    if (!t)
        return;
    json_decref(t->json);
    json_decref(t->solution);
    free(t->dir);
    free(t->id);
    free(t->instruction);
    free(t->source);
    free(t->image);
    strv_free(t->related_apps, t->nrelated_apps);
    steps_free(t->config, t->nconfig);
    steps_free(t->postconfig, t->npostconfig);
    eval_spec_free(&t->eval);
    strv_free(t->warnings, t->nwarnings);
    free(t);
}

/* ---- {SCREEN_WIDTH} and friends ---- */

#define NVARS 5

static void substitute(json_t *j, const char *const names[NVARS], const char *const values[NVARS])
{
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        size_t n = json_string_length(j);
        if (!memchr(s, '{', n))
            return;
        sbuf out = {0};
        bool changed = false;
        for (size_t i = 0; i < n;) {
            size_t k;
            for (k = 0; k < NVARS; k++) {
                size_t nl = strlen(names[k]);
                if (values[k] && n - i >= nl && !memcmp(s + i, names[k], nl))
                    break;
            }
            if (k < NVARS) {
                sbuf_puts(&out, values[k]);
                i += strlen(names[k]);
                changed = true;
            } else {
                sbuf_add(&out, s + i, 1);
                i++;
            }
        }
        if (changed)
            json_string_setn(j, out.s ? out.s : "", out.len);
        sbuf_release(&out);
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) substitute(v, names, values);
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) substitute(v, names, values);
    }
}

int task_substitute(task *t, const task_vars *v, em_err *err)
{
    if (!t || !v)
        return em_fail(err, "task_substitute: no task");
    int w = v->screen_w, h = v->screen_h;
    if (w <= 0 || h <= 0 || w > SCREEN_SIDE_MAX || h > SCREEN_SIDE_MAX)
        return em_fail_input(err, "screen size %dx%d is out of range (1..%d)", w, h, SCREEN_SIDE_MAX);
    char vw[16], vh[16], vw2[16], vh2[16];
    snprintf(vw, sizeof vw, "%d", w);
    snprintf(vh, sizeof vh, "%d", h);
    snprintf(vw2, sizeof vw2, "%d", w / 2);
    snprintf(vh2, sizeof vh2, "%d", h / 2);
    static const char *const names[NVARS] = {"{SCREEN_WIDTH_HALF}", "{SCREEN_HEIGHT_HALF}", "{SCREEN_WIDTH}",
                                             "{SCREEN_HEIGHT}", "{CLIENT_PASSWORD}"};
    const char *const values[NVARS] = {vw2, vh2, vw, vh, v->client_password};
    json_t *config = json_object_get(t->json, "config"), *ev = json_object_get(t->json, "evaluator");
    if (config)
        substitute(config, names, values);
    if (ev)
        substitute(ev, names, values);
    /* The parsed views hold copies of the old strings: parse them again. */
    steps_free(t->config, t->nconfig);
    steps_free(t->postconfig, t->npostconfig);
    eval_spec_free(&t->eval);
    t->config = t->postconfig = NULL;
    t->nconfig = t->npostconfig = 0;
    pctx c = {.t = t, .warn = false};
    int rc = parse_config_and_evaluator(&c, err);
    problems_free(&c);
    return rc;
}

int task_substitute_screen(task *t, int w, int h, em_err *err)
{
    task_vars v = {.screen_w = w, .screen_h = h};
    return task_substitute(t, &v, err);
}

/* ---- suites ---- */

typedef struct strvec {
    char **v;
    size_t n;
} strvec;

static int sv_push(strvec *s, char *p, em_err *err)
{
    if (s->n >= TASK_LIST_MAX) {
        free(p);
        return em_fail_input(err, "task list: more than %d task files", TASK_LIST_MAX);
    }
    s->v = xrealloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n++] = p;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_task_file_name(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' && l > 5 && !strcmp(n + l - 5, ".json") && strcmp(n, "index.json") && strcmp(n, "test_all.json");
}

static int scan_dir(const char *dir, int depth, strvec *out, em_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return em_fail_errno(err, "task list: open `%s`", dir);
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *full = xasprintf("%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(full, &st) < 0) {
            free(full); /* a dangling link is not a task */
            continue;
        }
        if (S_ISREG(st.st_mode) && is_task_file_name(de->d_name)) {
            rc = sv_push(out, full, err);
            continue;
        }
        if (S_ISDIR(st.st_mode) && depth == 0)
            rc = scan_dir(full, 1, out, err);
        free(full);
    }
    closedir(d);
    return rc;
}

static bool regular_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int load_index(const char *index, strvec *out, em_err *err)
{
    _cleanup_free_ char *text = NULL, *copy = xstrdup(index);
    size_t len;
    if (read_file_capped(index, TASK_FILE_MAX, &text, &len, err) < 0)
        return em_prefix(err, "task list: ");
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return em_fail_input(err, "%s: invalid JSON at line %d, column %d: %s", index, je.line, je.column, je.text);
    const char *dir = dirname(copy);
    int rc = 0;
    if (!json_is_object(root))
        rc = em_fail_input(err, "%s: expected an object {\"domain\": [\"task id\", ...]}, got %s", index,
                           json_type_name(root));
    const char *domain;
    json_t *ids;
    json_object_foreach(root, domain, ids)
    {
        if (rc < 0)
            break;
        if (!valid_id(domain)) {
            rc = em_fail_input(err, "%s: domain `%.64s` must be 1 to %d characters of A-Z a-z 0-9 . _ -", index,
                               domain, TASK_ID_MAX);
            break;
        }
        if (!json_is_array(ids) || json_array_size(ids) > TASK_ARRAY_MAX) {
            rc = em_fail_input(err, "%s: %s: expected an array of at most %d task ids", index, domain, TASK_ARRAY_MAX);
            break;
        }
        size_t i;
        json_t *idj;
        json_array_foreach(ids, i, idj)
        {
            const char *id = json_string_value(idj);
            if (!id || !valid_id(id)) {
                rc = em_fail_input(err, "%s: %s[%zu]: expected a task id (A-Z a-z 0-9 . _ -)", index, domain, i);
                break;
            }
            char *cands[3] = {xasprintf("%s/%s/%s.json", dir, domain, id),
                              xasprintf("%s/examples/%s/%s.json", dir, domain, id), xasprintf("%s/%s.json", dir, id)};
            int found = -1;
            for (int k = 0; k < 3 && found < 0; k++)
                if (regular_file(cands[k]))
                    found = k;
            if (found < 0)
                rc = em_fail_input(err, "%s: %s[%zu]: no task file for `%s` (looked for %s, %s and %s)", index, domain,
                                   i, id, cands[0], cands[1], cands[2]);
            else
                rc = sv_push(out, xstrdup(cands[found]), err);
            for (int k = 0; k < 3; k++)
                free(cands[k]);
            if (rc < 0)
                break;
        }
    }
    json_decref(root);
    return rc;
}

int task_list_dir(const char *dir_or_index, char ***paths, size_t *n, em_err *err)
{
    *paths = NULL;
    *n = 0;
    struct stat st;
    if (stat(dir_or_index, &st) < 0)
        return em_fail_errno(err, "task list: `%s`", dir_or_index);
    strvec sv = {0};
    int rc;
    if (S_ISDIR(st.st_mode)) {
        _cleanup_free_ char *dir = xstrdup(dir_or_index);
        size_t l = strlen(dir);
        while (l > 1 && dir[l - 1] == '/')
            dir[--l] = '\0';
        rc = scan_dir(dir, 0, &sv, err);
        if (rc == 0 && sv.n)
            qsort(sv.v, sv.n, sizeof *sv.v, cmp_str);
    } else {
        rc = load_index(dir_or_index, &sv, err);
    }
    if (rc < 0) {
        task_paths_free(sv.v, sv.n);
        return -1;
    }
    *paths = sv.v;
    *n = sv.n;
    return 0;
}

void task_paths_free(char **paths, size_t n)
{
    strv_free(paths, n);
}

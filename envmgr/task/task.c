/* Task file parsing: the document. It is kept as JSON (getter specs and options travel to
 * getters and metrics as JSON); what a run depends on is checked here and in the other task_*.c
 * files and exposed as C fields. Every error names the JSON path (base/json_field). */
#include "envmgr/task/task.h"

#include <ctype.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "envmgr/action/actions.h"
#include "envmgr/action/pyautogui.h"
#include "envmgr/base/warn.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/json_field.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/task/task_int.h"
#include "evaluator/spec.h"

/* rc < 0: record err's message as a problem; always 0, so the caller goes on. */
int task_keep(pctx *c, int rc, em_err *err)
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

/* A warning for the task (collected when c->warn). */
__attribute__((format(printf, 2, 3))) static void task_warn(pctx *c, const char *fmt, ...)
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
int task_get_boolish(json_t *obj, const char *base, const char *key, bool dflt, bool *out, em_err *err)
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

void task_strv_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static int warn_one(const char *path, void *c)
{
    task_warn(c, "unknown field `%s` ignored", path);
    return 0;
}

/* Warn about keys not in `known` (space separated, with spaces around). */
void task_warn_unknown(pctx *c, json_t *obj, const char *base, const char *known)
{
    jfield_each_unknown(obj, base, known, warn_one, c);
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

/* ---- evaluator: the evaluator's own part (evaluator/spec.h), then the postconfig steps ---- */

static void keep_problem(void *ctx, em_err *err) { task_keep(ctx, -1, err); }

static int parse_evaluator(pctx *c, json_t *root, em_err *err)
{
    task *t = c->t;
    json_t *ev = json_object_get(root, "evaluator");
    if (json_is_object(ev))
        task_warn_unknown(c, ev, "evaluator", " func result expected options conj postconfig ");
    if (eval_spec_parse(ev, &t->eval, keep_problem, c, err) < 0)
        return -1;
    return task_parse_steps(c, json_object_get(ev, "postconfig"), "evaluator.postconfig", &t->postconfig, &t->npostconfig,
                       err);
}

/* ---- solution ---- */

static int parse_solution(task *t, json_t *root, em_err *err)
{
    json_t *sol;
    if (jfield_array(root, "", "solution", "an array of actions", &sol, err) < 0)
        return -1;
    if (!sol)
        return 0;
    t->solution = json_array();
    size_t i;
    json_t *a;
    json_array_foreach(sol, i, a)
    {
        char p[JFIELD_PATH_MAX];
        if (jfield_item(sol, "solution", i, JSON_OBJECT, "an action object", p, err) < 0)
            return -1;
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

bool task_valid_id(const char *s)
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
int task_parse_config_and_evaluator(pctx *c, em_err *err)
{
    task *t = c->t;
    size_t before = c->nproblems;
    task_keep(c, task_parse_steps(c, json_object_get(t->json, "config"), "config", &t->config, &t->nconfig, err), err);
    task_keep(c, parse_evaluator(c, t->json, err), err);
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
    if (!task_valid_id(s))
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
    task_strv_free(items, n);
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

    task_warn_unknown(c, root, "", TOP_LEVEL_KNOWN);
    task_keep(c, parse_id(t, root, err), err);
    if (!task_keep(c, jfield_nonempty_str(root, "", "instruction", true, &s, err), err) && s)
        t->instruction = xstrdup(s);
    task_keep(c, jfield_str(root, "", "snapshot", false, &s, err), err);
    task_keep(c, parse_source(t, root, err), err);
    task_keep(c, jfield_str_array(root, "", "related_apps", &t->related_apps, &t->nrelated_apps, err), err);
    task_keep(c, parse_image(t, root, err), err);
    task_keep(c, task_get_boolish(root, "", "proxy", false, &t->osworld_proxy, err), err);
    task_keep(c, task_get_boolish(root, "", "fixed_ip", false, &t->fixed_ip, err), err);
    task_keep(c, task_get_boolish(root, "", "pause_while_thinking", true, &t->pause_while_thinking, err), err);
    task_keep(c, task_get_boolish(root, "", "setup_cache", true, &t->setup_cache, err), err);
    task_keep(c, task_parse_network(t, root, err), err);
    task_keep(c, task_parse_limits(t, root, err), err);
    task_parse_config_and_evaluator(c, err);
    task_keep(c, parse_solution(t, root, err), err);
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

void task_problems_free(pctx *c)
{
    task_strv_free(c->problems, c->nproblems);
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
    sha256_hex(json_text, len, t->sha256);
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
    task_problems_free(&c);
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
    task_strv_free(r->problems, r->nproblems);
    task_strv_free(r->warnings, r->nwarnings);
    task_strv_free(r->urls, r->nurls);
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
        em_warn("task %s: %s", path, (*out)->warnings[i]);
    return 0;
}

void cleanup_taskp(task **t)
{
    task_free(*t);
}

void task_free(task *t)
{
    if (!t)
        return;
    json_decref(t->json);
    json_decref(t->pristine);
    json_decref(t->solution);
    free(t->dir);
    free(t->id);
    free(t->instruction);
    free(t->source);
    free(t->image);
    task_strv_free(t->related_apps, t->nrelated_apps);
    task_steps_free(t->config, t->nconfig);
    task_steps_free(t->postconfig, t->npostconfig);
    eval_spec_free(&t->eval);
    task_strv_free(t->warnings, t->nwarnings);
    free(t);
}


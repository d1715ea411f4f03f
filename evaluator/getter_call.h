/* What the getter files share (evaluator/getters*.c only): one getter run's context, the
 * table entry every getter file exports, and the helpers that reach the guest with caps.
 * Not part of the evaluator's public interface (that is getters.h). */
#ifndef ENVMGR_GETTER_CALL_H
#define ENVMGR_GETTER_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "evaluator/env_ops.h"

/* What one getter run sees. */
typedef struct getter_call {
    const em_env_ops *ops;
    const char *artifact_dir; /* also the episode's cache (OSWorld's cache_dir) */
    const char *task_dir;
} getter_call;

typedef int (*getter_fn)(const getter_call *gc, json_t *spec, json_t **art, em_err *err);

/* One getter: its load-time check, its run, and the line of docs/osworld.md's table. writes:
 * it writes into the artifact folder (which must then exist). */
typedef struct getter_def {
    const char *name;
    int (*check)(json_t *spec, em_err *err);
    getter_fn run;
    bool writes;
    const char *note;
} getter_def;

/* The apps' getters (getters_apps.c), the browser's (getters_chrome.c), rule_relativeTime
 * (getters_time.c), those that read a guest document in the evaluator sandbox (getters_docs.c) and
 * those that load a URL in the guest's browser (getters_web.c). */
const getter_def *getter_app_defs(size_t *n);
const getter_def *getter_chrome_defs(size_t *n);
const getter_def *getter_time_defs(size_t *n);
const getter_def *getter_doc_defs(size_t *n);
const getter_def *getter_web_defs(size_t *n);

/* A string field: missing is an error only when required; present, it must be a non-empty string. */
int getter_check_string(json_t *spec, const char *key, bool required, em_err *err);
int getter_check_nothing(json_t *spec, em_err *err);
/* true, or the string "true" (some OSWorld files spell flags so) */
bool getter_flag_true(json_t *v);
/* An optional flag: missing, a boolean, or the string "true" / "false". */
int getter_check_flag(json_t *spec, const char *key, em_err *err);

/* Run argv in the guest (ops->exec) with at most cap bytes of stdout; type names the getter in
 * errors. A missing env is an error naming the getter. */
int getter_exec(const em_env_ops *ops, const char *type, const char *const *argv, unsigned flags, double timeout,
                size_t cap, char **out, size_t *len, int *code, em_err *err);

/* A guest file (`~` is the user's home) copied into the artifact folder under dest (sanitized;
 * NULL: the basename). missing_ok: a file the guest lacks gives *art NULL and 0. */
int getter_fetch_vm_file(const getter_call *gc, const char *path, const char *dest, bool missing_ok, json_t **art,
                         em_err *err);

/* Bytes written into the artifact folder under dest (sanitized), as a file artifact. */
int getter_save_bytes(const getter_call *gc, const char *type, const char *dest, const char *data, size_t len,
                      json_t **art, em_err *err);

/* The guest toolbelt's cap on one answer (`envmgr-guest --max-bytes`) and on what the exec brings
 * back: at least the accessibility tree's own cap (8 MiB), with room for its JSON escaping. */
#define TOOLBELT_ANSWER_CAP (16u << 20)
#define TOOLBELT_TIMEOUT_S 90.0

/* Run `envmgr-guest SUB ARGS...` (args: SUB first, NULL-terminated) as the desktop user and parse
 * its one JSON object into *answer. Returns 0, -1, or TOOLBELT_REPORTED (getter_parse.h) when the
 * toolbelt ran and reported an error of the app's state; every error names type. */
int toolbelt_run(const getter_call *gc, const char *type, const char *const *args, json_t **answer, em_err *err);
/* The same with another time limit (the page getters wait for the web). */
int toolbelt_run_for(const getter_call *gc, const char *type, const char *const *args, double timeout_s,
                     json_t **answer, em_err *err);

/* A getter OSWorld's server answers itself (gc->ops->server, guest interface osworld): GET path when
 * body is NULL, else POST body; its reply's body (*data, caller frees) when it answered 200, else
 * one line naming type, path, the status and what it said. */
int getter_server_get(const getter_call *gc, const char *type, const char *path, json_t *body, char **data,
                      size_t *len, em_err *err);

/* A string member of a toolbelt answer as a text artifact; a missing one is an error naming type. */
int toolbelt_text(const char *type, json_t *answer, const char *key, json_t **art, em_err *err);

/* Artifacts of a value: {"type": "text", "value": s} and {"type": "json", "value": v (stolen)}. */
json_t *getter_text_artifact(const char *s);
json_t *getter_json_artifact(json_t *v);

#endif

/* Getters: the evaluator's "result" and "expected" specs, turned into
 * artifacts a metric can compare. An artifact is a JSON object:
 *
 *   {"type": "file", "path": "<host path>", "sha256": "<hex>", "size": N, ...}
 *   {"type": "text", "value": "..."}                (+ "exit_code" for commands)
 *   {"type": "json", "value": <any JSON>}
 *
 * Spec types (OSWorld names where OSWorld has them):
 *   vm_file {path, dest?}            guest file → <artifact_dir>/<sanitized dest or basename>
 *   vm_command_line {command, shell?, timeout?}   stdout as text
 *   rule {rules}                     the rules value, as json
 *   cache_file / local_file {path}   a file shipped in the task folder
 *   screenshot {region?: [x,y,w,h]}  the screen as PNG; the region is recorded, not cropped
 *   list_directory {path}            names in a guest directory, sorted, as json
 *   vm_window_title                  the active window's title, as text
 *   egress_log                       the episode's egress attempts (artifacts/.egress.jsonl), verdict filter
 * Guest data is size-capped and every name written into artifact_dir is
 * sanitized, so a guest cannot write outside it. */
#ifndef ENVMGR_GETTERS_H
#define ENVMGR_GETTERS_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"
#include "evaluator/env_ops.h"

#define GETTER_FILE_CAP (16u << 20)   /* bytes of a guest file */
#define GETTER_OUTPUT_CAP (1u << 20)  /* bytes of command output */
#define GETTER_STDERR_CAP 2048u       /* bytes of a command getter's stderr kept in its artifact */
#define GETTER_TIMEOUT_S 60.0         /* default guest command timeout */
#define GETTER_TIMEOUT_MAX_S 600.0

/* Static check of a spec at task load. Messages start with the field,
 * relative to the spec ("type: unknown getter `x`", "path: missing"), so
 * the caller can prefix the JSON path of the spec. */
int getter_check(json_t *spec, em_err *err);

/* Run a spec and return a new artifact (*artifact, caller decrefs).
 * ops may be NULL when only host-side getters (rule, cache_file,
 * local_file) are used. task_dir: the task's folder, or NULL.
 * Messages start with the getter type ("vm_file `/tmp/x`: ..."). */
int getter_run(const em_env_ops *ops, json_t *spec, const char *artifact_dir, const char *task_dir,
               json_t **artifact, em_err *err);

/* What a getter spec needs of the guest: nothing (the env's frames and screen size or the host alone:
 * rule, time_diff_range, cache_file, local_file, cloud_file, egress_log), a guest agent's commands and
 * files (vm_file, vm_command_line, vm_command_error, list_directory, list_directory_names: any guest
 * agent runs them), or envmgr's own image: its toolbelt and desktop session (every other getter). The
 * plan refuses a task on an image whose guest interface lacks what one of its getters needs. */
typedef enum { GETTER_OFF_GUEST, GETTER_GUEST_AGENT, GETTER_GUEST_TOOLBELT } getter_need;
getter_need getter_guest_need(const json_t *spec);
/* A getter OSWorld's server answers itself (accessibility_tree: /accessibility, vm_wallpaper:
 * /wallpaper, vm_window_size: /window_size), so it runs on guest interface osworld though it needs the toolbelt elsewhere. */
bool getter_osworld_native(const json_t *spec);
/* getter_guest_need(spec) != GETTER_OFF_GUEST */
bool getter_needs_guest(const json_t *spec);

/* A JSON string of untrusted bytes: NUL bytes and invalid UTF-8 become
 * U+FFFD, so guest output never makes an artifact fail to build. */
json_t *getter_text_json(const char *s, size_t n);

/* A guest path as OSWorld's server reads it: a leading `~` is the desktop user's home. */
char *getter_guest_path(const char *p);

/* The getters envmgr runs and OSWorld's it refuses, with why: `envmgr task pieces` and the
 * generated table of docs/osworld.md. */
typedef struct getter_piece {
    const char *name;
    const char *status; /* "supported", or why not */
    const char *note;
} getter_piece;
const getter_piece *getter_pieces(size_t *n);

/* A guest-chosen name made safe as one path component: only [A-Za-z0-9._-],
 * no leading dots, at most 100 bytes, never empty. Caller frees. */
char *getter_safe_name(const char *name);

#endif

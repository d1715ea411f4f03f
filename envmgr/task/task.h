/* Task files: OSWorld-compatible JSON (id, instruction, config, evaluator)
 * plus envmgr's own fields (image, network, limits, solution). Parsing
 * checks everything a run will rely on, so a bad task fails at load time
 * with the JSON path of the problem ("config[2].parameters.command:
 * missing"), never half-way through an episode. docs/task-format.md is the
 * user-facing description of the format. */
#ifndef ENVMGR_TASK_H
#define ENVMGR_TASK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/net/netpolicy.h"
#include "evaluator/spec.h"

#define TASK_FILE_MAX (1u << 20)       /* bytes of a task file (or index) */
#define TASK_STRING_MAX (64u * 1024)   /* bytes of any string in it */
#define TASK_ARRAY_MAX 1000            /* items of any array in it */
#define TASK_ID_MAX 128
#define TASK_LIST_MAX 100000           /* task files task_list_dir returns */

typedef enum {
    STEP_EXECUTE,         /* run a command and wait (OSWorld "execute") */
    STEP_COMMAND,         /* the same, OSWorld's older name */
    STEP_LAUNCH,          /* start a command in the background */
    STEP_OPEN,            /* open a guest file with its default application */
    STEP_UPLOAD_FILE,     /* copy files shipped with the task into the guest */
    STEP_DOWNLOAD,        /* the same, named by URL (file:// or a task-relative path) */
    STEP_SLEEP,
    STEP_ACTIVATE_WINDOW,
    STEP_CLOSE_WINDOW,
    STEP_WAIT_SCREEN,     /* envmgr's own: wait until the screen is stable / matches a reference */
    STEP_EXECUTE_WITH_VERIFICATION, /* run, then wait until a check passes (else setup_error) */
    STEP_CHROME_OPEN_TABS,  /* open URLs in the guest's browser */
    STEP_CHROME_CLOSE_TABS, /* close the browser's tabs showing these URLs */
    STEP_CHANGE_WALLPAPER,  /* set the desktop background to a guest file */
    STEP_TIDY_DESKTOP,      /* show the bare desktop (every window minimized) */
    STEP_UPDATE_BROWSE_HISTORY, /* add visits to the browser's history */
    STEP_PROXY,             /* OSWorld's proxy: answered by the task's network policy */
    STEP_ACT,               /* computer_13 / pyautogui actions as setup */
} task_step_type;

typedef struct task_file {
    char *host_path;  /* absolute host path inside the task folder (not yet checked to exist); NULL for a URL */
    char *url;        /* an http(s) URL fetched on the host into the asset cache (net/assets.h); else NULL */
    char *guest_path; /* where it goes in the guest, as written */
} task_file;

/* One setup (config) or postconfig step, validated. Which fields are
 * meaningful depends on the type; the rest are zero. */
typedef struct task_step {
    task_step_type type;
    json_t *params;      /* the "parameters" object as written (borrowed from task.json) */
    /* execute, command, launch: the argv to run in the guest (NULL-terminated).
     * A string command runs as {"/bin/sh", "-c", cmd}; an array with shell=true
     * as {"/bin/sh", "-c", a0, a1, ...} (Python's subprocess semantics). */
    char **argv;
    size_t argc;
    bool shell;          /* as written */
    double timeout_s;    /* execute, command: default 120; wait_screen: default 30 */
    char *path;          /* open */
    task_file *files;    /* upload_file, download */
    size_t nfiles;
    double seconds;      /* sleep */
    char *window_name;   /* activate_window, close_window */
    bool strict, by_class;
    /* wait_screen */
    int stable_ms;       /* default 1000 */
    char *reference;     /* absolute host path of a PNG inside the task folder, or NULL */
    bool has_region;
    int region[4];       /* x, y, w, h */
    double tolerance;    /* fraction of pixels allowed to differ from the reference, default 0.01 */
    /* execute, command (OSWorld): output saved under the episode's cache for cache_file; retry
     * until the result matches (json {returncode, stdout, stderr}); envmgr's `check`: a non-zero
     * exit fails the episode as setup_error instead of being tolerated. */
    char *stdout_name, *stderr_name;
    json_t *until;       /* borrowed from the document */
    bool check;
    /* execute_with_verification: {window_exists, command_success}, max_wait_time, check_interval */
    json_t *verification; /* borrowed */
    double check_interval_s;
    /* chrome_open_tabs, chrome_close_tabs */
    char **urls;
    size_t nurls;
    /* act: validated computer_13 actions (pyautogui entries expanded) */
    json_t *actions;     /* owned */
    /* update_browse_history: [{url, title, visit_time_from_now_in_seconds}] */
    json_t *history;     /* borrowed */
} task_step;

typedef struct task {
    json_t *json;        /* the whole document (after task_substitute, the substituted one) */
    json_t *pristine;    /* the document as read, kept by the first task_substitute (NULL before) */
    char sha256[65];     /* of the bytes parsed: a task file's hash comes from the same read */
    char *dir;           /* the task's folder: absolute when it exists */
    char *id, *instruction;
    char *source;        /* NULL when absent */
    char *image;         /* default "desktop" */
    bool image_named;    /* the task file names its image (OSWorld's files never do) */
    char **related_apps;
    size_t nrelated_apps;
    task_step *config;
    size_t nconfig;
    eval_spec eval;      /* the evaluator section's metrics, conj, infeasible (evaluator/spec.h) */
    task_step *postconfig;
    size_t npostconfig;
    netpolicy net;       /* network section: mode none or allowlist, rules in the net layer's grammar, and the
                          * limits it asks for (0: the env's maxima; netpolicy_for_task) */
#define TASK_SETTLE_MAX_S 20.0 /* under TCG an application's first window can take 15 s and more */
    int max_steps;              /* default 15 */
    double step_timeout_s;      /* default 60 */
    double episode_timeout_s;   /* default 600 */
    double settle_max_s;        /* the longest wait for the screen after an action; default below */
    json_t *solution;    /* computer_13 actions with pyautogui entries expanded; NULL when absent */
    bool osworld_proxy;  /* OSWorld's "proxy": true: the task needs the web (answered by `network`) */
    bool pause_while_thinking; /* the guest stands still between an observation and the next action */
    bool setup_cache;    /* false: every episode runs the setup (docs/states.md, "The setup cache") */
    bool fixed_ip;       /* OSWorld's "fixed_ip": informational (envmgr guests have one address) */
    /* Warnings (unknown fields), without the "task <path>: " prefix. */
    char **warnings;
    size_t nwarnings;
} task;

/* Read and parse a task file; the task folder is the file's directory.
 * Warnings also go to the warning hook (base/warn) as "task <path>: <warning>". */
int task_load(const char *path, task **out, em_err *err);
/* Parse a task from memory; base_dir is the task folder (NULL: the current
 * directory). Warnings are collected in the task, not printed. */
int task_parse(const char *json_text, size_t len, const char *base_dir, task **out, em_err *err);
void task_free(task *t);
void cleanup_taskp(task **t);
#define _cleanup_task_ __attribute__((cleanup(cleanup_taskp)))

/* A file the task ships (an upload's local_path, a download's local url, a wait_screen reference):
 * p relative to the task folder dir (or absolute inside it), no `..` component, and once the file
 * is there its real path (symlinks resolved) inside the folder's real path, else "`p` resolves
 * outside the task folder". At load (must_exist false) a file not there yet passes; setup asks
 * again with must_exist before it reads the file, so a symlink placed after loading cannot lead
 * out either. *abs (malloc'd) is the path to read. */
int task_file_path(const char *dir, const char *p, bool must_exist, char **abs, em_err *err);

/* Every problem of a task file, for `envmgr task check`: one line each ("config[2].type: ..."),
 * in document order, without the file name. */
typedef struct task_check_result {
    char *id;            /* the task's id when it is a valid one, else NULL */
    char **problems;
    size_t nproblems;
    char **warnings;
    size_t nwarnings;
    char **urls;         /* the http(s) assets it names (download urls, cloud_file paths) */
    size_t nurls;
} task_check_result;
/* 0 when the file loads (no problems), -1 otherwise; *out is filled either way. */
int task_check_file(const char *path, task_check_result *out);
void task_check_result_free(task_check_result *r);
/* The http(s) URLs a loaded task fetches on the host (download steps, cloud_file getters), in
 * order, duplicates included. Caller frees the array (not the strings: they are t's). */
const char **task_asset_urls(const task *t, size_t *n);

/* What OSWorld's placeholders stand for in one env. */
typedef struct task_vars {
    int screen_w, screen_h;
    const char *client_password; /* the image user's password; NULL leaves {CLIENT_PASSWORD} as written */
} task_vars;

/* Replace OSWorld's placeholders ({SCREEN_WIDTH}, {SCREEN_HEIGHT}, {SCREEN_WIDTH_HALF},
 * {SCREEN_HEIGHT_HALF}, {CLIENT_PASSWORD}) in every string of config and evaluator (and its
 * postconfig), as OSWorld does, and refresh the parsed steps and metrics. Always from the document
 * as read: a task checked against one screen can be settled again for another without reading
 * its file again (the episode plan does both). */
int task_substitute(task *t, const task_vars *v, em_err *err);
/* The same with the screen only. */
int task_substitute_screen(task *t, int w, int h, em_err *err);

/* The task files of a suite: a folder (its *.json files and those of its
 * direct subfolders, skipping index.json and test_all.json, sorted), or an
 * OSWorld index file {"domain": ["id", ...]} whose tasks are looked up as
 * <dir>/<domain>/<id>.json, <dir>/examples/<domain>/<id>.json, <dir>/<id>.json. */
int task_list_dir(const char *dir_or_index, char ***paths, size_t *n, em_err *err);
/* The task files a PATH names: a folder or an index expanded (task_list_dir), a task file as it is. */
int task_list_path(const char *path, char ***paths, size_t *n, em_err *err);
void task_paths_free(char **paths, size_t n);


const char *task_step_type_name(task_step_type type);

/* OSWorld's setup step types and what envmgr does with each: for `envmgr task pieces` and the
 * generated table in docs/osworld.md. status: "supported", or why not. */
typedef struct task_piece {
    const char *name;
    const char *status;
    const char *note;
} task_piece;
const task_piece *task_setup_pieces(size_t *n);

#endif

/* Suites: a folder of task files (or an OSWorld index {domain: [ids]})
 * run as many episodes over a pool of warm envs (suite_pool.h), recorded
 * line by line in DIR/results.jsonl (results_log.h) and summed up in
 * summary.json and junit.xml (report_summary.h).
 *
 * This file is the model: which tasks a suite holds, in which domains, how
 * --shard K/N splits them (deterministically, so a Slurm job array can run
 * one shard per node) and the episode keys (task id, repeat) that results,
 * --resume and merge agree on. docs/suites.md is the user's description. */
#ifndef ENVMGR_SUITE_H
#define ENVMGR_SUITE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

#define SUITE_META_FILE "suite.json"
#define SUITE_RESULTS_FILE "results.jsonl"
#define SUITE_SUMMARY_FILE "summary.json"
#define SUITE_JUNIT_FILE "junit.xml"
#define SUITE_TRACES_DIR "traces"
#define SUITE_LOGS_DIR "logs"
#define SUITE_FORMAT 1
#define SUITE_SHARDS_MAX 10000
#define SUITE_REPEAT_MAX 1000
/* Env names of a suite run: suite-<pid of the envmgr that owns them>-<slot>. */

typedef struct suite_task {
    char *path;    /* the task file */
    char *id;
    char *domain;  /* the index's key, else the task's folder name */
    char *image;   /* the image its env boots (default "desktop") */
    double episode_timeout_s;
    bool infeasible;    /* OSWorld's infeasible metric: FAIL is the right answer */
    char *unsupported;  /* why the task cannot run (its first load problem), NULL when it loads */
} suite_task;

typedef struct suite {
    char *source;       /* SUITE as given, made absolute */
    suite_task *tasks;  /* this shard's tasks, sorted by id */
    size_t ntasks;
    size_t total;       /* tasks in the whole suite, before sharding */
    int shard_k, shard_n; /* 1-based; 1/1 when not sharded */
} suite;

/* "K/N" with 1 <= K <= N <= SUITE_SHARDS_MAX. */
int suite_parse_shard(const char *s, int *k, int *n, em_err *err);

/* True when the i-th task (0-based) of the sorted list belongs to shard K/N:
 * round robin, so every shard gets a share of every domain. */
bool suite_in_shard(size_t i, int k, int n);

/* List, load (every task is parsed and checked now: bad input costs nothing)
 * and shard a suite. Duplicate task ids are an input error. A task that does
 * not load is an error with strict; otherwise it stays in the suite marked
 * unsupported (its id from the file, else the file name), so a run records
 * it as such and runs the rest. */
struct plan_image_choice;
/* image: the operator's --image choice (NULL: none), applied to each task by plan_image; a task the
 * chosen image cannot run (related_apps it lacks) is unsupported with the reason, or, with strict,
 * an error. */
int suite_load(const char *source, int shard_k, int shard_n, bool strict, const struct plan_image_choice *image,
               suite **out, em_err *err);
/* How many tasks of s are unsupported. */
size_t suite_unsupported(const suite *s);
void suite_free(suite *s);

/* The episode key results.jsonl, --resume and merge agree on: "<id>" for
 * repeat 0, "<id>#<repeat>" otherwise. Caller frees. */
char *suite_episode_key(const char *task_id, int repeat);

/* Trace (episode output) directory of an episode, relative to the run's DIR:
 * traces/<id> (one repeat) or traces/<id>/rep-<r>. Caller frees. */
char *suite_episode_dir(const char *task_id, int repeat, int repeats);

/* The suite.json object of a run of s: what --resume checks and merge joins. */
json_t *suite_meta_new(const suite *s, const char *agent, int repeat);

#endif

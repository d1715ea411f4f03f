/* envmgr suite audit: a suite's tasks with agents that do nothing (DONE, and FAIL for infeasible
 * tasks) and, with --solutions, their reference solutions; what a benchmark maintainer must look at
 * (pre-satisfied, broken infeasible, crashing, flagged tasks) as a table and DIR/audit.json. Each
 * pass is an ordinary suite run into DIR/<pass>/, so its traces and summary stay for a closer look. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/plan.h"
#include "envmgr/suite/report_audit.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/suite/suite.h"
#include "envmgr/suite/suite_pool.h"
#include "envmgr/task/task.h"

static const char usage[] =
    "usage: envmgr suite audit SUITE --out DIR [--image NAME [--force-image]] [--solutions DIR] [--envs N]\n"
    "                          [--accel auto|kvm|tcg] [--resume] [--progress auto|line|plain] [--offline]\n"
    "                          [--asset-mirror PREFIX=DIR|URL]...\n"
    "  Run every task of SUITE with an agent that answers DONE at once (DIR/done/), the infeasible ones\n"
    "  also with one that answers FAIL (DIR/fail/), and with --solutions the scripted agent playing the\n"
    "  `solution` of each task found in DIR (DIR/solutions/). Prints one line per finding and writes\n"
    "  DIR/audit.json. Findings: pre_satisfied (a feasible task scores above 0 with nothing done),\n"
    "  infeasible_passes_done, infeasible_fails_fail, crashed (env_error, setup_error), evaluator_error,\n"
    "  flagged (a setup step or getter failed for the image's or the task's reasons, even when the score\n"
    "  hides it), solution_below_1, missing. Exit 0 when nothing is found, 1 when something is.\n"
    "  --solutions DIR   tasks with a `solution` (the scripted agent's --tasks: a task file or folder)\n"
    CLI_IMAGE_USAGE
    CLI_ASSET_USAGE;

/* One pass: an ordinary suite run into dir, then its final results (NULL and err on failure). A run
 * that ended with crashed episodes is no failure here: the crashes are findings. */
static json_t *run_pass(const suite *s, pool_opts o, const char *agent, const char *dir, em_err *err)
{
    o.agent = agent;
    o.out_dir = dir;
    json_t *summary = NULL;
    if (suite_run(s, &o, &summary, err) < 0) {
        if (!summary || err->code == SUITE_EXIT_INTERRUPTED) {
            json_decref(summary);
            return NULL;
        }
        fprintf(stderr, "envmgr: suite audit: %s\n", err->msg);
        em_err_clear(err);
    }
    json_decref(summary);
    _cleanup_free_ char *path = xasprintf("%s/" SUITE_RESULTS_FILE, dir);
    json_t *lines = NULL;
    size_t skipped;
    if (results_read(path, &lines, &skipped, err) < 0)
        return NULL;
    json_t *final = results_final(lines);
    json_decref(lines);
    return final;
}

/* The tasks of s that keep() takes (never the unsupported), sharing its strings (free only the array). */
static suite subset(const suite *s, bool (*keep)(const suite_task *t, json_t *ctx), json_t *ctx)
{
    suite sub = *s;
    sub.tasks = xcalloc(s->ntasks ? s->ntasks : 1, sizeof *sub.tasks);
    sub.ntasks = 0;
    for (size_t i = 0; i < s->ntasks; i++)
        if (!s->tasks[i].unsupported && keep(&s->tasks[i], ctx))
            sub.tasks[sub.ntasks++] = s->tasks[i];
    return sub;
}

static bool infeasible(const suite_task *t, json_t *ctx)
{
    (void)ctx;
    return t->infeasible;
}

static bool solved(const suite_task *t, json_t *ids)
{
    return json_object_get(ids, t->id) != NULL;
}

/* The ids of the tasks in `solutions` (a task file, a folder or an index, as the scripted agent's
 * --tasks reads it) that have a `solution`: the only ones the solutions pass runs. */
static int solved_ids(const char *solutions, json_t **ids, em_err *err)
{
    char **paths = NULL;
    size_t n = 0;
    if (task_list_path(solutions, &paths, &n, err) < 0)
        return em_prefix(err, "--solutions: ");
    *ids = json_object();
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        task *t = NULL;
        if (task_load(paths[i], &t, err) < 0)
            rc = em_prefix(err, "--solutions: ");
        else if (t->solution)
            json_object_set_new(*ids, t->id, json_true());
        task_free(t);
    }
    task_paths_free(paths, n);
    if (rc < 0) {
        json_decref(*ids);
        *ids = NULL;
    }
    return rc;
}

int cmd_suite_audit(int argc, char **argv)
{
    cli_episode ep; /* audit takes the image and the assets; its agents are its own */
    cli_episode_init(&ep);
    pool_opts o = POOL_OPTS_DEFAULTS;
    const char *out = NULL, *solutions = NULL;
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},
                                         {"solutions", required_argument, 0, 'L'},
                                         CLI_EPISODE_ASSET_OPTIONS,
                                         CLI_IMAGE_OPTIONS,
                                         CLI_POOL_OPTIONS,
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:n:", opts, NULL)) != -1) {
        int prc;
        if (cli_pool_option(usage, c, optarg, &o, &prc) || cli_episode_option(usage, c, optarg, &ep, &prc)) {
            if (prc)
                return prc;
            continue;
        }
        switch (c) {
        case 'o': out = optarg; break;
        case 'L': solutions = optarg; break;
        default: return cli_usage_error(usage, "suite audit: bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(usage, "suite audit: expected one SUITE (a folder of tasks or an index JSON)");
    if (!out)
        return cli_usage_error(usage, "--out: missing (the audit's directory)");
    if (cli_image_check(usage, &ep.image))
        return EM_EXIT_USAGE;
    em_err err = {0};
    suite *s = NULL;
    if (suite_load(argv[optind], 1, 1, false, &ep.image, &s, &err) < 0)
        return cli_report(&err);
    const char *data = paths_data_dir();
    _cleanup_free_ char *done_agent = xasprintf("'%s/tasks/agents/null'", data),
                        *fail_agent = xasprintf("'%s/tasks/agents/null' --fail", data),
                        *sol_agent = solutions ? xasprintf("'%s/tasks/agents/scripted' --tasks '%s'", data, solutions) : NULL,
                        *done_dir = xasprintf("%s/done", out), *fail_dir = xasprintf("%s/fail", out),
                        *sol_dir = xasprintf("%s/solutions", out), *report = xasprintf("%s/audit.json", out);
    json_t *ids = NULL;
    if (solutions && solved_ids(solutions, &ids, &err) < 0) {
        suite_free(s);
        return cli_report(&err);
    }
    suite infeasibles = subset(s, infeasible, NULL), with_solution = subset(s, solved, ids);
    json_t *done = NULL, *fail = NULL, *sol = NULL, *audit = NULL;
    int rc = -1;
    if (mkdir_p(out, 0755, &err) == 0 && (done = run_pass(s, o, done_agent, done_dir, &err)) &&
        (fail = infeasibles.ntasks ? run_pass(&infeasibles, o, fail_agent, fail_dir, &err) : json_object()) &&
        (!solutions || (sol = with_solution.ntasks ? run_pass(&with_solution, o, sol_agent, sol_dir, &err)
                                                   : json_object()))) {
        audit = report_audit(s, done, fail, sol, ids);
        rc = json_save(report, audit, JSON_INDENT(2) | JSON_SORT_KEYS, 0644, &err);
    }
    if (rc == 0) {
        report_audit_print(stdout, audit);
        printf("audit: %s\n", report);
    }
    bool found = rc == 0 && json_integer_value(json_object_get(audit, "with_findings")) > 0;
    json_decref(done);
    json_decref(fail);
    json_decref(sol);
    json_decref(audit);
    json_decref(ids);
    free(infeasibles.tasks);
    free(with_solution.tasks);
    suite_free(s);
    if (rc < 0)
        return cli_report(&err);
    fflush(stdout);
    return found ? EM_EXIT_FAIL : 0;
}

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "envmgr/base/cleanup.h"
#include "envmgr/env/env.h"
#include "envmgr/episode/episode.h"
#include "envmgr/episode/plan.h"
#include "envmgr/base/exit_cause.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/suite/report_summary.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/suite/suite.h"
#include "envmgr/suite/suite_pool.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/task/task.h"

static const char usage[] =
    "usage: envmgr run TASK.json|SUITE_DIR --agent CMD [--env NAME] [--out DIR] [--record DIR]\n"
    "                  [--accel auto|kvm|tcg] [--settle-ms MS] [--probe-late MS] [--allow-private ADDR:PORT]...\n"
    "                  [--observation KIND] [--offline] [--asset-mirror PREFIX=DIR|URL]...\n"
    "                  [--agent-env NAME]... [--agent-sandbox on|off] [--image NAME [--force-image]] [--video]\n"
    "                  [--max-egress-bytes N] [--max-connections-per-minute N]\n"
    "  Run episodes: restore the clean snapshot, run the task's setup, let the agent act\n"
    "  (docs/agent-protocol.md), run postconfig and the evaluator, revert. Prints the score and\n"
    "  writes OUT/result.json and the trace (OUT/trace, or --record DIR). A folder runs as a suite\n"
    "  with one env (`envmgr suite run --envs 1`: OUT/results.jsonl, OUT/traces/<id>/, summary.json)\n"
    "  and prints a table. Exit status: 0 when the episode was evaluated (whatever its score); 1 when\n"
    "  it has no score (env_error, setup_error, evaluator_error: `no score` and why) or on failure;\n"
    "  2 on bad input.\n"
    "  --env NAME      use this existing env (reverted after the run; one task only); default: a temporary env\n"
    "  --out DIR       default: ./envmgr-out/<task id> (one task) or ./envmgr-out (a folder)\n"
    "  --settle-ms MS  after each action wait until the screen was still and the guest idle (vCPUs\n"
    "                  and disk) over a window of 55 ms when the guest barely worked, else MS\n"
    "                  (default 550), at most the task's limits.settle_max_s\n"
    "  --probe-late MS a measurement: after each observation let the guest run MS longer and count\n"
    "                  the observations that changed (result.json late_probe: each change names both\n"
    "                  frames in the trace and says whether the screen changed again as long after,\n"
    "                  a live screen; the agent sees the later one)\n"
    "  --observation screenshot|a11y_tree|screenshot_a11y_tree  what each observation holds (OSWorld's\n"
    "                  names; the tree needs an image with the guest toolbelt: `apps`)\n"
    "  --video         also OUT/recording.mp4: the episode as a video, from the trace (ffmpeg on the host)\n"
    "  --allow-private A:P  the temporary env may reach this loopback/private address when a task's\n"
    "                  allowlist applies, and the host may fetch task assets from it (the operator's\n"
    "                  choice; tasks cannot; repeatable)\n"
    CLI_IMAGE_USAGE
    CLI_AGENT_USAGE
    CLI_NET_LIMITS_USAGE
    "                  (--allow-private and --max-*: for the temporary env; `envmgr up` sets them for --env,\n"
    "                  ENVMGR_ASSET_ALLOW_PRIVATE=ADDR:PORT;... the assets' with --env)\n"
    CLI_ASSET_USAGE;

typedef struct run_args {
    const char *agent, *env_name, *out, *record, *accel;
    double late_probe_ms;
    cli_episode ep; /* the episode options (the operator's network rules: mode none until a task opens an
                     * allowlist) */
} run_args;

/* run DIR's table: a row per task of s from out_dir's results.jsonl, in the suite's order, then
 * what they add up to from the suite's own summary, as `suite run` counts it. */
static void print_folder_table(const suite *s, const char *out_dir, json_t *summary)
{
    _cleanup_free_ char *path = xasprintf("%s/" SUITE_RESULTS_FILE, out_dir);
    _cleanup_json_ json_t *lines = NULL, *final = NULL;
    em_err rerr = {0};
    if (results_read(path, &lines, NULL, &rerr) == 0)
        final = results_final(lines);
    printf("%-32s %6s %6s %8s  %s\n", "TASK", "SCORE", "STEPS", "SECONDS", "EXIT");
    size_t n = s->ntasks;
    for (size_t i = 0; i < n; i++) { /* the suite's order: by task id */
        _cleanup_free_ char *key = suite_episode_key(s->tasks[i].id, 0);
        json_t *line = json_object_get(final, key);
        if (!line)
            continue; /* not run (interrupted) */
        const char *cause = json_string_value(json_object_get(line, "exit_cause"));
        if (cause && exit_cause_from_name(cause) == EXIT_UNSUPPORTED) {
            printf("%-32s %6s %6s %8s  error: %s\n", s->tasks[i].id, "-", "-", "-",
                   json_string_value(json_object_get(line, "reason")));
            continue;
        }
        double score = json_number_value(json_object_get(line, "score"));
        long long steps = json_integer_value(json_object_get(line, "steps"));
        double secs = json_number_value(json_object_get(line, "duration_s"));
        if (!report_scored(line)) { /* no score: neither a 0 in the mean nor a 0 in the table */
            const char *status = json_string_value(json_object_get(line, "status"));
            printf("%-32s %6s %6lld %8.1f  %s (no score: %s)\n", s->tasks[i].id, "-", steps, secs, cause ? cause : "?",
                   status ? status : "?");
            continue;
        }
        printf("%-32s %6.2f %6lld %8.1f  %s\n", s->tasks[i].id, score, steps, secs, cause ? cause : "?");
    }
    json_t *all = json_object_get(summary, "all");
    json_int_t ran = json_integer_value(json_object_get(all, "episodes"));
    json_int_t unscored = json_integer_value(json_object_get(all, "env_errors")) +
                          json_integer_value(json_object_get(all, "evaluator_errors")) +
                          json_integer_value(json_object_get(all, "setup_errors"));
    printf("%lld of %zu tasks ran", (long long)ran, n);
    if (unscored)
        printf(" (%lld without a score)", (long long)unscored);
    printf(", mean score %.3f\n", json_number_value(json_object_get(all, "mean_score")));
    fflush(stdout);
}

/* `envmgr run DIR`: a suite with one slot (the suite runner, suite_pool.h), then its table. */
static int run_folder(const char *target, const run_args *a, em_err *err)
{
    suite *s = NULL;
    if (suite_load(target, 1, 1, false, &a->ep.image, &s, err) < 0)
        return -1;
    pool_opts o = POOL_OPTS_DEFAULTS;
    o.agent = a->agent;
    o.out_dir = a->out ? a->out : "envmgr-out";
    o.accel = a->accel;
    o.envs = 1;
    o.progress = 0;
    cli_pool_from_episode(&o, &a->ep);
    bool boxed; /* decided (and said) once, before the worker forks */
    free(episode_agent_sandbox(a->ep.ag.sandbox_off, &boxed));
    _cleanup_json_ json_t *summary = NULL;
    int rc = suite_run(s, &o, &summary, err);
    /* no summary: refused before any episode (an OUT that holds a run), so no table of someone else's;
     * a summary: the table also when the run failed (an episode without a score), since it is what
     * the run measured */
    if (summary)
        print_folder_table(s, o.out_dir, summary);
    suite_free(s);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    run_args a = {.accel = "auto"};
    cli_episode_init(&a.ep);
    em_err err = {0};
    static const struct option opts[] = {{"agent", required_argument, 0, 'a'},
                                         {"env", required_argument, 0, 'e'},
                                         {"out", required_argument, 0, 'o'},
                                         {"record", required_argument, 0, 'r'},
                                         {"accel", required_argument, 0, 'A'},
                                         {"probe-late", required_argument, 0, 'L'},
                                         CLI_EPISODE_ENV_OPTIONS,
                                         CLI_EPISODE_RECORD_OPTIONS,
                                         CLI_EPISODE_ASSET_OPTIONS,
                                         CLI_EPISODE_AGENT_OPTIONS,
                                         {0, 0, 0, 0}};
    int c, erc;
    while ((c = getopt_long(argc, argv, "a:e:o:r:", opts, NULL)) != -1) {
        if (cli_episode_option(usage, c, optarg, &a.ep, &erc)) {
            if (erc)
                return erc;
            continue;
        }
        switch (c) {
        case 'a': a.agent = optarg; break;
        case 'e': a.env_name = optarg; break;
        case 'o': a.out = optarg; break;
        case 'r': a.record = optarg; break;
        case 'A': a.accel = optarg; break;
        case 'L':
            if (parse_double(optarg, &a.late_probe_ms) < 0 || a.late_probe_ms < 0 || a.late_probe_ms > 60000)
                return cli_usage_error(usage, "--probe-late: expected 0..60000, got `%s`", optarg);
            break;
        default: return cli_usage_error(usage, "run: bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(usage, "run: expected one TASK.json or SUITE_DIR");
    if (!a.agent)
        return cli_usage_error(usage, "--agent: missing");
    if (cli_image_check(usage, &a.ep.image))
        return EM_EXIT_USAGE;
    if (a.ep.image.image && a.env_name)
        return cli_usage_error(usage, "--image: only for the temporary env (--env runs the image it was started with)");
    if (a.ep.has_net && a.env_name)
        return cli_usage_error(usage, "--allow-private, --max-*: only for the temporary env (give them to `envmgr up` "
                                      "for --env)");
    const char *target = argv[optind];
    struct stat st;
    if (stat(target, &st) < 0)
        return cli_usage_error(usage, "run: `%s` does not exist", target);
    if (S_ISDIR(st.st_mode)) {
        if (a.env_name)
            return cli_usage_error(usage, "--env: only for a single task (a folder runs as a one-slot suite in its "
                                          "own env)");
        if (a.record)
            return cli_usage_error(usage, "--record: only for a single task (a folder records into "
                                          "OUT/traces/<id>/trace)");
        if (a.late_probe_ms > 0)
            return cli_usage_error(usage, "--probe-late: only for a single task");
        return run_folder(target, &a, &err) < 0 ? cli_report(&err) : 0;
    }
    /* The task is read once; the plan checks it before any VM starts (bad input costs nothing),
     * then settles it for the env that runs it. */
    _cleanup_task_ task *t = NULL;
    if (task_load(target, &t, &err) < 0)
        return cli_report(&err);
    _cleanup_free_ char *image = NULL;
    if (!a.env_name && plan_new_env(t, &a.ep.image, &a.ep.net, &image, &err) < 0) { /* --env: plan_for_env */
        em_prefix(&err, "%s: ", target);
        return cli_report(&err);
    }
    env *e = NULL;
    bool temporary = !a.env_name;
    char temp_name[64];
    int rc;
    if (temporary) {
        snprintf(temp_name, sizeof temp_name, "run-%d", (int)getpid());
        env_up_opts uo = {.name = temp_name, .image = image, .accel = a.accel, .net = a.ep.has_net ? &a.ep.net : NULL};
        rc = env_up(&uo, &e, NULL, &err);
    } else {
        rc = env_open(a.env_name, &e, &err);
    }
    if (rc < 0)
        return cli_report(&err);
    const char *base = strrchr(target, '/') ? strrchr(target, '/') + 1 : target, *dot = strrchr(base, '.');
    _cleanup_free_ char *out = a.out ? xstrdup(a.out)
                                     : xasprintf("envmgr-out/%.*s", (int)(dot ? dot - base : (long)strlen(base)), base);
    _cleanup_json_ json_t *res = NULL;
    rc = plan_for_env(e, t, &err);
    episode_opts o = {.agent_cmd = a.agent, .out_dir = out, .trace_dir = a.record, .fresh = temporary,
                      .settle_ms = a.ep.settle_ms, .late_probe_ms = a.late_probe_ms, .observation = a.ep.observation,
                      .agent_env = a.ep.ag.env, .agent_sandbox_off = a.ep.ag.sandbox_off, .video = a.ep.video};
    if (rc == 0)
        rc = episode_run(e, t, target, &o, &res, &err);
    bool scored = rc == 0 && report_scored(res);
    if (rc == 0) {
        /* An episode that was not evaluated (env_error, setup_error, evaluator_error) has no score, not a 0 */
        _cleanup_free_ char *score = scored ? xasprintf("score %.2f", json_real_value(json_object_get(res, "score")))
                                            : xasprintf("no score (%s)", json_string_value(json_object_get(res, "status")));
        printf("%s: %s (%s, %lld steps, %.1f s) — %s\n", json_string_value(json_object_get(res, "task_id")), score,
               json_string_value(json_object_get(res, "exit_cause")),
               json_integer_value(json_object_get(res, "steps")),
               json_real_value(json_object_get(json_object_get(res, "timings"), "total_s")),
               json_string_value(json_object_get(res, "reason")));
        fflush(stdout);
    }
    em_err cerr = {0};
    if (temporary) {
        env_close(e);
        env_down(temp_name, &cerr);
    } else {
        env_timings tm; /* leave a borrowed env as clean as we found it */
        if (env_reset(e, &tm, &cerr) < 0)
            fprintf(stderr, "envmgr: revert %s: %s\n", a.env_name, cerr.msg);
        env_close(e);
    }
    if (rc < 0)
        return cli_report(&err);
    return scored ? 0 : 1;
}

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/suite/report_compare.h"
#include "envmgr/suite/report_merge.h"
#include "envmgr/suite/report_summary.h"
#include "envmgr/suite/suite.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/suite/suite_pool.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/episode.h"
#include "envmgr/episode/plan.h"

static const char usage[] =
    "usage: envmgr suite run SUITE --agent CMD --out DIR [--envs N] [--resume] [--shard K/N] [--repeat R]\n"
    "                        [--retries N] [--accel auto|kvm|tcg] [--settle-ms MS] [--watchdog S]\n"
    "                        [--watchdog-margin S] [--progress auto|line|plain] [--strict] [--offline]\n"
    "                        [--asset-mirror PREFIX=DIR|URL]... [--allow-private ADDR:PORT]... [--observation KIND]\n"
    "                        [--video] [--image NAME [--force-image]]\n"
    "                        [--agent-env NAME]... [--agent-sandbox on|off]\n"
    "                        [--max-egress-bytes N] [--max-connections-per-minute N]\n"
    "       envmgr suite compare BASE_DIR NEW_DIR [--tolerance T]\n"
    "       envmgr suite merge --out DIR SHARD_DIR...\n"
    "       envmgr suite list SUITE [--shard K/N] [--strict] [--image NAME [--force-image]]\n"
    "       envmgr suite summary DIR\n"
    "       envmgr suite export DIR --osworld OUT\n"
    "       envmgr suite audit SUITE --out DIR [--image NAME [--force-image]] [--solutions DIR] [--envs N]\n"
    "                          [--accel auto|kvm|tcg] [--resume] [--progress MODE] [--offline] [--asset-mirror P=T]...\n"
    "  run      run every task of SUITE (a folder of task files, or an index JSON {domain: [ids]}) with\n"
    "           the agent, N envs at once, each restored to its clean snapshot between tasks. Writes\n"
    "           DIR/results.jsonl (a line per finished episode, appended atomically), DIR/traces/<id>/,\n"
    "           DIR/summary.json and DIR/junit.xml, and prints a table by domain. Exit 0 when every\n"
    "           episode ran and was evaluated (whatever the scores); 1 when one still ended in env_error\n"
    "           after its retries (not scored: the pass rate leaves it out), or on failure; 130 when\n"
    "           interrupted.\n"
    "    --envs N          envs at once (default: what the host's cores and memory allow; printed)\n"
    "    --resume          skip the episodes already in DIR/results.jsonl and run the rest\n"
    "    --shard K/N       run only shard K of N (1-based) of the sorted task list: deterministic, for\n"
    "                      job arrays (docs/slurm.md)\n"
    "    --repeat R        run every task R times (default 1)\n"
    "    --retries N       retries of an episode whose env failed (QEMU died or hung, a setup or\n"
    "                      postconfig step could not be carried out; default 1)\n"
    "    --watchdog S      kill an env whose episode is still running after S s (default: the task's\n"
    "                      episode_timeout_s + --watchdog-margin, 300 s)\n"
    "    --progress MODE   auto (a progress line on a terminal), line, or plain log lines\n"
    "    --observation KIND  screenshot (default), a11y_tree or screenshot_a11y_tree (docs/agent-protocol.md)\n"
    "    --video             each episode's recording.mp4 beside its result.json, built from its trace (ffmpeg)\n"
    "    --strict          refuse the whole suite when a task does not load; without it such a task is\n"
    "                      recorded as `unsupported` with its reason and counted apart from scores\n"
    CLI_IMAGE_USAGE
    CLI_AGENT_USAGE
    CLI_ASSET_USAGE
    "    --allow-private A:P  the envs may reach this loopback/private address when a task's allowlist\n"
    "                      applies, and the host may fetch task assets from it (the operator's choice;\n"
    "                      tasks cannot; repeatable)\n"
    CLI_NET_LIMITS_USAGE
    "  compare  per-task score changes from BASE_DIR to NEW_DIR, regressions first; exit 1 when a task\n"
    "           regressed, is missing from NEW_DIR, or has no score there where BASE_DIR had one (for CI)\n"
    "  merge    join the run directories of a suite's shards into DIR (results, summary, junit; traces\n"
    "           are linked); exit 1 when a shard or an episode is missing\n"
    "  list     the task ids (and domains) a run would run, in order; unsupported ones with their reason\n"
    "  summary  print DIR's table again and rewrite its summary.json and junit.xml\n"
    "  export   OSWorld's results tree of DIR's episodes: OUT/<domain>/<id>/traj.jsonl, step_<n>_<time>.png,\n"
    "           result.txt, recording.mp4 (docs/osworld.md)\n"
    "  audit    every task with an agent answering DONE at once (DIR/done/), the infeasible ones also\n"
    "           answering FAIL (DIR/fail/), and with --solutions DIR the scripted agent playing each task's\n"
    "           `solution` (DIR/solutions/); one line per finding and DIR/audit.json: pre_satisfied (a\n"
    "           feasible task above 0 with nothing done), infeasible_passes_done, infeasible_fails_fail,\n"
    "           crashed, evaluator_error, flagged (setup or getters failed for the image's or the task's\n"
    "           reasons), solution_below_1, missing. Exit 1 when something is found\n";

static int parse_seconds(const char *arg, const char *opt, double *out)
{
    if (parse_double(arg, out) < 0 || *out <= 0 || *out > 86400 * 7)
        return cli_usage_error(usage, "%s: expected seconds (> 0), got `%s`", opt, arg);
    return 0;
}

static void print_outputs(const char *dir)
{
    printf("results: %s/" SUITE_RESULTS_FILE "\nsummary: %s/" SUITE_SUMMARY_FILE "\njunit:   %s/" SUITE_JUNIT_FILE
           "\ntraces:  %s/" SUITE_TRACES_DIR "/\n",
           dir, dir, dir, dir);
}

bool cli_pool_option(const char *use, int c, const char *arg, pool_opts *o, int *rc)
{
    long v;
    *rc = 0;
    switch (c) {
    case 'n':
        if (parse_int(arg, 1, 256, &v) < 0)
            *rc = cli_usage_error(use, "--envs: expected 1..256, got `%s`", arg);
        else
            o->envs = (int)v;
        return true;
    case 'R': o->resume = true; return true;
    case 'A':
        if (strcmp(arg, "auto") && strcmp(arg, "kvm") && strcmp(arg, "tcg"))
            *rc = cli_usage_error(use, "--accel: expected auto, kvm or tcg, got `%s`", arg);
        else
            o->accel = arg;
        return true;
    case 'p':
        if (!strcmp(arg, "auto") || !strcmp(arg, "line") || !strcmp(arg, "plain"))
            o->progress = !strcmp(arg, "auto") ? -1 : !strcmp(arg, "line");
        else
            *rc = cli_usage_error(use, "--progress: expected auto, line or plain, got `%s`", arg);
        return true;
    default: return false;
    }
}

static int cmd_suite_run(int argc, char **argv)
{
    cli_episode ep;
    cli_episode_init(&ep);
    pool_opts o = POOL_OPTS_DEFAULTS;
    int shard_k = 1, shard_n = 1;
    static const struct option opts[] = {{"agent", required_argument, 0, 'a'},
                                         {"out", required_argument, 0, 'o'},
                                         {"shard", required_argument, 0, 's'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"retries", required_argument, 0, 't'},
                                         CLI_POOL_OPTIONS,
                                         {"watchdog", required_argument, 0, 'w'},
                                         {"watchdog-margin", required_argument, 0, 'W'},
                                         {"strict", no_argument, 0, 'X'},
                                         CLI_EPISODE_ENV_OPTIONS,
                                         CLI_EPISODE_RECORD_OPTIONS,
                                         CLI_EPISODE_ASSET_OPTIONS,
                                         CLI_EPISODE_AGENT_OPTIONS,
                                         {0, 0, 0, 0}};
    int c;
    long v;
    bool strict = false;
    em_err err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "a:o:n:", opts, NULL)) != -1) {
        int prc;
        if (cli_pool_option(usage, c, optarg, &o, &prc) || cli_episode_option(usage, c, optarg, &ep, &prc)) {
            if (prc)
                return prc;
            continue;
        }
        switch (c) {
        case 'a': o.agent = optarg; break;
        case 'o': o.out_dir = optarg; break;
        case 's':
            if (suite_parse_shard(optarg, &shard_k, &shard_n, &err) < 0)
                return cli_usage_error(usage, "%s", err.msg);
            break;
        case 'r':
            if (parse_int(optarg, 1, SUITE_REPEAT_MAX, &v) < 0)
                return cli_usage_error(usage, "--repeat: expected 1..%d, got `%s`", SUITE_REPEAT_MAX, optarg);
            o.repeat = (int)v;
            break;
        case 't':
            if (parse_int(optarg, 0, 10, &v) < 0)
                return cli_usage_error(usage, "--retries: expected 0..10, got `%s`", optarg);
            o.retries = (int)v;
            break;
        case 'w':
            if (parse_seconds(optarg, "--watchdog", &o.watchdog_s))
                return EM_EXIT_USAGE;
            break;
        case 'W':
            if (parse_seconds(optarg, "--watchdog-margin", &o.watchdog_margin_s))
                return EM_EXIT_USAGE;
            break;
        case 'X': strict = true; break;
        default: return cli_usage_error(usage, "suite run: bad option");
        }
    }
    cli_pool_from_episode(&o, &ep);
    if (argc - optind != 1)
        return cli_usage_error(usage, "suite run: expected one SUITE (a folder of tasks or an index JSON)");
    if (!o.agent)
        return cli_usage_error(usage, "--agent: missing");
    if (!o.out_dir)
        return cli_usage_error(usage, "--out: missing (the run directory)");
    if (cli_image_check(usage, &ep.image))
        return EM_EXIT_USAGE;
    suite *s = NULL;
    if (suite_load(argv[optind], shard_k, shard_n, strict, &ep.image, &s, &err) < 0)
        return cli_report(&err);
    if (suite_unsupported(s))
        fprintf(stderr, "suite: %zu of %zu tasks cannot run here (recorded as unsupported; `envmgr task check` "
                        "says why)\n",
                suite_unsupported(s), s->ntasks);
    if (s->ntasks == 0) {
        fprintf(stderr, "envmgr: suite: shard %d/%d of %zu tasks is empty\n", shard_k, shard_n, s->total);
        suite_free(s);
        return EM_EXIT_USAGE;
    }
    if (shard_n > 1)
        fprintf(stderr, "suite: shard %d/%d: %zu of %zu tasks\n", shard_k, shard_n, s->ntasks, s->total);
    bool boxed; /* decided (and said) once, before the workers fork */
    free(episode_agent_sandbox(ep.ag.sandbox_off, &boxed));
    json_t *summary = NULL;
    int rc = suite_run(s, &o, &summary, &err);
    suite_free(s);
    if (summary) {
        report_print_table(stdout, summary);
        print_outputs(o.out_dir);
        json_decref(summary);
    }
    fflush(stdout);
    return rc < 0 ? cli_report(&err) : 0;
}

static int cmd_suite_compare(int argc, char **argv)
{
    double tol = 1e-9;
    static const struct option opts[] = {{"tolerance", required_argument, 0, 't'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 't' || parse_double(optarg, &tol) < 0 || tol < 0 || tol > 1)
            return cli_usage_error(usage, "suite compare: --tolerance expects 0..1");
    }
    if (argc - optind != 2)
        return cli_usage_error(usage, "suite compare: expected BASE_DIR NEW_DIR");
    em_err err = {0};
    report_cmp cmp;
    if (report_compare_dirs(argv[optind], argv[optind + 1], tol, stdout, &cmp, &err) < 0) {
        err.code = EM_EXIT_USAGE;
        return cli_report(&err);
    }
    fflush(stdout);
    return cmp.regressed || cmp.missing || cmp.now_unscored ? EM_EXIT_FAIL : 0;
}

static int cmd_suite_merge(int argc, char **argv)
{
    const char *out = NULL;
    static const struct option opts[] = {{"out", required_argument, 0, 'o'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c != 'o')
            return cli_usage_error(usage, "suite merge: bad option");
        out = optarg;
    }
    if (!out)
        return cli_usage_error(usage, "suite merge: --out DIR: missing (where the merged run goes)");
    if (argc - optind < 1)
        return cli_usage_error(usage, "suite merge: expected one or more SHARD_DIRs");
    em_err err = {0};
    json_t *summary = NULL;
    report_merge_info info;
    if (report_merge((const char *const *)argv + optind, (size_t)(argc - optind), out, &summary, &info, &err) < 0)
        return cli_report(&err);
    report_print_table(stdout, summary);
    printf("merged %d director%s", argc - optind, argc - optind == 1 ? "y" : "ies");
    if (info.shards_n)
        printf(" (shards: %zu of %d)", info.shards_found, info.shards_n);
    printf("%s\n", info.complete ? "" : "; INCOMPLETE: a shard or some episodes are missing");
    print_outputs(out);
    json_decref(summary);
    fflush(stdout);
    return info.complete ? 0 : EM_EXIT_FAIL;
}

static int cmd_suite_list(int argc, char **argv)
{
    int k = 1, n = 1;
    bool strict = false;
    plan_image_choice image = {0};
    static const struct option opts[] = {{"shard", required_argument, 0, 's'}, {"strict", no_argument, 0, 'X'},
                                         CLI_IMAGE_OPTIONS, {0, 0, 0, 0}};
    int c;
    em_err err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'X') {
            strict = true;
            continue;
        }
        if (c == CLI_OPT_IMAGE || c == CLI_OPT_FORCE_IMAGE) {
            if (cli_image_option(usage, c, optarg, &image))
                return EM_EXIT_USAGE;
            continue;
        }
        if (c != 's')
            return cli_usage_error(usage, "suite list: bad option");
        if (suite_parse_shard(optarg, &k, &n, &err) < 0)
            return cli_usage_error(usage, "%s", err.msg);
    }
    if (argc - optind != 1)
        return cli_usage_error(usage, "suite list: expected one SUITE");
    if (cli_image_check(usage, &image))
        return EM_EXIT_USAGE;
    suite *s = NULL;
    if (suite_load(argv[optind], k, n, strict, &image, &s, &err) < 0)
        return cli_report(&err);
    for (size_t i = 0; i < s->ntasks; i++)
        if (s->tasks[i].unsupported)
            printf("%s\t%s\tunsupported: %s\n", s->tasks[i].id, s->tasks[i].domain, s->tasks[i].unsupported);
        else
            printf("%s\t%s\n", s->tasks[i].id, s->tasks[i].domain);
    suite_free(s);
    return 0;
}

static int cmd_suite_summary(int argc, char **argv)
{
    if (argc != 2)
        return cli_usage_error(usage, "suite summary: expected DIR");
    em_err err = {0};
    json_t *summary = NULL;
    if (report_write_all(argv[1], NULL, &summary, &err) < 0)
        return cli_report(&err);
    report_print_table(stdout, summary);
    json_decref(summary);
    return 0;
}

int cmd_suite(int argc, char **argv)
{
    static const cli_command subs[] = {{"run", "", cmd_suite_run},         {"compare", "", cmd_suite_compare},
                                       {"merge", "", cmd_suite_merge},     {"list", "", cmd_suite_list},
                                       {"summary", "", cmd_suite_summary}, {"audit", "", cmd_suite_audit},
                                       {"export", "", cmd_suite_export}};
    return cli_dispatch(argc, argv, usage, "suite", subs, sizeof subs / sizeof *subs);
}

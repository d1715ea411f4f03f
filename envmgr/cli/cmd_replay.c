#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "envmgr/episode/plan.h"
#include "envmgr/episode/replay.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "recorder/trace.h"

static const char usage[] =
    "usage: envmgr replay TRACE_DIR [--env NAME] [--out DIR] [--tolerance P] [--until N] [--fast] [--force]\n"
    "                     [--task FILE]\n"
    "  Restore the clean snapshot of the image the trace names (the built image whose manifest it\n"
    "  recorded, else the default image), replay the task's setup and every recorded action (with the\n"
    "  recorded timing unless --fast), compare each frame after an action with the\n"
    "  recorded one (exact sha256, else at most P of the pixels may differ; default 0.002), report the\n"
    "  first divergent step with both frames and a diff image, run the task's postconfig and evaluator again\n"
    "  and compare the score (setup and postconfig steps are run, not compared: their outcome shows in it).\n"
    "  Exit 0 only when it reproduced. Refuses a trace that does not verify, and another image or a changed\n"
    "  task unless --force. --out default: envmgr-replay/<trace dir name>.\n"
    "  The task is the one the trace carries (checked against its sha256), or --task FILE; the trace never\n"
    "  chooses a file on this host. A task that reads files of its folder (local_file, cache_file, uploads)\n"
    "  needs --task FILE: the trace carries the task, not its folder.\n";

/* The built image the trace was recorded on (its header's manifest sha256), or NULL: the default
 * image, on which replay_run refuses another image's trace unless --force. The header is read
 * before replay_run verifies the trace: it can only pick one of the operator's built images. */
static char *recorded_image(const char *trace_dir)
{
    trace *t = NULL;
    em_err ignored;
    if (trace_read(trace_dir, &t, &ignored) < 0)
        return NULL;
    char *image = plan_image_with_manifest(json_string_value(json_object_get(trace_header(t), "image_manifest_sha256")));
    trace_free(t);
    return image;
}

int cmd_replay(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    replay_opts o = {.tolerance = REPLAY_TOLERANCE_DEFAULT, .until = -1};
    const char *env_name = NULL, *out = NULL, *accel = "auto";
    static const struct option opts[] = {{"env", required_argument, 0, 'e'},       {"out", required_argument, 0, 'o'},
                                         {"tolerance", required_argument, 0, 't'}, {"until", required_argument, 0, 'u'},
                                         {"fast", no_argument, 0, 'f'},            {"force", no_argument, 0, 'F'},
                                         {"accel", required_argument, 0, 'a'},     {"task", required_argument, 0, 'T'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e': env_name = optarg; break;
        case 'o': out = optarg; break;
        case 'a': accel = optarg; break;
        case 'f': o.fast = true; break;
        case 'F': o.force = true; break;
        case 'T': o.task_path = optarg; break;
        case 't':
            if (parse_double(optarg, &o.tolerance) < 0 || o.tolerance < 0 || o.tolerance > 1)
                return cli_usage_error(usage, "--tolerance: expected a fraction 0..1, got `%s`", optarg);
            break;
        case 'u':
            if (parse_int(optarg, 0, 1000000, &o.until) < 0)
                return cli_usage_error(usage, "--until: expected a step count, got `%s`", optarg);
            break;
        default: return cli_usage_error(usage, "replay: bad option");
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(usage, "replay: expected TRACE_DIR");
    o.trace_dir = argv[optind];
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return cli_usage_error(usage, "replay: cannot find the envmgr binary");
    self[n] = '\0';
    o.self_exe = self;
    char real_trace[PATH_MAX];
    if (!realpath(o.trace_dir, real_trace))
        return cli_usage_error(usage, "replay: `%s` does not exist", o.trace_dir);
    o.trace_dir = real_trace;
    _cleanup_free_ char *out_dir = NULL;
    if (!out) {
        const char *base = strrchr(real_trace, '/') ? strrchr(real_trace, '/') + 1 : real_trace;
        out_dir = xasprintf("envmgr-replay/%s", base);
    } else {
        out_dir = xstrdup(out);
    }
    o.out_dir = out_dir;
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/trace/trace.jsonl", out_dir);
    if (access(probe, F_OK) == 0)
        return cli_usage_error(usage, "--out: `%s` already holds a replay; choose another directory", out_dir);

    em_err err = {0};
    env *e = NULL;
    char temp[64];
    bool temporary = !env_name;
    int rc;
    if (temporary) {
        snprintf(temp, sizeof temp, "replay-%d", (int)getpid());
        _cleanup_free_ char *image = recorded_image(o.trace_dir);
        env_up_opts uo = {.name = temp, .image = image ? image : IMAGE_DEFAULT, .accel = accel};
        rc = env_up(&uo, &e, NULL, &err);
    } else {
        rc = env_open(env_name, &e, &err);
    }
    if (rc < 0)
        return cli_report(&err);
    json_t *report = NULL;
    rc = replay_run(e, temporary, &o, &report, &err);
    em_err cerr = {0};
    if (temporary) {
        env_close(e);
        env_down(temp, &cerr);
    } else {
        env_timings tm;
        env_reset(e, &tm, &cerr);
        env_close(e);
    }
    if (rc < 0)
        return cli_report(&err);
    int reproduced = json_is_true(json_object_get(report, "reproduced"));
    json_t *div = json_object_get(report, "first_divergence");
    printf("replay of %s: %s\n", o.trace_dir, reproduced ? "REPRODUCED" : "DIVERGED");
    printf("  steps: %lld compared, %lld matched (%lld exact), worst pixel difference %.4f\n",
           json_integer_value(json_object_get(report, "steps_compared")),
           json_integer_value(json_object_get(report, "steps_matched")),
           json_integer_value(json_object_get(report, "steps_exact")),
           json_real_value(json_object_get(report, "worst_fraction")));
    if (json_is_object(div) && json_object_get(div, "reason"))
        printf("  first divergent step %lld: %s (replay ended: %s: %s)\n", json_integer_value(json_object_get(div, "step")),
               json_string_value(json_object_get(div, "reason")),
               json_string_value(json_object_get(report, "replay_exit_cause")),
               json_string_value(json_object_get(report, "replay_reason")));
    else if (json_is_object(div))
        printf("  first divergent step %lld (%.4f of pixels differ): recorded %s, replayed %s, diff %s\n",
               json_integer_value(json_object_get(div, "step")), json_real_value(json_object_get(div, "fraction")),
               json_string_value(json_object_get(div, "recorded")), json_string_value(json_object_get(div, "replayed")),
               json_string_value(json_object_get(div, "diff")));
    json_t *rs = json_object_get(report, "recorded_score");
    char recorded[32] = "-";
    if (json_is_number(rs))
        snprintf(recorded, sizeof recorded, "%.2f", json_number_value(rs));
    printf("  score: recorded %s, replayed %.2f%s (%.1f s)\n", recorded,
           json_real_value(json_object_get(report, "replayed_score")),
           json_is_false(json_object_get(report, "score_matches")) ? " (MISMATCH)" : "",
           json_real_value(json_object_get(report, "seconds")));
    json_decref(report);
    return reproduced ? 0 : EM_EXIT_FAIL;
}

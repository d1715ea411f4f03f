/* envmgr metric run | list: one metric on host files, in the same evaluator sandbox episodes use. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "evaluator/metrics_builtin.h"

static const char usage[] =
    "usage: envmgr metric run NAME [--result FILE] [--expected FILE] [--options JSON] [--timeout SECONDS] ...\n"
    "       envmgr metric list [--json]\n"
    "  run: score one metric (a built-in C metric, an evaluator script of the registry, or `script`) on\n"
    "  host files, in the evaluator sandbox episodes use. Prints one JSON line\n"
    "  {\"metric\", \"status\": \"scored\"|\"evaluator_error\", \"score\", \"reason\"}; exits 1 on an\n"
    "  evaluator_error (the reason on stderr), 2 on bad usage.\n"
    "    --result FILE | --result-text TEXT | --result-json JSON      the result artifact (a FILE that does\n"
    "                                                                 not exist is passed as OSWorld's None)\n"
    "    --expected FILE | --expected-text TEXT | --expected-json JSON the expected artifact (a `rule`: json)\n"
    "    --options JSON     the metric's options object\n"
    "    --task-dir DIR     where `script` finds task-folder scripts\n"
    "    --timeout SECONDS  wall clock for registry metrics (default 180; `script` takes options.timeout_s)\n"
    "    --agent-exit WHY   how the episode ended, for `infeasible` (done, fail, ...)\n"
    "  list: every metric, its source (builtin or script family), whether it takes an expected value, and\n"
    "  what it does; --json prints the catalog docs/task-format.md is generated from.\n";

/* --X FILE / --X-text TEXT / --X-json JSON for side X → an artifact; 1 when argv[i] is none of them. */
static int artifact_arg(const char *side, int argc, char **argv, int *i, json_t **art)
{
    char file[32], text[32], js[32];
    snprintf(file, sizeof file, "--%s", side);
    snprintf(text, sizeof text, "--%s-text", side);
    snprintf(js, sizeof js, "--%s-json", side);
    const char *a = argv[*i];
    if (strcmp(a, file) && strcmp(a, text) && strcmp(a, js))
        return 1;
    if (*i + 1 >= argc)
        return cli_usage_error(usage, "metric run: %s needs a value", a);
    if (*art)
        return cli_usage_error(usage, "metric run: the %s is given twice", side);
    const char *v = argv[++*i];
    if (!strcmp(a, file)) {
        char *abs = realpath(v, NULL);
        *art = json_pack("{s:s,s:s}", "type", "file", "path", abs ? abs : v);
        free(abs);
    } else if (!strcmp(a, text)) {
        *art = json_pack("{s:s,s:s}", "type", "text", "value", v);
    } else {
        json_error_t je;
        json_t *j = json_loads(v, JSON_DECODE_ANY, &je);
        if (!j)
            return cli_usage_error(usage, "metric run: %s: not JSON: %s", a, je.text);
        *art = json_pack("{s:s,s:o}", "type", "json", "value", j);
    }
    return 0;
}

static int run(int argc, char **argv)
{
    if (argc < 3)
        return cli_usage_error(usage, "metric run: NAME missing");
    const char *name = argv[2];
    json_auto_t *result = NULL, *expected = NULL, *options = NULL;
    metric_ctx ctx = {0};
    for (int i = 3; i < argc; i++) {
        int r = artifact_arg("result", argc, argv, &i, &result);
        if (r == 1)
            r = artifact_arg("expected", argc, argv, &i, &expected);
        if (r == 0)
            continue;
        if (r != 1)
            return r;
        const char *a = argv[i];
        if (i + 1 >= argc)
            return cli_usage_error(usage, "metric run: unknown argument `%s`", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--options")) {
            json_error_t je;
            json_decref(options);
            options = json_loads(v, 0, &je);
            if (!json_is_object(options))
                return cli_usage_error(usage, "metric run: --options: expected a JSON object");
        } else if (!strcmp(a, "--task-dir")) {
            ctx.task_dir = v;
        } else if (!strcmp(a, "--agent-exit")) {
            ctx.agent_exit = v;
        } else if (!strcmp(a, "--timeout")) {
            if (parse_double(v, &ctx.timeout_s) < 0 || !(ctx.timeout_s > 0 && ctx.timeout_s <= 3600))
                return cli_usage_error(usage, "metric run: --timeout: expected seconds in (0, 3600], got `%s`", v);
        } else {
            return cli_usage_error(usage, "metric run: unknown argument `%s`", a);
        }
    }
    if (!metric_known(name))
        return cli_usage_error(usage, "metric run: unknown metric `%s`%s (envmgr metric list)", name,
                               metric_unknown_hint());
    em_err err = {0};
    if (metric_check_options(name, options, &err) < 0)
        return cli_usage_error(usage, "metric run: %s: options.%s", name, err.msg);
    if (!result && metric_needs_result(name))
        return cli_usage_error(usage, "metric run: %s needs a result (--result)", name);
    if (!expected && metric_needs_expected(name))
        return cli_usage_error(usage, "metric run: %s needs an expected value (--expected)", name);
    double score = 0;
    char *reason = NULL;
    int rc = metric_run(&ctx, name, result, expected, options, &score, &reason, &err);
    if (rc < 0)
        return cli_report(&err);
    bool failed = rc == METRIC_EVALUATOR_ERROR;
    json_auto_t *out = json_pack("{s:s,s:s,s:f,s:s}", "metric", name, "status", failed ? "evaluator_error" : "scored",
                                 "score", score, "reason", reason ? reason : "");
    _cleanup_free_ char *line = json_dumps(out, JSON_COMPACT);
    if (line)
        puts(line);
    if (failed)
        fprintf(stderr, "envmgr: evaluator_error: %s\n", reason ? reason : name);
    free(reason);
    return failed ? EM_EXIT_FAIL : 0;
}

static int list(int argc, char **argv)
{
    bool as_json = argc > 2 && !strcmp(argv[2], "--json");
    if (argc > 3 || (argc == 3 && !as_json))
        return cli_usage_error(usage, "metric list: unknown argument `%s`", argv[argc - 1]);
    json_auto_t *cat = metric_catalog();
    if (as_json) {
        _cleanup_free_ char *s = json_dumps(cat, JSON_INDENT(1));
        if (s)
            puts(s);
    } else {
        size_t i;
        json_t *m;
        json_array_foreach(cat, i, m)
        {
            json_t *x = json_object_get(m, "expected");
            const char *fam = json_string_value(json_object_get(m, "family"));
            printf("%-45s %-22s %-8s %s\n", json_string_value(json_object_get(m, "name")), fam ? fam : "builtin",
                   json_is_string(x) ? "optional" : json_is_true(x) ? "yes" : "no",
                   json_string_value(json_object_get(m, "summary")));
        }
    }
    const char *hint = metric_unknown_hint();
    if (*hint) {
        fprintf(stderr, "envmgr: metric list: only the built-in metrics:%s\n", hint);
        return EM_EXIT_FAIL;
    }
    return 0;
}

int cmd_metric(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc < 2)
        return cli_usage_error(usage, "metric: run or list?");
    if (!strcmp(argv[1], "run"))
        return run(argc, argv);
    if (!strcmp(argv[1], "list"))
        return list(argc, argv);
    return cli_usage_error(usage, "metric: unknown subcommand `%s` (run, list)", argv[1]);
}

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/net/assets.h"
#include "envmgr/net/netpolicy.h"
#include "evaluator/getters.h"
#include "evaluator/metrics_builtin.h"
#include "evaluator/osworld.h"
#include "envmgr/task/task.h"

static const char usage[] =
    "usage: envmgr task check PATH... [--json]\n"
    "       envmgr task fetch SUITE|TASK... [--parallel N] [--lock FILE] [--offline] [--asset-mirror P=T]...\n"
    "                         [--allow-private ADDR:PORT]...\n"
    "       envmgr task pieces [--json]\n"
    "       envmgr task get NAME SPEC [--out DIR]\n"
    "  check   load every task without a VM: PATH is a task file, a folder of tasks, or an OSWorld index\n"
    "          ({\"domain\": [\"id\", ...]}, e.g. test_all.json, with its examples folder). Prints every\n"
    "          problem of each file (`file: json.path: problem`, one line each), then how many load and\n"
    "          why the others are refused, with counts. Exit 0 only when every task loads.\n"
    "    --json          the same as one JSON object\n"
    "  fetch   fetch every http(s) asset the tasks name (download steps, cloud_file getters) into the\n"
    "          host's asset cache (ENVMGR_CACHE_DIR/assets), N at a time, resuming partial downloads,\n"
    "          and pin each in the lock file (default: assets.lock.json next to the first SUITE). A URL\n"
    "          the lock pins must still give the same bytes; a changed or vanished upstream file is an\n"
    "          error naming it. Exit 0 when every asset is cached.\n"
    "    --parallel N    transfers at once (1..16, default 4)\n"
    "    --lock FILE     the lock file to check and extend\n"
    "    --offline       only check that the cache holds them (no network)\n"
    "    --asset-mirror PREFIX=DIR|URL   fetch URLs starting with PREFIX from DIR/<rest> or URL<rest>\n"
    "    --allow-private ADDR:PORT  an asset server on a loopback, private or link-local address may be\n"
    "                    fetched from (the operator's choice; without it a URL, or a redirect, that\n"
    "                    connects to one is refused; repeatable)\n"
    "  pieces  OSWorld's setup step types, getters and metrics and what envmgr does with each (the\n"
    "          tables docs/osworld.md is generated from)\n"
    "  get     run one getter spec on a running env and print its artifact (`task get --help`)\n"
    "environment: ENVMGR_ASSET_MAX_BYTES, ENVMGR_ASSET_TIMEOUT_S, ENVMGR_ASSET_CA_FILE (a PEM bundle),\n"
    "    ENVMGR_ASSET_ALLOW_PRIVATE (ADDR:PORT;... as --allow-private)\n";

int cli_asset_option(const char *use, int offline, const char *mirror)
{
    em_err err = {0};
    if (offline)
        assets_settings()->offline = true;
    if (mirror && assets_add_mirror(mirror, &err) < 0)
        return cli_usage_error(use, "%s", err.msg);
    return 0;
}

int cli_allow_private(const char *use, const char *arg, netpolicy *net)
{
    em_err err = {0};
    if ((net && netpolicy_add_private(net, arg, &err) < 0) || assets_allow_private(arg, &err) < 0)
        return cli_usage_error(use, "--allow-private: %s", err.msg);
    return 0;
}

/* The task files of every PATH: folders and indexes expanded, task files as they are. */
static int collect(char **args, int n, char ***paths, size_t *np, em_err *err)
{
    *paths = NULL;
    *np = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(args[i], &st) < 0) {
            em_fail_errno(err, "`%s`", args[i]);
            err->code = EM_EXIT_USAGE;
            return -1;
        }
        char **v = NULL;
        size_t k = 0;
        if (task_list_path(args[i], &v, &k, err) < 0)
            return -1;
        *paths = xrealloc(*paths, (*np + k + 1) * sizeof **paths);
        memcpy(*paths + *np, v, k * sizeof *v);
        *np += k;
        free(v);
    }
    return 0;
}

/* What tasks share in a problem: "config[2].type: unknown setup step `x`" -> "unknown setup step
 * `x`", "evaluator.result[1].multi: expected ..." -> "multi: expected ..." (the field, without the
 * path that differs from task to task). Caller frees. */
static char *reason_of(const char *problem)
{
    const char *sep = strstr(problem, ": ");
    if (!sep || memchr(problem, ' ', (size_t)(sep - problem)))
        return xstrdup(problem);
    const char *last = sep;
    while (last > problem && last[-1] != '.')
        last--;
    size_t n = strcspn(last, "[:");
    if ((n == 4 && !strncmp(last, "type", 4)) || (n == 4 && !strncmp(last, "func", 4)) || last == problem)
        return xstrdup(sep + 2);
    return xasprintf("%.*s: %s", (int)n, last, sep + 2);
}

static int cmp_count(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "tasks"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "tasks"));
    if (x != y)
        return x > y ? -1 : 1;
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "reason")),
                  json_string_value(json_object_get(*(json_t *const *)b, "reason")));
}

static int cmd_task_check(int argc, char **argv)
{
    bool as_json = false;
    static const struct option opts[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 'j')
            return cli_usage_error(usage, "task check: bad option");
        as_json = true;
    }
    if (optind >= argc)
        return cli_usage_error(usage, "task check: expected one or more PATHs");
    em_err err = {0};
    char **paths;
    size_t n;
    if (collect(argv + optind, argc - optind, &paths, &n, &err) < 0)
        return cli_report(&err);
    json_t *files = json_array(), *reasons = json_object();
    size_t loaded = 0, warnings = 0;
    for (size_t i = 0; i < n; i++) {
        task_check_result r;
        int rc = task_check_file(paths[i], &r);
        loaded += rc == 0;
        warnings += r.nwarnings;
        json_t *probs = json_array(), *seen = json_object();
        for (size_t k = 0; k < r.nproblems; k++) {
            json_array_append_new(probs, json_string(r.problems[k]));
            if (!as_json)
                printf("%s: %s\n", paths[i], r.problems[k]);
            _cleanup_free_ char *why = reason_of(r.problems[k]);
            if (json_object_get(seen, why))
                continue; /* a task counts once per reason */
            json_object_set_new(seen, why, json_true());
            json_t *cnt = json_object_get(reasons, why);
            json_object_set_new(reasons, why, json_integer(cnt ? json_integer_value(cnt) + 1 : 1));
        }
        json_decref(seen);
        json_t *f = json_pack("{s:s, s:b, s:o}", "path", paths[i], "loads", rc == 0, "problems", probs);
        if (r.id)
            json_object_set_new(f, "id", json_string(r.id));
        json_array_append_new(files, f);
        task_check_result_free(&r);
    }
    task_paths_free(paths, n);
    /* reasons, most frequent first */
    size_t nr = json_object_size(reasons), k = 0;
    json_t **rows = xcalloc(nr + 1, sizeof *rows);
    const char *why;
    json_t *cnt;
    json_object_foreach(reasons, why, cnt) rows[k++] = json_pack("{s:s, s:O}", "reason", why, "tasks", cnt);
    qsort(rows, nr, sizeof *rows, cmp_count);
    json_t *by_reason = json_array();
    for (k = 0; k < nr; k++)
        json_array_append_new(by_reason, rows[k]);
    free(rows);
    json_decref(reasons);
    if (as_json) {
        json_t *out = json_pack("{s:I, s:I, s:I, s:I, s:o, s:o}", "tasks", (json_int_t)n, "loaded", (json_int_t)loaded,
                                "refused", (json_int_t)(n - loaded), "warnings", (json_int_t)warnings, "reasons",
                                by_reason, "files", files);
        json_dumpf(out, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(out);
    } else {
        printf("%zu task%s: %zu load, %zu refused\n", n, n == 1 ? "" : "s", loaded, n - loaded);
        if (json_array_size(by_reason))
            printf("refusals (a task counts once per reason):\n");
        size_t i;
        json_t *row;
        json_array_foreach(by_reason, i, row) printf("%6lld  %s\n",
                                                     (long long)json_integer_value(json_object_get(row, "tasks")),
                                                     json_string_value(json_object_get(row, "reason")));
        if (warnings)
            printf("(%zu unknown-field warning%s; `envmgr run` prints them)\n", warnings, warnings == 1 ? "" : "s");
        json_decref(by_reason);
        json_decref(files);
    }
    fflush(stdout);
    return loaded == n ? 0 : EM_EXIT_FAIL;
}

static int cmd_task_fetch(int argc, char **argv)
{
    long parallel = 4;
    const char *lock_path = NULL;
    static const struct option opts[] = {{"parallel", required_argument, 0, 'p'},
                                         {"lock", required_argument, 0, 'l'},
                                         {"offline", no_argument, 0, 'O'},
                                         {"asset-mirror", required_argument, 0, 'm'},
                                         {"allow-private", required_argument, 0, 'P'},
                                         {0, 0, 0, 0}};
    int c;
    em_err err = {0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (parse_int(optarg, 1, ASSET_PARALLEL_MAX, &parallel) < 0)
                return cli_usage_error(usage, "--parallel: expected 1..%d, got `%s`", ASSET_PARALLEL_MAX, optarg);
            break;
        case 'l': lock_path = optarg; break;
        case 'O':
        case 'm':
            if (cli_asset_option(usage, c == 'O', c == 'm' ? optarg : NULL))
                return EM_EXIT_USAGE;
            break;
        case 'P':
            if (cli_allow_private(usage, optarg, NULL))
                return EM_EXIT_USAGE;
            break;
        default: return cli_usage_error(usage, "task fetch: bad option");
        }
    }
    if (optind >= argc)
        return cli_usage_error(usage, "task fetch: expected one or more SUITEs or TASKs");
    char **paths;
    size_t n;
    if (collect(argv + optind, argc - optind, &paths, &n, &err) < 0)
        return cli_report(&err);
    /* every URL once, in the order the tasks name them */
    json_t *seen = json_object();
    const char **urls = NULL;
    size_t nurls = 0;
    for (size_t i = 0; i < n; i++) {
        task_check_result r;
        task_check_file(paths[i], &r);
        for (size_t k = 0; k < r.nurls; k++) {
            if (json_object_get(seen, r.urls[k]))
                continue;
            json_object_set_new(seen, r.urls[k], json_true());
            urls = xrealloc(urls, (nurls + 1) * sizeof *urls);
            urls[nurls++] = json_object_iter_key(json_object_iter_at(seen, r.urls[k]));
        }
        task_check_result_free(&r);
    }
    task_paths_free(paths, n);
    asset_lock *lock = NULL;
    int rc = 0;
    if (lock_path) {
        rc = asset_lock_load(lock_path, &lock, &err);
    } else {
        rc = asset_lock_for_suite(argv[optind], &lock, &err);
        if (rc == 0 && !lock) {
            struct stat st;
            _cleanup_free_ char *copy = xstrdup(argv[optind]);
            char *slash = strrchr(copy, '/');
            bool dir = stat(argv[optind], &st) == 0 && S_ISDIR(st.st_mode);
            _cleanup_free_ char *p = dir ? xasprintf("%s/" ASSET_LOCK_FILE, copy)
                                   : slash ? (*slash = '\0', xasprintf("%s/" ASSET_LOCK_FILE, copy))
                                           : xstrdup(ASSET_LOCK_FILE);
            rc = asset_lock_load(p, &lock, &err);
        }
    }
    asset_fetch_report rep = {0};
    if (rc == 0) {
        fprintf(stderr, "assets: %zu URL%s in %zu task%s; lock %s\n", nurls, nurls == 1 ? "" : "s", n,
                n == 1 ? "" : "s", lock->path);
        rc = assets_fetch_all(urls, nurls, (int)parallel, lock, &rep, &err);
        em_err serr = {0};
        if (asset_lock_save(lock, &serr) < 0 && rc == 0) {
            err = serr;
            rc = -1;
        }
        for (size_t i = 0; i < rep.failed; i++)
            fprintf(stderr, "envmgr: %s\n", rep.errors[i]);
        printf("%zu asset%s: %zu cached before, %zu fetched (%.1f MiB in %.1f s), %zu failed\n", nurls,
               nurls == 1 ? "" : "s", rep.cached, rep.ok - rep.cached, rep.bytes / 1048576.0, rep.seconds,
               rep.failed);
    }
    asset_fetch_report_free(&rep);
    asset_lock_free(lock);
    free(urls);
    json_decref(seen);
    fflush(stdout);
    return rc < 0 ? cli_report(&err) : 0;
}

static void print_pieces(const char *kind, const char *name, const char *status, const char *note, json_t *out)
{
    if (out)
        json_array_append_new(out, json_pack("{s:s, s:s, s:s, s:s}", "kind", kind, "name", name, "status", status,
                                             "note", note ? note : ""));
    else
        printf("%s\t%s\t%s\t%s\n", kind, name, status, note ? note : "");
}

static int cmd_task_pieces(int argc, char **argv)
{
    bool as_json = argc > 1 && !strcmp(argv[1], "--json");
    if (argc > 2 || (argc == 2 && !as_json))
        return cli_usage_error(usage, "task pieces: expected no argument but --json");
    json_t *out = as_json ? json_array() : NULL;
    size_t n;
    const task_piece *steps = task_setup_pieces(&n);
    for (size_t i = 0; i < n; i++)
        print_pieces("setup", steps[i].name, steps[i].status, steps[i].note, out);
    const getter_piece *g = getter_pieces(&n);
    for (size_t i = 0; i < n; i++)
        print_pieces("getter", g[i].name, g[i].status, g[i].note, out);
    const char *const *m = osworld_metric_names(&n);
    for (size_t i = 0; i < n; i++)
        print_pieces("metric", m[i], metric_known(m[i]) ? "supported" : "missing (the evaluator-scripts work)", "",
                     out);
    if (out) {
        json_dumpf(out, stdout, JSON_INDENT(1));
        putchar('\n');
        json_decref(out);
    }
    return 0;
}

int cmd_task(int argc, char **argv)
{
    static const cli_command subs[] = {
        {"check", "", cmd_task_check}, {"fetch", "", cmd_task_fetch}, {"pieces", "", cmd_task_pieces},
        {"get", "", cmd_task_get}};
    return cli_dispatch(argc, argv, usage, "task", subs, sizeof subs / sizeof *subs);
}

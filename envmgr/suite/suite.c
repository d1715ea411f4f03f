#include "envmgr/suite/suite.h"

#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/episode/plan.h"
#include "envmgr/env/env_image.h"
#include "envmgr/task/task.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

int suite_parse_shard(const char *s, int *k, int *n, em_err *err)
{
    const char *slash = s ? strchr(s, '/') : NULL;
    long kk, nn;
    if (!slash || slash == s)
        return em_fail_input(err, "--shard: expected K/N (e.g. 1/4), got `%s`", s ? s : "");
    _cleanup_free_ char *left = xasprintf("%.*s", (int)(slash - s), s);
    if (parse_int(slash + 1, 1, SUITE_SHARDS_MAX, &nn) < 0)
        return em_fail_input(err, "--shard: N in `%s` must be 1..%d", s, SUITE_SHARDS_MAX);
    if (parse_int(left, 1, nn, &kk) < 0)
        return em_fail_input(err, "--shard: K in `%s` must be 1..%ld (shards count from 1)", s, nn);
    *k = (int)kk;
    *n = (int)nn;
    return 0;
}

bool suite_in_shard(size_t i, int k, int n)
{
    return n <= 1 || (int)(i % (size_t)n) == k - 1;
}

char *suite_episode_key(const char *task_id, int repeat)
{
    return repeat == 0 ? xstrdup(task_id) : xasprintf("%s#%d", task_id, repeat);
}

char *suite_episode_dir(const char *task_id, int repeat, int repeats)
{
    return repeats <= 1 ? xasprintf(SUITE_TRACES_DIR "/%s", task_id)
                        : xasprintf(SUITE_TRACES_DIR "/%s/rep-%d", task_id, repeat);
}

static void task_free_fields(suite_task *t)
{
    free(t->path);
    free(t->id);
    free(t->domain);
    free(t->image);
    free(t->unsupported);
}

size_t suite_unsupported(const suite *s)
{
    size_t n = 0;
    for (size_t i = 0; s && i < s->ntasks; i++)
        n += s->tasks[i].unsupported != NULL;
    return n;
}

/* A refused task's id: the one it names when valid, else its file name without .json. */
static char *refused_id(const char *path, const task_check_result *r)
{
    if (r->id)
        return xstrdup(r->id);
    _cleanup_free_ char *copy = xstrdup(path);
    char *b = basename(copy), *dot = strrchr(b, '.');
    if (dot && !strcmp(dot, ".json"))
        *dot = '\0';
    return xstrdup(b);
}

void suite_free(suite *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->ntasks; i++)
        task_free_fields(&s->tasks[i]);
    free(s->tasks);
    free(s->source);
    free(s);
}

static int cmp_task(const void *a, const void *b)
{
    const suite_task *x = a, *y = b;
    int c = strcmp(x->id, y->id);
    return c ? c : strcmp(x->path, y->path);
}

/* id -> domain from an OSWorld index file (task_list_dir already checked its shape). */
static json_t *index_domains(const char *index, em_err *err);

/* A folder suite: the task's folder name is its domain; files at the top take the suite's name. */
static char *folder_domain(const char *path);

/* In an index, the folder a task file sits in names its domain when it is one of the index's
 * (the same id can be in two domains); else the domain that lists the id. */
static char *task_domain(json_t *domains, const char *id, const char *path)
{
    if (!domains)
        return folder_domain(path);
    char *f = folder_domain(path);
    json_t *all = json_object_get(domains, "");
    if (json_object_get(all, f))
        return f;
    free(f);
    const char *d = json_string_value(json_object_get(domains, id));
    return d ? xstrdup(d) : folder_domain(path);
}

static json_t *index_domains(const char *index, em_err *err)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (read_file_capped(index, TASK_FILE_MAX, &text, &len, err) < 0)
        return NULL;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL), *map = json_object(), *names = json_object();
    json_object_set_new(map, "", names); /* "" is no task id: the set of domain names */
    const char *domain;
    json_t *ids;
    json_object_foreach(root, domain, ids)
    {
        json_object_set_new(names, domain, json_true());
        size_t i;
        json_t *id;
        json_array_foreach(ids, i, id)
        if (json_is_string(id))
            json_object_set_new(map, json_string_value(id), json_string(domain));
    }
    json_decref(root);
    return map;
}

/* A folder suite: the task's folder name is its domain; files at the top take the suite's name. */
static char *folder_domain(const char *path)
{
    _cleanup_free_ char *copy = xstrdup(path);
    return xstrdup(basename(dirname(copy)));
}

/* OSWorld's own index lists some tasks twice, and one id in two domains with two different
 * files: the same file twice runs once; a second file with a taken id runs as <domain>.<id>
 * (ids name results, so they must differ). all is sorted by id, then path; returns the new count. */
static size_t index_duplicates(suite_task *all, size_t n)
{
    size_t k = 0;
    bool renamed = false;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && !strcmp(all[k - 1].id, all[i].id) && !strcmp(all[k - 1].path, all[i].path)) {
            em_warn("suite: `%s` is listed twice in the index; it runs once", all[i].id);
            task_free_fields(&all[i]);
            continue;
        }
        if (k > 0 && !strcmp(all[k - 1].id, all[i].id) && strcmp(all[k - 1].domain, all[i].domain)) {
            char *id = xasprintf("%s.%s", all[i].domain, all[i].id);
            em_warn("suite: task id `%s` is used by two files (%s and %s); the second runs as `%s`",
                    all[i].id, all[k - 1].path, all[i].path, id);
            free(all[i].id);
            all[i].id = id;
            renamed = true;
        }
        all[k++] = all[i];
    }
    if (renamed)
        qsort(all, k, sizeof *all, cmp_task);
    return k;
}

int suite_load(const char *source, int shard_k, int shard_n, bool strict, const plan_image_choice *image,
               suite **out, em_err *err)
{
    if (image && image->image) { /* an image that is not built fails the suite, not each task */
        env_image_facts f;
        if (env_image_facts_read(image->image, &f, err) < 0)
            return em_prefix(err, "--image %s: ", image->image);
        env_image_facts_free(&f);
    }
    char real[PATH_MAX];
    struct stat st;
    if (!realpath(source, real) || stat(real, &st) < 0) {
        em_fail_errno(err, "suite `%s`", source);
        err->code = EM_EXIT_USAGE;
        return -1;
    }
    bool is_index = !S_ISDIR(st.st_mode);
    char **paths = NULL;
    size_t n = 0;
    if (task_list_dir(real, &paths, &n, err) < 0)
        return -1;
    if (n == 0) {
        task_paths_free(paths, n);
        return em_fail_input(err, "suite `%s`: no task files", source);
    }
    json_t *domains = is_index ? index_domains(real, err) : NULL;
    if (is_index && !domains) {
        task_paths_free(paths, n);
        return -1;
    }
    suite *s = xcalloc(1, sizeof *s);
    s->source = xstrdup(real);
    s->shard_k = shard_k > 0 ? shard_k : 1;
    s->shard_n = shard_n > 0 ? shard_n : 1;
    suite_task *all = xcalloc(n, sizeof *all);
    int rc = 0;
    size_t loaded = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        task *t = NULL;
        if (task_load(paths[i], &t, err) < 0) {
            if (strict) {
                rc = -1;
                break;
            }
            task_check_result r;
            task_check_file(paths[i], &r);
            suite_task *st2 = &all[loaded++];
            st2->path = xstrdup(paths[i]);
            st2->id = refused_id(paths[i], &r);
            st2->domain = task_domain(domains, st2->id, paths[i]);
            st2->image = xstrdup(IMAGE_DEFAULT);
            st2->unsupported = xstrdup(r.nproblems ? r.problems[0] : err->msg);
            task_check_result_free(&r);
            em_err_clear(err);
            continue;
        }
        em_err perr = {0};
        char *img = NULL;
        if (plan_image(t, image, &img, &perr) < 0 && strict) {
            *err = perr;
            em_prefix(err, "%s: ", paths[i]);
            task_free(t);
            rc = -1;
            break;
        }
        suite_task *st2 = &all[loaded++];
        st2->path = xstrdup(paths[i]);
        st2->id = xstrdup(t->id);
        st2->domain = task_domain(domains, t->id, paths[i]);
        st2->image = img ? img : xstrdup(IMAGE_DEFAULT);
        if (!img) /* the image cannot run it: recorded as unsupported, never run on the wrong one */
            st2->unsupported = xstrdup(perr.msg);
        st2->episode_timeout_s = t->episode_timeout_s;
        st2->infeasible = t->eval.infeasible;
        task_free(t);
    }
    json_decref(domains);
    task_paths_free(paths, n);
    if (rc == 0) {
        qsort(all, loaded, sizeof *all, cmp_task);
        if (is_index)
            loaded = index_duplicates(all, loaded);
        for (size_t i = 1; i < loaded && rc == 0; i++)
            if (!strcmp(all[i - 1].id, all[i].id))
                rc = em_fail_input(err, "suite `%s`: task id `%s` is used twice (%s and %s); ids name results",
                                   source, all[i].id, all[i - 1].path, all[i].path);
    }
    if (rc < 0) {
        for (size_t i = 0; i < loaded; i++)
            task_free_fields(&all[i]);
        free(all);
        suite_free(s);
        return -1;
    }
    s->total = loaded;
    s->tasks = xcalloc(loaded, sizeof *s->tasks);
    for (size_t i = 0; i < loaded; i++) {
        if (suite_in_shard(i, s->shard_k, s->shard_n))
            s->tasks[s->ntasks++] = all[i];
        else
            task_free_fields(&all[i]);
    }
    free(all);
    *out = s;
    return 0;
}

json_t *suite_meta_new(const suite *s, const char *agent, int repeat)
{
    json_t *tasks = json_array();
    for (size_t i = 0; i < s->ntasks; i++)
    {
        json_t *t = json_pack("{s:s, s:s, s:s}", "id", s->tasks[i].id, "domain", s->tasks[i].domain, "path",
                              s->tasks[i].path);
        if (s->tasks[i].unsupported)
            json_object_set_new(t, "unsupported", json_string(s->tasks[i].unsupported));
        json_array_append_new(tasks, t);
    }
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", s->shard_k, s->shard_n);
    char when[40];
    iso8601_now(when, sizeof when);
    return json_pack("{s:i, s:s, s:s, s:s, s:i, s:I, s:o, s:s, s:s, s:[]}", "format", SUITE_FORMAT, "suite",
                     s->source, "agent", agent, "shard", shard, "repeat", repeat, "suite_tasks", (json_int_t)s->total,
                     "tasks", tasks, "envmgr_version", ENVMGR_VERSION, "created", when, "runs");
}

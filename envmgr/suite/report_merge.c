#include "envmgr/suite/report_merge.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/suite/report_summary.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/suite/suite.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

static int cmp_task_json(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    return strcmp(json_string_value(json_object_get(x, "id")), json_string_value(json_object_get(y, "id")));
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* out/traces/<name> -> <shard>/traces/<name> for every entry of the shard's traces/. */
static int link_traces(const char *shard, const char *out, em_err *err)
{
    _cleanup_free_ char *src = xasprintf("%s/" SUITE_TRACES_DIR, shard), *dst = xasprintf("%s/" SUITE_TRACES_DIR, out);
    if (mkdir_p(dst, 0755, err) < 0)
        return -1;
    DIR *d = opendir(src);
    if (!d)
        return errno == ENOENT ? 0 : em_fail_errno(err, "open `%s`", src);
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *target = xasprintf("%s/%s", src, de->d_name), *link = xasprintf("%s/%s", dst, de->d_name);
        char have[PATH_MAX];
        ssize_t n = readlink(link, have, sizeof have - 1);
        if (n >= 0) {
            have[n] = '\0';
            if (!strcmp(have, target))
                continue;
            unlink(link); /* a stale link from an earlier merge */
        }
        if (symlink(target, link) < 0)
            rc = em_fail_errno(err, "symlink `%s`", link);
    }
    closedir(d);
    return rc;
}

int report_merge(const char *const *dirs, size_t n, const char *out_dir, json_t **summary, report_merge_info *info,
                 em_err *err)
{
    memset(info, 0, sizeof *info);
    if (n == 0)
        return em_fail_input(err, "merge: no run directories given");
    if (mkdir_p(out_dir, 0755, err) < 0)
        return -1;
    char out_abs[PATH_MAX];
    if (!realpath(out_dir, out_abs))
        return em_fail_errno(err, "`%s`", out_dir);
    json_t *tasks = json_array(), *lines_all = json_array(), *from = json_array(), *owner = json_object();
    json_t *first = NULL, *shard_ks = json_object();
    int rc = 0, shard_n = -1;
    bool complete = true;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char abs[PATH_MAX];
        if (!realpath(dirs[i], abs)) {
            rc = em_fail_errno(err, "merge: `%s`", dirs[i]);
            break;
        }
        if (!strcmp(abs, out_abs)) {
            rc = em_fail_input(err, "merge: --out `%s` is also an input; merge into a new directory", out_dir);
            break;
        }
        json_t *meta = NULL, *lines = NULL;
        if (report_read_meta(abs, false, &meta, err) < 0) {
            rc = em_prefix(err, "merge: ");
            break;
        }
        if (!first)
            first = json_incref(meta);
        else if (strcmp(str(meta, "agent"), str(first, "agent")) ||
                 json_integer_value(json_object_get(meta, "repeat")) !=
                     json_integer_value(json_object_get(first, "repeat"))) {
            rc = em_fail_input(err, "merge: `%s` ran another agent or --repeat than `%s`; they are not shards of one run",
                               dirs[i], dirs[0]);
            json_decref(meta);
            break;
        }
        int k = 0, nn = 0;
        if (sscanf(str(meta, "shard"), "%d/%d", &k, &nn) == 2) {
            char kk[16];
            snprintf(kk, sizeof kk, "%d", k);
            if (json_object_get(shard_ks, kk))
                rc = em_fail_input(err, "merge: shard %d/%d is given twice (%s)", k, nn, dirs[i]);
            json_object_set_new(shard_ks, kk, json_true());
            shard_n = shard_n == -1 || shard_n == nn ? nn : 0;
        } else {
            shard_n = 0;
        }
        _cleanup_free_ char *rpath = xasprintf("%s/" SUITE_RESULTS_FILE, abs);
        if (rc == 0)
            rc = results_read(rpath, &lines, NULL, err);
        if (rc == 0) {
            /* A task belongs to one shard: the same episode finished in two inputs is a mistake. */
            json_t *final = results_final(lines);
            const char *key;
            json_t *v;
            json_object_foreach(final, key, v)
            {
                json_t *o = json_object_get(owner, key);
                if (o) {
                    rc = em_fail_input(err, "merge: episode `%s` is in both `%s` and `%s`", key, json_string_value(o),
                                       dirs[i]);
                    break;
                }
                json_object_set_new(owner, key, json_string(dirs[i]));
            }
            size_t expected = json_array_size(json_object_get(meta, "tasks")) *
                              (size_t)(json_integer_value(json_object_get(meta, "repeat")) > 0
                                           ? json_integer_value(json_object_get(meta, "repeat"))
                                           : 1);
            if (json_object_size(final) < expected)
                complete = false;
            json_decref(final);
            json_array_extend(lines_all, lines);
            json_array_extend(tasks, json_object_get(meta, "tasks"));
            json_array_append_new(from, json_string(abs));
        }
        if (rc == 0)
            rc = link_traces(abs, out_abs, err);
        json_decref(lines);
        json_decref(meta);
    }
    if (rc == 0) {
        /* Sorted tasks, as one unsharded run lists them. */
        size_t nt = json_array_size(tasks);
        json_t **v = xcalloc(nt ? nt : 1, sizeof *v);
        for (size_t i = 0; i < nt; i++)
            v[i] = json_array_get(tasks, i);
        qsort(v, nt, sizeof *v, cmp_task_json);
        json_t *sorted = json_array();
        for (size_t i = 0; i < nt; i++)
            json_array_append(sorted, v[i]);
        free(v);
        info->shards_n = shard_n > 0 ? shard_n : 0;
        info->shards_found = json_object_size(shard_ks);
        if (shard_n > 0 && info->shards_found < (size_t)shard_n)
            complete = false;
        info->complete = complete;
        char shard[64];
        snprintf(shard, sizeof shard, "merged %zu of %d", info->shards_found, shard_n > 0 ? shard_n : 0);
        char when[40];
        iso8601_now(when, sizeof when);
        json_t *meta = json_pack("{s:i, s:s, s:s, s:s, s:O, s:O, s:o, s:s, s:s, s:O}", "format", SUITE_FORMAT, "suite",
                                 str(first, "suite"), "agent", str(first, "agent"), "shard", shard, "repeat",
                                 json_object_get(first, "repeat"), "suite_tasks", json_object_get(first, "suite_tasks"),
                                 "tasks", sorted, "envmgr_version", ENVMGR_VERSION, "created", when, "merged_from",
                                 from);
        _cleanup_free_ char *mpath = xasprintf("%s/" SUITE_META_FILE, out_abs);
        rc = json_save(mpath, meta, JSON_INDENT(2), 0644, err);
        json_decref(meta);
        size_t i;
        json_t *line;
        char *all = xstrdup("");
        size_t len = 0;
        json_array_foreach(lines_all, i, line)
        {
            _cleanup_free_ char *t = json_dumps(line, JSON_COMPACT | JSON_SORT_KEYS);
            size_t tl = strlen(t);
            all = xrealloc(all, len + tl + 2);
            memcpy(all + len, t, tl);
            len += tl;
            all[len++] = '\n';
            all[len] = '\0';
        }
        _cleanup_free_ char *rpath = xasprintf("%s/" SUITE_RESULTS_FILE, out_abs);
        if (rc == 0)
            rc = write_file_atomic(rpath, all, len, 0644, err);
        free(all);
        if (rc == 0) {
            json_t *extra = json_pack("{s:O, s:b}", "merged_from", from, "merge_complete", complete);
            rc = report_write_all(out_abs, extra, summary, err);
            json_decref(extra);
        }
    }
    json_decref(first);
    json_decref(tasks);
    json_decref(lines_all);
    json_decref(from);
    json_decref(owner);
    json_decref(shard_ks);
    return rc;
}

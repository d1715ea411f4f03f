/* The task files of a suite: a folder or an OSWorld index. */
#include "envmgr/task/task_int.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

/* ---- suites ---- */

typedef struct strvec {
    char **v;
    size_t n;
} strvec;

static int sv_push(strvec *s, char *p, em_err *err)
{
    if (s->n >= TASK_LIST_MAX) {
        free(p);
        return em_fail_input(err, "task list: more than %d task files", TASK_LIST_MAX);
    }
    s->v = xrealloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n++] = p;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_task_file_name(const char *n)
{
    size_t l = strlen(n);
    return n[0] != '.' && l > 5 && !strcmp(n + l - 5, ".json") && strcmp(n, "index.json") && strcmp(n, "test_all.json");
}

static int scan_dir(const char *dir, int depth, strvec *out, em_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return em_fail_errno(err, "task list: open `%s`", dir);
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *full = xasprintf("%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(full, &st) < 0) {
            free(full); /* a dangling link is not a task */
            continue;
        }
        if (S_ISREG(st.st_mode) && is_task_file_name(de->d_name)) {
            rc = sv_push(out, full, err);
            continue;
        }
        if (S_ISDIR(st.st_mode) && depth == 0)
            rc = scan_dir(full, 1, out, err);
        free(full);
    }
    closedir(d);
    return rc;
}

static bool regular_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int load_index(const char *index, strvec *out, em_err *err)
{
    _cleanup_free_ char *text = NULL, *copy = xstrdup(index);
    size_t len;
    if (read_file_capped(index, TASK_FILE_MAX, &text, &len, err) < 0)
        return em_prefix(err, "task list: ");
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return em_fail_input(err, "%s: invalid JSON at line %d, column %d: %s", index, je.line, je.column, je.text);
    const char *dir = dirname(copy);
    int rc = 0;
    if (!json_is_object(root))
        rc = em_fail_input(err, "%s: expected an object {\"domain\": [\"task id\", ...]}, got %s", index,
                           json_type_name(root));
    const char *domain;
    json_t *ids;
    json_object_foreach(root, domain, ids)
    {
        if (rc < 0)
            break;
        if (!task_valid_id(domain)) {
            rc = em_fail_input(err, "%s: domain `%.64s` must be 1 to %d characters of A-Z a-z 0-9 . _ -", index,
                               domain, TASK_ID_MAX);
            break;
        }
        if (!json_is_array(ids) || json_array_size(ids) > TASK_ARRAY_MAX) {
            rc = em_fail_input(err, "%s: %s: expected an array of at most %d task ids", index, domain, TASK_ARRAY_MAX);
            break;
        }
        size_t i;
        json_t *idj;
        json_array_foreach(ids, i, idj)
        {
            const char *id = json_string_value(idj);
            if (!id || !task_valid_id(id)) {
                rc = em_fail_input(err, "%s: %s[%zu]: expected a task id (A-Z a-z 0-9 . _ -)", index, domain, i);
                break;
            }
            char *cands[3] = {xasprintf("%s/%s/%s.json", dir, domain, id),
                              xasprintf("%s/examples/%s/%s.json", dir, domain, id), xasprintf("%s/%s.json", dir, id)};
            int found = -1;
            for (int k = 0; k < 3 && found < 0; k++)
                if (regular_file(cands[k]))
                    found = k;
            if (found < 0)
                rc = em_fail_input(err, "%s: %s[%zu]: no task file for `%s` (looked for %s, %s and %s)", index, domain,
                                   i, id, cands[0], cands[1], cands[2]);
            else
                rc = sv_push(out, xstrdup(cands[found]), err);
            for (int k = 0; k < 3; k++)
                free(cands[k]);
            if (rc < 0)
                break;
        }
    }
    json_decref(root);
    return rc;
}

int task_list_dir(const char *dir_or_index, char ***paths, size_t *n, em_err *err)
{
    *paths = NULL;
    *n = 0;
    struct stat st;
    if (stat(dir_or_index, &st) < 0)
        return em_fail_errno(err, "task list: `%s`", dir_or_index);
    strvec sv = {0};
    int rc;
    if (S_ISDIR(st.st_mode)) {
        _cleanup_free_ char *dir = xstrdup(dir_or_index);
        size_t l = strlen(dir);
        while (l > 1 && dir[l - 1] == '/')
            dir[--l] = '\0';
        rc = scan_dir(dir, 0, &sv, err);
        if (rc == 0 && sv.n)
            qsort(sv.v, sv.n, sizeof *sv.v, cmp_str);
    } else {
        rc = load_index(dir_or_index, &sv, err);
    }
    if (rc < 0) {
        task_paths_free(sv.v, sv.n);
        return -1;
    }
    *paths = sv.v;
    *n = sv.n;
    return 0;
}

/* An OSWorld index is an object of arrays; a task has an instruction or an evaluator. */
static bool is_index_file(const char *path)
{
    _cleanup_free_ char *text = NULL;
    size_t len;
    em_err ignored;
    if (read_file_capped(path, TASK_FILE_MAX, &text, &len, &ignored) < 0)
        return false;
    json_t *j = json_loadb(text, len, 0, NULL);
    bool index = json_is_object(j) && json_object_size(j) > 0 && !json_object_get(j, "instruction") &&
                 !json_object_get(j, "evaluator");
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) index = index && json_is_array(v);
    json_decref(j);
    return index;
}

int task_list_path(const char *path, char ***paths, size_t *n, em_err *err)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode) && !is_index_file(path)) {
        *paths = xcalloc(1, sizeof **paths);
        (*paths)[0] = xstrdup(path);
        *n = 1;
        return 0;
    }
    return task_list_dir(path, paths, n, err);
}

void task_paths_free(char **paths, size_t n)
{
    task_strv_free(paths, n);
}


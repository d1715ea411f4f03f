#include "envmgr/base/paths.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

/* Each root is filled once, on first use, before any reader (API threads included) can see it
 * half written; later changes of the environment do not move it. */
static char run_root[512], cache_root[512], data_dir[PATH_MAX + 32], image_root[PATH_MAX + 64];
static pthread_once_t run_once = PTHREAD_ONCE_INIT, cache_once = PTHREAD_ONCE_INIT, image_once = PTHREAD_ONCE_INIT,
                      data_once = PTHREAD_ONCE_INIT;

static bool has_dir(const char *base, const char *sub)
{
    char p[PATH_MAX];
    struct stat st;
    int n = snprintf(p, sizeof p, "%s/%s", base, sub);
    return n > 0 && (size_t)n < sizeof p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Nothing of the build machine is compiled in: the data files are found from where the running
 * binary is. Walking up from its folder, the first ancestor A that has share/envmgr/evaluator is an
 * install prefix (A/bin/envmgr -> A/share/envmgr); one that has evaluator/scripts is the checkout a
 * build-tree binary (bin/, build/tests/, build-asan/bin/) was built in. A few levels only: a binary
 * copied elsewhere must not adopt some unrelated tree far above it. */
static void init_data_dir(void)
{
    const char *e = getenv("ENVMGR_DATA_DIR");
    if (e && *e) {
        snprintf(data_dir, sizeof data_dir, "%s", e);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(data_dir, sizeof data_dir, "/usr/share/envmgr");
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    *slash = '\0'; /* the binary's folder */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", exe);
    for (int level = 0; level < 4 && dir[0]; level++) {
        if (has_dir(dir, "share/envmgr/evaluator")) {
            snprintf(data_dir, sizeof data_dir, "%s/share/envmgr", dir);
            return;
        }
        if (has_dir(dir, "evaluator/scripts")) {
            snprintf(data_dir, sizeof data_dir, "%s", dir);
            return;
        }
        char *up = strrchr(dir, '/');
        if (!up)
            break;
        *up = '\0';
    }
    /* Not found: name where an install would have put it, so errors point there. */
    snprintf(data_dir, sizeof data_dir, "%s/../share/envmgr", exe);
}

static void init_run_root(void)
{
    const char *e = getenv("ENVMGR_RUN_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
    if (e && *e)
        snprintf(run_root, sizeof run_root, "%s", e);
    else if (geteuid() == 0)
        snprintf(run_root, sizeof run_root, "/run/envmgr");
    else if (xdg && *xdg)
        snprintf(run_root, sizeof run_root, "%s/envmgr", xdg);
    else
        snprintf(run_root, sizeof run_root, "/tmp/envmgr-%u", (unsigned)geteuid());
}

static void init_cache_root(void)
{
    const char *e = getenv("ENVMGR_CACHE_DIR"), *home = getenv("HOME");
    if (e && *e)
        snprintf(cache_root, sizeof cache_root, "%s", e);
    else if (geteuid() == 0 || !home)
        snprintf(cache_root, sizeof cache_root, "/var/cache/envmgr");
    else
        snprintf(cache_root, sizeof cache_root, "%s/.cache/envmgr", home);
}

static void init_image_root(void)
{
    const char *e = getenv("ENVMGR_IMAGE_DIR");
    if (e && *e)
        snprintf(image_root, sizeof image_root, "%s", e);
    else
        snprintf(image_root, sizeof image_root, "%s/vm-images/out", paths_data_dir());
}

const char *paths_run_root(void)
{
    pthread_once(&run_once, init_run_root);
    return run_root;
}

const char *paths_cache_root(void)
{
    pthread_once(&cache_once, init_cache_root);
    return cache_root;
}

char *paths_state_root(void)
{
    const char *e = getenv("ENVMGR_STATE_DIR");
    return e && *e ? xstrdup(e) : xasprintf("%s/states", paths_cache_root());
}

const char *paths_data_dir(void)
{
    pthread_once(&data_once, init_data_dir);
    return data_dir;
}

const char *paths_image_root(void)
{
    pthread_once(&image_once, init_image_root);
    return image_root;
}

char *paths_image_dir(const char *image)
{
    if (strchr(image, '/'))
        return xstrdup(image);
    return xasprintf("%s/%s", paths_image_root(), image);
}

char *paths_env_dir(const char *name)
{
    return xasprintf("%s/%s", paths_run_root(), name);
}

int paths_check_private_dir(const char *path, const char *what, em_err *err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return em_fail_errno(err, "%s `%s`", what, path);
    if (!S_ISDIR(st.st_mode))
        return em_fail(err, "%s `%s` is not a directory (a symbolic link?): refusing it", what, path);
    if (st.st_uid != geteuid())
        return em_fail(err, "%s `%s` belongs to uid %u, not to you (uid %u): refusing it (set ENVMGR_RUN_DIR to a "
                            "directory of your own)",
                       what, path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        return em_fail(err, "%s `%s` is writable by %s: refusing it (chmod 700 it, or set ENVMGR_RUN_DIR)", what,
                       path, st.st_mode & S_IWOTH ? "everyone" : "its group");
    return 0;
}

int paths_ensure_run_root(em_err *err)
{
    if (mkdir_p(paths_run_root(), 0700, err) < 0)
        return -1;
    return paths_check_private_dir(paths_run_root(), "run root", err);
}

const char *paths_envmgr_bin(void)
{
    static char path[PATH_MAX];
    const char *e = getenv("ENVMGR_HELPER_BIN");
    if (e && *e)
        return e;
    if (!path[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        const char *base = NULL;
        if (n > 0) {
            path[n] = '\0';
            base = strrchr(path, '/');
        }
        if (!base || strcmp(base + 1, "envmgr")) /* a test program in the build tree: use the built CLI */
            snprintf(path, sizeof path, "%.4000s/bin/envmgr", paths_data_dir());
    }
    return path;
}

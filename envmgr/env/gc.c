#include "envmgr/env/gc.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "envmgr/env/env.h"
#include "envmgr/state/states.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/cgroup.h"
#include "envmgr/vm/image_import.h"
#include "envmgr/vm/overlay.h"
#include "envmgr/vm/runas.h"
#include "envmgr/vm/vm.h"

#define GC_YOUNG_S 120 /* a run directory this young without a QEMU may still be starting */

pid_t suite_env_owner(const char *name)
{
    size_t pl = strlen(SUITE_ENV_PREFIX);
    if (strncmp(name, SUITE_ENV_PREFIX, pl))
        return 0;
    const char *p = name + pl;
    char *end;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno || end == p || *end != '-' || !isdigit((unsigned char)end[1]) || pid < 2 || pid > (1L << 30))
        return 0;
    for (const char *q = end + 1; *q; q++)
        if (!isdigit((unsigned char)*q))
            return 0;
    return (pid_t)pid;
}

static char *read_proc(pid_t pid, const char *what, size_t *len)
{
    _cleanup_free_ char *path = xasprintf("/proc/%d/%s", (int)pid, what);
    char *text = NULL;
    if (read_file_capped(path, JSON_DOC_MAX, &text, len, NULL) < 0)
        return NULL;
    return text;
}

bool suite_owner_alive(pid_t pid)
{
    if (pid < 2 || (kill(pid, 0) < 0 && errno == ESRCH))
        return false;
    size_t len = 0;
    _cleanup_free_ char *cmd = read_proc(pid, "cmdline", &len);
    if (!cmd || !len)
        return false;
    /* argv[0] names envmgr (directly, or under valgrind/a sanitizer wrapper somewhere in argv) */
    for (size_t i = 0; i < len; i += strlen(cmd + i) + 1) {
        const char *base = strrchr(cmd + i, '/');
        if (strstr(base ? base + 1 : cmd + i, "envmgr"))
            return true;
    }
    return false;
}

/* Some process has `needle` in its command line (a QEMU mapping a golden RAM file). */
static bool any_process_mentions(const char *needle)
{
    DIR *d = opendir("/proc");
    if (!d)
        return true; /* cannot tell: assume in use */
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        size_t len = 0;
        char *cmd = read_proc((pid_t)atoi(de->d_name), "cmdline", &len);
        for (size_t i = 0; cmd && i < len && !found; i += strlen(cmd + i) + 1)
            found = strstr(cmd + i, needle) != NULL;
        free(cmd);
    }
    closedir(d);
    return found;
}

/* Try the lock a live holder keeps: -1 when someone holds it, else an fd to close (or -2 when there is no file). */
static int try_lock(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -2;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static double age_s(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return 1e9;
    return difftime(time(NULL), st.st_mtime);
}

static void say(FILE *log, const gc_opts *o, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(FILE *log, const gc_opts *o, const char *fmt, ...)
{
    if (!log)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(log, "gc: %s", o->dry_run ? "would " : "");
    vfprintf(log, fmt, ap);
    fputc('\n', log);
    va_end(ap);
}

/* Record the sha256 of image_dir/manifest.json (what golden.json names) as a live image. */
static void add_manifest(json_t *known, const char *image_dir)
{
    _cleanup_free_ char *path = xasprintf("%s/manifest.json", image_dir), *text = NULL;
    size_t len;
    if (read_file_capped(path, 4u << 20, &text, &len, NULL) < 0)
        return;
    char sha[65];
    sha256_hex(text, len, sha);
    json_object_set_new(known, sha, json_string(path));
}

static int gc_run_dirs(const gc_opts *o, FILE *log, gc_stats *st, em_err *err)
{
    const char *root = paths_run_root();
    DIR *d = opendir(root);
    if (!d)
        return errno == ENOENT ? 0 : em_fail_errno(err, "gc: open `%s`", root);
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        _cleanup_free_ char *dir = xasprintf("%s/%s", root, name), *lock = xasprintf("%s/lock", dir);
        struct stat sst;
        if (lstat(dir, &sst) < 0 || !S_ISDIR(sst.st_mode))
            continue;
        pid_t qpid = 0;
        em_err ignored;
        bool alive = vm_read_pid(dir, &qpid, &ignored) == 0 && vm_alive(qpid, dir);
        pid_t owner = suite_env_owner(name);
        if (o->only_owner > 0 && owner != o->only_owner)
            continue;

        if (!strncmp(name, ".golden-", 8)) { /* a golden-state builder's run directory */
            long bpid = atol(name + 8);
            if (suite_owner_alive((pid_t)bpid))
                continue;
            say(log, o, "remove the golden builder directory %s%s", dir, alive ? " and stop its QEMU" : "");
            if (!o->dry_run) {
                if (alive && vm_stop(dir, qpid, &ignored) == 0)
                    st->qemus++;
                vm_forget(dir);
                remove_tree(dir, NULL);
            }
            st->envs++;
            continue;
        }
        if (name[0] == '.')
            continue;
        if (check_name("env", name, &ignored) < 0)
            continue;

        bool reap = false;
        const char *why = "";
        if (owner) {
            if (o->all_suite) {
                reap = true;
                why = "suite env (--all-suite)";
            } else if (!suite_owner_alive(owner)) {
                reap = true;
                why = "suite env whose envmgr is gone";
            }
        } else if (!alive && o->only_owner <= 0 && age_s(dir) > GC_YOUNG_S) {
            reap = true;
            why = "its QEMU is dead";
        }
        if (!reap)
            continue;
        int lfd = try_lock(lock);
        if (lfd == -1 && !o->all_suite) { /* an envmgr holds it: in use */
            st->busy++;
            say(log, o, "skip %s (%s): in use", name, why);
            continue;
        }
        char what[160];
        snprintf(what, sizeof what, "%s%s", why, alive ? "; its QEMU is stopped" : "");
        say(log, o, "remove env %s (%s)", name, what);
        if (!o->dry_run) {
            em_err derr = {0};
            if (env_down(name, &derr) < 0) {
                if (log)
                    fprintf(log, "gc: %s\n", derr.msg);
                rc = -1;
                if (!err->msg[0])
                    *err = derr;
            } else {
                st->envs++;
                st->qemus += alive;
            }
        } else {
            st->envs++;
            st->qemus += alive;
        }
        if (lfd >= 0)
            close(lfd);
    }
    closedir(d);
    return rc;
}

/* sha256 of every image manifest envmgr can still boot from. */
static void add_manifests_in(json_t *known, const char *root)
{
    DIR *d = opendir(root);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *dir = xasprintf("%s/%s", root, de->d_name);
        add_manifest(known, dir);
    }
    closedir(d);
}

static void add_env_images(json_t *known)
{
    json_t *list = NULL, *row;
    em_err ignored;
    if (env_list(&list, &ignored) < 0)
        return;
    size_t i;
    json_array_foreach(list, i, row)
    {
        const char *image = json_string_value(json_object_get(row, "image"));
        if (!image)
            continue;
        add_manifest(known, image);
    }
    json_decref(list);
}

static double dir_mib(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    double bytes = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
        struct stat st;
        if (de->d_name[0] != '.' && lstat(p, &st) == 0 && S_ISREG(st.st_mode))
            bytes += (double)st.st_blocks * 512;
    }
    closedir(d);
    return bytes / (1024.0 * 1024.0);
}

static int gc_goldens(const gc_opts *o, FILE *log, gc_stats *st, em_err *err)
{
    _cleanup_free_ char *root = xasprintf("%s/golden", paths_cache_root()),
                        *images = xasprintf("%s/images", paths_cache_root());
    DIR *d = opendir(root);
    if (!d)
        return errno == ENOENT ? 0 : em_fail_errno(err, "gc: open `%s`", root);
    json_t *known = json_object();
    add_manifests_in(known, paths_image_root());
    add_manifests_in(known, images);
    add_env_images(known);
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        if (name[0] == '.')
            continue;
        _cleanup_free_ char *dir = xasprintf("%s/%s", root, name);
        struct stat sst;
        if (lstat(dir, &sst) < 0 || !S_ISDIR(sst.st_mode))
            continue;
        size_t nl = strlen(name);
        bool building = nl > 6 && !strcmp(name + nl - 6, ".build");
        _cleanup_free_ char *key = xasprintf("%.*s", (int)(building ? nl - 6 : nl), name);
        _cleanup_free_ char *lock = xasprintf("%s/%s.lock", root, key);
        char why[200];
        if (building) {
            snprintf(why, sizeof why, "an unfinished build");
        } else {
            _cleanup_free_ char *meta = xasprintf("%s/golden.json", dir), *text = NULL;
            if (read_file_capped(meta, JSON_DOC_MAX, &text, NULL, NULL) < 0)
                continue; /* not a golden state envmgr wrote */
            json_t *j = json_loads(text, 0, NULL);
            const char *sha = json_string_value(json_object_get(j, "image_sha256"));
            bool keep = !sha || json_object_get(known, sha);
            snprintf(why, sizeof why, "its image %.12s… is gone", sha ? sha : "?");
            json_decref(j);
            if (keep)
                continue;
        }
        int lfd = try_lock(lock);
        _cleanup_free_ char *ram = xasprintf("%s/ram.bin", dir);
        if (lfd == -1 || any_process_mentions(ram)) {
            st->busy++;
            say(log, o, "skip the golden state %s (%s): in use", dir, why);
            if (lfd >= 0)
                close(lfd);
            continue;
        }
        double mib = dir_mib(dir);
        char what[260];
        snprintf(what, sizeof what, "%s; %.0f MiB", why, mib);
        say(log, o, "remove the golden state %s (%s)", dir, what);
        if (!o->dry_run) {
            if (remove_tree(dir, err) < 0) {
                if (lfd >= 0)
                    close(lfd);
                closedir(d);
                json_decref(known);
                return -1;
            }
            if (!building)
                unlink(lock);
        }
        if (lfd >= 0)
            close(lfd);
        st->goldens++;
        st->golden_mib += mib;
    }
    closedir(d);
    json_decref(known);
    return 0;
}

int suite_gc(const gc_opts *o, FILE *log, gc_stats *st, em_err *err)
{
    memset(st, 0, sizeof *st);
    int rc = gc_run_dirs(o, log, st, err);
    if (o->only_owner <= 0 && !o->keep_golden && gc_goldens(o, log, st, err) < 0)
        rc = -1;
    if (o->only_owner <= 0) { /* after the run directories: their overlays went with them */
        char *list = NULL;
        int n = vm_overlay_orphans(o->dry_run, &list, &st->overlay_mib);
        for (char *save = NULL, *l = list ? strtok_r(list, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
            say(log, o, "remove the overlay %s (its env is gone)", l);
        free(list);
        st->overlays = n > 0 ? (size_t)n : 0;
        n = image_import_orphans(o->dry_run, &list); /* an `image import` or `rm` killed midway */
        for (char *save = NULL, *l = list ? strtok_r(list, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
            say(log, o, "remove %s (its image import or rm was killed)", l);
        free(list);
        st->cgroups = (size_t)vm_cgroup_orphans(o->dry_run);
        st->qemu_users = (size_t)vm_runas_orphans(o->dry_run);
    }
    if (o->only_owner <= 0 && !o->keep_states) {
        uint64_t cap = (uint64_t)o->state_cap_mib << 20;
        if ((o->state_cap_mib < 0 && state_cap_bytes(&cap, err) < 0) ||
            state_evict(cap, NULL, o->dry_run, log, &st->states, &st->state_mib, err) < 0)
            rc = -1;
    }
    return rc;
}

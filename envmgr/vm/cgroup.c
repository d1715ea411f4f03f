#include "envmgr/vm/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

#define CGROUP_ROOT "/sys/fs/cgroup"
#define PROC_CGROUP_MAX (64u << 10)
#define QEMU_OVERHEAD_MIB 1024 /* TCG's code buffer grows to 1 GiB; VNC, devices, the proxy */
#define ENV_PIDS_MAX 512       /* QEMU's threads (its I/O pool up to 64), proxy threads, 256 relays at most */
#define ENV_CPU_PER_VCPU 100    /* each vCPU thread may use a core */
#define ENV_CPU_QEMU_OWN 50     /* QEMU's I/O and display threads */
/* CPU weights, v1 (cpu.shares) and v2 (cpu.weight): the defaults, and ten times them (vm_cgroup_restored) */
#define WEIGHT_V1_RUNNING "1024"
#define WEIGHT_V1_RESTORING "10240"
#define WEIGHT_V2_RUNNING "100"
#define WEIGHT_V2_RESTORING "1000"

void vm_cgroup_limits_for(int memory_mb, int cpus, vm_cgroup_limits *out)
{
    out->memory_bytes = ((uint64_t)(memory_mb > 0 ? memory_mb : 0) + QEMU_OVERHEAD_MIB) << 20;
    out->pids = ENV_PIDS_MAX;
    out->cpu_percent = (unsigned)(cpus > 0 ? cpus : 1) * ENV_CPU_PER_VCPU + ENV_CPU_QEMU_OWN;
    out->restoring = false;
}

/* One place where the env's cgroup lives: a directory and the files that set its limits. */
typedef struct place {
    char *dir;        /* <mount><own path>/envmgr/<name> */
    bool v2;
    const char *what; /* "memory", "pids", "cpu" or "v2" */
} place;

static void say_once(const char *why)
{
    static bool said;
    if (!said)
        em_warn("envmgr: QEMU runs in no cgroup of its own (%s); it keeps the limits of envmgr's", why);
    said = true;
}

static void cgroup_name(const char *dir, char name[18])
{
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(dir, strlen(dir), hex);
    snprintf(name, 18, "e%.16s", hex);
}

static int write_text(const char *dir, const char *file, const char *text, em_err *err)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", dir, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return em_fail_errno(err, "cgroup: open `%s`", p);
    ssize_t n = write(fd, text, strlen(text));
    int saved = errno;
    close(fd);
    errno = saved;
    if (n != (ssize_t)strlen(text))
        return em_fail_errno(err, "cgroup: write `%s` to `%s`", text, p);
    return 0;
}

static bool has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ' || p[-1] == ',') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n' || p[n] == ','))
            return true;
    return false;
}

/* The v2 mount whose root offers memory, pids and cpu, or NULL. */
static const char *v2_mount(void)
{
    static const char *const mounts[] = {CGROUP_ROOT, CGROUP_ROOT "/unified"};
    for (size_t i = 0; i < ARRAY_LEN(mounts); i++) {
        _cleanup_free_ char *p = xasprintf("%s/cgroup.controllers", mounts[i]), *text = NULL;
        em_err ignored;
        if (read_file_capped(p, 4096, &text, NULL, &ignored) == 0 && has_word(text, "memory") &&
            has_word(text, "pids") && has_word(text, "cpu"))
            return mounts[i];
    }
    return NULL;
}

/* Where envmgr's cgroups go: per v1 controller (or v2) the cgroup this process is in. */
static int find_places(const char *name, place *out, size_t *n, char *why, size_t whylen)
{
    *n = 0;
    _cleanup_free_ char *text = NULL;
    em_err e;
    if (read_file_capped("/proc/self/cgroup", PROC_CGROUP_MAX, &text, NULL, &e) < 0) {
        snprintf(why, whylen, "%.200s", e.msg);
        return -1;
    }
    const char *v2 = v2_mount();
    static const char *const wanted[] = {"memory", "pids", "cpu"};
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (!strcmp(path, "/"))
            path = "";
        if (v2 && !*ctrls) {
            for (size_t i = 0; i < *n; i++)
                free(out[i].dir);
            out[0] = (place){xasprintf("%s%s/envmgr/%s", v2, path, name), true, "v2"};
            *n = 1;
            return 0;
        }
        for (size_t i = 0; i < ARRAY_LEN(wanted) && !v2; i++) {
            if (!has_word(ctrls, wanted[i]))
                continue;
            _cleanup_free_ char *mount = xasprintf(CGROUP_ROOT "/%s", ctrls);
            struct stat st;
            if (stat(mount, &st) < 0) {
                free(mount);
                mount = xasprintf(CGROUP_ROOT "/%s", wanted[i]);
            }
            if (stat(mount, &st) == 0 && *n < VM_CGROUP_MAX_FDS)
                out[(*n)++] = (place){xasprintf("%s%s/envmgr/%s", mount, path, name), false, wanted[i]};
        }
    }
    if (!*n) {
        snprintf(why, whylen, "no cgroup v2 controllers and no v1 memory, pids or cpu mounted");
        return -1;
    }
    return 0;
}

static int set_limits(const place *pl, const vm_cgroup_limits *lim, em_err *err)
{
    char mem[32], pids[16], cpu[48];
    snprintf(mem, sizeof mem, "%llu", (unsigned long long)lim->memory_bytes);
    snprintf(pids, sizeof pids, "%u", lim->pids);
    if (pl->v2) {
        snprintf(cpu, sizeof cpu, "%u 100000", lim->cpu_percent * 1000);
        if (write_text(pl->dir, "memory.max", mem, err) < 0 || write_text(pl->dir, "pids.max", pids, err) < 0 ||
            write_text(pl->dir, "cpu.max", cpu, err) < 0 ||
            write_text(pl->dir, "cpu.weight", lim->restoring ? WEIGHT_V2_RESTORING : WEIGHT_V2_RUNNING, err) < 0)
            return -1;
        return 0;
    }
    if (!strcmp(pl->what, "memory"))
        return write_text(pl->dir, "memory.limit_in_bytes", mem, err);
    if (!strcmp(pl->what, "pids"))
        return write_text(pl->dir, "pids.max", pids, err);
    snprintf(cpu, sizeof cpu, "%u", lim->cpu_percent * 1000);
    if (write_text(pl->dir, "cpu.cfs_period_us", "100000", err) < 0 ||
        write_text(pl->dir, "cpu.shares", lim->restoring ? WEIGHT_V1_RESTORING : WEIGHT_V1_RUNNING, err) < 0)
        return -1;
    return write_text(pl->dir, "cpu.cfs_quota_us", cpu, err);
}

/* The v2 parent folder `envmgr` must pass the three controllers down to the env's cgroup. */
static int enable_v2_controllers(const char *env_dir, em_err *err)
{
    _cleanup_free_ char *parent = xstrdup(env_dir);
    *strrchr(parent, '/') = '\0';
    _cleanup_free_ char *grand = xstrdup(parent);
    *strrchr(grand, '/') = '\0';
    if (write_text(grand, "cgroup.subtree_control", "+memory +pids +cpu", err) < 0)
        return -1;
    return write_text(parent, "cgroup.subtree_control", "+memory +pids +cpu", err);
}

int vm_cgroup_prepare(const char *dir, const vm_cgroup_limits *lim, int fds[VM_CGROUP_MAX_FDS], size_t *nfds,
                      em_err *err)
{
    *nfds = 0;
    char name[18], why[300];
    cgroup_name(dir, name);
    place pl[VM_CGROUP_MAX_FDS];
    size_t n = 0;
    const char *off = getenv("ENVMGR_CGROUP");
    if (off && !strcmp(off, "off")) {
        say_once("ENVMGR_CGROUP=off");
        return 0;
    }
    if (find_places(name, pl, &n, why, sizeof why) < 0) {
        say_once(why);
        return 0;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        em_err e;
        if (mkdir_p(pl[i].dir, 0755, &e) < 0 || (pl[i].v2 && enable_v2_controllers(pl[i].dir, &e) < 0)) {
            say_once(e.msg); /* not root, or a hierarchy envmgr may not write: run without */
            for (size_t j = 0; j < *nfds; j++)
                close(fds[j]);
            *nfds = 0;
            break;
        }
        if (set_limits(&pl[i], lim, err) < 0) {
            rc = -1;
            break;
        }
        _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", pl[i].dir);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            rc = em_fail_errno(err, "cgroup: open `%s`", procs);
            break;
        }
        fds[(*nfds)++] = fd;
    }
    if (rc < 0) {
        for (size_t j = 0; j < *nfds; j++)
            close(fds[j]);
        *nfds = 0;
    }
    for (size_t i = 0; i < n; i++)
        free(pl[i].dir);
    return rc;
}

/* SIGKILL every process in cgroup directory cg. */
static void kill_members(const char *cg)
{
    _cleanup_free_ char *path = xasprintf("%s/cgroup.procs", cg), *procs = NULL;
    em_err ignored;
    if (read_file_capped(path, 1 << 20, &procs, NULL, &ignored) < 0)
        return;
    for (char *line = procs, *next; *line; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = '\0';
        long pid;
        if (parse_int(line, 2, 1 << 30, &pid) == 0)
            kill((pid_t)pid, SIGKILL);
    }
}

/* Where the cgroup of run directory dir is (or would be); 0 places when none can be had. */
static size_t places_of(const char *dir, place pl[VM_CGROUP_MAX_FDS])
{
    char name[18], why[300];
    cgroup_name(dir, name);
    size_t n = 0;
    return find_places(name, pl, &n, why, sizeof why) < 0 ? 0 : n;
}

void vm_cgroup_restored(const char *dir)
{
    place pl[VM_CGROUP_MAX_FDS];
    size_t n = places_of(dir, pl);
    for (size_t i = 0; i < n; i++) {
        em_err ignored; /* no cgroup (ENVMGR_CGROUP=off, not root): nothing was raised */
        if (pl[i].v2)
            write_text(pl[i].dir, "cpu.weight", WEIGHT_V2_RUNNING, &ignored);
        else if (!strcmp(pl[i].what, "cpu"))
            write_text(pl[i].dir, "cpu.shares", WEIGHT_V1_RUNNING, &ignored);
        free(pl[i].dir);
    }
}

void vm_cgroup_remove(const char *dir)
{
    place pl[VM_CGROUP_MAX_FDS];
    size_t n = places_of(dir, pl);
    double deadline = now_ms() + 2000;
    for (size_t i = 0; i < n; i++) {
        /* What QEMU's user left running (a QEMU taken over can fork) dies with the env: it would
         * otherwise outlive it as a user id the next env may be given. A process killed a moment
         * ago leaves its cgroup only once the kernel has reaped it; killing again each round
         * catches what forked meanwhile (the pids limit bounds how many). */
        while (rmdir(pl[i].dir) < 0 && errno == EBUSY && now_ms() < deadline) {
            kill_members(pl[i].dir);
            sleep_ms(10);
        }
        free(pl[i].dir);
    }
}

/* An env may be about to start a QEMU in its cgroup (a reset, between its old QEMU's end and its
 * new one joining): the cgroup of a run directory that exists. (An env of another run root is not
 * seen from this one: gc there is the operator's, with its own root.) */
static bool cgroup_may_be_used(const char *name)
{
    DIR *d = opendir(paths_run_root());
    struct dirent *de;
    bool found = false;
    while (d && !found && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char mine[18];
        _cleanup_free_ char *dir = paths_env_dir(de->d_name);
        cgroup_name(dir, mine);
        found = !strcmp(mine, name);
    }
    if (d)
        closedir(d);
    return found;
}

int vm_cgroup_orphans(bool dry_run)
{
    char why[300];
    place pl[VM_CGROUP_MAX_FDS];
    size_t n = 0;
    if (find_places("", pl, &n, why, sizeof why) < 0)
        return 0;
    int removed = 0;
    for (size_t i = 0; i < n; i++) {
        DIR *d = opendir(pl[i].dir); /* <...>/envmgr/ */
        struct dirent *de;
        while (d && (de = readdir(d))) {
            if (de->d_name[0] != 'e' || strlen(de->d_name) != 17)
                continue;
            _cleanup_free_ char *cg = xasprintf("%s%s", pl[i].dir, de->d_name), *procs = NULL;
            _cleanup_free_ char *procs_path = xasprintf("%s/cgroup.procs", cg);
            em_err ignored;
            if (read_file_capped(procs_path, 1 << 16, &procs, NULL, &ignored) < 0 || procs[0] ||
                cgroup_may_be_used(de->d_name))
                continue; /* in use, about to be, or unreadable: never touched */
            if (dry_run || rmdir(cg) == 0)
                removed += i == 0; /* one env has one cgroup per controller: count it once */
        }
        if (d)
            closedir(d);
        free(pl[i].dir);
    }
    return removed;
}

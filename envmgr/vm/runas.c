#include "envmgr/vm/runas.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/boundaries.h"

#define REGISTRY "/run/envmgr-qemu-users"

static bool runas_wanted(void)
{
    const char *v = getenv("ENVMGR_QEMU_RUNAS");
    return geteuid() == 0 && !(v && !strcmp(v, "off"));
}

static int parse_uid(const char *text, uid_t *uid)
{
    long v;
    char buf[32];
    snprintf(buf, sizeof buf, "%s", text);
    buf[strcspn(buf, "\r\n")] = '\0';
    if (parse_int(buf, VM_RUNAS_UID_BASE, (long)VM_RUNAS_UID_BASE + VM_RUNAS_UID_COUNT - 1, &v) < 0)
        return -1;
    *uid = (uid_t)v;
    return 0;
}

/* The run directory a registry entry names ("" when unreadable). */
static void entry_owner(uid_t uid, char *out, size_t len)
{
    _cleanup_free_ char *p = xasprintf(REGISTRY "/%u", (unsigned)uid), *text = NULL;
    em_err ignored;
    out[0] = '\0';
    if (read_file_flags(p, 4096, O_NOFOLLOW, &text, NULL, &ignored) == 0)
        snprintf(out, len, "%s", text);
}

int vm_runas_read(const char *dir, vm_runas *out, em_err *err)
{
    *out = (vm_runas){0};
    _cleanup_free_ char *p = xasprintf("%s/" VM_RUNAS_FILE, dir), *text = NULL;
    if (access(p, F_OK) != 0)
        return 0;
    if (read_file_flags(p, 64, O_NOFOLLOW, &text, NULL, err) < 0)
        return -1;
    uid_t uid;
    if (parse_uid(text, &uid) < 0)
        return em_fail(err, "`%s` holds no envmgr QEMU user id", p);
    *out = (vm_runas){true, uid, (gid_t)uid};
    return 0;
}

/* One bit per id from VM_RUNAS_UID_BASE: the ids some process still runs as. */
typedef struct busy_ids {
    uint8_t bits[VM_RUNAS_UID_COUNT / 8];
} busy_ids;

static bool in_range(unsigned long id)
{
    return id >= VM_RUNAS_UID_BASE && id - VM_RUNAS_UID_BASE < VM_RUNAS_UID_COUNT;
}

static bool is_busy(const busy_ids *b, unsigned long id)
{
    return in_range(id) && (b->bits[(id - VM_RUNAS_UID_BASE) / 8] & (1u << ((id - VM_RUNAS_UID_BASE) % 8)));
}

static void set_busy(busy_ids *b, unsigned long id)
{
    if (in_range(id))
        b->bits[(id - VM_RUNAS_UID_BASE) / 8] |= (uint8_t)(1u << ((id - VM_RUNAS_UID_BASE) % 8));
}

/* Marks the ids some process still runs as: a process an env's QEMU user left behind must never
 * share its id with the next env. */
static void mark_busy_uids(busy_ids *b)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        long pid;
        unsigned long ids[4];
        if (parse_int(de->d_name, 1, 1 << 30, &pid) < 0 || vm_proc_uids((pid_t)pid, ids) < 0)
            continue; /* not a process, or gone meanwhile */
        for (int i = 0; i < 4; i++)
            set_busy(b, ids[i]);
    }
    if (d)
        closedir(d);
}

int vm_runas_acquire(const char *dir, vm_runas *out, em_err *err)
{
    *out = (vm_runas){0};
    if (!runas_wanted())
        return 0;
    char owner[4096];
    if (vm_runas_read(dir, out, err) < 0)
        return -1;
    if (out->drop) {
        entry_owner(out->uid, owner, sizeof owner);
        if (!strcmp(owner, dir))
            return 0;
        *out = (vm_runas){0};
    }
    /* 0711: env users reach their socket and the relay binary in it; nobody lists it */
    if (mkdir_p(REGISTRY, 0711, err) < 0 || chmod(REGISTRY, 0711) < 0)
        return em_prefix(err, "QEMU user registry: ");
    _cleanup_close_ int lock = open(REGISTRY "/.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock < 0)
        return em_fail_errno(err, "open `%s`", REGISTRY "/.lock");
    while (flock(lock, LOCK_EX) < 0)
        if (errno != EINTR)
            return em_fail_errno(err, "lock `%s`", REGISTRY "/.lock");
    busy_ids busy = {0};
    mark_busy_uids(&busy);
    for (uid_t uid = VM_RUNAS_UID_BASE; uid < VM_RUNAS_UID_BASE + VM_RUNAS_UID_COUNT; uid++) {
        if (is_busy(&busy, uid))
            continue; /* a running env's, or a process of it outlived its env */
        _cleanup_free_ char *entry = xasprintf(REGISTRY "/%u", (unsigned)uid);
        struct stat st;
        if (lstat(entry, &st) == 0) {
            entry_owner(uid, owner, sizeof owner);
            _cleanup_free_ char *mark = xasprintf("%s/" VM_RUNAS_FILE, owner);
            _cleanup_free_ char *text = NULL;
            em_err ignored;
            uid_t held;
            /* Still claimed while its run directory exists and says it holds this id. */
            if (owner[0] && strcmp(owner, dir) && read_file_flags(mark, 64, O_NOFOLLOW, &text, NULL, &ignored) == 0 &&
                parse_uid(text, &held) == 0 && held == uid)
                continue;
        }
        char text[32];
        int n = snprintf(text, sizeof text, "%u\n", (unsigned)uid);
        _cleanup_free_ char *mark = xasprintf("%s/" VM_RUNAS_FILE, dir);
        if (write_file_atomic(entry, dir, strlen(dir), 0600, err) < 0 ||
            write_file_atomic(mark, text, (size_t)n, 0600, err) < 0)
            return em_prefix(err, "claim QEMU user %u: ", (unsigned)uid);
        *out = (vm_runas){true, uid, (gid_t)uid};
        return 0;
    }
    return em_fail(err, "all %u QEMU user ids from %u are claimed (see %s)", VM_RUNAS_UID_COUNT, VM_RUNAS_UID_BASE,
                   REGISTRY);
}

void vm_runas_release(const char *dir)
{
    vm_runas r;
    em_err ignored;
    if (geteuid() != 0 || vm_runas_read(dir, &r, &ignored) < 0 || !r.drop)
        return;
    char owner[4096];
    entry_owner(r.uid, owner, sizeof owner);
    if (!strcmp(owner, dir)) {
        _cleanup_free_ char *entry = xasprintf(REGISTRY "/%u", (unsigned)r.uid), *sock = vm_runas_socket(&r);
        unlink(sock);
        unlink(entry);
    }
}

int vm_runas_orphans(bool dry_run)
{
    DIR *d = opendir(REGISTRY);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        uid_t uid;
        char owner[4096];
        if (parse_uid(de->d_name, &uid) < 0)
            continue;
        entry_owner(uid, owner, sizeof owner);
        struct stat st;
        if (owner[0] && stat(owner, &st) == 0)
            continue;
        n++;
        if (!dry_run) {
            vm_runas r = {true, uid, (gid_t)uid};
            _cleanup_free_ char *entry = xasprintf(REGISTRY "/%u", (unsigned)uid), *sock = vm_runas_socket(&r);
            unlink(sock);
            unlink(entry);
        }
    }
    closedir(d);
    return n;
}

char *vm_runas_socket(const vm_runas *r)
{
    return xasprintf(REGISTRY "/%u.sock", (unsigned)r->uid);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int vm_runas_helper(const vm_runas *r, const char *helper, char **out, em_err *err)
{
    *out = NULL;
    if (!r->drop) {
        *out = xstrdup(helper);
        return 0;
    }
    _cleanup_free_ char *dir = xstrdup(REGISTRY "/bin"), *target = xstrdup(REGISTRY "/bin/envmgr");
    struct stat src, dst;
    if (stat(helper, &src) < 0)
        return em_fail_errno(err, "relay helper `%s`", helper);
    if (lstat(target, &dst) == 0 && S_ISREG(dst.st_mode) && dst.st_uid == 0 && same_file(&src, &dst)) {
        *out = xstrdup(target);
        return 0;
    }
    if (mkdir_p(dir, 0755, err) < 0)
        return em_prefix(err, "relay helper: ");
    /* A fresh name per writer, renamed over the old copy: envs starting at once never see a half copy. */
    _cleanup_free_ char *tmp = xasprintf("%s/.envmgr.%d", dir, (int)getpid()), *data = NULL;
    size_t len = 0;
    if (read_file_capped(helper, 256u << 20, &data, &len, err) < 0)
        return em_prefix(err, "relay helper: ");
    unlink(tmp);
    int rc = write_file_atomic(tmp, data, len, 0755, err);
    struct timespec times[2] = {src.st_atim, src.st_mtim};
    if (rc == 0 && (chmod(tmp, 0755) < 0 || utimensat(AT_FDCWD, tmp, times, 0) < 0 || rename(tmp, target) < 0))
        rc = em_fail_errno(err, "relay helper: install `%s`", target);
    if (rc < 0) {
        unlink(tmp);
        return -1;
    }
    *out = xstrdup(target);
    return 0;
}

int vm_runas_become(const vm_runas *r, em_err *err)
{
    if (!r->drop)
        return 0;
    if (setgroups(1, &r->gid) < 0 || setgid(r->gid) < 0 || setuid(r->uid) < 0)
        return em_fail_errno(err, "become QEMU user %u", (unsigned)r->uid);
    if (setuid(0) == 0) /* must be impossible now */
        return em_fail(err, "become QEMU user %u: root could be regained", (unsigned)r->uid);
    return 0;
}

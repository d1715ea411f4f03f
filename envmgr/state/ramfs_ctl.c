/* Starting, finding and stopping the FUSE server of a state's RAM (ramfs.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "envmgr/base/paths.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "envmgr/state/ramfs.h"

#define FUSE_MAGIC 0x65735546
#define START_WAIT_MS 15000.0

bool ramfs_available(void)
{
    int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return false;
    close(fd);
    return geteuid() == 0 || access("/usr/bin/fusermount3", X_OK) == 0;
}

bool ramfs_live(const char *mountpoint, const char *file_name, uint64_t ram_bytes)
{
    struct statfs fs;
    struct stat st;
    _cleanup_free_ char *file = xasprintf("%s/%s", mountpoint, file_name);
    return statfs(mountpoint, &fs) == 0 && fs.f_type == FUSE_MAGIC && stat(file, &st) == 0 && S_ISREG(st.st_mode) &&
           (uint64_t)st.st_size == ram_bytes;
}

/* A request made after the server's connection was aborted fails with ENOTCONN; one already queued
 * when it was aborted fails with ECONNABORTED (a killed server's warm-up child still held the
 * connection for a moment: the stat that came in that moment waited and was ended so). Both say
 * nobody will ever answer. */
bool ramfs_dead(const char *mountpoint)
{
    struct stat st;
    return stat(mountpoint, &st) < 0 && (errno == ENOTCONN || errno == ECONNABORTED);
}

/* Something (a live or a dead FUSE mount) is mounted at path. */
static bool mounted(const char *path)
{
    struct stat here, up;
    _cleanup_free_ char *parent = xasprintf("%s/..", path);
    if (stat(path, &here) < 0)
        return ramfs_dead(path);
    return stat(parent, &up) == 0 && here.st_dev != up.st_dev;
}

int ramfs_unmount(const char *mountpoint, em_err *err)
{
    if (mounted(mountpoint)) {
        if (geteuid() == 0) {
            if (umount2(mountpoint, MNT_DETACH) < 0 && errno != EINVAL)
                return em_fail_errno(err, "unmount `%s`", mountpoint);
        } else {
            const char *argv[] = {"fusermount3", "-u", "-z", "-q", mountpoint, NULL};
            spawn_opts so = {.argv = argv, .fd_in = SPAWN_DEVNULL, .fd_out = SPAWN_DEVNULL, .fd_err = SPAWN_DEVNULL};
            spawn_result r;
            spawn_io io = {.timeout_ms = 10000};
            if (spawn_run(&so, &io, &r, err) < 0)
                return em_prefix(err, "unmount `%s`: ", mountpoint);
            spawn_result_free(&r);
        }
    }
    if (rmdir(mountpoint) < 0 && errno != ENOENT)
        return em_fail_errno(err, "remove `%s`", mountpoint);
    return 0;
}

/* The server's first line: "ok", or its error. */
static int wait_ready(int fd, pid_t pid, em_err *err)
{
    char line[EM_ERR_MAX];
    size_t n = 0;
    double deadline = now_ms() + START_WAIT_MS;
    while (n < sizeof line - 1) {
        double left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = left > 0 ? poll(&p, 1, (int)left + 1) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return em_fail(err, "its FUSE server (pid %d) did not mount within %.0f s", (int)pid,
                           START_WAIT_MS / 1000);
        ssize_t got = read(fd, line + n, sizeof line - 1 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
        if (memchr(line, '\n', n))
            break;
    }
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (!strcmp(line, "ok"))
        return 0;
    return em_fail(err, "its FUSE server: %s", n ? line : "ended before it mounted (its log says why)");
}

int ramfs_start(const ramfs_opts *o, const char *log_path, em_err *err)
{
    if (mkdir(o->mountpoint, 0700) < 0 && errno != EEXIST)
        return em_fail_errno(err, "create `%s`", o->mountpoint);
    _cleanup_close_ int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (logfd < 0)
        return em_fail_errno(err, "open `%s`", log_path);
    char bytes[32], idle[32];
    snprintf(bytes, sizeof bytes, "%" PRIu64, o->ram_bytes);
    snprintf(idle, sizeof idle, "%.3f", o->idle_s);
    const char **argv = xcalloc(o->ndeltas + 10, sizeof *argv);
    size_t a = 0;
    argv[a++] = paths_envmgr_bin();
    argv[a++] = "__ramfs";
    argv[a++] = o->mountpoint;
    argv[a++] = o->file_name;
    argv[a++] = bytes;
    argv[a++] = idle;
    argv[a++] = o->lock_path;
    argv[a++] = o->warm_path;
    argv[a++] = o->golden_ram;
    for (size_t i = 0; i < o->ndeltas; i++)
        argv[a++] = o->deltas[i];
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        free(argv);
        return em_fail_errno(err, "pipe");
    }
    /* in / : a server must hold no folder of anyone's busy */
    spawn_opts so = {.argv = argv, .cwd = "/", .fd_in = SPAWN_DEVNULL, .fd_out = logfd, .fd_err = logfd,
                     .pass_fds = &p[1], .npass = 1};
    pid_t pid = 0;
    int rc = spawn_detached(&so, NULL, START_WAIT_MS, &pid, err);
    close(p[1]);
    free(argv);
    if (rc == 0)
        rc = wait_ready(p[0], pid, err);
    close(p[0]);
    return rc < 0 ? em_prefix(err, "serve the state's RAM at `%s`: ", o->mountpoint) : 0;
}

/* envmgr __ramfs MOUNTPOINT FILE_NAME RAM_BYTES IDLE_S LOCK WARM GOLDEN_RAM [DELTA...], the ready
 * pipe as fd 3 */
int ramfs_main(int argc, char **argv)
{
    if (argc < 8) {
        fprintf(stderr, "envmgr __ramfs: started by envmgr, not by hand\n");
        return EM_EXIT_USAGE;
    }
    char *end;
    ramfs_opts o = {.mountpoint = argv[1], .file_name = argv[2], .lock_path = argv[5], .warm_path = argv[6],
                    .golden_ram = argv[7], .deltas = (const char *const *)argv + 8, .ndeltas = (size_t)(argc - 8)};
    errno = 0;
    o.ram_bytes = strtoull(argv[3], &end, 10);
    bool bad = errno || *end || !o.ram_bytes;
    o.idle_s = strtod(argv[4], &end);
    if (bad || *end || o.idle_s < 0) {
        fprintf(stderr, "envmgr __ramfs: bad RAM size or idle time\n");
        return EM_EXIT_USAGE;
    }
    em_err err = {0};
    if (ramfs_serve(&o, 3, &err) < 0) {
        fprintf(stderr, "envmgr __ramfs: %s\n", err.msg);
        return EM_EXIT_FAIL;
    }
    return 0;
}

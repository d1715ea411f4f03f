#include "envmgr/vm/qemu_log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/paths.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/vm/runas.h"
#include "envmgr/vm/vm.h"

static void write_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(1, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a full disk or a closed file: nothing better to do with a log line */
        p += w;
        n -= (size_t)w;
    }
}

int vm_log_keeper_main(const char *dir)
{
    signal(SIGINT, SIG_IGN); /* only the end of its input ends it */
    signal(SIGPIPE, SIG_IGN);
    vm_runas r;
    em_err err;
    if (vm_runas_read(dir, &r, &err) < 0 || vm_runas_become(&r, &err) < 0) {
        em_log(EM_LOG_ERROR, "envmgr: QEMU log keeper: %s", err.msg);
        return 1;
    }
    char buf[16384];
    size_t kept = 0;
    unsigned long long dropped = 0;
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t room = VM_LOG_MAX - kept, take = (size_t)n < room ? (size_t)n : room;
        write_all(buf, take);
        kept += take;
        if (take < (size_t)n) {
            if (!dropped) {
                char note[128];
                int len = snprintf(note, sizeof note, "\nenvmgr: QEMU's log reached %u bytes; the rest is dropped\n",
                                   VM_LOG_MAX);
                write_all(note, (size_t)len);
            }
            dropped += (size_t)n - take;
        }
    }
    return 0;
}

int vm_log_keeper_start(const char *dir, const int *cg, size_t ncg, int *wfd, pid_t *pid, em_err *err)
{
    *wfd = -1;
    _cleanup_free_ char *log = xasprintf("%s/" VM_LOG_FILE, dir), *prev = xasprintf("%s/" VM_LOG_FILE ".prev", dir);
    rename(log, prev); /* one log per QEMU life, each capped */
    _cleanup_close_ int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (logfd < 0)
        return em_fail_errno(err, "qemu: open `%s`", log);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return em_fail_errno(err, "qemu: log pipe");
    const char *argv[] = {paths_envmgr_bin(), "__qemu-log", dir, NULL};
    spawn_opts ko = {.argv = argv, .fd_in = p[0], .fd_out = logfd, .fd_err = logfd, .join_fds = cg, .njoin = ncg};
    int rc = spawn_detached(&ko, NULL, 10000, pid, err);
    close(p[0]);
    if (rc < 0) {
        close(p[1]);
        return em_prefix(err, "qemu: log keeper: ");
    }
    *wfd = p[1];
    return 0;
}

void vm_log_keeper_wait(pid_t pid)
{
    double deadline = now_ms() + 500;
    while (pid_running(pid) && now_ms() < deadline)
        sleep_ms(5);
}

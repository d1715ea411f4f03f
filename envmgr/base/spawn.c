#include "envmgr/base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

/* What the child reports on the close-on-exec pipe. */
enum stage { ST_NONE, ST_SETSID, ST_SETPGID, ST_PDEATHSIG, ST_PARENT_GONE, ST_NO_NEW_PRIVS, ST_RLIMIT, ST_DUP,
             ST_CHDIR, ST_EXEC, ST_FORK, ST_SUBREAPER, ST_CGROUP, ST_NETNS, ST_LOOPBACK };
static const char *const stage_names[] = {"", "setsid", "setpgid", "PR_SET_PDEATHSIG", "its parent exited first",
                                          "PR_SET_NO_NEW_PRIVS", "setrlimit", "dup2", "chdir", "exec", "fork",
                                          "PR_SET_CHILD_SUBREAPER", "joining its cgroup",
                                          "a network namespace of its own (unshare CLONE_NEWNET)",
                                          "bringing up `lo` in its network namespace"};
enum msg_kind { MSG_ERROR = 1, MSG_PID = 2 };
typedef struct child_msg {
    int kind;
    int who; /* 0: the child, 1: the supervisor */
    int stage;
    int err;
    pid_t pid;
} child_msg;

typedef struct prepared {
    const spawn_opts *o;
    char path[PATH_MAX];
    char *const *argv;
    char *const *envp;
    int fds[3];
    pid_t parent; /* for pdeathsig: the process that must still be our parent */
} prepared;

static int devnull_fd = -1; /* opened once, before any fork, and kept: children dup it */
static pthread_once_t devnull_once = PTHREAD_ONCE_INIT;

static void open_devnull(void)
{
    devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
}

/* argv[0] as execve needs it: a path, or the first executable of that name in PATH. */
static int resolve(const char *name, char *out, size_t len, em_err *err)
{
    if (strchr(name, '/')) {
        if ((size_t)snprintf(out, len, "%s", name) >= len)
            return em_fail(err, "`%.100s`: path too long", name);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && (size_t)snprintf(out, len, "%.*s/%s", (int)n, p, name) < len && access(out, X_OK) == 0)
            return 0;
        if (!e)
            break;
        p = e + 1;
    }
    errno = ENOENT;
    return em_fail_errno(err, "exec `%s`: not found in PATH", name);
}

static int prepare(const spawn_opts *o, prepared *p, em_err *err)
{
    memset(p, 0, sizeof *p);
    p->o = o;
    if (!o->argv || !o->argv[0])
        return em_fail(err, "spawn: no program");
    if (o->npass > SPAWN_PASS_MAX)
        return em_fail(err, "spawn `%s`: more than %d fds to pass", o->argv[0], SPAWN_PASS_MAX);
    if (resolve(o->argv[0], p->path, sizeof p->path, err) < 0)
        return -1;
    pthread_once(&devnull_once, open_devnull);
    if (devnull_fd < 0)
        return em_fail_errno(err, "open /dev/null");
    p->argv = (char *const *)o->argv;
    p->envp = o->envp ? (char *const *)o->envp : environ;
    int in[3] = {o->fd_in, o->fd_out, o->fd_err};
    for (int i = 0; i < 3; i++)
        p->fds[i] = in[i] == SPAWN_DEVNULL ? devnull_fd : in[i];
    p->parent = getpid();
    return 0;
}

/* ---- in the child: async-signal-safe calls only ---- */

static void report(int fd, int who, int stage)
{
    child_msg m = {.kind = MSG_ERROR, .who = who, .stage = stage, .err = errno};
    ssize_t w = write(fd, &m, sizeof m);
    (void)w;
}

static void reset_signals(void)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL); /* glibc's internal signals refuse: fine */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static void format_pid(char *buf, size_t len, pid_t pid)
{
    char tmp[24];
    size_t n = 0;
    unsigned long v = (unsigned long)pid;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) && n < sizeof tmp);
    size_t i = 0;
    for (; i < n && i + 1 < len; i++)
        buf[i] = tmp[n - 1 - i];
    if (len)
        buf[i] = '\0';
}

/* A new network namespace has `lo` down: up it with one ioctl (no `ip` binary). Syscalls only. */
static int new_netns(int msgfd, int who)
{
    if (unshare(CLONE_NEWNET) < 0) {
        report(msgfd, who, ST_NETNS);
        return -1;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
    if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
        report(msgfd, who, ST_LOOPBACK);
        return -1;
    }
    close(s);
    return 0;
}

static void __attribute__((noreturn)) child_exec(const prepared *p, int msgfd, int who)
{
    const spawn_opts *o = p->o;
    reset_signals();
    if (o->npass) { /* passed fds go to 3, 4, ...: the message pipe must not sit there */
        int high = fcntl(msgfd, F_DUPFD_CLOEXEC, 3 + SPAWN_PASS_MAX + 1);
        if (high >= 0)
            msgfd = high;
    }
    if (o->njoin) {
        char pid[24];
        format_pid(pid, sizeof pid, getpid());
        size_t len = strlen(pid);
        for (size_t i = 0; i < o->njoin; i++)
            if (write(o->join_fds[i], pid, len) != (ssize_t)len) {
                report(msgfd, who, ST_CGROUP);
                _exit(126);
            }
    }
    if ((o->flags & SPAWN_NEWNET) && new_netns(msgfd, who) < 0)
        _exit(126);
    if (o->flags & SPAWN_PRIVATE_FILES)
        umask(077);
    if ((o->flags & SPAWN_SETSID) && setsid() < 0) {
        report(msgfd, who, ST_SETSID);
        _exit(126);
    }
    if ((o->flags & SPAWN_PGROUP) && !(o->flags & SPAWN_SETSID) && setpgid(0, 0) < 0) {
        report(msgfd, who, ST_SETPGID);
        _exit(126);
    }
    if (o->pdeathsig > 0) {
        if (prctl(PR_SET_PDEATHSIG, o->pdeathsig) < 0) {
            report(msgfd, who, ST_PDEATHSIG);
            _exit(126);
        }
        if (getppid() != p->parent) {
            errno = ESRCH;
            report(msgfd, who, ST_PARENT_GONE);
            _exit(126);
        }
    }
    if ((o->flags & SPAWN_NO_NEW_PRIVS) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        report(msgfd, who, ST_NO_NEW_PRIVS);
        _exit(126);
    }
    for (size_t i = 0; i < o->nrlimits; i++) {
        struct rlimit rl = {o->rlimits[i].limit, o->rlimits[i].limit};
        if (setrlimit(o->rlimits[i].resource, &rl) < 0) {
            report(msgfd, who, ST_RLIMIT);
            _exit(126);
        }
    }
    /* Move the sources above every target first, so placing one cannot overwrite another. */
    int high[3 + SPAWN_PASS_MAX];
    size_t nfd = 3 + (o->npass < SPAWN_PASS_MAX ? o->npass : SPAWN_PASS_MAX);
    for (size_t i = 0; i < nfd; i++)
        if ((high[i] = fcntl(i < 3 ? p->fds[i] : o->pass_fds[i - 3], F_DUPFD_CLOEXEC, (int)nfd + 1)) < 0) {
            report(msgfd, who, ST_DUP);
            _exit(126);
        }
    for (size_t i = 0; i < nfd; i++)
        if (dup2(high[i], (int)i) < 0) { /* dup2 clears close-on-exec on the target */
            report(msgfd, who, ST_DUP);
            _exit(126);
        }
    if (o->cwd && chdir(o->cwd) < 0) {
        report(msgfd, who, ST_CHDIR);
        _exit(126);
    }
    /* Nothing of the caller's but 0, 1, 2 and the passed fds survives the exec (the message pipe
     * is already close-on-exec). */
    if (close_range((unsigned)nfd, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
        for (int fd = (int)nfd; fd < 1024; fd++)
            if (fd != msgfd)
                close(fd);
    execve(p->path, p->argv, p->envp);
    report(msgfd, who, ST_EXEC);
    _exit(127);
}

/* ---- in the parent ---- */

static int child_error(const prepared *p, const child_msg *m, em_err *err)
{
    errno = m->err;
    const char *stage = m->stage > 0 && m->stage < (int)ARRAY_LEN(stage_names) ? stage_names[m->stage] : "start";
    if (m->stage == ST_EXEC)
        return em_fail_errno(err, "exec `%s`", p->path);
    return em_fail_errno(err, "start `%s`: %s", p->path, stage);
}

/* Read child messages until every writer has exec'd or exited (EOF), or the deadline. */
static int read_messages(int fd, double deadline, child_msg *errs, size_t *nerr, pid_t *pid, em_err *err)
{
    child_msg m;
    size_t have = 0;
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0)
            return em_fail(err, "timed out waiting for the program to start");
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)left + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return em_fail_errno(err, "poll");
        if (r == 0)
            continue;
        ssize_t n = read(fd, (char *)&m + have, sizeof m - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return em_fail_errno(err, "read");
        if (n == 0)
            return 0;
        have += (size_t)n;
        if (have < sizeof m)
            continue;
        have = 0;
        if (m.kind == MSG_PID && pid)
            *pid = m.pid;
        else if (m.kind == MSG_ERROR && *nerr < 2)
            errs[(*nerr)++] = m;
    }
}

/* fork with every signal blocked, so no handler of ours runs in the child before it resets them. */
static pid_t fork_blocked(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid != 0)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return pid;
}

int spawn_start(const spawn_opts *o, pid_t *pid_out, em_err *err)
{
    prepared p;
    if (prepare(o, &p, err) < 0)
        return -1;
    int msg[2];
    if (pipe2(msg, O_CLOEXEC) < 0)
        return em_fail_errno(err, "spawn `%s`: pipe", p.path);
    pid_t pid = fork_blocked();
    if (pid < 0) {
        close(msg[0]);
        close(msg[1]);
        return em_fail_errno(err, "spawn `%s`: fork", p.path);
    }
    if (pid == 0) {
        close(msg[0]);
        child_exec(&p, msg[1], 0);
    }
    close(msg[1]);
    if (o->flags & (SPAWN_PGROUP | SPAWN_SETSID))
        setpgid(pid, pid); /* also from here: the group exists before the caller can kill it */
    child_msg errs[2];
    size_t nerr = 0;
    em_err rerr = {0};
    /* exec or _exit closes the pipe promptly; the deadline only guards against the impossible */
    int rc = read_messages(msg[0], now_ms() + 30000, errs, &nerr, NULL, &rerr);
    close(msg[0]);
    if (rc < 0 || nerr) {
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return nerr ? child_error(&p, &errs[0], err) : em_fail(err, "spawn `%s`: %s", p.path, rerr.msg);
    }
    *pid_out = pid;
    return 0;
}

int spawn_detached(const spawn_opts *child, const spawn_opts *supervisor, double timeout_ms, pid_t *pid_out,
                   em_err *err)
{
    /* The child dies with its supervisor; without one, its parent exits at once, so no pdeathsig. */
    spawn_opts co = *child;
    co.pdeathsig = supervisor ? SIGKILL : 0;
    prepared pc, ps;
    if (prepare(&co, &pc, err) < 0 || (supervisor && prepare(supervisor, &ps, err) < 0))
        return -1;
    int msg[2];
    if (pipe2(msg, O_CLOEXEC) < 0)
        return em_fail_errno(err, "spawn `%s`: pipe", pc.path);
    pid_t first = fork_blocked();
    if (first < 0) {
        close(msg[0]);
        close(msg[1]);
        return em_fail_errno(err, "spawn `%s`: fork", pc.path);
    }
    if (first == 0) {
        close(msg[0]);
        if (setsid() < 0) {
            report(msg[1], 0, ST_SETSID);
            _exit(1);
        }
        if (supervisor) { /* one more fork: the supervisor is not our caller's child */
            pid_t sup = fork();
            if (sup < 0)
                report(msg[1], 1, ST_FORK);
            if (sup != 0)
                _exit(sup > 0 ? 0 : 1);
            if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
                report(msg[1], 1, ST_SUBREAPER);
                _exit(1);
            }
        }
        pc.parent = getpid(); /* the child's pdeathsig watches this process: the supervisor */
        pid_t c = fork();
        if (c == 0)
            child_exec(&pc, msg[1], 0);
        if (c < 0) {
            report(msg[1], 0, ST_FORK);
            _exit(1);
        }
        child_msg m = {.kind = MSG_PID, .pid = c};
        ssize_t w = write(msg[1], &m, sizeof m);
        (void)w;
        if (!supervisor)
            _exit(0);
        format_pid(supervisor->pid_arg, supervisor->pid_arg_len, c);
        child_exec(&ps, msg[1], 1); /* on failure the child follows: its pdeathsig */
    }
    close(msg[1]);
    pid_t pid = -1;
    child_msg errs[2];
    size_t nerr = 0;
    em_err rerr = {0};
    int rc = read_messages(msg[0], now_ms() + timeout_ms, errs, &nerr, &pid, &rerr);
    close(msg[0]);
    while (waitpid(first, NULL, 0) < 0 && errno == EINTR)
        ;
    if (rc < 0 || nerr || pid <= 0) {
        if (pid > 0)
            kill(pid, SIGKILL);
        if (nerr)
            return child_error(errs[0].who ? &ps : &pc, &errs[0], err);
        return em_fail(err, "spawn `%s`: %s", pc.path, rc < 0 ? rerr.msg : "no process");
    }
    *pid_out = pid;
    return 0;
}

/* ---- run to completion ---- */

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Read what is there into *buf (at most cap bytes kept); 0 at EOF, 1 more may come, 2 over the cap. */
static int drain(int fd, char **buf, size_t *len, size_t cap)
{
    char tmp[16384];
    for (;;) {
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : 0;
        if (r == 0)
            return 0;
        if (*len + (size_t)r > cap)
            return 2;
        *buf = xrealloc(*buf, *len + (size_t)r + 1);
        memcpy(*buf + *len, tmp, (size_t)r);
        *len += (size_t)r;
        (*buf)[*len] = '\0';
    }
}

int spawn_run(const spawn_opts *o, const spawn_io *io, spawn_result *res, em_err *err)
{
    int in_sv[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
    memset(res, 0, sizeof *res);
    res->out = xstrdup("");
    res->errs = xstrdup("");
    /* stdin is a socket so a child that exits early cannot SIGPIPE us (send + MSG_NOSIGNAL). */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in_sv) < 0 || pipe2(out_p, O_CLOEXEC) < 0 ||
        (!io->merge_stderr && pipe2(err_p, O_CLOEXEC) < 0)) {
        em_fail_errno(err, "spawn `%s`: pipe", o->argv[0]);
        goto fail;
    }
    spawn_opts so = *o;
    so.fd_in = in_sv[1];
    so.fd_out = out_p[1];
    so.fd_err = io->merge_stderr ? out_p[1] : err_p[1];
    so.flags |= SPAWN_PGROUP;
    pid_t pid;
    if (spawn_start(&so, &pid, err) < 0)
        goto fail;
    close_fd(&in_sv[1]);
    close_fd(&out_p[1]);
    close_fd(&err_p[1]);
    fcntl(in_sv[0], F_SETFL, O_NONBLOCK);
    fcntl(out_p[0], F_SETFL, O_NONBLOCK);
    if (err_p[0] >= 0)
        fcntl(err_p[0], F_SETFL, O_NONBLOCK);
    if (io->input_len == 0)
        close_fd(&in_sv[0]);

    double deadline = now_ms() + io->timeout_ms;
    size_t in_off = 0;
    while ((out_p[0] >= 0 || err_p[0] >= 0) && !res->overflow) {
        double left = deadline - now_ms();
        if (left <= 0) {
            res->timed_out = true;
            break;
        }
        struct pollfd pf[3];
        int n = 0, i_in = -1, i_out = -1, i_err = -1;
        if (in_sv[0] >= 0)
            pf[i_in = n++] = (struct pollfd){.fd = in_sv[0], .events = POLLOUT};
        if (out_p[0] >= 0)
            pf[i_out = n++] = (struct pollfd){.fd = out_p[0], .events = POLLIN};
        if (err_p[0] >= 0)
            pf[i_err = n++] = (struct pollfd){.fd = err_p[0], .events = POLLIN};
        int r = poll(pf, (nfds_t)n, (int)left + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            em_fail_errno(err, "poll");
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            goto fail;
        }
        if (i_in >= 0 && pf[i_in].revents) {
            ssize_t w = send(in_sv[0], io->input + in_off, io->input_len - in_off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                in_off += (size_t)w;
            if ((w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) || in_off == io->input_len)
                close_fd(&in_sv[0]); /* done, or the child stopped reading: either way EOF */
        }
        if (i_out >= 0 && pf[i_out].revents) {
            int d = drain(out_p[0], &res->out, &res->out_len, io->out_cap);
            if (d == 2)
                res->overflow = true;
            else if (d == 0)
                close_fd(&out_p[0]);
        }
        if (i_err >= 0 && pf[i_err].revents) {
            int d = drain(err_p[0], &res->errs, &res->err_len, io->err_cap);
            if (d != 1)
                close_fd(&err_p[0]); /* stderr past the cap is dropped, not an error */
        }
    }
    if (res->timed_out || res->overflow)
        kill(-pid, SIGKILL);
    /* Wait for the exit without reaping (WNOWAIT keeps the pid ours), kill whatever the child
     * left running in its group, then reap. */
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof si);
        int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || si.si_pid == pid)
            break;
        if (now_ms() >= deadline && !res->timed_out) {
            res->timed_out = true;
            kill(-pid, SIGKILL);
        }
        sleep_ms(5);
    }
    kill(-pid, SIGKILL);
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    res->status = status;
    res->lost = r != pid;
    close_fd(&in_sv[0]);
    close_fd(&out_p[0]);
    close_fd(&err_p[0]);
    return 0;
fail:
    close_fd(&in_sv[0]);
    close_fd(&in_sv[1]);
    close_fd(&out_p[0]);
    close_fd(&out_p[1]);
    close_fd(&err_p[0]);
    close_fd(&err_p[1]);
    spawn_result_free(res);
    return -1;
}

void spawn_result_free(spawn_result *r)
{
    free(r->out);
    free(r->errs);
    r->out = r->errs = NULL;
}

const char *spawn_status_text(const spawn_result *r, char *buf, size_t len)
{
    if (r->timed_out)
        snprintf(buf, len, "timed out");
    else if (r->lost)
        snprintf(buf, len, "its exit status was lost");
    else if (WIFSIGNALED(r->status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(r->status));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(r->status));
    return buf;
}

/* Starting processes: one way for every child envmgr runs (QEMU and its supervisor, the KVM
 * probe, qemu-img, stdio agents, evaluator scripts).
 *
 * Everything the child needs (the resolved program path, argv, envp, /dev/null, rlimits) is
 * prepared before fork, and between fork and exec the child makes only async-signal-safe calls
 * (raw syscalls: no malloc, no stdio, no locks), so a child forked from a thread of the HTTP
 * server cannot deadlock on a lock another thread held at fork time. A failure in the child
 * (exec, chdir, prctl, setrlimit) comes back to the parent through a close-on-exec pipe as a
 * stage and an errno, and spawn_start reports it as an error: the child never prints. */
#ifndef ENVMGR_BASE_SPAWN_H
#define ENVMGR_BASE_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

#define SPAWN_DEVNULL (-1) /* as fd_in/fd_out/fd_err: /dev/null */
#define SPAWN_PASS_MAX 4

enum {
    SPAWN_SETSID = 1 << 0,       /* a new session (and process group): no terminal signals reach it */
    SPAWN_PGROUP = 1 << 1,       /* its own process group, so killing -pid takes what it started */
    SPAWN_NO_NEW_PRIVS = 1 << 2, /* PR_SET_NO_NEW_PRIVS; the child is not started when that fails */
    SPAWN_PRIVATE_FILES = 1 << 3, /* umask 077: files and sockets it creates are its user's alone */
    SPAWN_NEWNET = 1 << 4,       /* a network namespace of its own with only `lo`, up (needs CAP_SYS_ADMIN):
                                    what it listens on is reachable only by a process that enters it */
};

typedef struct spawn_rlimit {
    int resource; /* RLIMIT_* */
    rlim_t limit; /* soft and hard */
} spawn_rlimit;

typedef struct spawn_opts {
    const char *const *argv; /* argv[0]: a path, or a name looked up in PATH (before fork) */
    const char *const *envp; /* NULL: the caller's environment */
    const char *cwd;         /* NULL: the caller's */
    int fd_in, fd_out, fd_err; /* the child's 0, 1, 2 (SPAWN_DEVNULL for /dev/null); every other fd is closed */
    unsigned flags;
    int pdeathsig;             /* > 0: sent to the child when its parent dies (it is not started if the parent already has) */
    const spawn_rlimit *rlimits;
    size_t nrlimits;
    /* Open (for writing) cgroup.procs files the child joins before anything else: it writes
     * its own pid to each, so it never runs outside its cgroups. */
    const int *join_fds;
    size_t njoin;
    /* Open fds the child gets as 3, 4, ... (e.g. a file QEMU may reopen by its /dev/fdset
     * name once it has dropped the rights to open it by path). */
    const int *pass_fds;
    size_t npass;
    /* Only for spawn_detached's supervisor: a buffer argv points into that receives the
     * detached child's pid as decimal text before the supervisor execs. */
    char *pid_arg;
    size_t pid_arg_len;
} spawn_opts;

/* Start a child. Signal dispositions and the signal mask are reset to the defaults in the
 * child. Returns 0 with *pid once the program runs (exec succeeded), or -1 with err naming the
 * program and what failed ("exec `x`: No such file or directory"). */
int spawn_start(const spawn_opts *o, pid_t *pid, em_err *err);

/* Start a child that is not ours: it is reparented to init (or to the supervisor) in a session
 * of its own, so it outlives this process and Ctrl-C at the terminal does not reach it. With a
 * supervisor, the supervisor (started with the child's pid in supervisor->pid_arg) becomes the
 * child's parent and reaper, and the child gets SIGKILL when the supervisor dies (child->pdeathsig
 * is ignored: it is SIGKILL with a supervisor, none without). Returns 0 with the child's pid once
 * both exec'd. */
int spawn_detached(const spawn_opts *child, const spawn_opts *supervisor, double timeout_ms, pid_t *pid,
                   em_err *err);

/* Run to completion with input on stdin, stdout and stderr captured (each up to cap bytes, NUL
 * terminated), and a deadline after which the whole process group is killed. fd_* of o are
 * ignored (set here); SPAWN_PGROUP is implied. merge_stderr sends stderr into out. */
typedef struct spawn_result {
    char *out, *errs;    /* malloc'd; free with spawn_result_free */
    size_t out_len, err_len;
    int status;          /* as waitpid */
    bool timed_out;      /* killed at the deadline */
    bool overflow;       /* stdout went over the cap (the group was killed) */
    bool lost;           /* reaped elsewhere: status unknown */
} spawn_result;

typedef struct spawn_io {
    const char *input;   /* may be NULL */
    size_t input_len;
    size_t out_cap, err_cap;
    double timeout_ms;
    bool merge_stderr;
} spawn_io;

int spawn_run(const spawn_opts *o, const spawn_io *io, spawn_result *res, em_err *err);
void spawn_result_free(spawn_result *r);

/* The first line of a finished run's output, for messages ("qemu-img failed: ..."). */
const char *spawn_status_text(const spawn_result *r, char *buf, size_t len);

#endif

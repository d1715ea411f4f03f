/* Test helper: starve one thread of another process, as a loaded host starves a TCG guest's vCPU,
 * without taking any CPU from anyone. It stops the thread (a ptrace stop: the rest of its process,
 * QEMU's main loop included, runs on) for STOP_MS, lets it run RUN_MS, and again, until SIGTERM or
 * SIGINT; then it lets the thread go (detach) and exits 0. Exit 1: the thread cannot be traced (not
 * root, or Yama's ptrace_scope), or it went away.
 *   vstall TID STOP_MS RUN_MS */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void nap(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (!stopping && nanosleep(&t, &t) < 0 && errno == EINTR)
        ;
}

/* Stop the thread; the signal to pass on when it is let go (a stop for a signal it was being sent,
 * not for our interrupt), or -1 when it is gone. */
static int halt(pid_t tid)
{
    int st;
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 || waitpid(tid, &st, __WALL) < 0 || !WIFSTOPPED(st))
        return -1;
    return (st >> 16) == 0 ? WSTOPSIG(st) : 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: vstall TID STOP_MS RUN_MS\n");
        return 2;
    }
    pid_t tid = (pid_t)atoi(argv[1]);
    long stop_ms = atol(argv[2]), run_ms = atol(argv[3]);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
        perror("vstall: ptrace seize");
        return 1;
    }
    int sig = 0;
    bool held = false;
    while (!stopping) {
        if ((sig = halt(tid)) < 0)
            return 1;
        held = true;
        nap(stop_ms);
        if (stopping)
            break;
        ptrace(PTRACE_CONT, tid, 0, (void *)(long)sig);
        held = false;
        nap(run_ms);
    }
    if (!held && (sig = halt(tid)) < 0)
        return 1;
    ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
    return 0;
}

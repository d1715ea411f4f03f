/* base/spawn: the one way envmgr starts processes. Real children, real signals. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

static int run_sh(const char *script, double timeout_ms, spawn_result *r)
{
    const char *const argv[] = {"sh", "-c", script, NULL};
    spawn_opts o = {.argv = argv};
    spawn_io io = {.out_cap = 4096, .err_cap = 4096, .timeout_ms = timeout_ms};
    em_err err = {0};
    return spawn_run(&o, &io, r, &err);
}

static void test_output_and_status(void)
{
    spawn_result r;
    CU_ASSERT_EQUAL_FATAL(run_sh("echo out; echo err >&2; exit 3", 5000, &r), 0);
    CU_ASSERT_STRING_EQUAL(r.out, "out\n");
    CU_ASSERT_STRING_EQUAL(r.errs, "err\n");
    CU_ASSERT(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 3);
    CU_ASSERT_FALSE(r.timed_out);
    char buf[64];
    CU_ASSERT_STRING_EQUAL(spawn_status_text(&r, buf, sizeof buf), "exited with status 3");
    spawn_result_free(&r);

    /* stdin is fed and closed */
    const char *const argv[] = {"cat", NULL};
    spawn_opts o = {.argv = argv};
    spawn_io io = {.input = "hello\n", .input_len = 6, .out_cap = 64, .err_cap = 64, .timeout_ms = 5000};
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(spawn_run(&o, &io, &r, &err), 0);
    CU_ASSERT_STRING_EQUAL(r.out, "hello\n");
    spawn_result_free(&r);
}

static bool pid_gone_soon(pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        sleep_ms(10);
    }
    return false;
}

static void test_timeout_kills_the_group(void)
{
    spawn_result r;
    double t0 = now_ms();
    /* the background sleep is a grandchild: the deadline must take it too */
    CU_ASSERT_EQUAL_FATAL(run_sh("sleep 60 & echo $!; sleep 60", 500, &r), 0);
    CU_ASSERT_TRUE(r.timed_out);
    CU_ASSERT(now_ms() - t0 < 5000);
    pid_t bg = (pid_t)atoi(r.out);
    CU_ASSERT_FATAL(bg > 1);
    CU_ASSERT_TRUE(pid_gone_soon(bg));
    spawn_result_free(&r);
}

static void test_output_cap(void)
{
    const char *const argv[] = {"sh", "-c", "yes", NULL};
    spawn_opts o = {.argv = argv};
    spawn_io io = {.out_cap = 1024, .err_cap = 64, .timeout_ms = 10000};
    spawn_result r;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(spawn_run(&o, &io, &r, &err), 0);
    CU_ASSERT_TRUE(r.overflow);
    CU_ASSERT(r.out_len <= 1024);
    CU_ASSERT_FALSE(r.timed_out);
    spawn_result_free(&r);
}

static void test_child_failures_are_errors(void)
{
    const char *const missing[] = {"envmgr-no-such-program", NULL};
    spawn_opts o = {.argv = missing};
    pid_t pid;
    em_err err = {0};
    CU_ASSERT_EQUAL(spawn_start(&o, &pid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "envmgr-no-such-program"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not found in PATH"));

    const char *const noexec[] = {"/etc/hostname", NULL};
    o.argv = noexec;
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(spawn_start(&o, &pid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exec `/etc/hostname`"));

    const char *const sh[] = {"sh", "-c", "true", NULL};
    o.argv = sh;
    o.cwd = "/nonexistent-dir";
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(spawn_start(&o, &pid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "chdir"));
}

static void test_child_environment(void)
{
    /* rlimits, cwd, envp, and nothing of ours but 0, 1, 2 */
    int leak = open("/dev/null", O_RDONLY); /* not close-on-exec: must not reach the child anyway */
    CU_ASSERT_FATAL(leak > 2);
    spawn_rlimit rl[] = {{RLIMIT_CPU, 64}}; /* (valgrind refuses NOFILE changes in its children) */
    const char *const argv[] = {"sh", "-c", "ulimit -t; pwd; echo $ONLY; ls /proc/$$/fd", NULL};
    const char *const envp[] = {"ONLY=this", "PATH=/usr/bin:/bin", NULL};
    spawn_opts o = {.argv = argv, .envp = envp, .cwd = "/", .rlimits = rl, .nrlimits = 1};
    spawn_io io = {.out_cap = 4096, .err_cap = 4096, .timeout_ms = 5000};
    spawn_result r;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(spawn_run(&o, &io, &r, &err), 0);
    CU_ASSERT_STRING_EQUAL(r.out, "64\n/\nthis\n0\n1\n2\n");
    close(leak);
    spawn_result_free(&r);

    /* the caller ignores SIGPIPE (as envmgr does): the child gets the default back */
    signal(SIGPIPE, SIG_IGN);
    CU_ASSERT_EQUAL_FATAL(run_sh("kill -PIPE $$; echo survived", 5000, &r), 0);
    CU_ASSERT(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGPIPE);
    spawn_result_free(&r);
}

static void test_passed_and_joined_fds(void)
{
    /* passed fds arrive as 3, 4 (low fds of ours in the way are moved, not clobbered); a join fd
     * gets the child's own pid before it runs; umask 077 with SPAWN_PRIVATE_FILES. ls runs alone,
     * not in a pipeline: the shell holds a pipeline's read end while it starts the pipeline's
     * second command, and ls saw it as fd 5 about once in twenty runs */
    int a[2], b[2], join[2];
    CU_ASSERT_EQUAL_FATAL(pipe(a), 0);
    CU_ASSERT_EQUAL_FATAL(pipe(b), 0);
    CU_ASSERT_EQUAL_FATAL(pipe2(join, O_CLOEXEC), 0);
    CU_ASSERT_EQUAL(write(a[1], "first", 5), 5);
    CU_ASSERT_EQUAL(write(b[1], "second", 6), 6);
    close(a[1]);
    close(b[1]);
    int pass[2] = {b[0], a[0]}; /* crosswise: b's read end becomes 3 */
    const char *const argv[] = {"sh", "-c", "cat <&3; echo; cat <&4; echo; umask; echo $$; ls /proc/$$/fd",
                                NULL};
    spawn_opts o = {.argv = argv, .pass_fds = pass, .npass = 2, .join_fds = &join[1], .njoin = 1,
                    .flags = SPAWN_PRIVATE_FILES};
    spawn_io io = {.out_cap = 4096, .err_cap = 4096, .timeout_ms = 5000};
    spawn_result r;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(spawn_run(&o, &io, &r, &err), 0);
    close(join[1]);
    char joined[32] = "";
    CU_ASSERT(read(join[0], joined, sizeof joined - 1) > 0);
    char want[128];
    snprintf(want, sizeof want, "second\nfirst\n0077\n%s\n0\n1\n2\n3\n4\n", joined);
    CU_ASSERT_STRING_EQUAL(r.out, want);
    spawn_result_free(&r);
    close(a[0]);
    close(b[0]);
    close(join[0]);
    /* more than SPAWN_PASS_MAX is refused before anything starts */
    int many[SPAWN_PASS_MAX + 1] = {0};
    spawn_opts m = {.argv = argv, .pass_fds = many, .npass = SPAWN_PASS_MAX + 1};
    CU_ASSERT_EQUAL(spawn_run(&m, &io, &r, &err), -1);
}

static pid_t ppid_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    int ppid = -1;
    if (close)
        sscanf(close + 2, "%*c %d", &ppid);
    return (pid_t)ppid;
}

static void test_detached(void)
{
    const char *const argv[] = {"sleep", "60", NULL};
    spawn_opts c = {.argv = argv};
    pid_t pid;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(spawn_detached(&c, NULL, 5000, &pid, &err), 0);
    CU_ASSERT(pid > 1);
    CU_ASSERT_NOT_EQUAL(ppid_of(pid), getpid()); /* not our child */
    CU_ASSERT_NOT_EQUAL(getsid(pid), getsid(0)); /* a session of its own */
    kill(pid, SIGKILL);
    CU_ASSERT_TRUE(pid_gone_soon(pid));

    /* with a supervisor: it gets the child's pid, is its parent, and takes it down when it dies */
    char pidfile[512];
    snprintf(pidfile, sizeof pidfile, "%s/sup-pid", test_tmpdir());
    char pid_arg[24] = "";
    const char *const sup_argv[] = {"sh", "-c", "echo $$ $1 > \"$0\"; exec sleep 60", pidfile, pid_arg, NULL};
    spawn_opts s = {.argv = sup_argv, .pid_arg = pid_arg, .pid_arg_len = sizeof pid_arg};
    CU_ASSERT_EQUAL_FATAL(spawn_detached(&c, &s, 5000, &pid, &err), 0);
    int sup = 0, got = 0;
    for (int i = 0; i < 200 && got != pid; i++) {
        FILE *f = fopen(pidfile, "r");
        if (f) {
            if (fscanf(f, "%d %d", &sup, &got) != 2)
                got = 0;
            fclose(f);
        }
        sleep_ms(10);
    }
    CU_ASSERT_EQUAL(got, pid);
    CU_ASSERT_EQUAL(ppid_of(pid), sup);
    kill(sup, SIGKILL);
    CU_ASSERT_TRUE(pid_gone_soon(pid)); /* pdeathsig */

    /* a child that cannot start is an error, and nothing is left behind */
    const char *const bad[] = {"/nonexistent/qemu", NULL};
    c.argv = bad;
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(spawn_detached(&c, NULL, 5000, &pid, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exec `/nonexistent/qemu`"));
}

/* Forking from threads while other threads allocate: a child that called malloc or stdio
 * between fork and exec would hang on a lock held at fork time. */
static volatile int churn_stop;
static void *churn(void *arg)
{
    (void)arg;
    while (!churn_stop) {
        char *p = malloc(4096);
        snprintf(p, 4096, "%d", rand());
        free(p);
    }
    return NULL;
}
static void *spawner(void *arg)
{
    int *ok = arg;
    for (int i = 0; i < 40; i++) {
        spawn_result r;
        /* 30 s: under valgrind the churning threads take most of the one CPU it runs threads on */
        if (run_sh("echo x", 30000, &r) == 0 && !r.timed_out && !strcmp(r.out, "x\n"))
            (*ok)++;
        spawn_result_free(&r);
    }
    return NULL;
}

static void test_threads(void)
{
    pthread_t ch[2], sp[3];
    int ok[3] = {0};
    churn_stop = 0;
    for (int i = 0; i < 2; i++)
        pthread_create(&ch[i], NULL, churn, NULL);
    for (int i = 0; i < 3; i++)
        pthread_create(&sp[i], NULL, spawner, &ok[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(sp[i], NULL);
    churn_stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(ch[i], NULL);
    CU_ASSERT_EQUAL(ok[0] + ok[1] + ok[2], 120);
}

static CU_TestInfo tests[] = {
    {"output, stderr, stdin and exit status", test_output_and_status},
    {"the deadline kills the whole process group", test_timeout_kills_the_group},
    {"output over the cap stops the child", test_output_cap},
    {"exec, PATH and chdir failures come back as errors", test_child_failures_are_errors},
    {"rlimits, cwd, envp, closed fds, default signals", test_child_environment},
    {"passed fds, cgroup join fds and a private umask", test_passed_and_joined_fds},
    {"detached children and their supervisor", test_detached},
    {"spawning from threads while others allocate", test_threads},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("spawn", tests);
}

/* QMP client against a real QEMU (-machine none: no guest, starts in ~50 ms),
 * plus a scripted peer for the malformed replies a real QEMU never sends. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/vm/qmp.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/vm.h"
#include "helpers/cunit_main.h"

static pid_t qemu_pid;
static char sock[512];

static void start_qemu(void)
{
    snprintf(sock, sizeof sock, "%s/qmp.sock", test_tmpdir());
    unlink(sock);
    char qmp_arg[600];
    snprintf(qmp_arg, sizeof qmp_arg, "unix:%s,server=on,wait=off", sock);
    qemu_pid = fork();
    if (qemu_pid == 0) {
        execlp(vm_qemu_binary(), vm_qemu_binary(), "-machine", "none", "-nodefaults", "-display", "none", "-qmp",
               qmp_arg, "-S", (char *)NULL);
        _exit(127);
    }
}

static void stop_qemu(void)
{
    if (qemu_pid > 0) {
        kill(qemu_pid, SIGKILL);
        waitpid(qemu_pid, NULL, 0);
        qemu_pid = 0;
    }
}

static void test_real_qemu_commands(void)
{
    start_qemu();
    em_err err = {0};
    qmp *q = NULL;
    CU_ASSERT_EQUAL_FATAL(qmp_open(sock, 10000, &q, &err), 0);
    char *status = NULL;
    CU_ASSERT_EQUAL(qmp_status(q, 5000, &status, &err), 0);
    CU_ASSERT_STRING_EQUAL(status, "prelaunch");
    free(status);
    json_t *ret = NULL;
    CU_ASSERT_EQUAL(qmp_execute(q, "query-version", NULL, 5000, &ret, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(ret, "qemu"));
    json_decref(ret);
    /* A QMP error becomes a message with QEMU's description and class. */
    CU_ASSERT_EQUAL(qmp_execute(q, "no-such-command", NULL, 5000, NULL, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "CommandNotFound"));
    /* HMP output counts as failure unless asked for. */
    char *out = NULL;
    CU_ASSERT_EQUAL(qmp_hmp(q, "info version", 5000, 1, &out, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strchr(out, '.'));
    free(out);
    CU_ASSERT_EQUAL(qmp_hmp(q, "no_such_hmp_command", 5000, 0, NULL, &err), -1);
    CU_ASSERT_EQUAL(qmp_execute(q, "quit", NULL, 5000, NULL, &err), 0);
    qmp_close(q);
    int st;
    CU_ASSERT_EQUAL(waitpid(qemu_pid, &st, 0), qemu_pid);
    qemu_pid = 0;
}

static void test_real_qemu_gone(void)
{
    start_qemu();
    em_err err = {0};
    qmp *q = NULL;
    CU_ASSERT_EQUAL_FATAL(qmp_open(sock, 10000, &q, &err), 0);
    stop_qemu();
    CU_ASSERT_EQUAL(qmp_execute(q, "query-status", NULL, 2000, NULL, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(err.msg[0] ? err.msg : NULL);
    qmp_close(q);
}

static void test_connect_missing_socket(void)
{
    em_err err = {0};
    qmp *q = NULL;
    double t0 = now_ms();
    CU_ASSERT_EQUAL(qmp_open("/nonexistent/envmgr/qmp.sock", 200, &q, &err), -1);
    CU_ASSERT(now_ms() - t0 < 2000);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/envmgr/qmp.sock"));
}

/* A scripted peer: writes the given bytes, then holds the socket open. */
static int scripted_peer(const char *script, pid_t *pid)
{
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    *pid = fork();
    if (*pid == 0) {
        close(sv[0]);
        if (write(sv[1], script, strlen(script)) < 0)
            _exit(1);
        char buf[4096];
        while (read(sv[1], buf, sizeof buf) > 0)
            ;
        _exit(0);
    }
    close(sv[1]);
    return sv[0];
}

static void check_peer(const char *script, const char *expect_in_error)
{
    pid_t pid;
    int fd = scripted_peer(script, &pid);
    em_err err = {0};
    qmp *q = NULL;
    int rc = qmp_open_fd(fd, "scripted", 500, &q, &err);
    CU_ASSERT_EQUAL(rc, -1);
    if (rc == 0)
        qmp_close(q);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, expect_in_error));
    if (!strstr(err.msg, expect_in_error))
        fprintf(stderr, "got: %s\n", err.msg);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void test_malformed_peers(void)
{
    check_peer("not json\n", "malformed");
    check_peer("[1,2]\n", "not a JSON object");
    check_peer("{\"hello\":1}\n", "did not greet");
    check_peer("", "timed out");
    check_peer("{\"QMP\":{}}\n{\"id\":\"em-1\",\"error\":{\"class\":\"GenericError\",\"desc\":\"nope\"}}\n", "nope");
}

static CU_TestInfo tests[] = {
    {"real QEMU: commands, errors, HMP, quit", test_real_qemu_commands},
    {"real QEMU: killed mid-session", test_real_qemu_gone},
    {"missing socket fails fast with the path", test_connect_missing_socket},
    {"malformed peers give one-line errors", test_malformed_peers},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    int rc = run_suite("qmp", tests);
    stop_qemu();
    return rc;
}

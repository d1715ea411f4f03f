#include "envmgr/episode/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/jsonline.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"

struct agent {
    pid_t pid;
    jsonline conn; /* one socket for both directions: the agent's stdin and stdout */
    int exited;
    int status;
    bool status_lost; /* reaped elsewhere: status holds nothing */
};

/* envmgr's secrets, never handed to an agent: with the trace key an agent could forge the HMAC of
 * the trace that records it. */
static const char *const hidden_vars[] = {"ENVMGR_TRACE_KEY", NULL};

static bool hidden(const char *kv)
{
    for (size_t i = 0; hidden_vars[i]; i++) {
        size_t n = strlen(hidden_vars[i]);
        if (!strncmp(kv, hidden_vars[i], n) && kv[n] == '=')
            return true;
    }
    return false;
}

/* environ without envmgr's secrets, with env_kv ("K=V") added, a same-named variable replaced:
 * built before fork. */
static char **merged_env(const char *const *env_kv)
{
    extern char **environ;
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    while (env_kv && env_kv[k])
        k++;
    char **out = xcalloc(n + k + 1, sizeof *out);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strcspn(environ[i], "=");
        bool replaced = false;
        for (size_t j = 0; j < k && !replaced; j++)
            replaced = !strncmp(environ[i], env_kv[j], nl) && env_kv[j][nl] == '=';
        if (!replaced && !hidden(environ[i]))
            out[m++] = environ[i];
    }
    for (size_t j = 0; j < k; j++)
        out[m++] = (char *)env_kv[j];
    return out;
}

int agent_start(const char *cmd, const char *const *env_kv, const char *log_path, agent **out, em_err *err)
{
    const char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    return agent_start_argv(argv, env_kv, log_path, out, err);
}

int agent_start_argv(const char *const *argv, const char *const *env_kv, const char *log_path, agent **out,
                     em_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return em_fail_errno(err, "agent: socketpair");
    int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) {
        close(sv[0]);
        close(sv[1]);
        return em_fail_errno(err, "agent: open `%s`", log_path);
    }
    _cleanup_free_ char **envp = merged_env(env_kv);
    /* Its own process group: stopping the agent takes whatever it started. */
    spawn_opts so = {.argv = argv, .envp = (const char *const *)envp, .fd_in = sv[1], .fd_out = sv[1],
                     .fd_err = logfd, .flags = SPAWN_PGROUP};
    pid_t pid;
    int rc = spawn_start(&so, &pid, err);
    close(sv[1]);
    close(logfd);
    if (rc < 0) {
        close(sv[0]);
        return em_prefix(err, "agent: ");
    }
    agent *a = xcalloc(1, sizeof *a);
    a->pid = pid;
    jsonline_init(&a->conn, sv[0], "agent", AGENT_LINE_MAX);
    *out = a;
    return 0;
}

static int reap(agent *a, int block)
{
    if (a->exited)
        return 1;
    pid_t r;
    do
        r = waitpid(a->pid, &a->status, block ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    if (r == a->pid)
        a->exited = 1;
    else if (r < 0 && errno == ECHILD)
        a->exited = 1, a->status_lost = true;
    return a->exited;
}

/* Why the agent went away (it hung up on `when`): its exit status if it exited within a moment. */
static void gone_reason(agent *a, const char *when, em_err *err)
{
    double deadline = now_ms() + 500;
    while (!reap(a, 0) && now_ms() < deadline)
        sleep_ms(10);
    if (a->exited && a->status_lost)
        em_fail(err, "agent: exited %s", when);
    else if (a->exited && WIFEXITED(a->status))
        em_fail(err, "agent: exited with status %d %s", WEXITSTATUS(a->status), when);
    else if (a->exited && WIFSIGNALED(a->status))
        em_fail(err, "agent: killed by signal %d", WTERMSIG(a->status));
    else
        em_fail(err, "agent: closed its %s", !strcmp(when, "before answering") ? "output" : "input");
}

int agent_send(agent *a, json_t *obs, em_err *err)
{
    if (jsonline_send(&a->conn, obs, -1, err) < 0) {
        gone_reason(a, "before reading its observation", err);
        return -1;
    }
    return 0;
}

agent_status agent_receive(agent *a, double timeout_ms, json_t **reply, em_err *err)
{
    *reply = NULL;
    em_err rerr = {0};
    if (jsonline_read(&a->conn, now_ms() + timeout_ms, reply, &rerr) == 0)
        return AGENT_OK;
    if (strstr(rerr.msg, "timed out")) {
        em_fail(err, "agent: no action within the step timeout of %.0f s", timeout_ms / 1000);
        return AGENT_TIMEOUT;
    }
    if (strstr(rerr.msg, "interrupted")) {
        *err = rerr;
        return AGENT_GONE;
    }
    if (strstr(rerr.msg, "closed the connection")) {
        gone_reason(a, "before answering", err);
        return AGENT_GONE;
    }
    em_fail(err, "agent: wrote something that is not a JSON object line (%.200s)", rerr.msg);
    return AGENT_GARBAGE;
}

void agent_stop(agent *a, double grace_ms)
{
    if (!a)
        return;
    shutdown(a->conn.fd, SHUT_RDWR); /* EOF on its stdin: the protocol's "episode over" */
    double deadline = now_ms() + grace_ms;
    while (!reap(a, 0) && now_ms() < deadline)
        sleep_ms(10);
    kill(-a->pid, SIGKILL); /* whatever it started goes too */
    if (!a->exited)
        reap(a, 1);
    jsonline_release(&a->conn);
    free(a);
}

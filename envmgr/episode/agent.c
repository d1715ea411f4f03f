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

/* What an agent gets of envmgr's environment: what a program needs to run and to reach its
 * model's API, nothing of envmgr's (docs/agent-protocol.md). An allowlist: a variable envmgr's
 * caller set for envmgr (ENVMGR_TRACE_KEY, ENVMGR_TOKEN, ENVMGR_RUN_DIR, ...) never leaks by
 * being forgotten here. */
static const char *const passed_vars[] = {
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "PYENV_VERSION",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", NULL,
};
static const char *const passed_prefixes[] = {"LC_", NULL};
static const char *const passed_suffixes[] = {"_API_KEY", "_API_BASE", "_BASE_URL", NULL};

static bool name_is(const char *name, size_t len, const char *s)
{
    return strlen(s) == len && !memcmp(name, s, len);
}

bool agent_env_passes(const char *name, size_t len, const char *const *pass_env)
{
    if (len >= 7 && !memcmp(name, "ENVMGR_", 7))
        return false;
    for (size_t i = 0; passed_vars[i]; i++)
        if (name_is(name, len, passed_vars[i]))
            return true;
    for (size_t i = 0; passed_prefixes[i]; i++) {
        size_t n = strlen(passed_prefixes[i]);
        if (len > n && !memcmp(name, passed_prefixes[i], n))
            return true;
    }
    for (size_t i = 0; passed_suffixes[i]; i++) {
        size_t n = strlen(passed_suffixes[i]);
        if (len > n && !memcmp(name + len - n, passed_suffixes[i], n))
            return true;
    }
    for (size_t i = 0; pass_env && pass_env[i]; i++)
        if (name_is(name, len, pass_env[i]))
            return true;
    return false;
}

char **agent_env(char *const *env, const char *const *pass_env, const char *const *env_kv)
{
    size_t n = 0, k = 0;
    while (env && env[n])
        n++;
    while (env_kv && env_kv[k])
        k++;
    char **out = xcalloc(n + k + 1, sizeof *out);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strcspn(env[i], "=");
        if (!env[i][nl] || !agent_env_passes(env[i], nl, pass_env))
            continue;
        bool replaced = false;
        for (size_t j = 0; j < k && !replaced; j++)
            replaced = !strncmp(env[i], env_kv[j], nl) && env_kv[j][nl] == '=';
        if (!replaced)
            out[m++] = env[i];
    }
    for (size_t j = 0; j < k; j++)
        out[m++] = (char *)env_kv[j];
    return out;
}

int agent_env_name_check(const char *name, em_err *err)
{
    bool ok = *name && !(*name >= '0' && *name <= '9');
    for (const char *c = name; ok && *c; c++)
        ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
    if (!ok)
        return em_fail(err, "--agent-env: `%.100s` is not a variable name (letters, digits, _)", name);
    if (!strncmp(name, "ENVMGR_", 7))
        return em_fail(err, "--agent-env: `%.100s`: ENVMGR_ variables are envmgr's own and never reach an agent",
                       name);
    return 0;
}

int agent_start(const char *cmd, const agent_opts *o, const char *log_path, agent **out, em_err *err)
{
    const char *const argv[] = {"/bin/sh", "-c", cmd, NULL};
    return agent_start_argv(argv, o, log_path, out, err);
}

int agent_start_argv(const char *const *argv, const agent_opts *o, const char *log_path, agent **out, em_err *err)
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
    extern char **environ;
    _cleanup_free_ char **envp = agent_env(environ, o ? o->pass_env : NULL, o ? o->env_kv : NULL);
    char **boxed = o && o->sandbox ? agent_sandbox_argv(o->sandbox, argv) : NULL;
    /* Its own process group: stopping the agent takes whatever it started (in the sandbox too:
     * bwrap, its pid namespace's first process and the agent share the group). */
    spawn_opts so = {.argv = boxed ? (const char *const *)boxed : argv, .envp = (const char *const *)envp,
                     .fd_in = sv[1], .fd_out = sv[1], .fd_err = logfd, .flags = SPAWN_PGROUP};
    pid_t pid;
    int rc = spawn_start(&so, &pid, err);
    agent_sandbox_argv_free(boxed);
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

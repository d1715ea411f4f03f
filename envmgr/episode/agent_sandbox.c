/* The agent's sandbox (agent_sandbox.h): bwrap's argv and the one trial run per process. */
#include "envmgr/episode/agent_sandbox.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/argvec.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"

/* The resolved paths of list, shortest first (a parent before what is inside it). */
static char **resolved(const char *const *list, size_t *n)
{
    size_t cap = 0;
    while (list && list[cap])
        cap++;
    char **out = xcalloc(cap + 1, sizeof *out);
    *n = 0;
    for (size_t i = 0; i < cap; i++) {
        char *r = realpath(list[i], NULL);
        if (r && strcmp(r, "/")) /* never hide (or rebind) the whole root */
            out[(*n)++] = r;
        else
            free(r);
    }
    for (size_t i = 1; i < *n; i++) /* insertion sort by length: a handful of paths */
        for (size_t j = i; j > 0 && strlen(out[j]) < strlen(out[j - 1]); j--) {
            char *t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return out;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

char **agent_sandbox_argv(const agent_sandbox *sb, const char *const *argv)
{
    argvec a = {0};
    argvec_add(&a, AGENT_BWRAP, "--bind", "/", "/", "--dev", "/dev", "--tmpfs", "/dev/shm", "--unshare-pid", "--proc",
               "/proc", "--die-with-parent", "--cap-drop", "ALL", NULL);
    size_t nh = 0, ns = 0;
    char **hide = resolved(sb ? sb->hide : NULL, &nh), **show = resolved(sb ? sb->show : NULL, &ns);
    for (size_t i = 0; i < nh; i++)
        argvec_add(&a, "--tmpfs", hide[i], NULL);
    for (size_t i = 0; i < ns; i++) {
        argvec_add(&a, "--ro-bind", show[i], show[i], NULL);
    }
    free_list(hide, nh);
    free_list(show, ns);
    argvec_add(&a, "--", NULL);
    for (size_t i = 0; argv && argv[i]; i++)
        argvec_add(&a, argv[i], NULL);
    return a.v;
}

void agent_sandbox_argv_free(char **v)
{
    argv_free(v);
}

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool probe_ok;
static char probe_why[256];

static void probe(void)
{
    if (access(AGENT_BWRAP, X_OK) < 0) {
        snprintf(probe_why, sizeof probe_why, AGENT_BWRAP " not found (apt-get install bubblewrap)");
        return;
    }
    static const char *const trial[] = {"/bin/true", NULL};
    char **v = agent_sandbox_argv(NULL, trial);
    static const char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
    spawn_opts so = {.argv = (const char *const *)v, .envp = envp};
    spawn_io io = {.out_cap = 4096, .err_cap = 4096, .timeout_ms = 10000};
    spawn_result r;
    em_err err = {0};
    if (spawn_run(&so, &io, &r, &err) < 0) {
        snprintf(probe_why, sizeof probe_why, "%.200s", err.msg);
    } else if (r.timed_out || r.lost || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        char buf[200];
        size_t n = strcspn(r.errs, "\n");
        snprintf(probe_why, sizeof probe_why, "bwrap cannot set up the sandbox here: %.*s",
                 (int)(n > 180 ? 180 : n), n ? r.errs : spawn_status_text(&r, buf, sizeof buf));
    } else {
        probe_ok = true;
    }
    if (!probe_ok) { /* one line of printable ASCII: it goes into the trace header */
        probe_why[strcspn(probe_why, "\n")] = '\0';
        for (char *c = probe_why; *c; c++)
            if (*c < 0x20 || *c > 0x7e)
                *c = '?';
    }
    spawn_result_free(&r);
    agent_sandbox_argv_free(v);
}

bool agent_sandbox_available(char *why, size_t len)
{
    pthread_once(&probe_once, probe);
    if (!probe_ok && why && len)
        snprintf(why, len, "%s", probe_why);
    return probe_ok;
}

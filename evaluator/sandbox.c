/* The evaluator sandbox (see sandbox.h): bwrap's argv, the input files it binds, and what a run's
 * end means. */
#include "sandbox.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/argvec.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

#define SETPRIV "/usr/bin/setpriv"
#define PRLIMIT "/usr/bin/prlimit"
#define EXT_MAX 10

void sandbox_init(sandbox *sb)
{
    memset(sb, 0, sizeof *sb);
}

void sandbox_free(sandbox *sb)
{
    for (size_t i = 0; i < sb->nbinds; i++) {
        free(sb->binds[i].host);
        free(sb->binds[i].inside);
    }
    free(sb->binds);
    sandbox_init(sb);
}

void sandbox_add(sandbox *sb, const char *host, const char *inside)
{
    if (sb->nbinds == sb->cap) {
        sb->cap = sb->cap ? sb->cap * 2 : 8;
        sb->binds = xrealloc(sb->binds, sb->cap * sizeof *sb->binds);
    }
    sb->binds[sb->nbinds++] = (sandbox_bind){xstrdup(host), xstrdup(inside)};
}

/* ---- artifacts → values ---- */

/* /in/<side>/<n>.<ext>, the extension kept (metrics look at it: .csv or .xlsx) when it is short
 * and alphanumeric. NULL when the file is not a regular file. */
static char *bind_input(sandbox *sb, const char *host, const char *side)
{
    struct stat st;
    if (!host || stat(host, &st) < 0 || !S_ISREG(st.st_mode))
        return NULL;
    const char *base = strrchr(host, '/');
    base = base ? base + 1 : host;
    const char *dot = strrchr(base, '.');
    char ext[EXT_MAX + 2] = "";
    if (dot && dot != base && strlen(dot + 1) >= 1 && strlen(dot + 1) <= EXT_MAX) {
        bool ok = true;
        for (const char *s = dot + 1; *s; s++)
            ok = ok && isalnum((unsigned char)*s);
        if (ok)
            snprintf(ext, sizeof ext, ".%s", dot + 1);
    }
    size_t *n = &sb->count[strcmp(side, "result") ? 1 : 0];
    char *inside = xasprintf("/in/%s/%zu%s", side, (*n)++, ext);
    sandbox_add(sb, host, inside);
    return inside;
}

static bool is_artifact(json_t *a)
{
    return json_is_string(json_object_get(a, "type"));
}

json_t *sandbox_osworld_value(sandbox *sb, json_t *a, const char *side)
{
    if (!a || json_is_null(a))
        return json_null();
    if (json_is_array(a)) {
        json_t *list = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v) json_array_append_new(list, sandbox_osworld_value(sb, v, side));
        return list;
    }
    if (!is_artifact(a))
        return json_incref(a);
    const char *type = json_string_value(json_object_get(a, "type"));
    if (!strcmp(type, "list")) /* vm_file multi: OSWorld's list of paths, None for a missing file */
        return sandbox_osworld_value(sb, json_object_get(a, "items"), side);
    if (!strcmp(type, "file")) {
        char *inside = bind_input(sb, json_string_value(json_object_get(a, "path")), side);
        json_t *v = inside ? json_string(inside) : json_null();
        free(inside);
        return v;
    }
    json_t *v = json_object_get(a, "value");
    return v ? json_incref(v) : json_null();
}

json_t *sandbox_script_artifact(sandbox *sb, json_t *a, const char *side)
{
    if (!a)
        return NULL;
    if (json_is_array(a)) {
        json_t *list = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(a, i, v)
        {
            json_t *c = sandbox_script_artifact(sb, v, side);
            json_array_append_new(list, c ? c : json_null());
        }
        return list;
    }
    const char *type = json_string_value(json_object_get(a, "type"));
    if (type && !strcmp(type, "list")) { /* vm_file multi: each item bound like a file of its own */
        json_t *c = json_copy(a);
        json_object_set_new(c, "items", sandbox_script_artifact(sb, json_object_get(a, "items"), side));
        return c;
    }
    if (!type || strcmp(type, "file"))
        return json_incref(a);
    json_t *c = json_copy(a);
    char *inside = bind_input(sb, json_string_value(json_object_get(a, "path")), side);
    json_object_set_new(c, "path", inside ? json_string(inside) : json_null());
    free(inside);
    return c;
}

/* ---- staging (root only) ---- */

/* A copy of src owned by nobody, so the unprivileged sandbox can read it (root's folders are 0700). */
static int stage_copy(const char *src, const char *dst, em_err *err)
{
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (in < 0)
        return em_fail_errno(err, "evaluator sandbox: open `%s`", src);
    struct stat st;
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return em_fail(err, "evaluator sandbox: `%s` is not a regular file", src);
    }
    mode_t mode = (st.st_mode & 0111) ? 0500 : 0400;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (out < 0) {
        close(in);
        return em_fail_errno(err, "evaluator sandbox: create `%s`", dst);
    }
    int rc = 0;
    char buf[1 << 16];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r < 0)
                rc = em_fail_errno(err, "evaluator sandbox: read `%s`", src);
            break;
        }
        if (write_full(out, buf, (size_t)r, err) < 0) {
            rc = em_prefix(err, "evaluator sandbox: copy `%s`: ", src);
            break;
        }
    }
    if (rc == 0 && fchown(out, SANDBOX_NOBODY, SANDBOX_NOBODY) < 0)
        rc = em_fail_errno(err, "evaluator sandbox: chown `%s`", dst);
    close(in);
    close(out);
    return rc;
}

/* ---- argv ---- */

/* The host's top-level links into /usr (merged /usr) as links, or the folders themselves. */
static void top_dirs(argvec *a)
{
    static const char *const dirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
    for (size_t i = 0; i < ARRAY_LEN(dirs); i++) {
        char target[256];
        ssize_t n = readlink(dirs[i], target, sizeof target - 1);
        if (n > 0) {
            target[n] = '\0';
            argvec_add(a, "--symlink", target, dirs[i], NULL);
        } else if (access(dirs[i], F_OK) == 0) {
            argvec_add(a, "--ro-bind", dirs[i], dirs[i], NULL);
        }
    }
}

/* bwrap's arguments for argv; files of sb bound from stage/N when stage is set. */
static int build_argv(const sandbox *sb, const char *stage, const char *const *argv, argvec *a, em_err *err)
{
    if (stage) {
        char id[32];
        snprintf(id, sizeof id, "%d", SANDBOX_NOBODY);
        argvec_add(a, SETPRIV, "--reuid", id, "--regid", id, "--clear-groups", NULL);
    }
    argvec_add(a, SANDBOX_BWRAP, NULL);
    argvec_add(a, "--unshare-all", "--unshare-user", "--disable-userns", NULL);
    argvec_add(a, "--die-with-parent", "--new-session", NULL);
    argvec_add(a, "--cap-drop", "ALL", NULL);
    argvec_add(a, "--ro-bind", "/usr", "/usr", NULL);
    top_dirs(a);
    argvec_add(a, "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", NULL);
    argvec_add(a, "--ro-bind-try", "/etc/alternatives", "/etc/alternatives", NULL);
    argvec_add(a, "--proc", "/proc", NULL);
    argvec_add(a, "--dev", "/dev", NULL);
    char size[32];
    snprintf(size, sizeof size, "%llu", SANDBOX_TMPFS_MAX);
    argvec_add(a, "--size", size, NULL);
    argvec_add(a, "--tmpfs", "/tmp", NULL);
    for (size_t i = 0; i < sb->nbinds; i++) {
        struct stat st;
        if (stat(sb->binds[i].host, &st) < 0)
            return em_fail_errno(err, "evaluator sandbox: `%s`", sb->binds[i].host);
        if (stage && S_ISREG(st.st_mode)) {
            _cleanup_free_ char *copy = xasprintf("%s/%zu", stage, i);
            if (stage_copy(sb->binds[i].host, copy, err) < 0)
                return -1;
            argvec_add(a, "--ro-bind", copy, sb->binds[i].inside, NULL);
        } else {
            argvec_add(a, "--ro-bind", sb->binds[i].host, sb->binds[i].inside, NULL);
        }
    }
    argvec_add(a, "--remount-ro", "/", NULL);
    argvec_add(a, "--chdir", "/tmp", NULL);
    argvec_add(a, "--clearenv", NULL);
    static const char *const env[][2] = {
        {"PATH", "/usr/bin:/bin"}, {"HOME", "/tmp"},           {"TMPDIR", "/tmp"},
        {"LANG", "C.UTF-8"},       {"PYTHONDONTWRITEBYTECODE", "1"}, {"OPENBLAS_NUM_THREADS", "1"},
        {"OMP_NUM_THREADS", "1"},  {"MALLOC_ARENA_MAX", "2"},
    };
    for (size_t i = 0; i < ARRAY_LEN(env); i++)
        argvec_add(a, "--setenv", env[i][0], env[i][1], NULL);
    argvec_add(a, "--", NULL);
    /* The process limit is set inside the user namespace: there the kernel counts the sandbox's
     * own processes, where an RLIMIT_NPROC set before bwrap would count all of the user's. */
    char nproc[32];
    snprintf(nproc, sizeof nproc, "--nproc=%d:%d", SANDBOX_NPROC, SANDBOX_NPROC);
    argvec_add(a, PRLIMIT, nproc, "--", NULL);
    for (size_t i = 0; argv[i]; i++)
        argvec_add(a, argv[i], NULL);
    return 0;
}

/* ---- running ---- */

static const char bwrap_missing[] =
    "evaluator sandbox: " SANDBOX_BWRAP " not found: install bubblewrap (apt-get install bubblewrap); "
    "envmgr never runs evaluator scripts unsandboxed";

/* A failure of the sandbox itself (bwrap or setpriv refusing), as opposed to the program's. */
static bool setup_failed(const spawn_result *r, const char **what)
{
    if (r->timed_out || r->lost || !WIFEXITED(r->status) || WEXITSTATUS(r->status) == 0)
        return false;
    if (!strncmp(r->errs, "bwrap: ", 7))
        *what = r->errs + 7;
    else if (!strncmp(r->errs, "setpriv: ", 9))
        *what = r->errs;
    else
        return false;
    return true;
}

static int setup_error(const char *what, em_err *err)
{
    size_t n = strcspn(what, "\n");
    bool ns = strstr(what, "namespace") || strstr(what, "Operation not permitted") || strstr(what, "uid map") ||
              strstr(what, "setting up uid");
    if (ns)
        return em_fail(err,
                       "evaluator sandbox: bwrap cannot create namespaces on this host (%.*s): allow unprivileged "
                       "user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu also "
                       "kernel.apparmor_restrict_unprivileged_userns=0), or run envmgr where they are allowed",
                       (int)(n > 200 ? 200 : n), what);
    return em_fail(err, "evaluator sandbox: bwrap failed: %.*s", (int)(n > 300 ? 300 : n), what);
}

static int run_raw(const sandbox *sb, const char *const *argv, const char *input, size_t input_len, double timeout_s,
                   spawn_result *res, em_err *err)
{
    memset(res, 0, sizeof *res);
    if (access(SANDBOX_BWRAP, X_OK) < 0)
        return em_fail(err, "%s", bwrap_missing);
    if (timeout_s <= 0)
        timeout_s = SANDBOX_TIMEOUT_S;
    _cleanup_free_ char *stage = NULL;
    if (geteuid() == 0) {
        stage = xstrdup("/tmp/envmgr-sandbox.XXXXXX");
        if (!mkdtemp(stage)) {
            em_fail_errno(err, "evaluator sandbox: mkdtemp");
            free(stage);
            stage = NULL;
            return -1;
        }
        if (chown(stage, SANDBOX_NOBODY, SANDBOX_NOBODY) < 0) {
            em_fail_errno(err, "evaluator sandbox: chown `%s`", stage);
            rmdir(stage);
            return -1;
        }
    }
    argvec a = {0};
    int rc = build_argv(sb, stage, argv, &a, err);
    if (rc == 0) {
        rlim_t cpu = (rlim_t)ceil(timeout_s);
        const spawn_rlimit lims[] = {
            {RLIMIT_CPU, cpu},
            {RLIMIT_AS, (rlim_t)SANDBOX_MEM_MAX},
            {RLIMIT_FSIZE, (rlim_t)SANDBOX_FILE_MAX},
            {RLIMIT_CORE, 0},
        };
        static const char *const envp[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
        spawn_opts so = {.argv = (const char *const *)a.v, .envp = envp, .flags = SPAWN_NO_NEW_PRIVS,
                         .pdeathsig = SIGKILL, .rlimits = lims, .nrlimits = ARRAY_LEN(lims)};
        spawn_io io = {.input = input, .input_len = input ? input_len : 0,
                       .out_cap = sb->out_cap ? sb->out_cap : SANDBOX_OUTPUT_MAX,
                       .err_cap = SANDBOX_OUTPUT_MAX, .timeout_ms = timeout_s * 1000};
        rc = spawn_run(&so, &io, res, err);
        if (rc < 0)
            em_prefix(err, "evaluator sandbox: ");
    }
    argvec_free(&a);
    if (stage) {
        em_err rerr = {0};
        remove_tree(stage, &rerr);
    }
    return rc;
}

static atomic_bool sandbox_ok;

int sandbox_check(em_err *err)
{
    if (atomic_load(&sandbox_ok))
        return 0;
    sandbox none;
    sandbox_init(&none);
    static const char *const argv[] = {"/usr/bin/true", NULL};
    spawn_result r;
    if (run_raw(&none, argv, NULL, 0, 10, &r, err) < 0)
        return -1;
    const char *what = NULL;
    int rc = 0;
    if (setup_failed(&r, &what))
        rc = setup_error(what, err);
    else if (r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        _cleanup_free_ char *why = sandbox_failure(&r, 10);
        rc = em_fail(err, "evaluator sandbox: a trial run of /usr/bin/true failed: %s", why);
    }
    spawn_result_free(&r);
    if (rc == 0)
        atomic_store(&sandbox_ok, true);
    return rc;
}

int sandbox_run(const sandbox *sb, const char *const *argv, const char *input, size_t input_len, double timeout_s,
                spawn_result *res, em_err *err)
{
    memset(res, 0, sizeof *res);
    if (sandbox_check(err) < 0)
        return -1;
    if (run_raw(sb, argv, input, input_len, timeout_s, res, err) < 0)
        return -1;
    const char *what = NULL;
    if (setup_failed(res, &what)) {
        setup_error(what, err);
        spawn_result_free(res);
        return -1;
    }
    return 0;
}

int sandbox_run_json(const sandbox *sb, const char *const *argv, json_t *request, double timeout_s, const char *label,
                     json_t **answer, em_err *err)
{
    *answer = NULL;
    _cleanup_free_ char *input = json_dumps(request, JSON_COMPACT);
    if (!input)
        return em_fail(err, "%s: cannot serialize the request", label);
    spawn_result io;
    if (sandbox_run(sb, argv, input, strlen(input), timeout_s, &io, err) < 0)
        return em_prefix(err, "%s: ", label);
    json_error_t je;
    json_t *res = (!io.overflow && !io.timed_out && io.out_len) ? json_loadb(io.out, io.out_len, 0, &je) : NULL;
    json_t *ej = json_object_get(res, "error");
    bool exited = !io.timed_out && !io.overflow && !io.lost && WIFEXITED(io.status);
    int rc = 0;
    if (exited && json_is_string(ej)) {
        const char *es = json_string_value(ej);
        size_t n = strlen(label);
        bool named = !strncmp(es, label, n) && es[n] == ':';
        rc = em_fail(err, "%s%s%.400s", named ? "" : label, named ? "" : ": ", es);
    } else if (io.overflow) {
        rc = em_fail(err, "%s: printed more than %zu bytes", label, sb->out_cap ? sb->out_cap : SANDBOX_OUTPUT_MAX);
    } else if (!exited || WEXITSTATUS(io.status) != 0) {
        _cleanup_free_ char *why = sandbox_failure(&io, timeout_s);
        rc = em_fail(err, "%s: %s", label, why);
    } else if (json_is_object(res)) {
        *answer = json_incref(res);
    }
    json_decref(res);
    spawn_result_free(&io);
    return rc;
}

/* The last line of stderr, printable ASCII only, at most 200 bytes. */
static char *stderr_tail(const spawn_result *r)
{
    size_t n = r->err_len;
    while (n > 0 && isspace((unsigned char)r->errs[n - 1]))
        n--;
    size_t s = n;
    while (s > 0 && r->errs[s - 1] != '\n')
        s--;
    if (n - s > 200)
        s = n - 200;
    char *t = xmalloc(n - s + 1);
    for (size_t i = s; i < n; i++)
        t[i - s] = (r->errs[i] >= 0x20 && r->errs[i] < 0x7f) ? r->errs[i] : '?';
    t[n - s] = '\0';
    return t;
}

static char *signal_text(int sig, double timeout_s)
{
    switch (sig) {
    case SIGXCPU:
        return xasprintf("killed by SIGXCPU (CPU limit of %g s)", ceil(timeout_s));
    case SIGXFSZ:
        return xasprintf("killed by SIGXFSZ (file size limit of %llu bytes)", SANDBOX_FILE_MAX);
    case SIGKILL:
        return xstrdup("killed by SIGKILL");
    default:
        return xasprintf("killed by signal %d (%s)", sig, strsignal(sig));
    }
}

char *sandbox_failure(const spawn_result *r, double timeout_s)
{
    if (timeout_s <= 0)
        timeout_s = SANDBOX_TIMEOUT_S;
    if (r->timed_out)
        return xasprintf("timed out after %g s", timeout_s);
    if (r->overflow)
        return xasprintf("printed more than %u bytes", SANDBOX_OUTPUT_MAX);
    if (r->lost)
        return xstrdup("its exit status was lost (reaped elsewhere)");
    _cleanup_free_ char *tail = stderr_tail(r);
    const char *sep = *tail ? ": " : "";
    if (WIFSIGNALED(r->status)) {
        _cleanup_free_ char *s = signal_text(WTERMSIG(r->status), timeout_s);
        return xasprintf("%s%s%s", s, sep, tail);
    }
    int code = WEXITSTATUS(r->status);
    if (code > 128 && code < 128 + 65) { /* bwrap reports a child killed by a signal as 128 + the signal */
        _cleanup_free_ char *s = signal_text(code - 128, timeout_s);
        return xasprintf("%s%s%s", s, sep, tail);
    }
    return xasprintf("exited with status %d%s%s", code, sep, tail);
}

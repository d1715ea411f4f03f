#include "envmgr/suite/suite_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/env/env.h"
#include "envmgr/env/env_image.h"
#include "envmgr/base/exit_cause.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/suite/report_summary.h"
#include "envmgr/suite/results_log.h"
#include "envmgr/env/gc.h"
#include "envmgr/suite/suite_host.h"
#include "envmgr/suite/suite_worker.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

#define LOCK_WAIT_MS 60000.0     /* a previous run's workers may still be tearing down */
#define SHUTDOWN_GRACE_MS 30000.0
#define SAMPLE_EVERY_MS 2000.0
#define DRAW_EVERY_MS 1000.0

/* ---- the parent ------------------------------------------------------------ */

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

typedef struct job {
    size_t task;
    int rep, attempt;
} job;

enum { SLOT_OFF, SLOT_STARTING, SLOT_IDLE, SLOT_BUSY, SLOT_RETIRED };

typedef struct slot {
    int k, state;
    pid_t pid;
    suite_chan ch;
    char env[64];
    bool has_job;
    job j;
    double started, deadline, spawned;
    double limit_s;        /* the watchdog's limit for the episode in hand */
    bool qemu_killed;
    int failures;          /* env start failures in a row */
    char *last_error;
    double peak_rss_mib, peak_pss_mib;
} slot;

typedef struct pool {
    const suite *s;
    const pool_opts *o;
    char dir[PATH_MAX];
    const char *accel;
    int results_fd, lock_fd;
    slot *slots;
    int nslots;
    job *q;                /* pending episodes; retries go to the front */
    size_t qhead, qlen, qcap;
    size_t expected, finished, passed, scored, finished_here, retried, unsupported;
    double t_start, last_draw, last_sample;
    bool tty, drawn, stopping;
    size_t running;
} pool;

static void q_push_back(pool *p, job j)
{
    if (p->qhead + p->qlen == p->qcap) {
        if (p->qhead) {
            memmove(p->q, p->q + p->qhead, p->qlen * sizeof *p->q);
            p->qhead = 0;
        } else {
            p->qcap = p->qcap ? p->qcap * 2 : 64;
            p->q = xrealloc(p->q, p->qcap * sizeof *p->q);
        }
    }
    p->q[p->qhead + p->qlen++] = j;
}

static void q_push_front(pool *p, job j)
{
    if (p->qhead == 0) {
        q_push_back(p, j); /* make room, then rotate it to the front */
        memmove(p->q + 1, p->q, (p->qlen - 1) * sizeof *p->q);
        p->q[0] = j;
        return;
    }
    p->q[--p->qhead] = j;
    p->qlen++;
}

static job q_pop(pool *p)
{
    p->qlen--;
    return p->q[p->qhead++];
}

static void fmt_duration(char *buf, size_t len, double s)
{
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

static void progress_clear(pool *p)
{
    if (p->drawn) {
        em_log(EM_LOG_PROGRESS, "\r\033[K");
        p->drawn = false;
    }
}

static void progress_draw(pool *p)
{
    if (!p->tty)
        return;
    char el[32], eta[32] = "-";
    double elapsed = (now_ms() - p->t_start) / 1000;
    fmt_duration(el, sizeof el, elapsed);
    size_t left = p->expected - p->finished;
    if (p->finished_here > 0 && left > 0)
        fmt_duration(eta, sizeof eta, elapsed / (double)p->finished_here * (double)left);
    else if (left == 0)
        snprintf(eta, sizeof eta, "0:00");
    em_log(EM_LOG_PROGRESS, "\r\033[Ksuite: %zu/%zu done, %zu running, pass %.0f%%, %s elapsed, ETA %s", p->finished,
           p->expected, p->running, p->scored ? 100.0 * (double)p->passed / (double)p->scored : 0.0, el, eta);
    p->drawn = true;
    p->last_draw = now_ms();
}

static void plog(pool *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void plog(pool *p, const char *fmt, ...)
{
    char line[EM_WARN_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    em_info("suite: %s", line); /* pool_sink keeps the progress line below it */
}

/* While the pool runs, whatever the library says (here, or forwarded by a worker) goes above the
 * progress line: cleared, the message, redrawn. */
static em_warn_fn outer_sink;
static void *outer_arg;

static void pool_sink(em_log_level level, const char *msg, void *arg)
{
    pool *p = arg;
    if (level == EM_LOG_PROGRESS) {
        outer_sink(level, msg, outer_arg);
        return;
    }
    progress_clear(p);
    outer_sink(level, msg, outer_arg);
    progress_draw(p);
}

static const suite_task *job_task(pool *p, const job *j)
{
    return &p->s->tasks[j->task];
}

/* ---- spawning and reaping workers ---- */

static void close_inherited(pool *p, int keep)
{
    for (int i = 0; i < p->nslots; i++)
        if (p->slots[i].ch.fd >= 0 && p->slots[i].ch.fd != keep)
            close(p->slots[i].ch.fd);
    if (p->results_fd >= 0)
        close(p->results_fd);
    /* The DIR lock stays open: a worker that outlives a kill -9'd parent holds it while it tears down. */
}

static int spawn_worker(pool *p, slot *sl, em_err *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return em_fail_errno(err, "suite: socketpair");
    _cleanup_free_ char *log = xasprintf("%s/" SUITE_LOGS_DIR "/env-%d.log", p->dir, sl->k);
    const char *image = p->qlen ? job_task(p, &p->q[p->qhead])->image : p->s->tasks[0].image;
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return em_fail_errno(err, "suite: fork");
    }
    if (pid == 0) {
        close(sv[0]);
        close_inherited(p, sv[1]);
        /* Die with the parent, and tear the env down on the way: kill -9 of envmgr leaves no QEMU behind. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        char comm[16];
        snprintf(comm, sizeof comm, "envmgr-env%d", sl->k);
        prctl(PR_SET_NAME, comm);
        int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nullfd >= 0)
            dup2(nullfd, 0);
        if (logfd >= 0) {
            dup2(logfd, 1);
            dup2(logfd, 2);
        }
        setvbuf(stderr, NULL, _IOLBF, 0);
        fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK);
        suite_worker_ctx w = {.o = p->o, .dir = p->dir, .accel = p->accel};
        snprintf(w.name, sizeof w.name, "%s", sl->env);
        int rc = suite_worker_main(&w, sv[1], image);
        fflush(NULL);
        _exit(rc);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    sl->pid = pid;
    sl->ch = (suite_chan){.fd = sv[0]};
    sl->state = SLOT_STARTING;
    sl->spawned = now_ms();
    sl->has_job = false;
    sl->qemu_killed = false;
    return 0;
}

static void reap_worker(slot *sl, double grace_ms)
{
    if (sl->pid <= 0)
        return;
    double deadline = now_ms() + grace_ms;
    int status;
    for (;;) {
        pid_t r = waitpid(sl->pid, &status, WNOHANG);
        if (r == sl->pid || (r < 0 && errno == ECHILD))
            break;
        if (now_ms() > deadline) {
            kill(sl->pid, SIGKILL);
            while (waitpid(sl->pid, &status, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        sleep_ms(20);
    }
    sl->pid = 0;
}

static void env_down_quiet(const char *name)
{
    _cleanup_free_ char *d = paths_env_dir(name);
    em_err ignored;
    if (access(d, F_OK) == 0)
        env_down(name, &ignored);
}

/* ---- results ---- */

static char *trace_rel(pool *p, const job *j, bool renamed)
{
    _cleanup_free_ char *base = suite_episode_dir(job_task(p, j)->id, j->rep, p->o->repeat);
    return renamed ? xasprintf("%s.env_error-%d/trace", base, j->attempt) : xasprintf("%s/trace", base);
}

static int record(pool *p, slot *sl, const job *j, json_t *res, em_err *err)
{
    const suite_task *t = job_task(p, j);
    const char *cause = jstr(res, "exit_cause");
    cause = cause ? cause : exit_cause_name(EXIT_ENV_ERROR);
    bool env_error = exit_cause_from_name(cause) == EXIT_ENV_ERROR;
    /* Not over yet: a retry follows, or (interrupted) --resume runs it again. */
    bool retry = env_error && (j->attempt < p->o->retries || p->stopping);
    if (retry) { /* keep the failed attempt's output beside the one that follows */
        _cleanup_free_ char *base = suite_episode_dir(t->id, j->rep, p->o->repeat);
        _cleanup_free_ char *from = xasprintf("%s/%s", p->dir, base),
                            *to = xasprintf("%s/%s.env_error-%d", p->dir, base, j->attempt);
        remove_tree(to, NULL);
        if (rename(from, to) < 0 && errno != ENOENT)
            plog(p, "warning: keep `%s`: %s", from, strerror(errno));
    }
    char when[40];
    iso8601_now(when, sizeof when);
    json_t *timings = json_object_get(res, "timings");
    double duration = json_number_value(json_object_get(timings, "total_s"));
    _cleanup_free_ char *trace = trace_rel(p, j, retry);
    json_t *line = json_pack("{s:s, s:s, s:i, s:i, s:b, s:f, s:s, s:s, s:I, s:I, s:f, s:s, s:s, s:s, s:s}", "task_id",
                             t->id, "domain", t->domain, "repeat", j->rep, "attempt", j->attempt, "final", !retry,
                             "score", json_number_value(json_object_get(res, "score")), "exit_cause", cause, "reason",
                             jstr(res, "reason") ? jstr(res, "reason") : "", "steps",
                             json_integer_value(json_object_get(res, "steps")), "actions",
                             json_integer_value(json_object_get(res, "actions")), "duration_s", duration, "trace",
                             trace, "env", sl->env, "finished", when, "task_path", t->path);
    if (jstr(res, "accel"))
        json_object_set(line, "accel", json_object_get(res, "accel"));
    if (jstr(res, "status")) /* evaluator_error: the 0 is no score (report_summary counts it apart) */
        json_object_set(line, "status", json_object_get(res, "status"));
    if (timings)
        json_object_set(line, "timings", timings);
    if (json_is_true(json_object_get(res, "flagged"))) { /* the image's or the task's fault, said per episode */
        json_object_set_new(line, "flagged", json_true());
        json_t *why = json_array();
        /* a list that is not there adds nothing (json_array_extend refuses a NULL) */
        json_array_extend(why, json_object_get(res, "setup_flags"));
        json_array_extend(why, json_object_get(res, "getter_flags"));
        json_object_set_new(line, "flags", why);
    }
    bool eval_error = report_evaluator_error(line), scored = report_scored(line);
    int rc = results_append(p->results_fd, line, err);
    json_decref(line);
    if (rc < 0)
        return em_prefix(err, "suite: `%s/" SUITE_RESULTS_FILE "`: ", p->dir);
    double score = json_number_value(json_object_get(res, "score"));
    sbuf why = {0};
    sbuf_add_visible(&why, jstr(res, "reason") ? jstr(res, "reason") : "", 200);
    if (retry && p->stopping) {
        plog(p, "env_error %s on %s while stopping: %s (--resume runs it again)", t->id, sl->env, why.s ? why.s : "");
    } else if (retry) {
        p->retried++;
        q_push_front(p, (job){j->task, j->rep, j->attempt + 1});
        plog(p, "env_error %s on %s: %s; retrying on a restored env", t->id, sl->env, why.s ? why.s : "");
    } else {
        p->finished++;
        p->finished_here++;
        p->passed += scored && report_passed(score);
        p->scored += scored;
        _cleanup_free_ char *key = suite_episode_key(t->id, j->rep);
        plog(p, "[%zu/%zu] %s %s score %.2f (%s, %.1f s, %s)%s%s", p->finished, p->expected,
             eval_error ? "EVALUATOR_ERROR" : !scored ? "ENV_ERROR" : report_passed(score) ? "PASS" : "FAIL", key, score,
             cause, duration, sl->env,
             report_passed(score) ? "" : ": ", report_passed(score) ? "" : (why.s ? why.s : ""));
    }
    sbuf_release(&why);
    return 0;
}

/* A task that cannot run (a piece envmgr lacks): one final line with exit cause unsupported and
 * its reason, no env, no trace; reports count it apart from scores. */
static int record_unsupported(pool *p, const suite_task *t, int rep, em_err *err)
{
    char when[40];
    iso8601_now(when, sizeof when);
    json_t *line = json_pack("{s:s, s:s, s:i, s:i, s:b, s:f, s:s, s:s, s:i, s:i, s:f, s:s, s:s, s:s}", "task_id",
                             t->id, "domain", t->domain, "repeat", rep, "attempt", 0, "final", 1, "score", 0.0,
                             "exit_cause", exit_cause_name(EXIT_UNSUPPORTED), "reason", t->unsupported, "steps", 0,
                             "actions", 0, "duration_s", 0.0, "finished", when, "task_path", t->path, "env", "");
    int rc = results_append(p->results_fd, line, err);
    json_decref(line);
    if (rc < 0)
        return em_prefix(err, "suite: `%s/" SUITE_RESULTS_FILE "`: ", p->dir);
    p->finished++; /* not finished_here: it took no time, the ETA must not count it */
    p->unsupported++;
    _cleanup_free_ char *key = suite_episode_key(t->id, rep);
    sbuf why = {0};
    sbuf_add_visible(&why, t->unsupported, 200);
    plog(p, "[%zu/%zu] UNSUPPORTED %s: %s", p->finished, p->expected, key, why.s ? why.s : "");
    sbuf_release(&why);
    return 0;
}

/* The worker died or was killed with an episode in hand: that episode ended in env_error. */
static int worker_lost(pool *p, slot *sl, const char *why, em_err *err)
{
    if (!sl->has_job)
        return 0;
    sl->has_job = false;
    p->running--;
    if (p->stopping)
        return 0; /* interrupted: the episode was in flight, nothing to record */
    json_t *res = suite_synth_result(job_task(p, &sl->j)->id, EXIT_ENV_ERROR, why, (now_ms() - sl->started) / 1000);
    int rc = record(p, sl, &sl->j, res, err);
    json_decref(res);
    return rc;
}

static void slot_closed(pool *p, slot *sl, em_err *err, int *rc)
{
    int was = sl->state;
    close(sl->ch.fd);
    sl->ch.fd = -1;
    suite_chan_release(&sl->ch);
    sl->ch = (suite_chan){.fd = -1};
    reap_worker(sl, 15000);
    if (sl->has_job) {
        _cleanup_free_ char *why =
            sl->qemu_killed
                ? xasprintf("watchdog: no result after %.0f s; its QEMU and then its silent worker were killed (a "
                            "hung env)",
                            sl->limit_s)
                : xasprintf("the worker of %s exited mid-episode (see %s/" SUITE_LOGS_DIR "/env-%d.log)", sl->env,
                            p->dir, sl->k);
        if (worker_lost(p, sl, why, err) < 0)
            *rc = -1;
    }
    env_down_quiet(sl->env); /* its QEMU, if the worker could not take it down */
    if (was == SLOT_STARTING) {
        sl->failures++;
        if (!p->stopping)
            plog(p, "env %s failed to start (%d of %d tries): %s", sl->env, sl->failures, SUITE_SPAWN_TRIES,
                 sl->last_error ? sl->last_error : "see its log");
    }
    sl->state = sl->failures >= SUITE_SPAWN_TRIES ? SLOT_RETIRED : SLOT_OFF;
}

static void handle_msg(pool *p, slot *sl, json_t *m, em_err *err, int *rc)
{
    const char *type = jstr(m, "type");
    if (!type)
        return;
    if (!strcmp(type, "ready")) {
        sl->state = SLOT_IDLE;
        sl->failures = 0;
        plog(p, "env %s ready in %.1f s", sl->env, json_number_value(json_object_get(m, "up_s")));
    } else if (!strcmp(type, "log")) { /* a worker's warning or error: its env log has it too */
        _cleanup_free_ char *text = suite_log_text(m);
        plog(p, "env %s: %s", sl->env, text);
    } else if (!strcmp(type, "fatal")) {
        free(sl->last_error);
        sl->last_error = xstrdup(jstr(m, "error") ? jstr(m, "error") : "?");
        if (sl->state != SLOT_STARTING)
            plog(p, "env %s: %s", sl->env, sl->last_error);
    } else if (!strcmp(type, "result") && sl->has_job) {
        json_t *res = json_object_get(m, "result");
        if (sl->qemu_killed) { /* the watchdog ended it: whatever the worker saw, the env hung */
            char why[256];
            snprintf(why, sizeof why, "watchdog: no result after %.0f s; the env's QEMU was killed (a hung env)",
                     sl->limit_s);
            json_object_set_new(res, "exit_cause", json_string(exit_cause_name(EXIT_ENV_ERROR)));
            json_object_set_new(res, "reason", json_string(why));
            json_object_set_new(res, "score", json_real(0));
        }
        job j = sl->j;
        sl->has_job = false;
        sl->qemu_killed = false;
        sl->state = SLOT_IDLE;
        p->running--;
        if (record(p, sl, &j, res, err) < 0)
            *rc = -1;
    }
}

static void read_slot(pool *p, slot *sl, em_err *err, int *rc)
{
    suite_chan_fill(&sl->ch);
    json_t *m;
    while ((m = suite_chan_next(&sl->ch))) {
        handle_msg(p, sl, m, err, rc);
        json_decref(m);
    }
    if (sl->ch.eof)
        slot_closed(p, sl, err, rc);
}

static pid_t slot_qemu(const slot *sl) { return env_qemu_pid(sl->env); }

/* How long a worker may stay silent once its QEMU is killed: the sockets it
 * waits on closed, so it answers at once unless it hangs itself. */
static double worker_grace_s(const slot *sl)
{
    double g = sl->limit_s / 2;
    return g < 5 ? 5 : g > SUITE_WORKER_GRACE_S ? SUITE_WORKER_GRACE_S : g;
}

static void watchdog(pool *p, slot *sl)
{
    if (sl->state != SLOT_BUSY || now_ms() < sl->deadline)
        return;
    if (!sl->qemu_killed) {
        pid_t q = slot_qemu(sl);
        if (q > 0)
            kill(q, SIGKILL);
        sl->qemu_killed = true;
        sl->deadline = now_ms() + worker_grace_s(sl) * 1000;
        plog(p, "watchdog: %s on %s ran past %.0f s: killed its QEMU (pid %d)", job_task(p, &sl->j)->id, sl->env,
             (now_ms() - sl->started) / 1000, (int)q);
    } else if (sl->pid > 0) {
        plog(p, "watchdog: the worker of %s is still silent %.0f s later: killed it", sl->env, worker_grace_s(sl));
        kill(sl->pid, SIGKILL);
        sl->deadline = now_ms() + 3600e3; /* its EOF does the rest */
    }
}

static void sample_memory(pool *p)
{
    for (int i = 0; i < p->nslots; i++) {
        slot *sl = &p->slots[i];
        if (sl->state != SLOT_IDLE && sl->state != SLOT_BUSY)
            continue;
        pid_t q = slot_qemu(sl);
        long rss, pss;
        if (q > 0 && suite_proc_mem(q, &rss, &pss) == 0) {
            if ((double)rss / 1024 > sl->peak_rss_mib)
                sl->peak_rss_mib = (double)rss / 1024;
            if ((double)pss / 1024 > sl->peak_pss_mib)
                sl->peak_pss_mib = (double)pss / 1024;
        }
    }
    p->last_sample = now_ms();
}

static void dispatch(pool *p, slot *sl)
{
    job j = q_pop(p);
    const suite_task *t = job_task(p, &j);
    _cleanup_free_ char *out = suite_episode_dir(t->id, j.rep, p->o->repeat);
    json_t *m = json_pack("{s:s, s:I, s:s, s:s, s:s, s:s, s:i}", "type", "job", "job", (json_int_t)j.task, "task",
                          t->path, "task_id", t->id, "out", out, "image", t->image, "attempt", j.attempt);
    int rc = suite_chan_send(sl->ch.fd, m);
    json_decref(m);
    if (rc < 0) { /* the worker is gone; its EOF will show up: put the episode back */
        q_push_front(p, j);
        return;
    }
    sl->j = j;
    sl->has_job = true;
    sl->state = SLOT_BUSY;
    sl->started = now_ms();
    sl->limit_s = p->o->watchdog_s > 0 ? p->o->watchdog_s : t->episode_timeout_s + p->o->watchdog_margin_s;
    sl->deadline = sl->started + sl->limit_s * 1000;
    sl->qemu_killed = false;
    p->running++;
    _cleanup_free_ char *key = suite_episode_key(t->id, j.rep);
    if (!p->tty)
        plog(p, "start %s on %s (attempt %d)", key, sl->env, j.attempt + 1);
}

/* The end: idle workers get EOF and take their envs down. After SIGINT/SIGTERM
 * or a fatal error (abort) they get SIGTERM, so running episodes stop too. */
static void shutdown_pool(pool *p, bool abort, em_err *err, int *rc)
{
    p->stopping = true;
    for (int i = 0; i < p->nslots; i++)
        if (p->slots[i].pid > 0) {
            if (abort)
                kill(p->slots[i].pid, SIGTERM); /* it may have had SIGINT from the terminal already */
            else if (p->slots[i].ch.fd >= 0)
                shutdown(p->slots[i].ch.fd, SHUT_WR); /* EOF: finish up */
        }
    double deadline = now_ms() + SHUTDOWN_GRACE_MS;
    for (;;) {
        struct pollfd pf[p->nslots > 0 ? p->nslots : 1];
        int map[p->nslots > 0 ? p->nslots : 1], n = 0;
        for (int i = 0; i < p->nslots; i++)
            if (p->slots[i].ch.fd >= 0) {
                pf[n] = (struct pollfd){.fd = p->slots[i].ch.fd, .events = POLLIN};
                map[n++] = i;
            }
        if (n == 0 || now_ms() > deadline)
            break;
        int r = poll(pf, (nfds_t)n, 200);
        for (int i = 0; r > 0 && i < n; i++)
            if (pf[i].revents)
                read_slot(p, &p->slots[map[i]], err, rc); /* results that finished still count */
    }
    for (int i = 0; i < p->nslots; i++) {
        slot *sl = &p->slots[i];
        if (sl->ch.fd >= 0) {
            close(sl->ch.fd);
            sl->ch.fd = -1;
        }
        suite_chan_release(&sl->ch);
        reap_worker(sl, 0);
        env_down_quiet(sl->env);
    }
}

/* ---- run directory, resume ---- */

static int lock_dir(pool *p, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/.lock", p->dir);
    p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (p->lock_fd < 0)
        return em_fail_errno(err, "suite: open `%s`", path);
    double deadline = now_ms() + LOCK_WAIT_MS;
    bool said = false;
    while (flock(p->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return em_fail_errno(err, "suite: lock `%s`", path);
        if (check_interrupt(err) < 0)
            return -1;
        if (now_ms() > deadline)
            return em_fail_input(err, "suite: `%s` is in use by another envmgr suite run", p->dir);
        if (!said)
            em_info("suite: waiting for another envmgr (or its exiting workers) to release %s", p->dir);
        said = true;
        sleep_ms(200);
    }
    return 0;
}

static bool same_tasks(json_t *a, json_t *b)
{
    if (json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_equal(json_object_get(json_array_get(a, i), "id"), json_object_get(json_array_get(b, i), "id")))
            return false;
    return true;
}

static int write_meta(pool *p, json_t *meta, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" SUITE_META_FILE, p->dir);
    return json_save(path, meta, JSON_INDENT(2), 0644, err);
}

/* suite.json: new, or (--resume) the same suite, agent, shard and repeat as before. */
static int prepare_meta(pool *p, em_err *err)
{
    json_t *meta = NULL;
    if (report_read_meta(p->dir, true, &meta, err) < 0)
        return -1;
    _cleanup_free_ char *rpath = xasprintf("%s/" SUITE_RESULTS_FILE, p->dir);
    struct stat st;
    bool has_results = stat(rpath, &st) == 0 && st.st_size > 0;
    json_t *mine = suite_meta_new(p->s, p->o->agent, p->o->repeat);
    int rc = 0;
    if (!p->o->resume && (meta || has_results)) {
        rc = em_fail_input(err, "suite: `%s` already holds a run (--resume finishes it; or choose another --out)",
                           p->dir);
    } else if (p->o->resume && meta) {
        const char *keys[] = {"agent", "shard", "repeat"};
        for (size_t i = 0; i < ARRAY_LEN(keys) && rc == 0; i++)
            if (!json_equal(json_object_get(meta, keys[i]), json_object_get(mine, keys[i]))) {
                _cleanup_free_ char *was = json_dumps(json_object_get(meta, keys[i]), JSON_ENCODE_ANY),
                                    *now = json_dumps(json_object_get(mine, keys[i]), JSON_ENCODE_ANY);
                rc = em_fail_input(err, "suite: --resume: `%s` was run with %s %s, not %s", p->dir, keys[i], was, now);
            }
        if (rc == 0 && !same_tasks(json_object_get(meta, "tasks"), json_object_get(mine, "tasks")))
            rc = em_fail_input(err, "suite: --resume: the suite's tasks changed since `%s` was started", p->dir);
        /* Reap what a killed earlier run left: its suite envs, if its envmgr is gone. */
        size_t i;
        json_t *run;
        json_array_foreach(json_object_get(meta, "runs"), i, run)
        {
            pid_t pid = (pid_t)json_integer_value(json_object_get(run, "pid"));
            if (rc == 0 && pid > 1 && pid != getpid() && !suite_owner_alive(pid)) {
                gc_opts go = {.only_owner = pid};
                gc_stats gs;
                em_err gerr = {0};
                if (suite_gc(&go, stderr, &gs, &gerr) < 0)
                    em_log(EM_LOG_ERROR, "suite: gc: %s", gerr.msg);
            }
        }
    }
    if (rc == 0) {
        json_t *use = meta && p->o->resume ? meta : mine;
        char when[40];
        iso8601_now(when, sizeof when);
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        json_t *runs = json_object_get(use, "runs");
        if (!json_is_array(runs)) {
            runs = json_array();
            json_object_set_new(use, "runs", runs);
        }
        json_array_append_new(runs, json_pack("{s:i, s:s, s:s}", "pid", (int)getpid(), "host", host, "started", when));
        rc = write_meta(p, use, err);
    }
    json_decref(meta);
    json_decref(mine);
    return rc;
}

/* Boot checks and golden states in the parent, before any worker: one
 * message if the golden state must be built, none of the workers waits on
 * another's build, and bad images fail before anything starts. */
static int prepare_images(pool *p, int *memory_mb, int *cpus, em_err *err)
{
    *memory_mb = 0;
    *cpus = 1;
    for (size_t i = 0; i < p->s->ntasks; i++) {
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = !strcmp(p->s->tasks[k].image, p->s->tasks[i].image);
        if (seen)
            continue;
        env_image_facts f;
        const char *accel = NULL;
        int rc = env_image_prepare(p->s->tasks[i].image, p->o->accel, &accel, &f, err);
        if (rc == 0) {
            p->accel = accel;
            if (f.memory_mb > *memory_mb)
                *memory_mb = f.memory_mb;
            if (f.cpus > *cpus)
                *cpus = f.cpus;
            env_image_facts_free(&f);
        }
        if (rc < 0)
            return em_prefix(err, "suite: image %s: ", p->s->tasks[i].image);
    }
    return 0;
}

static json_t *resources_json(pool *p)
{
    json_t *per = json_array();
    double rss = 0, pss = 0, pss_sum = 0;
    int n = 0;
    for (int i = 0; i < p->nslots; i++) {
        slot *sl = &p->slots[i];
        if (sl->peak_rss_mib <= 0)
            continue;
        json_array_append_new(per, json_pack("{s:s, s:f, s:f}", "env", sl->env, "peak_rss_mib", sl->peak_rss_mib,
                                             "peak_pss_mib", sl->peak_pss_mib));
        rss = sl->peak_rss_mib > rss ? sl->peak_rss_mib : rss;
        pss = sl->peak_pss_mib > pss ? sl->peak_pss_mib : pss;
        pss_sum += sl->peak_pss_mib;
        n++;
    }
    return json_pack("{s:f, s:f, s:f, s:o}", "peak_rss_mib", rss, "peak_pss_mib", pss, "mean_peak_pss_mib",
                     n ? pss_sum / n : 0.0, "per_env", per);
}

static void free_pool(pool *p)
{
    for (int i = 0; i < p->nslots; i++) {
        suite_chan_release(&p->slots[i].ch);
        free(p->slots[i].last_error);
    }
    free(p->slots);
    free(p->q);
    if (p->results_fd >= 0)
        close(p->results_fd);
    if (p->lock_fd >= 0)
        close(p->lock_fd);
}

int suite_run(const suite *s, const pool_opts *o, json_t **summary_out, em_err *err)
{
    pool p = {.s = s, .o = o, .results_fd = -1, .lock_fd = -1};
    if (mkdir_p(o->out_dir, 0755, err) < 0)
        return -1;
    if (!realpath(o->out_dir, p.dir))
        return em_fail_errno(err, "suite: `%s`", o->out_dir);
    _cleanup_free_ char *logs = xasprintf("%s/" SUITE_LOGS_DIR, p.dir), *traces = xasprintf("%s/" SUITE_TRACES_DIR, p.dir);
    int rc = lock_dir(&p, err);
    if (rc == 0)
        rc = prepare_meta(&p, err);
    if (rc == 0)
        rc = mkdir_p(logs, 0755, err);
    if (rc == 0)
        rc = mkdir_p(traces, 0755, err);
    _cleanup_free_ char *rpath = xasprintf("%s/" SUITE_RESULTS_FILE, p.dir);
    size_t dropped = 0;
    if (rc == 0)
        rc = results_open_append(rpath, &p.results_fd, &dropped, err);
    if (rc < 0) {
        free_pool(&p);
        return -1;
    }
    if (dropped)
        em_warn("suite: cut a partial last line (%zu bytes) off %s", dropped, rpath);

    /* What is left to run. */
    json_t *lines = NULL;
    if (results_read(rpath, &lines, NULL, err) < 0) {
        free_pool(&p);
        return -1;
    }
    json_t *final = results_final(lines);
    json_decref(lines);
    p.expected = s->ntasks * (size_t)o->repeat;
    for (size_t i = 0; i < s->ntasks; i++)
        for (int r = 0; r < o->repeat; r++) {
            _cleanup_free_ char *key = suite_episode_key(s->tasks[i].id, r);
            json_t *done = json_object_get(final, key);
            if (done) {
                p.finished++;
                p.scored += report_scored(done);
                p.passed += report_scored(done) && report_passed(json_number_value(json_object_get(done, "score")));
            } else if (s->tasks[i].unsupported) {
                if (record_unsupported(&p, &s->tasks[i], r, err) < 0) {
                    json_decref(final);
                    free_pool(&p);
                    return -1;
                }
            } else {
                q_push_back(&p, (job){i, r, 0});
            }
        }
    json_decref(final);
    if (o->resume)
        em_info("suite: --resume: %zu of %zu episodes already finished, %zu to run", p.finished, p.expected,
                p.qlen);

    host_facts hf = {0};
    char why[256] = "";
    int memory_mb = 1024, cpus = 1;
    double t_wall = now_ms();
    if (p.qlen > 0) {
        if (prepare_images(&p, &memory_mb, &cpus, err) < 0) {
            if (interrupted()) /* e.g. during a golden-state build: nothing ran */
                err->code = SUITE_EXIT_INTERRUPTED;
            free_pool(&p);
            return -1;
        }
        if (o->envs > 0) {
            p.nslots = o->envs;
            snprintf(why, sizeof why, "--envs");
        } else {
            em_err herr = {0};
            if (host_read(&hf, &herr) < 0) {
                hf.cores = 1;
                hf.mem_avail_mib = memory_mb + SUITE_ENV_OVERHEAD_MIB;
            }
            p.nslots = suite_default_envs(&hf, memory_mb, cpus, !strcmp(p.accel, "kvm"), p.qlen, why, sizeof why);
        }
        if ((size_t)p.nslots > p.qlen)
            p.nslots = (int)p.qlen;
        em_info("suite: %zu episodes on %d env%s (%s), %s", p.qlen, p.nslots, p.nslots == 1 ? "" : "s", why,
                p.accel);
    }
    p.tty = o->progress == 1 || (o->progress < 0 && isatty(STDERR_FILENO));
    p.slots = xcalloc(p.nslots > 0 ? (size_t)p.nslots : 1, sizeof *p.slots);
    for (int i = 0; i < p.nslots; i++) {
        p.slots[i] = (slot){.k = i, .ch = {.fd = -1}};
        snprintf(p.slots[i].env, sizeof p.slots[i].env, SUITE_ENV_PREFIX "%d-%d", (int)getpid(), i);
    }
    p.t_start = now_ms();
    em_warn_get(&outer_sink, &outer_arg);
    em_warn_set(pool_sink, &p);

    /* The event loop. */
    bool signalled = false;
    while (rc == 0) {
        if (interrupted()) {
            signalled = true;
            break;
        }
        size_t waiting = 0; /* envs that are, or soon will be, free for the queue */
        for (int i = 0; i < p.nslots; i++)
            waiting += p.slots[i].state == SLOT_IDLE || p.slots[i].state == SLOT_STARTING;
        int live = 0, busy = 0, retired = 0;
        for (int i = 0; i < p.nslots; i++) {
            slot *sl = &p.slots[i];
            if (sl->state == SLOT_OFF && p.qlen > waiting) {
                if (spawn_worker(&p, sl, err) < 0) {
                    rc = -1;
                    break;
                }
                waiting++;
            }
            if (sl->state == SLOT_IDLE && p.qlen > 0)
                dispatch(&p, sl);
            live += sl->state == SLOT_STARTING || sl->state == SLOT_IDLE || sl->state == SLOT_BUSY;
            busy += sl->state == SLOT_BUSY;
            retired += sl->state == SLOT_RETIRED;
        }
        if (rc < 0)
            break;
        if (p.qlen == 0 && busy == 0)
            break; /* every episode is over */
        if (live == 0 && retired == p.nslots) {
            slot *last = &p.slots[p.nslots - 1];
            rc = em_fail(err, "suite: no env could be started (%d tries each): %s", SUITE_SPAWN_TRIES,
                         last->last_error ? last->last_error : "see " SUITE_LOGS_DIR "/env-*.log");
            break;
        }
        struct pollfd pf[p.nslots];
        int map[p.nslots], n = 0;
        for (int i = 0; i < p.nslots; i++)
            if (p.slots[i].ch.fd >= 0) {
                pf[n] = (struct pollfd){.fd = p.slots[i].ch.fd, .events = POLLIN};
                map[n++] = i;
            }
        int r = poll(pf, (nfds_t)n, 250);
        for (int i = 0; r > 0 && i < n; i++)
            if (pf[i].revents)
                read_slot(&p, &p.slots[map[i]], err, &rc);
        for (int i = 0; i < p.nslots; i++)
            watchdog(&p, &p.slots[i]);
        if (now_ms() - p.last_sample > SAMPLE_EVERY_MS)
            sample_memory(&p);
        if (p.tty && now_ms() - p.last_draw > DRAW_EVERY_MS)
            progress_draw(&p);
    }
    if (p.nslots > 0) {
        if (signalled)
            plog(&p, "interrupted: stopping %zu running episode%s and every env", p.running,
                 p.running == 1 ? "" : "s");
        shutdown_pool(&p, signalled || rc < 0, err, &rc);
    }
    progress_clear(&p);
    em_warn_set(outer_sink, outer_arg);

    json_t *extra = json_pack("{s:f, s:i, s:s, s:s, s:o, s:I}", "wall_s", (now_ms() - t_wall) / 1000, "envs", p.nslots,
                              "envs_reason", why, "accel", p.accel ? p.accel : "", "resources", resources_json(&p),
                              "retried_this_run", (json_int_t)p.retried);
    em_err serr = {0};
    json_t *summary = NULL;
    if (report_write_all(p.dir, extra, &summary, &serr) < 0 && rc == 0) {
        *err = serr;
        rc = -1;
    }
    /* A crashed episode, or one whose setup could not run, is no score: the run did not measure what it
     * was asked to. */
    json_t *all = json_object_get(summary, "all");
    json_int_t crashed = json_integer_value(json_object_get(all, "env_errors"));
    json_int_t unset = json_integer_value(json_object_get(all, "setup_errors"));
    if (rc == 0 && !signalled && crashed > 0)
        rc = em_fail(err, "suite: %lld episode%s ended in env_error after %d retr%s%s (not scored; `%s/" SUITE_RESULTS_FILE
                          "` says why)",
                     (long long)crashed, crashed == 1 ? "" : "s", o->retries, o->retries == 1 ? "y" : "ies",
                     unset ? " and more in setup_error" : "", p.dir);
    else if (rc == 0 && !signalled && unset > 0)
        rc = em_fail(err, "suite: %lld episode%s ended in setup_error: the task's setup could not run here (not scored; `%s/"
                          SUITE_RESULTS_FILE "` says why)",
                     (long long)unset, unset == 1 ? "" : "s", p.dir);
    json_decref(extra);
    if (signalled && rc == 0) {
        check_interrupt(err);
        err->code = SUITE_EXIT_INTERRUPTED;
        rc = -1;
    } else if (signalled) {
        err->code = SUITE_EXIT_INTERRUPTED;
    }
    if (summary_out)
        *summary_out = summary;
    else
        json_decref(summary);
    free_pool(&p);
    return rc;
}

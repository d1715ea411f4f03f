#include "envmgr/suite/suite_worker.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/env/env.h"
#include "envmgr/episode/episode.h"
#include "envmgr/episode/plan.h"
#include "envmgr/task/task.h"
#include "envmgr/base/exit_cause.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/warn.h"

#define MSG_MAX (8u << 20)
#define SUITE_CHAN_SEND_WAIT_MS 120000 /* a peer that reads nothing for 2 min is stuck or gone */

/* ---- a JSON-lines channel over a socketpair ----------------------------- */

int suite_chan_send(int fd, json_t *msg)
{
    _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return -1;
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    /* Both ends are non-blocking (for their reads), and a result with a getter's document in it is
     * larger than the socket's buffer: wait for the other end to read, rather than fail half-sent. */
    em_err err;
    if (send_full_wait(fd, text, n, SUITE_CHAN_SEND_WAIT_MS, &err) < 0) {
        em_info("envmgr: suite channel: %s", err.msg);
        return -1;
    }
    return 0;
}

/* Read whatever is there (the fd is non-blocking); EOF or an error sets eof. */
void suite_chan_fill(suite_chan *c)
{
    if (!c->in.owned)
        linebuf_init(&c->in, MSG_MAX);
    for (;;) {
        em_err ignored;
        ssize_t r = linebuf_read(&c->in, c->fd, &ignored);
        if (r > 0)
            continue;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        c->eof = true; /* closed, broken, or a peer that floods us past MSG_MAX without a newline */
        return;
    }
}

json_t *suite_chan_next(suite_chan *c)
{
    for (;;) {
        const char *line;
        size_t n;
        int got = linebuf_next(&c->in, &line, &n);
        if (got == LINEBUF_TOO_LONG)
            c->eof = true;
        if (got != LINEBUF_LINE)
            return NULL;
        json_t *j = json_loadb(line, n, 0, NULL);
        if (json_is_object(j))
            return j;
        json_decref(j);
    }
}

void suite_chan_release(suite_chan *c)
{
    linebuf_release(&c->in);
}

char *suite_log_text(json_t *msg)
{
    const char *t = json_string_value(json_object_get(msg, "text"));
    sbuf b = {0};
    sbuf_add_visible(&b, t ? t : "?", SUITE_LOG_TEXT_MAX);
    return sbuf_steal(&b);
}

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* ---- the worker: one env, episodes one at a time -------------------------- */

static int worker_env_up(const suite_worker_ctx *w, const char *image, env **e, em_err *err)
{
    _cleanup_free_ char *d = paths_env_dir(w->name);
    em_err ignored;
    if (access(d, F_OK) == 0)
        env_down(w->name, &ignored);
    env_up_opts uo = {.name = w->name, .image = image, .accel = w->accel, .net = w->o->net};
    return env_up(&uo, e, NULL, err);
}

json_t *suite_synth_result(const char *task_id, exit_cause cause, const char *reason, double total_s)
{
    return json_pack("{s:s, s:f, s:s, s:s, s:i, s:i, s:{s:f}}", "task_id", task_id, "score", 0.0, "reason", reason,
                     "exit_cause", exit_cause_name(cause), "steps", 0, "actions", 0, "timings", "total_s", total_s);
}

/* One episode; NULL when interrupted (nothing to report: the episode was in flight). */
static json_t *worker_episode(const suite_worker_ctx *w, env *e, bool *fresh, json_t *job, bool *broken)
{
    const char *path = jstr(job, "task"), *task_id = jstr(job, "task_id"), *out_rel = jstr(job, "out");
    _cleanup_free_ char *out = xasprintf("%s/%s", w->dir, out_rel);
    remove_tree(out, NULL); /* what an interrupted earlier attempt left */
    double t0 = now_ms();
    em_err err = {0};
    task *t = NULL;
    if (task_load(path, &t, &err) < 0 || plan_for_env(e, t, &err) < 0) {
        task_free(t);
        return suite_synth_result(task_id, EXIT_TASK_ERROR, err.msg, (now_ms() - t0) / 1000);
    }
    episode_opts eo = {.agent_cmd = w->o->agent, .out_dir = out, .fresh = *fresh, .settle_ms = w->o->settle_ms,
                        .observation = w->o->observation, .agent_env = w->o->agent_env,
                        .agent_sandbox_off = w->o->agent_sandbox_off, .video = w->o->video};
    json_t *res = NULL;
    int rc = episode_run(e, t, path, &eo, &res, &err);
    task_free(t);
    *fresh = false;
    if (interrupted()) {
        /* A signal mid-episode can end a step or a getter early in ways that
         * look like an outcome (a getter that "failed" scores 0): the episode
         * was in flight, so it is not reported and --resume runs it again. */
        json_decref(res);
        return NULL;
    }
    if (rc < 0) {
        *broken = true;
        return suite_synth_result(task_id, EXIT_ENV_ERROR, err.msg, (now_ms() - t0) / 1000);
    }
    const char *cause = jstr(res, "exit_cause");
    if (exit_cause_from_name(cause) == EXIT_ENV_ERROR)
        *broken = true;
    return res;
}

/* A worker's sink: every message into its env log (its stderr), and warnings and errors also to
 * the parent, which shows them above its progress line. */
static void worker_sink(em_log_level level, const char *msg, void *arg)
{
    em_warn_stderr(level, msg, NULL);
    if (level != EM_LOG_WARNING && level != EM_LOG_ERROR)
        return;
    _cleanup_free_ char *text = utf8_sanitize(msg, strlen(msg), NULL); /* JSON takes only UTF-8 */
    json_t *m = json_pack("{s:s, s:s, s:s}", "type", "log", "level", em_log_level_name(level), "text", text);
    if (m)
        suite_chan_send(*(int *)arg, m);
    json_decref(m);
}

static void worker_fatal(int fd, const char *what, const em_err *err)
{
    em_info("envmgr: %s: %s", what, err->msg); /* the parent hears it as "fatal" */
    json_t *m = json_pack("{s:s, s:s}", "type", "fatal", "error", err->msg);
    suite_chan_send(fd, m);
    json_decref(m);
}

int suite_worker_main(const suite_worker_ctx *w, int fd, const char *first_image)
{
    static int chan_fd;
    chan_fd = fd;
    em_warn_set(worker_sink, &chan_fd);
    em_err err = {0};
    env *e = NULL;
    char *image = xstrdup(first_image);
    double t0 = now_ms();
    if (worker_env_up(w, image, &e, &err) < 0) {
        if (!interrupted())
            worker_fatal(fd, "up", &err);
        free(image);
        return 1;
    }
    em_info("envmgr: env %s up in %.1f s", w->name, (now_ms() - t0) / 1000);
    json_t *m = json_pack("{s:s, s:f}", "type", "ready", "up_s", (now_ms() - t0) / 1000);
    suite_chan_send(fd, m);
    json_decref(m);
    suite_chan c = {.fd = fd};
    bool fresh = true;
    int rc = 0;
    bool idle_held = false;
    while (!interrupted() && rc == 0) {
        json_t *msg = suite_chan_next(&c);
        if (!msg) {
            if (c.eof)
                break;
            if (!idle_held) { /* an env waiting for its next job waits paused: it costs no CPU */
                em_err herr = {0};
                if (env_hold(e, true, &herr) < 0)
                    em_log(EM_LOG_ERROR, "envmgr: %s", herr.msg);
                idle_held = true;
            }
            struct pollfd p = {.fd = fd, .events = POLLIN};
            poll(&p, 1, 250);
            suite_chan_fill(&c);
            continue;
        }
        idle_held = false; /* the episode resumes it */
        const char *type = jstr(msg, "type");
        if (!type || strcmp(type, "job")) {
            json_decref(msg);
            break;
        }
        const char *want = jstr(msg, "image");
        if (want && strcmp(want, image)) { /* a task on another image: this env boots that one now */
            env_close(e);
            e = NULL;
            free(image);
            image = xstrdup(want);
            fresh = true;
            if (worker_env_up(w, image, &e, &err) < 0) {
                if (!interrupted())
                    worker_fatal(fd, "up", &err);
                json_decref(msg);
                rc = 1;
                break;
            }
        }
        em_info("envmgr: episode %s (attempt %lld)", jstr(msg, "task_id"),
                json_integer_value(json_object_get(msg, "attempt")) + 1);
        bool broken = false;
        json_t *res = worker_episode(w, e, &fresh, msg, &broken);
        if (!res) {
            json_decref(msg);
            break;
        }
        json_t *reply = json_pack("{s:s, s:O, s:o}", "type", "result", "job", json_object_get(msg, "job"), "result",
                                  res);
        json_decref(msg);
        int src = suite_chan_send(fd, reply);
        json_decref(reply);
        if (src < 0)
            break; /* the parent is gone */
        if (broken) {
            /* Back to the snapshot: a fresh QEMU from the golden state; if even that fails, a new env. */
            env_timings tm;
            em_err rerr = {0};
            if (env_reset(e, &tm, &rerr) == 0) {
                em_info("envmgr: env %s restored from its snapshot after env_error", w->name);
            } else {
                if (interrupted())
                    break;
                em_warn("envmgr: %s; recreating the env", rerr.msg);
                env_close(e);
                e = NULL;
                if (worker_env_up(w, image, &e, &err) < 0) {
                    if (!interrupted())
                        worker_fatal(fd, "recreate", &err);
                    rc = 1;
                    break;
                }
            }
            fresh = true;
        }
    }
    if (e)
        env_close(e);
    em_err derr = {0};
    _cleanup_free_ char *d = paths_env_dir(w->name);
    if (access(d, F_OK) == 0 && env_down(w->name, &derr) < 0)
        em_log(EM_LOG_ERROR, "envmgr: %s", derr.msg);
    free(image);
    suite_chan_release(&c);
    return rc;
}


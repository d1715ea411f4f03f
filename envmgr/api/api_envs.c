/* The envs a server owns and the endpoints that act on them. One request at a
 * time per env (its mutex): an env's VNC session, QMP and agent connections
 * serve one caller. The table lock is held only to find, add or remove an
 * entry, never across env work, so a slow reset on one env never stalls the
 * others. */
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/api/api_int.h"
#include "envmgr/action/action_reply.h"
#include "envmgr/env/env_image.h"
#include "envmgr/episode/plan.h"
#include "envmgr/base/base64.h"
#include "envmgr/base/cleanup.h"
#include "envmgr/net/egress_log.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/state/states.h"
#include "recorder/trace.h"

#define FREEFORM_TASK                                                                                                  \
    "{\"id\": \"freeform\", \"instruction\": \"freeform session (no task)\", \"config\": [], \"evaluator\": {\"func\": \"infeasible\"},"       \
    " \"limits\": {\"max_steps\": 1000, \"episode_timeout_s\": 86400}}"

/* ---- the table ---- */

api_env *api_env_acquire(api_server *s, const char *id)
{
    pthread_mutex_lock(&s->lock);
    api_env *ae = s->envs;
    while (ae && strcmp(ae->id, id))
        ae = ae->next;
    if (ae)
        ae->refs++;
    pthread_mutex_unlock(&s->lock);
    return ae;
}

static void env_entry_free(api_env *ae)
{
    pthread_mutex_destroy(&ae->mu);
    free(ae->image);
    free(ae->task_path);
    free(ae->trace_dir);
    json_decref(ae->last_result);
    free(ae);
}

void api_env_release(api_server *s, api_env *ae)
{
    if (!ae)
        return;
    pthread_mutex_lock(&s->lock);
    bool last = --ae->refs == 0 && ae->gone;
    pthread_mutex_unlock(&s->lock);
    if (last)
        env_entry_free(ae);
}

/* Under ae->mu: stop the episode, close the handle, stop QEMU, remove the run directory. */
static int teardown(api_server *s, api_env *ae, em_err *err)
{
    if (!ae->e)
        return 0;
    episode_abandon(ae->ep);
    ae->ep = NULL;
    task_free(ae->t);
    ae->t = NULL;
    env_close(ae->e);
    ae->e = NULL;
    int rc = env_down(ae->id, err);
    api_metrics_add(&s->metrics, &s->metrics.envs_deleted, 1);
    return rc;
}

static void count_egress_locked(api_server *s, api_env *ae);

/* Take ae out of the table (the caller holds a reference). False when someone else already did. */
static bool unlink_env(api_server *s, api_env *ae)
{
    pthread_mutex_lock(&s->lock);
    bool found = false;
    for (api_env **pp = &s->envs; *pp; pp = &(*pp)->next)
        if (*pp == ae) {
            *pp = ae->next;
            found = true;
            break;
        }
    if (found) {
        count_egress_locked(s, ae); /* the last of its egress log, before the run directory goes */
        ae->gone = true;
        s->nenvs--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return found;
}

void api_envs_teardown_all(api_server *s)
{
    for (;;) {
        pthread_mutex_lock(&s->lock);
        api_env *ae = s->envs;
        if (ae)
            ae->refs++;
        pthread_mutex_unlock(&s->lock);
        if (!ae)
            break;
        unlink_env(s, ae);
        pthread_mutex_lock(&ae->mu);
        em_err err = {0};
        if (teardown(s, ae, &err) < 0)
            em_log(EM_LOG_ERROR, "envmgr serve: tear down %s: %s", ae->id, err.msg);
        else
            em_info("envmgr serve: tore down %s", ae->id);
        pthread_mutex_unlock(&ae->mu);
        api_env_release(s, ae);
    }
    /* envs still being created finish (or fail) and find the server stopping */
    pthread_mutex_lock(&s->lock);
    while (s->nenvs > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

int api_envs_count(api_server *s)
{
    pthread_mutex_lock(&s->lock);
    int n = 0;
    for (api_env *ae = s->envs; ae; ae = ae->next)
        n++;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Denied egress: the env's egress log (netpolicy.h) read from where the last
 * count stopped. Reading a file under the table lock is short: only new lines. */
static void count_egress_locked(api_server *s, api_env *ae)
{
    _cleanup_free_ char *dir = paths_env_dir(ae->id), *path = netpolicy_log_path(dir);
    if (egress_log_size(path) < ae->egress_off) /* a new log */
        ae->egress_off = 0;
    json_t *events = NULL;
    em_err err = {0};
    if (egress_log_read(path, &ae->egress_off, 100000, &events, &err) < 0)
        return;
    size_t i, denied = 0;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        const char *v = json_string_value(json_object_get(ev, "verdict"));
        denied += v && !strcmp(v, "denied");
    }
    json_decref(events);
    if (denied)
        api_metrics_add(&s->metrics, &s->metrics.egress_denied, (long)denied);
}

void api_envs_count_egress(api_server *s)
{
    pthread_mutex_lock(&s->lock);
    for (api_env *ae = s->envs; ae; ae = ae->next)
        count_egress_locked(s, ae);
    pthread_mutex_unlock(&s->lock);
}

/* ---- helpers ---- */

/* An env with no episode running waits paused (no CPU); the next reset resumes it. */
static void hold_idle(api_env *ae)
{
    em_err herr = {0};
    if (env_hold(ae->e, true, &herr) < 0)
        em_log(EM_LOG_ERROR, "envmgr serve: %s", herr.msg);
}

static json_t *env_summary(api_env *ae)
{
    return json_pack("{s:s, s:s, s:s}", "id", ae->id, "image", ae->image, "created", ae->created);
}

/* Find the env and lock it; on failure the reply says why and NULL comes back. */
static api_env *lock_env(api_request *q, api_reply *r)
{
    api_env *ae = api_env_acquire(q->s, q->rt.env);
    api_error e;
    if (!ae) {
        api_fail(&e, 404, "id", "no env `%s` on this server (GET /v1/envs lists them)", q->rt.env);
        api_reply_error(r, &e);
        return NULL;
    }
    pthread_mutex_lock(&ae->mu);
    if (!ae->e) {
        pthread_mutex_unlock(&ae->mu);
        api_env_release(q->s, ae);
        api_fail(&e, 404, "id", "env `%s` was deleted", q->rt.env);
        api_reply_error(r, &e);
        return NULL;
    }
    return ae;
}

static void unlock_env(api_request *q, api_env *ae)
{
    pthread_mutex_unlock(&ae->mu);
    api_env_release(q->s, ae);
}

static void reply_em(api_reply *r, const em_err *err, const char *field)
{
    api_error e;
    api_fail_em(&e, err, field);
    api_reply_error(r, &e);
}

static void reply_fail(api_reply *r, int status, const char *field, const char *msg)
{
    api_error e;
    api_fail(&e, status, field, "%s", msg);
    api_reply_error(r, &e);
}

/* The observation an agent acts on: the frame just stored in the trace. */
static json_t *observe(api_request *q, api_env *ae, em_err *err, double *env_ms)
{
    char sha[65];
    double t0 = now_ms();
    if (episode_observe(ae->ep, sha, err) < 0)
        return NULL;
    *env_ms = now_ms() - t0; /* the frame and its PNG; what follows is the API's own work */
    const task *t = ae->t;
    _cleanup_json_ json_t *obs =
        json_pack("{s:i, s:s, s:s, s:i, s:i}", "step", episode_steps(ae->ep), "instruction",
                  t && !ae->freeform ? t->instruction : "", "screenshot_sha256", sha, "width", env_width(ae->e),
                  "height", env_height(ae->e));
    const char *mode = api_query(q, "screenshot");
    if (obs_has_screenshot(ae->observation) && (!mode || strcmp(mode, "none") != 0)) {
        _cleanup_free_ char *path = xasprintf("%s/frames/%s.png", episode_trace_dir(ae->ep), sha), *png = NULL;
        size_t len;
        if (read_file_capped(path, 64 << 20, &png, &len, err) < 0)
            return NULL;
        char *b64 = base64_encode(png, len);
        json_object_set_new(obs, "screenshot", json_string(b64));
        free(b64);
        api_metrics_add(&q->s->metrics, &q->s->metrics.screenshots, 1);
    }
    const char *tree = episode_observed_tree(ae->ep);
    if (tree) { /* observation a11y_tree / screenshot_a11y_tree: OSWorld's XML, as the trace holds it */
        _cleanup_free_ char *path = xasprintf("%s/" TRACE_A11Y_DIR "/%s.xml", episode_trace_dir(ae->ep), tree);
        _cleanup_free_ char *xml = NULL;
        size_t len;
        if (read_file_capped(path, TRACE_MAX_A11Y_BYTES, &xml, &len, err) < 0)
            return NULL;
        json_object_set_new(obs, "accessibility_tree", json_stringn(xml, len));
        json_object_set_new(obs, "a11y_tree_sha256", json_string(tree));
    }
    ae->last_obs_ms = now_ms();
    return steal_pointer(&obs);
}

/* The body's "observation" (default the screenshot); -1 with the reply set. */
static int observation_of(api_request *q, api_reply *r, obs_kind *kind)
{
    *kind = OBS_SCREENSHOT;
    json_t *jobs = json_object_get(q->body, "observation");
    em_err err = {0};
    if (jobs && !json_is_null(jobs) && obs_kind_parse(json_string_value(jobs), kind, &err) < 0) {
        reply_fail(r, 400, "observation", err.msg);
        return -1;
    }
    return 0;
}

/* A new episode and its first observation; NULL with the reply set on failure. from_state: the env
 * was just restored from it (its setup done); else the episode resets the env (or restores the
 * task's cached setup). */
static json_t *begin_episode(api_request *q, api_reply *r, api_env *ae, obs_kind kind, const json_t *from_state,
                             double *setup_ms, double *obs_ms)
{
    api_server *s = q->s;
    em_err err = {0};
    if (!ae->t) { /* freeform: the same episode machinery (trace, limits) with an empty task */
        if (task_parse(FREEFORM_TASK, strlen(FREEFORM_TASK), s->empty_dir, &ae->t, &err) < 0) {
            reply_em(r, &err, "");
            return NULL;
        }
        sha256_hex(FREEFORM_TASK, strlen(FREEFORM_TASK), ae->task_sha);
        ae->freeform = true;
    }
    ae->episodes++;
    _cleanup_free_ char *out = xasprintf("%s/%s/%d", s->cfg.out_dir, ae->id, ae->episodes);
    remove_tree(out, NULL); /* a previous server's leftovers under the same id */
    ae->observation = kind;
    episode_opts o = {.agent_cmd = "http-api", .out_dir = out, .fresh = from_state != NULL,
                      .settle_ms = s->cfg.settle_ms, .observation = kind, .from_state = from_state};
    double t1 = now_ms();
    episode *ep = NULL;
    int rc = episode_begin(ae->e, ae->t, ae->task_path, ae->task_sha, &o, &ep, &err);
    *setup_ms = now_ms() - t1;
    if (rc < 0) {
        reply_em(r, &err, "");
        return NULL;
    }
    ae->ep = ep;
    free(ae->trace_dir);
    ae->trace_dir = xstrdup(episode_trace_dir(ep));
    json_decref(ae->last_result);
    ae->last_result = NULL;
    const char *cause = exit_cause_name(episode_exit_cause(ep));
    if (cause) { /* a setup step failed: the episode is over before it began */
        char msg[EM_ERR_MAX + 64];
        snprintf(msg, sizeof msg, "reset %s: task setup failed: %s", ae->id,
                 episode_reason(ep) ? episode_reason(ep) : cause);
        reply_fail(r, 500, "task", msg);
        return NULL;
    }
    json_t *obs = observe(q, ae, &err, obs_ms);
    if (!obs) { /* no observation, no episode: a step after this error is refused, never run */
        episode_abandon(ae->ep);
        ae->ep = NULL;
        reply_em(r, &err, "");
    }
    return obs;
}

/* ---- endpoints ---- */

void api_h_list(api_request *q, api_reply *r)
{
    json_t *list = json_array();
    pthread_mutex_lock(&q->s->lock);
    for (api_env *ae = q->s->envs; ae; ae = ae->next)
        json_array_append_new(list, env_summary(ae));
    pthread_mutex_unlock(&q->s->lock);
    api_reply_json(r, 200, json_pack("{s:o, s:i}", "envs", list, "max_envs", q->s->cfg.max_envs));
}

void api_h_create(api_request *q, api_reply *r)
{
    api_server *s = q->s;
    api_error ae_;
    if (api_check_fields(q->body, " image task accel from_state ", &ae_) < 0)
        return api_reply_error(r, &ae_);
    json_t *jimage = json_object_get(q->body, "image"), *jtask = json_object_get(q->body, "task");
    json_t *jaccel = json_object_get(q->body, "accel"), *jfrom = json_object_get(q->body, "from_state");
    em_err err = {0};
    if (jfrom && (!json_is_string(jfrom) || check_name("from_state", json_string_value(jfrom), &err) < 0 || jimage))
        return reply_fail(r, 400, "from_state",
                          err.msg[0] ? err.msg : "from_state: a state name, without image (the state names it)");
    if (jimage && (!json_is_string(jimage) || check_name("image", json_string_value(jimage), &err) < 0))
        return reply_fail(r, 400, "image", err.msg[0] ? err.msg : "image: expected an image name");
    if (jaccel && (!json_is_string(jaccel) || (strcmp(json_string_value(jaccel), "auto") &&
                                                strcmp(json_string_value(jaccel), "tcg") &&
                                                strcmp(json_string_value(jaccel), "kvm"))))
        return reply_fail(r, 400, "accel", "accel: expected \"auto\", \"tcg\" or \"kvm\"");
    _cleanup_free_ char *state_image = NULL; /* from_state: the image the state was saved from */
    if (jfrom) {
        state *st = NULL;
        if (state_load(json_string_value(jfrom), &st, &err) < 0)
            return reply_em(r, &err, "from_state");
        state_image = xstrdup(st->image);
        state_free(st);
    }
    /* Check the task before a VM starts: bad input costs nothing. The image is the request's own (or
     * its state's), else plan_image's rule with serve's --image; the task is read once and settled
     * by the episode plan, for the guessed screen, the image's, then the env's own. */
    task *t = NULL;
    char *tpath = NULL, sha[65] = "";
    plan_image_choice choice = {.image = jimage ? json_string_value(jimage) : state_image ? state_image : s->cfg.image,
                                .force = jimage || state_image || s->cfg.force_image};
    const char *guess = choice.image ? choice.image : IMAGE_DEFAULT;
    int w, h;
    env_image_screen(guess, &w, &h);
    if (jtask && api_parse_task(jtask, "task", s->cfg.task_root, s->empty_dir, s->cfg.net, w, h, NULL, &t, &tpath, sha, &ae_) < 0)
        return api_reply_error(r, &ae_);
    char *image_copy = NULL;
    if (t && plan_image(t, &choice, &image_copy, &err) < 0) {
        task_free(t);
        free(tpath);
        return reply_fail(r, 400, "task", err.msg);
    }
    if (t) {
        int tw, th;
        env_image_screen(image_copy, &tw, &th);
        task_vars v = {.screen_w = tw, .screen_h = th};
        if ((tw != w || th != h) && plan_settle(t, s->cfg.net, &v, &err) < 0) { /* on another screen than guessed */
            task_free(t);
            free(tpath);
            free(image_copy);
            api_fail_em(&ae_, &err, "task");
            return api_reply_error(r, &ae_);
        }
    } else {
        image_copy = xstrdup(guess);
    }

    pthread_mutex_lock(&s->lock);
    if (s->stopping || s->nenvs >= s->cfg.max_envs) {
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->lock);
        free(image_copy);
        task_free(t);
        free(tpath);
        if (stopping)
            return reply_fail(r, 503, "", "the server is stopping");
        api_fail(&ae_, 429, "", "this server already owns %d envs (--max-envs); DELETE one first", s->cfg.max_envs);
        api_reply_header(r, "Retry-After", "5");
        return api_reply_error(r, &ae_);
    }
    s->nenvs++;
    long n = ++s->next_id;
    pthread_mutex_unlock(&s->lock);

    api_env *ae = xcalloc(1, sizeof *ae);
    pthread_mutex_init(&ae->mu, NULL);
    snprintf(ae->id, sizeof ae->id, "api%d-%ld", (int)getpid(), n);
    ae->image = image_copy;
    ae->t = t; /* the one reading; settled again below for the env's own screen and user */
    ae->task_path = tpath;
    memcpy(ae->task_sha, sha, sizeof sha);
    iso8601_now(ae->created, sizeof ae->created);
    env_up_opts uo = {.name = ae->id, .image = image_copy,
                      .accel = jaccel ? json_string_value(jaccel) : s->cfg.accel ? s->cfg.accel : "auto",
                      .net = s->cfg.net, .from_state = jfrom ? json_string_value(jfrom) : NULL};
    double t0 = now_ms();
    int rc = env_up(&uo, &ae->e, NULL, &err);
    if (rc == 0 && ae->t && plan_for_env(ae->e, ae->t, &err) < 0) /* its real screen size and user password */
    {
        api_fail_em(&ae_, &err, "task");
        rc = -2;
    }
    if (rc == 0)
        hold_idle(ae);
    pthread_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    if (rc == 0 && !stopping) {
        ae->next = s->envs;
        s->envs = ae;
    } else {
        s->nenvs--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    if (rc < 0 || stopping) {
        if (ae->e) {
            em_err derr = {0};
            env_close(ae->e);
            ae->e = NULL;
            env_down(ae->id, &derr);
        }
        task_free(ae->t);
        env_entry_free(ae);
        if (rc == -2)
            return api_reply_error(r, &ae_);
        if (rc == 0)
            return reply_fail(r, 503, "", "the server is stopping");
        return reply_em(r, &err, err.code == EM_EXIT_USAGE ? jfrom ? "from_state" : "image" : "");
    }
    api_metrics_add(&s->metrics, &s->metrics.envs_created, 1);
    em_info("envmgr serve: created %s (%s, %.1f s)", ae->id, ae->image, (now_ms() - t0) / 1000);
    json_t *j = env_summary(ae);
    json_object_set_new(j, "width", json_integer(env_width(ae->e)));
    json_object_set_new(j, "height", json_integer(env_height(ae->e)));
    json_object_set_new(j, "accel", json_string(env_accel(ae->e)));
    json_object_set_new(j, "task_id", ae->t ? json_string(ae->t->id) : json_null());
    json_object_set_new(j, "up_ms", json_real(now_ms() - t0));
    _cleanup_free_ char *loc = xasprintf("/v1/envs/%s", ae->id);
    api_reply_header(r, "Location", loc);
    api_reply_json(r, 201, j);
}

void api_h_get(api_request *q, api_reply *r)
{
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    json_t *j = env_summary(ae);
    json_object_set_new(j, "width", json_integer(env_width(ae->e)));
    json_object_set_new(j, "height", json_integer(env_height(ae->e)));
    json_object_set_new(j, "accel", json_string(env_accel(ae->e)));
    json_object_set_new(j, "task_id", ae->t ? json_string(ae->t->id) : json_null());
    json_object_set_new(j, "episodes", json_integer(ae->episodes));
    if (ae->ep) {
        const char *cause = exit_cause_name(episode_exit_cause(ae->ep));
        json_object_set_new(j, "episode", json_pack("{s:i, s:i, s:o}", "number", ae->episodes, "steps",
                                                    episode_steps(ae->ep), "exit_cause",
                                                    cause ? json_string(cause) : json_null()));
    }
    if (ae->last_result)
        json_object_set(j, "last_result", ae->last_result);
    unlock_env(q, ae);
    api_reply_json(r, 200, j);
}

void api_h_delete(api_request *q, api_reply *r)
{
    api_env *ae = api_env_acquire(q->s, q->rt.env);
    if (!ae || !unlink_env(q->s, ae)) {
        api_env_release(q->s, ae);
        return reply_fail(r, 404, "id", "no such env on this server (GET /v1/envs lists them)");
    }
    pthread_mutex_lock(&ae->mu); /* waits for a request in progress on it */
    em_err err = {0};
    int rc = teardown(q->s, ae, &err);
    pthread_mutex_unlock(&ae->mu);
    em_info("envmgr serve: deleted %s", ae->id);
    api_env_release(q->s, ae);
    if (rc < 0)
        return reply_em(r, &err, "");
    api_reply_json(r, 200, json_pack("{s:s, s:b}", "id", q->rt.env, "deleted", 1));
}

void api_h_reset(api_request *q, api_reply *r)
{
    api_server *s = q->s;
    api_error ae_;
    if (api_check_fields(q->body, " task observation ", &ae_) < 0)
        return api_reply_error(r, &ae_);
    obs_kind kind;
    if (observation_of(q, r, &kind) < 0)
        return;
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    json_t *jtask = json_object_get(q->body, "task");
    task *nt = NULL;
    char *npath = NULL, nsha[65] = "";
    _cleanup_free_ char *pw = env_user_password(ae->e);
    if (jtask && !json_is_null(jtask) &&
        api_parse_task(jtask, "task", s->cfg.task_root, s->empty_dir, s->cfg.net, env_width(ae->e), env_height(ae->e), pw, &nt,
                       &npath, nsha, &ae_) < 0) {
        unlock_env(q, ae);
        return api_reply_error(r, &ae_);
    }
    em_err perr = {0};
    /* As for the env's creation, run --env and a suite's warm env: its apps on this image, its network
     * within the env's policy, settled for the env's screen and user. */
    if (nt && plan_for_env(ae->e, nt, &perr) < 0) {
        unlock_env(q, ae);
        task_free(nt);
        free(npath);
        return reply_fail(r, 400, "task", perr.msg);
    }
    /* The old episode goes (its trace stays, marked incomplete) before its task does. */
    episode_abandon(ae->ep);
    ae->ep = NULL;
    if (nt) {
        task_free(ae->t);
        free(ae->task_path);
        ae->t = nt;
        ae->task_path = npath;
        ae->freeform = false;
        memcpy(ae->task_sha, nsha, sizeof nsha);
    }
    /* The episode resets the env itself, or restores the task's cached setup instead of both. */
    double setup_ms = 0, obs_ms = 0;
    json_t *obs = begin_episode(q, r, ae, kind, NULL, &setup_ms, &obs_ms);
    double reset_ms = ae->ep ? episode_reset_ms(ae->ep) : 0;
    setup_ms -= reset_ms;
    api_metrics_reset_done(&s->metrics, reset_ms / 1000, ae->ep != NULL);
    if (!obs) {
        unlock_env(q, ae);
        return;
    }
    r->env_ms = reset_ms + setup_ms + obs_ms;
    json_t *j = json_pack("{s:o, s:i, s:o, s:{s:f, s:f}}", "observation", obs, "episode", ae->episodes, "task_id",
                          ae->freeform ? json_null() : json_string(ae->t->id), "timings", "reset_ms", reset_ms,
                          "setup_ms", setup_ms);
    unlock_env(q, ae);
    api_reply_json(r, 200, j);
}

/* A step that ran but whose end (its trace line, the next observation) failed: the episode ends
 * with env_error, and the step's 200 says so. */
static void end_with_env_error(api_env *ae, episode_step_out *so, const char *why)
{
    episode_end(ae->ep, EXIT_ENV_ERROR, why);
    so->ended = true;
    snprintf(so->error, sizeof so->error, "%s", why);
}

void api_h_step(api_request *q, api_reply *r)
{
    api_server *s = q->s;
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    api_error ae_;
    if (!ae->ep) {
        unlock_env(q, ae);
        return reply_fail(r, 409, "", "no episode on this env: POST /v1/envs/{id}/reset first");
    }
    const char *cause = exit_cause_name(episode_exit_cause(ae->ep));
    if (cause) {
        char msg[256];
        snprintf(msg, sizeof msg, "the episode has ended (%s): POST evaluate or reset", cause);
        unlock_env(q, ae);
        return reply_fail(r, 409, "", msg);
    }
    json_t *reply = NULL;
    if (api_parse_step(q->body, env_width(ae->e), env_height(ae->e), &reply, &ae_) < 0) {
        unlock_env(q, ae);
        json_t *refusal = action_reply_refusal(json_object_get(q->body, "action"), ae_.msg);
        if (!refusal)
            return api_reply_error(r, &ae_);
        json_t *j = api_error_json(&ae_); /* and the tool's own shape of it, for the model */
        json_object_set_new(j, "answer", refusal);
        return api_reply_json(r, ae_.status, j);
    }
    em_err err = {0};
    episode_step_out so;
    double t0 = now_ms();
    double agent_ms = ae->last_obs_ms > 0 ? t0 - ae->last_obs_ms : 0;
    /* From here the step has happened (its actions reached the guest): whatever fails after is said
     * in a 200's body, the episode ended with env_error, so a client never repeats a step that ran. */
    int rc = episode_step(ae->ep, reply, agent_ms, &so, &err);
    json_decref(reply);
    double step_ms = now_ms() - t0;
    if (rc < 0)
        end_with_env_error(ae, &so, err.msg);
    api_metrics_add(&s->metrics, &s->metrics.steps, 1);
    api_metrics_add(&s->metrics, &s->metrics.actions, so.actions);
    json_t *obs = NULL;
    double env_work_ms = 0;
    if (episode_exit_cause(ae->ep) != EXIT_ENV_ERROR && !(obs = observe(q, ae, &err, &env_work_ms)))
        end_with_env_error(ae, &so, err.msg);
    cause = exit_cause_name(episode_exit_cause(ae->ep));
    r->env_ms = env_work_ms + step_ms;
    json_t *info = json_pack("{s:i, s:i, s:f, s:o}", "step", episode_steps(ae->ep), "actions", so.actions, "step_ms",
                             step_ms, "exit_cause", cause ? json_string(cause) : json_null());
    if (so.error[0])
        json_object_set_new(info, "error", json_string(so.error));
    if (so.agent_error[0]) /* the agent's own code failed in the guest; the episode goes on */
        json_object_set_new(info, "agent_error", json_string(so.agent_error));
    json_t *j = json_pack("{s:o, s:i, s:b, s:o}", "observation", obs ? obs : json_null(), "reward", 0, "done",
                          so.ended, "info", info);
    json_t *answer = NULL;
    em_err aerr = {0};
    if (obs && episode_answer(ae->ep, &answer, &aerr) < 0) /* the step ran: say why the tool has no answer */
        json_object_set_new(info, "answer_error", json_string(aerr.msg));
    if (answer)
        json_object_set_new(j, "answer", answer);
    unlock_env(q, ae);
    api_reply_json(r, 200, j);
}

void api_h_screenshot(api_request *q, api_reply *r)
{
    const char *format = api_query(q, "format");
    if (format && strcmp(format, "png") && strcmp(format, "raw"))
        return reply_fail(r, 400, "format", "format: expected png or raw");
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    em_err err = {0};
    double t0 = now_ms();
    if (format && !strcmp(format, "raw")) {
        const uint8_t *px;
        if (env_frame(ae->e, &px, &err) < 0) {
            unlock_env(q, ae);
            return reply_em(r, &err, "");
        }
        int w = env_width(ae->e), h = env_height(ae->e);
        r->len = (size_t)w * h * 4;
        r->body = xmalloc(r->len);
        memcpy(r->body, px, r->len);
        r->ctype = "application/octet-stream";
        char v[32];
        snprintf(v, sizeof v, "%d", w);
        api_reply_header(r, "X-Width", v);
        snprintf(v, sizeof v, "%d", h);
        api_reply_header(r, "X-Height", v);
        api_reply_header(r, "X-Pixel-Format", "RGBX");
    } else {
        const png_buf *png;
        if (env_screenshot(ae->e, &png, &err) < 0) {
            unlock_env(q, ae);
            return reply_em(r, &err, "");
        }
        r->len = png->len;
        r->body = xmalloc(png->len);
        memcpy(r->body, png->data, png->len);
        r->ctype = "image/png";
    }
    r->status = 200;
    r->env_ms = now_ms() - t0;
    api_metrics_add(&q->s->metrics, &q->s->metrics.screenshots, 1);
    unlock_env(q, ae);
}

void api_h_evaluate(api_request *q, api_reply *r)
{
    api_error ae_;
    if (api_check_fields(q->body, " ", &ae_) < 0)
        return api_reply_error(r, &ae_);
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    if (!ae->ep && ae->last_result) { /* evaluating again answers the same */
        json_t *j = json_incref(ae->last_result);
        unlock_env(q, ae);
        return api_reply_json(r, 200, j);
    }
    if (!ae->ep || ae->freeform) {
        unlock_env(q, ae);
        return reply_fail(r, 409, "", ae->ep ? "no task to evaluate: this episode is freeform (reset with a task)"
                                             : "no episode on this env: POST /v1/envs/{id}/reset with a task first");
    }
    em_err err = {0};
    json_t *res = NULL;
    episode *ep = ae->ep;
    ae->ep = NULL; /* episode_finish frees it, also on failure */
    if (episode_finish(ep, EXIT_EVALUATED, &res, &err) < 0) {
        unlock_env(q, ae);
        return reply_em(r, &err, "");
    }
    api_metrics_add(&q->s->metrics, &q->s->metrics.evaluations, 1);
    json_t *j = json_pack("{s:O, s:O, s:O, s:O, s:O}", "score", json_object_get(res, "score"), "reason",
                          json_object_get(res, "reason"), "exit_cause", json_object_get(res, "exit_cause"), "steps",
                          json_object_get(res, "steps"), "task_id", json_object_get(res, "task_id"));
    /* whether the score is one (status), and what the image or the task did that the score may hide */
    const char *keep[] = {"status", "evaluator_error", "flagged", "setup_flags", "getter_flags"};
    for (size_t i = 0; i < ARRAY_LEN(keep); i++)
        if (json_object_get(res, keep[i]))
            json_object_set(j, keep[i], json_object_get(res, keep[i]));
    json_t *details = json_object_get(res, "evaluation");
    if (details)
        json_object_set(j, "details", details);
    json_decref(res);
    ae->last_result = json_incref(j);
    hold_idle(ae);
    unlock_env(q, ae);
    api_reply_json(r, 200, j);
}

/* The env, locked, when it has a trace (its current or last episode's); else NULL, answered. */
static api_env *lock_traced_env(api_request *q, api_reply *r)
{
    api_env *ae = lock_env(q, r);
    if (ae && !ae->trace_dir) {
        unlock_env(q, ae);
        reply_fail(r, 404, "", "no trace yet: POST /v1/envs/{id}/reset starts an episode");
        return NULL;
    }
    return ae;
}

void api_h_trace(api_request *q, api_reply *r)
{
    api_env *ae = lock_traced_env(q, r);
    if (!ae)
        return;
    em_err err = {0};
    /* the file list and sizes are taken now, under the env's lock: the trace only grows by appends */
    struct MHD_Response *resp = api_tar_response(ae->trace_dir, &err);
    unlock_env(q, ae);
    if (!resp)
        return reply_em(r, &err, "");
    r->status = 200;
    r->mhd = resp;
    r->ctype = "application/x-tar";
    api_reply_header(r, "Content-Disposition", "attachment; filename=\"trace.tar\"");
}

/* OSWorld's recording.mp4 for a remote client (its controller.end_recording): the current or last
 * episode's trace as a video, written next to the trace (the episode's folder under --out) and sent. */
void api_h_video(api_request *q, api_reply *r)
{
    api_env *ae = lock_traced_env(q, r);
    if (!ae)
        return;
    em_err err = {0};
    _cleanup_free_ char *dir = xstrdup(ae->trace_dir);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir)
        *slash = '\0';
    _cleanup_free_ char *mp4 = xasprintf("%s/recording.mp4", slash && slash != dir ? dir : ".");
    int rc = trace_export_video(ae->trace_dir, mp4, &err);
    unlock_env(q, ae);
    if (rc < 0)
        return reply_em(r, &err, "");
    int fd = open(mp4, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        em_fail_errno(&err, "video `%s`", mp4);
        if (fd >= 0)
            close(fd);
        return reply_em(r, &err, "");
    }
    struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd); /* it closes fd */
    if (!resp) {
        close(fd);
        return reply_fail(r, 500, "", "video: cannot create the response");
    }
    r->status = 200;
    r->mhd = resp;
    r->ctype = "video/mp4";
    api_reply_header(r, "Content-Disposition", "attachment; filename=\"recording.mp4\"");
}

/* ---- saved states (docs/states.md) ---- */

/* The body's "name": a state name, or a 400 naming the field. */
static const char *state_name_of(api_request *q, api_reply *r, const char *fields)
{
    api_error ae_;
    if (api_check_fields(q->body, fields, &ae_) < 0) {
        api_reply_error(r, &ae_);
        return NULL;
    }
    json_t *jname = json_object_get(q->body, "name");
    em_err err = {0};
    if (!json_is_string(jname) || check_name("name", json_string_value(jname), &err) < 0) {
        reply_fail(r, 400, "name", err.msg[0] ? err.msg : "name: expected a state name (a string)");
        return NULL;
    }
    return json_string_value(jname);
}

void api_h_state_save(api_request *q, api_reply *r)
{
    const char *name = state_name_of(q, r, " name ");
    em_err nerr = {0};
    if (!name)
        return;
    if (state_check_user_name(name, &nerr) < 0)
        return reply_fail(r, 400, "name", nerr.msg);
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    /* what was done since the parent: this env's episode up to its current step */
    json_t *since = json_pack("{s:s, s:s, s:i, s:i}", "by", "http-api", "env", ae->id, "episode", ae->episodes,
                              "step", ae->ep ? episode_steps(ae->ep) : 0);
    if (ae->t && !ae->freeform)
        json_object_set_new(since, "task_id", json_string(ae->t->id));
    if (ae->ep)
        json_object_set_new(since, "trace", json_string(episode_trace_dir(ae->ep)));
    em_err err = {0};
    json_t *info = NULL;
    double t0 = now_ms();
    int rc = env_state_save(ae->e, name, since, &info, &err);
    r->env_ms = now_ms() - t0;
    json_decref(since);
    unlock_env(q, ae);
    if (rc < 0)
        return reply_em(r, &err, err.code == EM_EXIT_USAGE ? "name" : "");
    api_reply_json(r, 201, info);
}

void api_h_state_restore(api_request *q, api_reply *r)
{
    const char *name = state_name_of(q, r, " name observation ");
    if (!name)
        return;
    obs_kind kind;
    if (observation_of(q, r, &kind) < 0)
        return;
    api_env *ae = lock_env(q, r);
    if (!ae)
        return;
    em_err err = {0};
    env_timings tm = {0};
    double t0 = now_ms();
    /* A refused state leaves the env and its episode as they were; a restored one ends the episode. */
    int rc = env_state_restore(ae->e, name, &tm, &err);
    double restore_ms = now_ms() - t0;
    if (rc < 0) {
        unlock_env(q, ae);
        return reply_em(r, &err, err.code == EM_EXIT_USAGE ? "name" : "");
    }
    episode_abandon(ae->ep);
    ae->ep = NULL;
    json_t *from = json_pack("{s:s, s:s}", "name", name, "id", env_state_id(ae->e));
    double setup_ms = 0, obs_ms = 0;
    json_t *obs = begin_episode(q, r, ae, kind, from, &setup_ms, &obs_ms);
    json_decref(from);
    if (!obs) {
        unlock_env(q, ae);
        return;
    }
    r->env_ms = restore_ms + setup_ms + obs_ms;
    json_t *j = json_pack("{s:o, s:i, s:o, s:s, s:{s:f, s:f}}", "observation", obs, "episode", ae->episodes,
                          "task_id", ae->freeform ? json_null() : json_string(ae->t->id), "state", name, "timings",
                          "restore_ms", restore_ms, "settle_ms", setup_ms);
    unlock_env(q, ae);
    api_reply_json(r, 200, j);
}

void api_h_states(api_request *q, api_reply *r)
{
    json_t *list = NULL;
    em_err err = {0};
    if (state_list(&list, &err) < 0)
        return reply_em(r, &err, "");
    size_t i;
    json_t *row;
    json_array_foreach(list, i, row) /* run directories are the server's business, not a client's */
        json_object_set_new(row, "users", json_integer((json_int_t)json_array_size(json_object_get(row, "users"))));
    api_reply_json(r, 200, json_pack("{s:o}", "states", list));
}

#include "envmgr/episode/replay.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/episode/episode.h"
#include "envmgr/episode/plan.h"
#include "recorder/frame_compare.h"
#include "recorder/trace.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

static char *frame_path(const char *trace_dir, const char *sha)
{
    return xasprintf("%s/" TRACE_FRAMES_DIR "/%s.png", trace_dir, sha);
}

static int copy_file(const char *from, const char *to, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (read_file_capped(from, TRACE_MAX_FRAME_BYTES, &data, &len, err) < 0)
        return -1;
    return write_file_atomic(to, data, len, 0644, err);
}

static bool replayable(json_t *step)
{
    const char *type = json_string_value(json_object_get(json_object_get(step, "action"), "action_type"));
    return type && strcmp(type, "REFUSED");
}

/* Walk both traces' steps side by side; the first frame outside the tolerance is the divergence. */
static int compare_steps(const trace *rec, const trace *rep, const replay_opts *o, json_t *report, em_err *err)
{
    size_t i = 0, j = 0, matched = 0, exact = 0, compared = 0;
    double worst = 0;
    json_t *divergence = NULL;
    _cleanup_free_ char *div_dir = xasprintf("%s/divergence", o->out_dir);
    for (; i < trace_n_steps(rec) && j < trace_n_steps(rep); i++) {
        json_t *a = trace_step(rec, i);
        if (!replayable(a))
            continue;
        json_t *b = trace_step(rep, j++);
        if (o->until >= 0 && (long)compared >= o->until)
            break;
        compared++;
        const char *sa = json_string_value(json_object_get(a, "frame_after"));
        const char *sb = json_string_value(json_object_get(b, "frame_after"));
        frame_diff d = {.fraction = 1};
        if (sa && sb) {
            _cleanup_free_ char *pa = frame_path(trace_dir(rec), sa), *pb = frame_path(trace_dir(rep), sb);
            if (frame_compare(pa, pb, NULL, &d, err) < 0)
                return -1;
        }
        if (d.fraction > worst)
            worst = d.fraction;
        exact += d.exact;
        if (d.exact || d.fraction <= o->tolerance) {
            matched++;
            continue;
        }
        if (!divergence) {
            /* Keep both frames and the diff where a person can look at them. */
            if (mkdir_p(div_dir, 0755, err) < 0)
                return -1;
            _cleanup_free_ char *ra = xasprintf("%s/step-%zu-recorded.png", div_dir, i);
            _cleanup_free_ char *rb = xasprintf("%s/step-%zu-replayed.png", div_dir, i);
            _cleanup_free_ char *rd = xasprintf("%s/step-%zu-diff.png", div_dir, i);
            if (sa && sb) {
                _cleanup_free_ char *pa = frame_path(trace_dir(rec), sa), *pb = frame_path(trace_dir(rep), sb);
                if (copy_file(pa, ra, err) < 0 || copy_file(pb, rb, err) < 0 ||
                    frame_compare(pa, pb, rd, &d, err) < 0)
                    return -1;
            }
            divergence = json_pack("{s:i, s:O, s:f, s:s, s:s, s:s}", "step", (int)i, "action",
                                   json_object_get(a, "action"), "fraction", d.fraction, "recorded", ra, "replayed",
                                   rb, "diff", rd);
        }
    }
    /* A replay that stopped before the recording did diverged at the first step it did not reach. */
    size_t remaining = 0;
    for (size_t k = i; k < trace_n_steps(rec); k++)
        remaining += replayable(trace_step(rec, k));
    if (!divergence && remaining && (o->until < 0 || (long)compared < o->until))
        divergence = json_pack("{s:i, s:O, s:f, s:s}", "step", (int)compared, "action",
                               json_object_get(trace_step(rec, i < trace_n_steps(rec) ? i : 0), "action"), "fraction",
                               1.0, "reason", "the replay ended before reaching this step");
    json_object_set_new(report, "steps_compared", json_integer((json_int_t)compared));
    json_object_set_new(report, "steps_matched", json_integer((json_int_t)matched));
    json_object_set_new(report, "steps_exact", json_integer((json_int_t)exact));
    json_object_set_new(report, "worst_fraction", json_real(worst));
    json_object_set_new(report, "first_divergence", divergence ? divergence : json_null());
    return 0;
}

/* A getter spec (an object, or a list of them) reading a file of the task's folder. */
static const char *folder_getter(json_t *spec)
{
    if (json_is_array(spec)) {
        size_t i;
        json_t *v;
        json_array_foreach(spec, i, v)
        {
            const char *u = folder_getter(v);
            if (u)
                return u;
        }
        return NULL;
    }
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (type && !strcmp(type, "local_file"))
        return "a local_file getter";
    if (type && !strcmp(type, "cache_file"))
        return "a cache_file getter";
    return NULL;
}

static const char *folder_upload(const task_step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t f = 0; steps[i].type == STEP_UPLOAD_FILE && f < steps[i].nfiles; f++)
            if (steps[i].files[f].host_path)
                return "an upload of a local file";
    return NULL;
}

/* What in a task reads files of the task's own folder (NULL: nothing). */
static const char *task_folder_use(const task *t)
{
    const char *u = folder_upload(t->config, t->nconfig);
    if (!u)
        u = folder_upload(t->postconfig, t->npostconfig);
    for (size_t i = 0; !u && i < t->eval.nmetrics; i++)
        if (!(u = folder_getter(t->eval.metrics[i].result)))
            u = folder_getter(t->eval.metrics[i].expected);
    return u;
}

/* A trace that began from a saved state replays from it: the very state (its id) from this host's
 * cache, never a file the trace names. */
static int restore_recorded_state(env *e, const task *t, json_t *from, em_err *err)
{
    const char *name = json_string_value(json_object_get(from, "name"));
    const char *id = json_string_value(json_object_get(from, "id"));
    env_timings tm;
    netpolicy cur, net;
    bool changed;
    if (!name || !id)
        return em_fail_input(err, "replay: the trace's from_state is not {name, id}");
    /* the task's network first: the restore starts the guest under it, as the episode did */
    if (env_network(e, &cur, err) < 0 || plan_network(&cur, t, &net, err) < 0 ||
        env_set_network(e, &net, &changed, err) < 0)
        return em_prefix(err, "replay: ");
    if (env_state_restore(e, name, &tm, err) < 0)
        return em_prefix(err, "replay: the trace began from saved state `%s`: ", name);
    if (strcmp(env_state_id(e) ? env_state_id(e) : "", id))
        return em_fail_input(err, "replay: saved state `%s` is not the one the trace began from (it was saved "
                                  "again since): the episode cannot be replayed",
                             name);
    return 0;
}

int replay_run(env *e, bool fresh, const replay_opts *o, json_t **out, em_err *err)
{
    json_t *vreport = NULL;
    if (trace_verify(o->trace_dir, &vreport, err) < 0)
        return em_prefix(err, "replay: the trace does not verify, refusing it: ");
    json_decref(vreport);
    trace *rec = NULL;
    if (trace_read(o->trace_dir, &rec, err) < 0)
        return -1;
    json_t *h = trace_header(rec);
    /* The task: the operator's --task, or the one the trace carries (checked against its hash).
     * A trace never names a host file that is then loaded or run. */
    const char *task_sha = json_string_value(json_object_get(h, "task_sha256"));
    const char *task_text = json_string_value(json_object_get(h, "task_text"));
    const char *image_sha = json_string_value(json_object_get(h, "image_manifest_sha256"));
    const char *agent = json_string_value(json_object_get(h, "agent"));
    json_t *settle = json_object_get(h, "settle_ms");
    int rc = mkdir_p(o->out_dir, 0755, err);
    char sha[65];
    task *t = NULL;
    _cleanup_free_ char *task_path = NULL;
    if (rc == 0 && o->task_path) { /* read once: its hash is of the bytes parsed */
        task_path = xstrdup(o->task_path);
        if (task_load(task_path, &t, err) < 0)
            rc = em_prefix(err, "replay: --task: ");
        else if (strcmp(t->sha256, task_sha) && !o->force)
            rc = em_fail_input(err, "replay: --task %s is not the recorded task (sha256 %.12s…, recorded %.12s…); "
                                    "--force replays anyway",
                               task_path, t->sha256, task_sha);
    } else if (rc == 0) {
        if (!task_text)
            rc = em_fail_input(err, "replay: the trace does not carry its task (recorded by an older envmgr, or "
                                    "the task was over %zu KiB); give it with --task FILE",
                               TRACE_TASK_TEXT_MAX >> 10);
        else {
            sha256_hex(task_text, strlen(task_text), sha);
            if (strcmp(sha, task_sha))
                rc = em_fail_input(err, "replay: the trace's task does not match its task_sha256");
        }
        task_path = xasprintf("%s/task.json", o->out_dir); /* our own copy */
        if (rc == 0 && write_file_atomic(task_path, task_text, strlen(task_text), 0644, err) < 0)
            rc = -1;
    }
    if (rc == 0 && strcmp(image_sha, env_image_sha256(e)) && !o->force)
        rc = em_fail_input(err, "replay: the env runs image %.12s…, the trace was recorded on %.12s…; --force "
                                "replays anyway",
                           env_image_sha256(e), image_sha);
    if (rc == 0 && !t && task_load(task_path, &t, err) < 0)
        rc = -1;
    const char *uses = rc == 0 && !o->task_path ? task_folder_use(t) : NULL;
    if (uses)
        rc = em_fail_input(err, "replay: the task uses files of its folder (%s); the trace carries the task, not "
                                "them: give the task with --task FILE",
                           uses);
    json_t *from = json_object_get(h, "from_state");
    json_t *sc = json_object_get(h, "setup_cache"), *cached = NULL;
    if (rc == 0)
        rc = plan_for_env(e, t, err);
    if (rc == 0 && from)
        rc = restore_recorded_state(e, t, from, err);
    /* A setup the recording restored from the setup cache: the very state again when the cache
     * still holds it, else the setup runs (on a fresh reset). */
    const char *used = json_string_value(json_object_get(sc, "used"));
    if (rc == 0 && !from && used && !strcmp(used, "restored")) {
        cached = json_pack("{s:s?, s:s?}", "name", json_string_value(json_object_get(sc, "state")), "id",
                           json_string_value(json_object_get(sc, "id")));
        em_err cerr = {0};
        if (restore_recorded_state(e, t, cached, &cerr) == 0)
            from = cached;
        else
            em_warn("envmgr: %s; the task's setup runs again", cerr.msg);
    }
    if (rc < 0) {
        json_decref(cached);
        task_free(t);
        trace_free(rec);
        return -1;
    }
    /* The recording decides how long the replay is, not the task's limits. */
    t->max_steps = INT_MAX / 2;
    t->step_timeout_s = 3600;
    t->episode_timeout_s = 86400;
    /* The replay agent is envmgr itself, started without a shell: the trace directory's name is
     * an argument, never shell text. */
    char until[32];
    snprintf(until, sizeof until, "%ld", o->until);
    const char *argv[8];
    size_t n = 0;
    argv[n++] = o->self_exe;
    argv[n++] = "__replay-agent";
    argv[n++] = o->trace_dir;
    if (o->fast)
        argv[n++] = "--fast";
    if (o->until >= 0) {
        argv[n++] = "--until";
        argv[n++] = until;
    }
    argv[n] = NULL;
    /* It runs under the rules of every agent (its environment, its sandbox); what it reads is the
     * recording, bound in read-only wherever it is. */
    const char *show[] = {o->trace_dir, NULL};
    episode_opts eo = {.agent_argv = argv, .out_dir = o->out_dir, .fresh = (fresh || from) && !(cached && !from),
                       /* a trace that does not record its window was made when the default was 300 ms */
                       .agent_show = show, .settle_ms = json_is_number(settle) ? json_number_value(settle) : 300,
                       .from_state = from};
    json_t *result = NULL;
    double t0 = now_ms();
    rc = episode_run(e, t, task_path, &eo, &result, err);
    double replay_s = (now_ms() - t0) / 1000;
    json_decref(cached);
    task_free(t);
    trace *rep = NULL;
    _cleanup_free_ char *rep_dir = xasprintf("%s/trace", o->out_dir);
    if (rc == 0)
        rc = trace_read(rep_dir, &rep, err);
    json_t *report = json_pack("{s:s, s:s, s:s, s:f, s:f}", "trace", o->trace_dir, "replay_trace", rep_dir,
                               "recorded_agent", agent ? agent : "", "tolerance", o->tolerance, "seconds", replay_s);
    if (rc == 0)
        rc = compare_steps(rec, rep, o, report, err);
    if (rc == 0) {
        json_object_set(report, "replay_exit_cause", json_object_get(result, "exit_cause"));
        json_object_set(report, "replay_reason", json_object_get(result, "reason"));
        json_t *ev = trace_evaluation(rec);
        double want = json_number_value(json_object_get(ev, "score"));
        double got = json_number_value(json_object_get(result, "score"));
        bool score_checked = o->until < 0 && ev;
        json_object_set_new(report, "recorded_score", ev ? json_real(want) : json_null());
        json_object_set_new(report, "replayed_score", json_real(got));
        bool frames_ok = json_is_null(json_object_get(report, "first_divergence"));
        bool score_ok = !score_checked || fabs(want - got) < 1e-9;
        json_object_set_new(report, "score_matches", score_checked ? json_boolean(score_ok) : json_null());
        json_object_set_new(report, "reproduced", json_boolean(frames_ok && score_ok));
        _cleanup_free_ char *path = xasprintf("%s/replay.json", o->out_dir);
        rc = json_save(path, report, JSON_INDENT(2), 0644, err);
    }
    json_decref(result);
    trace_free(rep);
    trace_free(rec);
    if (rc < 0) {
        json_decref(report);
        return -1;
    }
    *out = report;
    return 0;
}

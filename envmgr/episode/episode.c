#include "envmgr/episode/episode.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/action/action_reply.h"
#include "envmgr/action/actions.h"
#include "envmgr/episode/agent.h"
#include "envmgr/episode/episode_env.h"
#include "envmgr/episode/setup_cache.h"
#include "envmgr/episode/setup.h"
#include "envmgr/net/egress_log.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/episode/plan.h"
#include "recorder/trace.h"
#include "evaluator/score.h"
#include "envmgr/base/cleanup.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

#define AGENT_GRACE_MS 2000.0
#define AGENT_INSTRUCTION_ENV_MAX (64u << 10) /* a longer instruction is only in the observations */

struct episode {
    episode_env ev;        /* the env, as operations (a real env, or a test's fake) */
    const task *t;
    episode_opts o;        /* a copy; its strings are owned by the episode */
    char *task_path;       /* NULL for an inline task */
    char *trace_dir, *artifacts;
    trace_writer *tw;
    agent *ag;
    exit_cause cause; /* EXIT_NONE while running */
    char *reason;   /* why the episode ended early (agent or env trouble) */
    int steps;      /* agent replies */
    int actions;    /* actions executed */
    double t_start, reset_ms, setup_ms, agent_ms, action_ms;
    char before[65];       /* the frame the next reply acts on */
    char tree[65];         /* the accessibility tree observed with it ("" when none, or recorded already) */
    char tree_seen[65];    /* the last observation's tree, for episode_observed_tree */
    bool have_last;        /* last_sha names the frame whose pixels hash to last_hash */
    uint64_t last_hash;
    char last_sha[65];
    uint64_t egress_start, egress_off; /* this episode's part of the env's egress log */
    json_t *setup_flags; /* steps that failed the way OSWorld goes on after: [{phase, index, type, why}] */
    size_t egress_lines, egress_dropped;
    bool held;                    /* the guest is paused while the agent thinks */
    bool frozen_frame;            /* ... and the env's current frame was taken after the pause (settle.h) */
    bool settled_frame;           /* the env's current frame is the one the last action's settle judged
                                   * still, the guest running on: the observation right after is that frame */
    int late_changes, late_probes; /* --probe-late: observations that changed while the guest ran on */
    json_t *late_list;             /* ... each change: [{step, observed, later, still_changing}] */
    double hold_ms, hold_max_ms;  /* what pausing and resuming cost */
    int holds;
    bool agent_boxed; /* the agent runs in its sandbox (agent_sandbox.h) */
    json_t *said;     /* what the reply said beside its actions ("response", "pyautogui" code), for its first step line */
    action_reply last; /* the last reply decoded: what its answer (a tool result) needs */
    char agent_error[EM_ERR_MAX]; /* this reply's pyautogui code failed in the guest: why (the step goes on) */
};
typedef struct episode run; /* the agent loop below reads as "a run of an episode" */

/* ---- the guest stands still while the agent thinks ---- */

/* The observation freezes the guest before it takes the frame, so the frame is exactly the screen
 * the agent then reasons about. Not when a tree is read (the guest's AT-SPI bus must answer), the
 * late-change probe measures what a running guest does after the observation, or the task opts out
 * of pausing. */
static bool observe_frozen(const run *r)
{
    return r->ev.hold && r->t->pause_while_thinking && !obs_has_tree(r->o.observation) && r->o.late_probe_ms <= 0;
}

/* Paused from the observation to the next action (unless the task opts out): the frame the agent
 * reasons about cannot change under it, its think time is not guest time, and a replay runs the
 * guest for exactly the time the recording did. */
static int hold_guest(run *r, bool hold, em_err *err)
{
    if (!r->ev.hold || r->held == hold || (hold && !r->t->pause_while_thinking))
        return 0;
    double t0 = now_ms();
    int rc = r->ev.hold(r->ev.ctx, hold, err);
    double ms = now_ms() - t0;
    r->hold_ms += ms;
    r->holds++;
    if (ms > r->hold_max_ms)
        r->hold_max_ms = ms;
    if (rc == 0)
        r->held = hold;
    r->frozen_frame = false;
    return rc;
}

/* ---- egress events (netpolicy.h): the env's egress log, copied into the trace ---- */
#define EGRESS_TRACE_MAX 10000 /* refusals per trace; more are counted in a last line */
#define EGRESS_TRACE_ALLOWED_MAX 50000 /* allowed connections: every one, within the trace's line limit */
#define EGRESS_ARTIFACT_MAX 100000

static char *egress_path(run *r)
{
    return netpolicy_log_path(r->ev.dir);
}

static int drain_egress(run *r, em_err *err)
{
    _cleanup_free_ char *path = egress_path(r);
    json_t *events = NULL;
    em_err rerr = {0};
    if (egress_log_read(path, &r->egress_off, EGRESS_ARTIFACT_MAX, &events, &rerr) < 0)
        em_log(EM_LOG_ERROR, "envmgr: %s", rerr.msg); /* the trace goes on without them */
    size_t i;
    json_t *ev;
    int rc = 0;
    json_array_foreach(events, i, ev)
    {
        /* what the guest reached is always in the trace; a flood of refusals only as a count */
        bool allowed = egress_event_allowed(ev);
        if (r->egress_lines >= (allowed ? EGRESS_TRACE_ALLOWED_MAX : EGRESS_TRACE_MAX)) {
            r->egress_dropped++;
            continue;
        }
        json_t *line = json_deep_copy(ev);
        json_object_del(line, "prev");
        json_object_set_new(line, "type", json_string("egress"));
        rc = trace_append(r->tw, line, err);
        json_decref(line);
        if (rc < 0)
            break;
        r->egress_lines++;
    }
    json_decref(events);
    return rc;
}

/* Before the evaluator: open connections logged, the rest of the events into
 * the trace, and the episode's events as artifacts/.egress.jsonl for the
 * egress_log getter. */
static int finish_egress(run *r, em_err *err)
{
    em_err ignored;
    if (netpolicy_helper_pid(r->ev.dir))
        netpolicy_control(r->ev.dir, "flush", 5000, &ignored);
    if (drain_egress(r, err) < 0)
        return -1;
    if (r->egress_dropped) {
        json_t *line = json_pack("{s:s, s:s, s:I}", "type", "egress", "verdict", "trace_cap", "dropped",
                                 (json_int_t)r->egress_dropped);
        int rc = trace_append(r->tw, line, err);
        json_decref(line);
        if (rc < 0)
            return -1;
    }
    _cleanup_free_ char *path = egress_path(r), *art = xasprintf("%s/" EGRESS_ARTIFACT, r->artifacts);
    uint64_t off = r->egress_start;
    json_t *events = NULL;
    if (egress_log_read(path, &off, EGRESS_ARTIFACT_MAX, &events, &ignored) < 0)
        em_warn("envmgr: %s", ignored.msg);
    size_t cap = 1, n = 0, i;
    char *text = xmalloc(cap);
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        char *l = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
        size_t ll = l ? strlen(l) : 0;
        text = xrealloc(text, cap = n + ll + 2);
        memcpy(text + n, l ? l : "", ll);
        n += ll;
        text[n++] = '\n';
        free(l);
    }
    json_decref(events);
    int rc = write_file_atomic(art, text, n, 0644, err);
    free(text);
    return rc;
}

/* The episode ends this way, whatever ended it before (the env failed after the agent was done). */
static void end_as(run *r, exit_cause cause, const char *why)
{
    r->cause = cause;
    free(r->reason);
    r->reason = why ? xstrdup(why) : NULL;
}

static void set_end(run *r, exit_cause cause, const char *why)
{
    if (r->cause == EXIT_NONE)
        end_as(r, cause, why);
}

/* The screen's frame (fresh, or the one the settle wait ended on) into the trace, named by its
 * sha. An unchanged screen (same pixel hash as the last frame stored) reuses that frame's name
 * instead of encoding again. */
static int frame_sha(run *r, bool fresh, char sha[65], em_err *err)
{
    const uint8_t *px;
    uint64_t hash;
    int w = r->ev.width, h = r->ev.height;
    if (r->ev.frame(r->ev.ctx, fresh, &px, &hash, err) < 0)
        return -1;
    if (r->have_last && hash == r->last_hash) {
        memcpy(sha, r->last_sha, 65);
        return 0;
    }
    if (trace_add_frame_rgb(r->tw, px, w, h, w * 4, sha, err) < 0)
        return -1;
    r->have_last = true;
    r->last_hash = hash;
    memcpy(r->last_sha, sha, 65);
    return 0;
}

/* The task's config steps (setup lines, before the agent) or its evaluator.postconfig steps
 * (postconfig lines, after the agent, before the getters). A step that failed the way OSWorld
 * goes on after is flagged and the next one runs; any other failure ends the episode as
 * setup_error (the step's own check failed) or env_error, unevaluated either way: OSWorld
 * records no result for such an episode, and envmgr gives it no score. Returns 1 then. */
static int run_steps(run *r, const task_step *steps, size_t n, const char *list_name, em_err *err)
{
    bool post = !strcmp(list_name, "postconfig");
    json_t *raw = post ? json_object_get(json_object_get(r->t->json, "evaluator"), "postconfig")
                       : json_object_get(r->t->json, list_name);
    /* Setup spends the episode's time (a slow asset server must not stretch it); postconfig runs
     * after the episode, under the asset timeouts alone. */
    double deadline = post ? 0 : r->t_start + r->t->episode_timeout_s * 1000;
    for (size_t i = 0; i < n; i++) {
        double t0 = now_ms();
        json_t *detail = NULL;
        em_err serr = {0};
        int rc = r->ev.setup_step(r->ev.ctx, r->t, &steps[i], r->artifacts, deadline, &detail, &serr);
        json_t *line = json_pack("{s:s, s:O, s:f, s:b}", "type", post ? "postconfig" : "setup", "step",
                                 json_array_get(raw, i) ? json_array_get(raw, i) : json_null(), "duration_ms",
                                 now_ms() - t0, "ok", rc == 0);
        if (!json_is_object(json_object_get(line, "step")))
            json_object_set_new(line, "step", json_pack("{s:s}", "type", task_step_type_name(steps[i].type)));
        if (!post) /* a postconfig line says so by its type */
            json_object_set_new(line, "phase", json_string(list_name));
        const char *tolerated = json_string_value(json_object_get(detail, "tolerated"));
        if (tolerated) { /* kept going as OSWorld does, but visible: in the trace line and the result */
            json_object_set_new(line, "tolerated", json_string(tolerated));
            json_array_append_new(r->setup_flags, json_pack("{s:s, s:I, s:s, s:s}", "phase", list_name, "index",
                                                            (json_int_t)i, "type", task_step_type_name(steps[i].type),
                                                            "why", tolerated));
        }
        if (detail)
            json_object_set_new(line, "detail", detail);
        if (rc < 0)
            json_object_set_new(line, "error", json_string(serr.msg));
        int wrc = trace_append(r->tw, line, err);
        json_decref(line);
        if (wrc < 0)
            return -1;
        if (rc < 0) {
            if (check_interrupt(err) < 0)
                return -1;
            char why[EM_ERR_MAX + 64];
            snprintf(why, sizeof why, "%s[%zu] (%s): %s", list_name, i, task_step_type_name(steps[i].type), serr.msg);
            end_as(r, rc == SETUP_FAILED ? EXIT_SETUP_ERROR : EXIT_ENV_ERROR, why);
            return 1;
        }
    }
    return 0;
}

#define RESPONSE_MAX (64 * 1024) /* a reply's "response": the model's text, as OSWorld's traj.jsonl keeps it */

/* A reply's "response" is taken off (the actions never see it) and kept, with the reply in its action
 * space as sent (pyautogui code, a tool call, UI-TARS text, the display it was made for), for the
 * reply's first step line; NULL with *refusal when "response" is not a string of at most 64 KiB. */
static json_t *take_said(run *r, json_t *reply, char **refusal)
{
    static const char *const kept[] = {"pyautogui", "anthropic", "openai", "uitars", "display", "coords"};
    json_t *resp = json_object_get(reply, "response");
    json_decref(r->said);
    r->said = json_object();
    if (resp && (!json_is_string(resp) || json_string_length(resp) > RESPONSE_MAX)) {
        *refusal = xstrdup("response: expected a string of at most 64 KiB");
        return NULL;
    }
    json_t *rest = json_copy(reply);
    if (resp) {
        json_object_set(r->said, "response", resp);
        json_object_del(rest, "response");
    }
    for (size_t i = 0; i < ARRAY_LEN(kept); i++)
        if (json_object_get(reply, kept[i]))
            json_object_set(r->said, kept[i], json_object_get(reply, kept[i]));
    return rest;
}

/* The agent's reply as a list of validated actions (r->last keeps what the answer needs), or a
 * message to send back. */
static void decode_reply(run *r, json_t *whole, json_t **actions, const char **source, char **refusal)
{
    em_err perr = {0};
    *actions = NULL;
    *refusal = NULL;
    action_reply_free(&r->last);
    const char *key = action_reply_space_key(whole);
    *source = key ? key : action_space_name(SPACE_COMPUTER_13);
    json_t *reply = take_said(r, whole, refusal);
    if (!reply)
        return;
    if (action_reply_decode(reply, r->ev.width, r->ev.height, &r->last, &perr) < 0)
        *refusal = xstrdup(perr.msg);
    else
        *actions = json_incref(r->last.actions);
    json_decref(reply);
}

/* Where a step's time went: now_ms() when the step began (the reply arrived, or the reply's previous
 * action ended), the action was sent, the screen settled, and frame_after was taken and stored. */
typedef struct step_clock {
    double begin, sent, settled, frame;
} step_clock;

static int record_step(run *r, json_t *act_json, const char *source, double agent_ms, double action_ms,
                       const char *before, const char *after, const settle_info *settle, const step_clock *clk,
                       const char *error, em_err *err)
{
    json_t *line = json_pack("{s:s, s:O, s:s, s:f, s:f, s:s}", "type", "step", "action", act_json, "source", source,
                             "agent_ms", agent_ms, "action_ms", action_ms, "frame_before", before);
    if (settle && settle->why) { /* how the wait before frame_after ended: settled, or the bound with why */
        json_t *st = json_pack("{s:f, s:s, s:f, s:i}", "ms", settle->ms, "result", settle->why, "window_ms",
                               settle->window_ms, "frames", settle->frames);
        if (isfinite(settle->work_ms)) /* what chose the window */
            json_object_set_new(st, "work_ms", json_real(settle->work_ms));
        json_object_set_new(line, "settle", st);
    }
    if (clk) /* milliseconds from the step's beginning; "recorded" is now, as the line is written */
        json_object_set_new(line, "timing",
                            json_pack("{s:f, s:f, s:f, s:f}", "sent_ms", clk->sent - clk->begin, "settled_ms",
                                      clk->settled - clk->begin, "frame_ms", clk->frame - clk->begin, "recorded_ms",
                                      now_ms() - clk->begin));
    if (after)
        json_object_set_new(line, "frame_after", json_string(after));
    if (error)
        json_object_set_new(line, "error", json_string(error));
    if (r->said) { /* the reply's response and code as sent, on its first step line */
        json_object_update(line, r->said);
        json_decref(r->said);
        r->said = NULL;
    }
    if (r->tree[0]) { /* the tree the agent saw, on the first step line of its reply */
        json_object_set_new(line, "a11y_tree", json_string(r->tree));
        r->tree[0] = '\0';
    }
    int rc = trace_append(r->tw, line, err);
    json_decref(line);
    return rc;
}

/* Execute one reply's actions; returns 1 when the episode ended (DONE/FAIL or env trouble). */
static int execute_actions(run *r, json_t *actions, const char *source, double agent_ms, double t_reply,
                           char before[65], em_err *err)
{
    size_t i;
    json_t *a;
    json_array_foreach(actions, i, a)
    {
        action parsed;
        em_err aerr = {0};
        if (action_parse(a, r->ev.width, r->ev.height, &parsed, &aerr) < 0)
            return em_fail(err, "action changed after validation: %s", aerr.msg);
        json_t *canon = action_to_json(&parsed);
        double t0 = now_ms();
        step_clock clk = {.begin = i == 0 ? t_reply : t0};
        int rc = 0;
        settle_info settle = {0};
        char agent_err[EM_ERR_MAX] = "";
        if (!action_is_terminal(&parsed)) {
            rc = r->ev.act(r->ev.ctx, &parsed, &aerr);
            if (rc < 0 && parsed.type == ACT_PYAUTOGUI && aerr.code == EM_EXIT_USAGE) {
                /* the agent's code failed in the guest (a syntax error, an exception): OSWorld's step
                 * goes on and so does the episode; the step records why */
                snprintf(agent_err, sizeof agent_err, "%s", aerr.msg);
                snprintf(r->agent_error, sizeof r->agent_error, "%s", aerr.msg);
                em_err_clear(&aerr);
                rc = 0;
            }
            clk.sent = now_ms();
            /* the reply's last action: the observation comes next, and may be the settle's own frame */
            bool freeze = i + 1 == json_array_size(actions) && observe_frozen(r);
            if (rc == 0)
                rc = r->ev.settle(r->ev.ctx, r->o.settle_ms, r->t->settle_max_s * 1000, freeze, &settle, &aerr);
            if (rc == 0 && settle.frozen) {
                r->held = r->frozen_frame = true;
                r->holds++;
            }
        } else {
            clk.sent = t0;
        }
        r->settled_frame = rc == 0 && settle.settled && !settle.frozen; /* a terminal action has no settle */
        double action_ms = now_ms() - t0;
        clk.settled = now_ms();
        r->action_ms += action_ms;
        r->actions++;
        char after[65] = "";
        if (rc == 0) /* after a settle, the frame it judged still: another fetch only waits for a refresh */
            rc = frame_sha(r, action_is_terminal(&parsed), after, &aerr);
        clk.frame = now_ms();
        int wrc = record_step(r, canon, source, i == 0 ? agent_ms : 0, action_ms, before, rc == 0 ? after : NULL,
                              &settle, &clk, rc == 0 ? (agent_err[0] ? agent_err : NULL) : aerr.msg, err);
        json_decref(canon);
        bool terminal = action_is_terminal(&parsed);
        action_type type = parsed.type;
        action_free(&parsed);
        if (wrc < 0)
            return -1;
        if (rc < 0) {
            if (check_interrupt(err) < 0)
                return -1;
            set_end(r, EXIT_ENV_ERROR, aerr.msg);
            return 1;
        }
        memcpy(before, after, 65);
        if (terminal) {
            set_end(r, type == ACT_DONE ? EXIT_DONE : EXIT_FAIL, NULL);
            return 1;
        }
    }
    return 0;
}

/* ---- one reply: the per-step logic shared by the agent loop and the HTTP API ---- */

/* A measurement (make bench): let the guest run on after an observation and count the
 * observations a later frame contradicts; the later frame becomes the one the agent sees. */
static int frame_later(run *r, em_err *err)
{
    sleep_ms(r->o.late_probe_ms);
    return check_interrupt(err) < 0 || frame_sha(r, true, r->before, err) < 0 ? -1 : 0;
}

static int probe_late(run *r, em_err *err)
{
    uint64_t seen = r->last_hash;
    char observed[65];
    memcpy(observed, r->before, sizeof observed);
    if (frame_later(r, err) < 0)
        return -1;
    r->late_probes++;
    if (r->last_hash == seen)
        return 0;
    /* Both frames are in the trace, so what changed can be seen. A screen that changes again as
     * long after is live (a clock, a playing video): no still window would have ended on it. */
    uint64_t later = r->last_hash;
    char later_sha[65];
    memcpy(later_sha, r->before, sizeof later_sha);
    if (frame_later(r, err) < 0)
        return -1;
    bool live = r->last_hash != later;
    r->late_changes++;
    if (!r->late_list)
        r->late_list = json_array();
    json_array_append_new(r->late_list, json_pack("{s:i, s:s, s:s, s:b}", "step", r->steps, "observed", observed,
                                                  "later", later_sha, "still_changing", live));
    em_warn("envmgr: late change: the observation of step %d changed %.0f ms later%s", r->steps,
            r->o.late_probe_ms, live ? " (and again as long after: the screen is live)" : "");
    return 0;
}

int episode_observe(episode *ep, char sha[65], em_err *err)
{
    ep->tree[0] = ep->tree_seen[0] = '\0';
    bool freeze_first = observe_frozen(ep);
    /* A settle that ended by pausing the guest took its frame after the pause: that is the screen.
     * One that ended with the guest running judged its last frame still: a new fetch would only wait a
     * display refresh (25-30 ms a step) for the same screen. */
    bool fresh = !((freeze_first && ep->held && ep->frozen_frame) || ep->settled_frame);
    ep->settled_frame = false;
    if (freeze_first && hold_guest(ep, true, err) < 0)
        return -1;
    if (frame_sha(ep, fresh, ep->before, err) < 0 || (ep->o.late_probe_ms > 0 && probe_late(ep, err) < 0))
        return -1;
    /* the tree is read while the guest still runs (its AT-SPI bus answers), right after the frame */
    if (obs_has_tree(ep->o.observation) && obs_fetch_tree(&ep->ev, ep->tw, ep->tree, err) < 0)
        return -1;
    memcpy(ep->tree_seen, ep->tree, sizeof ep->tree);
    if (hold_guest(ep, true, err) < 0)
        return -1;
    memcpy(sha, ep->before, 65);
    return 0;
}

const char *episode_observed_tree(const episode *ep) { return ep->tree_seen[0] ? ep->tree_seen : NULL; }

int episode_step(episode *r, json_t *reply, double agent_ms, episode_step_out *out, em_err *err)
{
    memset(out, 0, sizeof *out);
    if (r->cause != EXIT_NONE) {
        out->ended = true;
        return 0;
    }
    em_err ferr = {0};
    double t_reply = now_ms();
    /* the guest runs again (the reply acts now); no observation yet: it acts on the current screen */
    if (hold_guest(r, false, &ferr) < 0 || (!r->before[0] && frame_sha(r, true, r->before, &ferr) < 0)) {
        set_end(r, EXIT_ENV_ERROR, ferr.msg);
        snprintf(out->error, sizeof out->error, "%s", ferr.msg);
        out->ended = true;
        return 0;
    }
    r->agent_ms += agent_ms;
    r->agent_error[0] = '\0';
    json_t *actions;
    const char *source;
    char *refusal = NULL;
    int rc, actions_before = r->actions;
    decode_reply(r, reply, &actions, &source, &refusal);
    if (!actions) {
        /* Refused: nothing reaches the guest; the agent hears why. */
        json_t *stub = json_pack("{s:s}", "action_type", "REFUSED");
        rc = record_step(r, stub, source, agent_ms, 0, r->before, NULL, NULL, NULL, refusal, err);
        json_decref(stub);
        out->refused = true;
        snprintf(out->error, sizeof out->error, "%s", refusal);
        free(refusal);
    } else {
        rc = execute_actions(r, actions, source, agent_ms, t_reply, r->before, err);
        json_decref(actions);
        rc = rc < 0 ? -1 : 0;
    }
    r->steps++;
    out->actions = r->actions - actions_before;
    snprintf(out->agent_error, sizeof out->agent_error, "%s", r->agent_error);
    bool off = false;
    em_err gerr = {0};
    if (rc == 0 && r->cause == EXIT_NONE && out->actions > 0 && r->ev.guest_off &&
        r->ev.guest_off(r->ev.ctx, &off, &gerr) == 0 && off)
        set_end(r, EXIT_GUEST_SHUTDOWN, "the guest shut down");
    if (rc == 0)
        rc = drain_egress(r, err);
    if (rc < 0)
        return -1;
    if (r->cause == EXIT_NONE && now_ms() > r->t_start + r->t->episode_timeout_s * 1000)
        set_end(r, EXIT_TIMEOUT, "episode timeout");
    if (r->cause == EXIT_NONE && r->steps >= r->t->max_steps)
        set_end(r, EXIT_MAX_STEPS, NULL);
    if (r->cause != EXIT_NONE) {
        out->ended = true;
        if (!out->refused && r->reason && r->cause == EXIT_ENV_ERROR)
            snprintf(out->error, sizeof out->error, "%s", r->reason);
    }
    return 0;
}

int episode_answer(const episode *ep, json_t **answer, em_err *err)
{
    *answer = NULL;
    if (!ep->last.actions || (ep->last.space != SPACE_ANTHROPIC && ep->last.space != SPACE_OPENAI))
        return 0;
    const uint8_t *px;
    uint64_t hash;
    int x = 0, y = 0;
    if (ep->ev.frame(ep->ev.ctx, false, &px, &hash, err) < 0)
        return -1;
    if (ep->ev.pointer)
        ep->ev.pointer(ep->ev.ctx, &x, &y);
    return action_reply_answer(&ep->last, px, x, y, answer, err);
}

void episode_end(episode *ep, exit_cause cause, const char *why)
{
    set_end(ep, cause, why);
}

exit_cause episode_exit_cause(const episode *ep) { return ep->cause; }
const char *episode_reason(const episode *ep) { return ep->reason; }
int episode_steps(const episode *ep) { return ep->steps; }
double episode_reset_ms(const episode *ep) { return ep->reset_ms; }
const char *episode_trace_dir(const episode *ep) { return ep->trace_dir; }

/* ---- the stdio agent loop (envmgr run) ---- */

/* What the agent gets from envmgr (docs/agent-protocol.md, "Environment"): never the task's path
 * (its file holds the expected values and the solution), never envmgr's own variables. */
static int agent_launch(run *r, em_err *err)
{
    _cleanup_free_ char *log = xasprintf("%s/agent.log", r->o.out_dir);
    _cleanup_free_ char *e1 = xasprintf("ENVMGR_TASK_ID=%s", r->t->id);
    _cleanup_free_ char *e2 = xasprintf("ENVMGR_SCREEN_WIDTH=%d", r->ev.width);
    _cleanup_free_ char *e3 = xasprintf("ENVMGR_SCREEN_HEIGHT=%d", r->ev.height);
    _cleanup_free_ char *e4 = strlen(r->t->instruction) <= AGENT_INSTRUCTION_ENV_MAX
                                  ? xasprintf("ENVMGR_INSTRUCTION=%s", r->t->instruction)
                                  : NULL;
    const char *envv[] = {e1, e2, e3, e4, NULL};
    /* The sandbox: envmgr's state out of sight, the frames (and trees) observations name in reach. */
    _cleanup_free_ char *frames = xasprintf("%s/" TRACE_FRAMES_DIR, r->trace_dir);
    _cleanup_free_ char *trees = xasprintf("%s/" TRACE_A11Y_DIR, r->trace_dir);
    if (r->agent_boxed && obs_has_tree(r->o.observation) && mkdir_p(trees, 0755, err) < 0)
        return -1;
    const char *hide[] = {paths_run_root(), paths_cache_root(), r->trace_dir, r->artifacts, NULL};
    size_t nshow = 0;
    while (r->o.agent_show && r->o.agent_show[nshow])
        nshow++;
    _cleanup_free_ const char **show = xcalloc(nshow + 3, sizeof *show);
    show[0] = frames;
    show[1] = trees;
    for (size_t i = 0; i < nshow; i++)
        show[2 + i] = r->o.agent_show[i];
    agent_sandbox sb = {.hide = hide, .show = show};
    agent_opts ao = {.env_kv = envv, .pass_env = r->o.agent_env, .sandbox = r->agent_boxed ? &sb : NULL};
    return r->o.agent_argv ? agent_start_argv(r->o.agent_argv, &ao, log, &r->ag, err)
                           : agent_start(r->o.agent_cmd, &ao, log, &r->ag, err);
}

static int agent_loop(run *r, em_err *err)
{
    em_err aerr = {0};
    if (agent_launch(r, &aerr) < 0) {
        set_end(r, EXIT_AGENT_ERROR, aerr.msg);
        return 0;
    }
    double deadline = r->t_start + r->t->episode_timeout_s * 1000;
    char refusal[EM_ERR_MAX] = "";
    _cleanup_json_ json_t *refused_answer = NULL; /* a refused tool call's answer in the tool's shape */
    char before[65];
    int rc = 0;
    while (r->cause == EXIT_NONE) {
        if (r->steps >= r->t->max_steps) {
            set_end(r, EXIT_MAX_STEPS, NULL);
            break;
        }
        if ((rc = check_interrupt(err)) < 0)
            break;
        if (episode_observe(r, before, &aerr) < 0) {
            set_end(r, EXIT_ENV_ERROR, aerr.msg);
            break;
        }
        _cleanup_json_ json_t *obs = json_pack("{s:i, s:s, s:i, s:i}", "step", r->steps, "instruction",
                                               r->t->instruction, "width", r->ev.width, "height", r->ev.height);
        if (obs_has_screenshot(r->o.observation))
            json_object_set_new(obs, "screenshot", json_sprintf("%s/" TRACE_FRAMES_DIR "/%s.png",
                                                                trace_writer_dir(r->tw), before));
        if (r->tree_seen[0])
            json_object_set_new(obs, "accessibility_tree", json_sprintf("%s/" TRACE_A11Y_DIR "/%s.xml",
                                                                        trace_writer_dir(r->tw), r->tree_seen));
        if (refusal[0]) {
            json_object_set_new(obs, "error", json_string(refusal));
            refusal[0] = '\0';
        }
        json_t *answer = steal_pointer(&refused_answer);
        if (!answer && episode_answer(r, &answer, &aerr) < 0) {
            set_end(r, EXIT_ENV_ERROR, aerr.msg);
            break;
        }
        if (answer) /* the tool's own answer (a tool_result, a computer_call_output) */
            json_object_set_new(obs, "answer", answer);
        if (agent_send(r->ag, obs, &aerr) < 0) {
            set_end(r, EXIT_AGENT_ERROR, aerr.msg);
            break;
        }
        double left = deadline - now_ms(), step_ms = r->t->step_timeout_s * 1000;
        bool episode_limit = left < step_ms;
        double t0 = now_ms();
        _cleanup_json_ json_t *reply = NULL;
        agent_status st = agent_receive(r->ag, episode_limit ? (left > 0 ? left : 0) : step_ms, &reply, &aerr);
        double agent_ms = now_ms() - t0;
        if (st == AGENT_TIMEOUT) {
            r->agent_ms += agent_ms;
            set_end(r, EXIT_TIMEOUT, episode_limit ? "episode timeout" : aerr.msg);
            break;
        }
        if (st != AGENT_OK) {
            r->agent_ms += agent_ms;
            if ((rc = check_interrupt(err)) < 0)
                break;
            set_end(r, EXIT_AGENT_ERROR, aerr.msg);
            break;
        }
        episode_step_out so;
        if ((rc = episode_step(r, reply, agent_ms, &so, err)) < 0)
            break;
        if (so.refused) {
            snprintf(refusal, sizeof refusal, "%s", so.error);
            refused_answer = action_reply_refusal(reply, so.error);
        }
    }
    agent_stop(r->ag, AGENT_GRACE_MS);
    r->ag = NULL;
    return rc;
}

static json_t *artifact_hashes(json_t *details)
{
    json_t *out = json_object();
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(details, "metrics"), i, m)
    {
        const char *sides[] = {"result", "expected"};
        for (int s = 0; s < 2; s++) {
            const char *sha = json_string_value(json_object_get(json_object_get(m, sides[s]), "sha256"));
            if (sha && is_sha256_hex(sha)) {
                char name[64];
                snprintf(name, sizeof name, "metric%zu_%s", i, sides[s]);
                json_object_set_new(out, name, json_string(sha));
            }
        }
    }
    return out;
}

static const char *const *strv_dup(const char *const *v)
{
    if (!v)
        return NULL;
    size_t n = 0;
    while (v[n])
        n++;
    char **copy = xcalloc(n + 1, sizeof *copy);
    for (size_t i = 0; i < n; i++)
        copy[i] = xstrdup(v[i]);
    return (const char *const *)copy;
}

static void strv_free(const char *const *v)
{
    for (size_t i = 0; v && v[i]; i++)
        free((char *)v[i]);
    free((void *)v);
}

char *episode_agent_sandbox(bool off, bool *boxed)
{
    *boxed = false;
    if (off)
        return xstrdup("off (--agent-sandbox=off)");
    char why[256] = "";
    if (!agent_sandbox_available(why, sizeof why)) {
        static bool said;
        if (!said)
            em_warn("envmgr: agents run without a sandbox (they can reach envmgr's run and cache folders): %s",
                    why);
        said = true;
        return xasprintf("none (%s)", why);
    }
    *boxed = true;
    return xstrdup("bwrap");
}

static void episode_free(episode *ep)
{
    if (!ep)
        return;
    em_err ignored;
    hold_guest(ep, false, &ignored); /* an abandoned episode leaves its env running, as it found it */
    agent_stop(ep->ag, 0);
    free(ep->reason);
    json_decref(ep->setup_flags);
    json_decref(ep->late_list);
    json_decref(ep->said);
    action_reply_free(&ep->last);
    free(ep->task_path);
    free(ep->trace_dir);
    free(ep->artifacts);
    free((char *)ep->o.agent_cmd);
    for (size_t i = 0; ep->o.agent_argv && ep->o.agent_argv[i]; i++)
        free((char *)ep->o.agent_argv[i]);
    free((void *)ep->o.agent_argv);
    strv_free(ep->o.agent_env);
    strv_free(ep->o.agent_show);
    free((char *)ep->o.out_dir);
    free((char *)ep->o.trace_dir);
    free(ep);
}

void episode_abandon(episode *ep)
{
    if (!ep)
        return;
    trace_abandon(ep->tw);
    episode_free(ep);
}

int episode_begin(env *e, const task *t, const char *task_path, const char *task_sha256, const episode_opts *o,
                  episode **out, em_err *err)
{
    episode_env ev;
    episode_env_bind(e, &ev);
    return episode_begin_with(&ev, t, task_path, task_sha256, o, out, err);
}

int episode_begin_with(const episode_env *ev, const task *t, const char *task_path, const char *task_sha256,
                       const episode_opts *o, episode **out, em_err *err)
{
    if (mkdir_p(o->out_dir, 0755, err) < 0)
        return -1;
    episode *r = xcalloc(1, sizeof *r);
    r->ev = *ev;
    r->t = t;
    r->t_start = now_ms();
    r->o = *o;
    r->o.agent_cmd = o->agent_cmd ? xstrdup(o->agent_cmd) : NULL;
    r->o.agent_argv = strv_dup(o->agent_argv);
    r->o.agent_env = strv_dup(o->agent_env);
    r->o.agent_show = strv_dup(o->agent_show);
    r->o.out_dir = xstrdup(o->out_dir);
    r->o.trace_dir = o->trace_dir ? xstrdup(o->trace_dir) : NULL;
    r->task_path = task_path ? xstrdup(task_path) : NULL;
    r->trace_dir = o->trace_dir ? xstrdup(o->trace_dir) : xasprintf("%s/trace", o->out_dir);
    r->artifacts = xasprintf("%s/artifacts", o->out_dir);
    r->setup_flags = json_array();
    char task_sha[65];
    int rc = mkdir_p(r->artifacts, 0755, err);
    /* The hash of the bytes the task was parsed from (task.sha256), never a second read of its file. */
    snprintf(task_sha, sizeof task_sha, "%s", task_sha256 ? task_sha256 : t->sha256);
    double t_reset = now_ms();
    /* The task's network section: a policy that changes needs a restart even on a fresh env. */
    netpolicy cur, net;
    bool net_changed = false;
    if (rc == 0 && ev->network(ev->ctx, &cur, err) < 0)
        rc = -1;
    if (rc == 0 && plan_network(&cur, t, &net, err) < 0)
        rc = -1;
    if (rc == 0 && ev->set_network(ev->ctx, &net, &net_changed, err) < 0)
        rc = -1;
    setup_cache sc; /* a restore of the task's cached setup is the reset */
    setup_cache_plan(t, ev, &net, o->from_state != NULL, &sc);
    bool cached = rc == 0 && setup_cache_restore(ev, &sc);
    if (rc == 0 && o->from_state && net_changed) /* a reset would throw the restored state away */
        rc = em_fail(err, "the task's network section is not the env's: a saved state runs under the policy it "
                          "was restored with (reset with the task first)");
    else if (rc == 0 && !cached && (!o->fresh || net_changed || sc.refused[0]))
        rc = ev->reset(ev->ctx, err); /* a new QEMU, running: whatever the old one was, dead included */
    else if (rc == 0 && !cached && ev->hold && ev->hold(ev->ctx, false, err) < 0) /* an idle env waits paused */
        rc = -1;
    r->reset_ms = now_ms() - t_reset;
    _cleanup_free_ char *elog = egress_path(r);
    r->egress_start = r->egress_off = egress_log_size(elog);
    if (rc < 0) {
        episode_free(r);
        return -1;
    }
    json_t *hdr = json_pack("{s:s, s:s, s:s, s:{s:i, s:i}, s:s, s:b, s:s}", "task_id", t->id, "task_sha256", task_sha,
                            "image_manifest_sha256", ev->image_sha256, "screen", "width", ev->width, "height",
                            ev->height, "accel", ev->accel, "unsafe_open_network",
                            net.mode == NETPOLICY_OPEN, "agent", o->agent_cmd ? o->agent_cmd : "");
    if (o->agent_argv && o->agent_argv[0] && o->agent_argv[1])
        json_object_set_new(hdr, "agent", json_string(o->agent_argv[1])); /* envmgr's own agent, by its role */
    if (o->agent_cmd || o->agent_argv) { /* where the agent ran: in its sandbox, or why not */
        _cleanup_free_ char *note = episode_agent_sandbox(o->agent_sandbox_off, &r->agent_boxed);
        json_object_set_new(hdr, "agent_sandbox", json_string(note));
    }
    json_object_set_new(hdr, "network", netpolicy_to_json(&net));
    if (ev->boundaries) { /* what the guest was really under: sandbox, netdev, QEMU's user, cgroups */
        json_t *b = ev->boundaries(ev->ctx);
        if (b)
            json_object_set_new(hdr, "boundaries", b);
    }
    if (task_path) {
        json_object_set_new(hdr, "task_path", json_string(task_path));
        /* The task itself, so a replay never has to trust a host path the trace names. */
        _cleanup_free_ char *text = NULL;
        size_t len;
        char sha[65];
        em_err ignored;
        if (read_file_capped(task_path, TRACE_TASK_TEXT_MAX, &text, &len, &ignored) == 0 &&
            utf8_valid(text, len, true)) {
            sha256_hex(text, len, sha);
            if (!strcmp(sha, task_sha))
                json_object_set_new(hdr, "task_text", json_stringn(text, len));
        }
    }
    json_object_set_new(hdr, "settle_ms", json_real(o->settle_ms));
    json_object_set_new(hdr, "observation", json_string(obs_kind_name(o->observation)));
    json_object_set_new(hdr, "pause_while_thinking", json_boolean(t->pause_while_thinking && ev->hold));
    if (t->osworld_proxy) /* OSWorld's "proxy": true: the task wants the web; `network` is the answer */
        json_object_set_new(hdr, "osworld_proxy", json_true());
    if (o->from_state)
        json_object_set_new(hdr, "from_state", json_deep_copy(o->from_state));
    json_object_set_new(hdr, "setup_cache", setup_cache_json(&sc));
    rc = trace_open(r->trace_dir, hdr, &r->tw, err);
    json_decref(hdr);
    if (rc < 0) {
        episode_free(r);
        return -1;
    }

    double t0 = now_ms();
    rc = o->from_state || cached ? 0 : run_steps(r, t->config, t->nconfig, "config", err);
    if (rc >= 0 && drain_egress(r, err) < 0)
        rc = -1;
    r->setup_ms = now_ms() - t0;
    if (rc == 0 && r->cause == EXIT_NONE && !cached) { /* a cached setup was saved once the screen settled */
        em_err serr = {0};
        if (ev->settle(ev->ctx, o->settle_ms, t->settle_max_s * 1000, false, NULL, &serr) < 0)
            set_end(r, EXIT_ENV_ERROR, serr.msg);
        else if (r->cause == EXIT_NONE) /* before the first observation */
            setup_cache_save(ev, t, task_sha, &sc);
    }
    if (rc < 0) { /* interrupted or the trace cannot be written: keep what is recorded, marked incomplete */
        episode_abandon(r);
        return -1;
    }
    *out = r;
    return 0;
}

/* OSWorld's recording.mp4, built from the closed trace. A video that cannot be made is said in
 * result.json and never touches the score. */
static void add_video(const run *r, json_t *res)
{
    _cleanup_free_ char *mp4 = xasprintf("%s/recording.mp4", r->o.out_dir);
    em_err verr = {0};
    if (trace_export_video(r->trace_dir, mp4, &verr) == 0)
        json_object_set_new(res, "video", json_string(mp4));
    else
        json_object_set_new(res, "video_error", json_string(verr.msg));
}

int episode_finish(episode *ep, exit_cause cause, json_t **result, em_err *err)
{
    run *r = ep;
    const task *t = r->t;
    if (r->cause == EXIT_NONE)
        set_end(r, cause != EXIT_NONE ? cause : EXIT_EVALUATED, NULL);
    em_err herr = {0};
    if (hold_guest(r, false, &herr) < 0) /* postconfig and getters need a running guest */
        end_as(r, EXIT_ENV_ERROR, herr.msg);
    int rc = 0;
    double t_eval = now_ms();
    double score = 0;
    _cleanup_free_ char *reason = NULL;
    _cleanup_json_ json_t *details = NULL;
    bool evaluate = r->cause != EXIT_ENV_ERROR && r->cause != EXIT_SETUP_ERROR && r->cause != EXIT_GUEST_SHUTDOWN;
    if (evaluate && (rc = run_steps(r, t->postconfig, t->npostconfig, "postconfig", err)) == 1) {
        rc = 0; /* a postconfig step failed: the episode ended as setup_error or env_error, unevaluated */
        evaluate = false;
    }
    if (rc < 0) {
        /* interrupted, or the trace cannot be written: below */
    } else if (r->cause == EXIT_GUEST_SHUTDOWN) { /* nothing to read in a powered-off guest: a 0, recorded */
        rc = finish_egress(r, err);
        reason = xstrdup("not evaluated: the guest shut down (a scored outcome: 0)");
    } else if (evaluate) {
        rc = finish_egress(r, err);
        em_env_ops ops;
        r->ev.guest_ops(r->ev.ctx, &ops);
        if (rc == 0)
            rc = evaluate_task(&ops, &t->eval, t->dir, r->artifacts, exit_cause_name(r->cause), &score, &reason, &details, err);
    } else {
        rc = finish_egress(r, err); /* what the guest sent before the env failed still counts */
        reason = xasprintf("not evaluated: %s", r->reason ? r->reason : "the env failed");
    }
    /* An env that died during postconfig or the evaluation made its getters fail: what they read is
     * no result, and the episode is env_error (no score; a suite retries it), never a scored 0. A
     * score below 1 waits a moment for a QEMU still exiting (its sockets close before it is gone). */
    em_err gerr = {0};
    if (rc == 0 && evaluate && r->ev.gone && r->ev.gone(r->ev.ctx, score < 1 ? 300 : 0, &gerr) > 0) {
        end_as(r, EXIT_ENV_ERROR, gerr.msg);
        evaluate = false;
        score = 0;
        free(reason);
        reason = xasprintf("not evaluated: the env failed during the evaluation: %s", gerr.msg);
        json_decref(details);
        details = NULL;
    }
    /* A signal during evaluation makes getters fail and score 0: that is not a result, so nothing is
     * recorded as finished (a resumed suite runs the episode again). */
    if (rc == 0 && check_interrupt(err) < 0)
        rc = -1;
    if (rc < 0) {
        episode_abandon(r);
        return -1;
    }
    if (r->reason && evaluate) { /* keep why the episode ended next to the score */
        char *joined = xasprintf("%s (episode ended: %s)", reason ? reason : "", r->reason);
        free(reason);
        reason = joined;
    }
    double eval_ms = now_ms() - t_eval;
    /* scored, evaluator_error (an evaluator script failed: the 0 is no score), or not_evaluated (env_error,
     * setup_error); a guest that shut itself down is a scored 0 with nothing to evaluate */
    const char *status = details                           ? json_string_value(json_object_get(details, "status"))
                         : r->cause == EXIT_GUEST_SHUTDOWN ? "scored"
                                                           : "not_evaluated";
    json_t *eval_error = json_object_get(details, "evaluator_error");
    json_t *eval = json_pack("{s:s, s:f, s:s, s:s, s:s, s:o}", "type", "evaluation", "score", score, "status",
                             status ? status : "scored", "reason", reason ? reason : "", "exit_cause",
                             exit_cause_name(r->cause), "artifacts", artifact_hashes(details));
    if (eval_error)
        json_object_set(eval, "evaluator_error", eval_error);
    if (details)
        json_object_set(eval, "details", details);
    rc = trace_append(r->tw, eval, err);
    json_decref(eval);
    if (rc == 0)
        rc = trace_close(r->tw, err);
    else
        trace_abandon(r->tw);
    r->tw = NULL;

    json_t *res = json_pack("{s:s, s:f, s:s, s:s, s:i, s:i, s:s, s:s, s:{s:f, s:f, s:f, s:f, s:f, s:f}}", "task_id",
                            t->id, "score", score, "reason", reason ? reason : "", "exit_cause", exit_cause_name(r->cause), "steps",
                            r->steps, "actions", r->actions, "trace", r->trace_dir, "accel", r->ev.accel, "timings",
                            "reset_ms", r->reset_ms, "setup_ms", r->setup_ms, "agent_ms", r->agent_ms, "actions_ms",
                            r->action_ms, "evaluation_ms", eval_ms, "total_s", (now_ms() - r->t_start) / 1000);
    json_t *tm = json_object_get(res, "timings");
    json_object_set_new(tm, "pauses", json_integer(r->holds)); /* pause and resume calls, and their cost */
    json_object_set_new(tm, "pause_ms", json_real(r->hold_ms));
    json_object_set_new(tm, "pause_max_ms", json_real(r->hold_max_ms));
    if (r->late_probes)
        json_object_set_new(res, "late_probe", json_pack("{s:i, s:i, s:f}", "observations", r->late_probes,
                                                         "late_changes", r->late_changes, "after_ms",
                                                         r->o.late_probe_ms));
    if (r->late_list)
        json_object_set(json_object_get(res, "late_probe"), "changes", r->late_list);
    json_object_set_new(res, "status", json_string(status ? status : "scored"));
    if (eval_error)
        json_object_set(res, "evaluator_error", eval_error);
    if (details)
        json_object_set(res, "evaluation", details);
    if (json_array_size(r->setup_flags))
        json_object_set(res, "setup_flags", r->setup_flags);
    /* Something the image or the task did, not the agent, even where the score hides it: the suite
     * summary counts these episodes (docs/osworld.md, "Flagged episodes"). */
    json_t *gflags = json_object_get(details, "getter_flags");
    if (gflags)
        json_object_set(res, "getter_flags", gflags);
    json_object_set_new(res, "flagged", json_boolean(json_array_size(r->setup_flags) || json_array_size(gflags)));
    if (rc == 0 && r->o.video)
        add_video(r, res);
    _cleanup_free_ char *path = xasprintf("%s/result.json", r->o.out_dir);
    if (rc == 0)
        rc = json_save(path, res, JSON_INDENT(2), 0644, err);
    episode_free(r);
    if (rc < 0) {
        json_decref(res);
        return -1;
    }
    *result = res;
    return 0;
}

int episode_run(env *e, const task *t, const char *task_path, const episode_opts *o, json_t **result, em_err *err)
{
    episode_env ev;
    episode_env_bind(e, &ev);
    return episode_run_with(&ev, t, task_path, o, result, err);
}

int episode_run_with(const episode_env *ev, const task *t, const char *task_path, const episode_opts *o,
                     json_t **result, em_err *err)
{
    episode *ep;
    if (episode_begin_with(ev, t, task_path, NULL, o, &ep, err) < 0)
        return -1;
    if (ep->cause == EXIT_NONE && agent_loop(ep, err) < 0) {
        episode_abandon(ep); /* interrupted or the trace cannot be written */
        return -1;
    }
    return episode_finish(ep, EXIT_NONE, result, err);
}

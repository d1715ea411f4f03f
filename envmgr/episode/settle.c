#include "envmgr/episode/settle.h"

#include <math.h>

#include "envmgr/base/util.h"

void settle_rule_init(settle_rule *r, double settle_ms)
{
    *r = (settle_rule){.settle_ms = settle_ms > 0 ? settle_ms : 0, .why = "screen changing"};
}

void settle_rule_add_work(settle_rule *r, double ms)
{
    r->work_ms += ms;
}

double settle_rule_window_ms(const settle_rule *r)
{
    bool quick = r->work_ms <= SETTLE_QUICK_WORK_MS && r->settle_ms > SETTLE_MIN_MS;
    return quick ? SETTLE_MIN_MS : r->settle_ms;
}

/* The share of the time the vCPUs could run that they did run over an interval; time spent
 * waiting for a host CPU counts for neither, so host load does not make a busy guest look idle or
 * the other way round. */
static double busy_share(const settle_sample *a, const settle_sample *b)
{
    double wall = (b->t_ms - a->t_ms) * 1e6, ran = (double)(b->run_ns - a->run_ns),
           waited = (double)(b->wait_ns - a->wait_ns);
    return wall - waited > 1e6 ? ran / (wall - waited) : 1; /* it waited the whole interval: it had work */
}

static int intervals_needed(const settle_rule *r)
{
    return r->settle_ms < SETTLE_MIN_MS ? 1 : SETTLE_MIN_INTERVALS;
}

bool settle_rule_would_settle(const settle_rule *r, double t_ms)
{
    return r->started && r->still + 1 >= intervals_needed(r) && t_ms - r->still_since >= settle_rule_window_ms(r);
}

bool settle_rule_feed(settle_rule *r, const settle_sample *s)
{
    r->frames++;
    if (!r->started) {
        r->started = true;
        r->last = *s;
        r->still_since = s->t_ms;
        r->work_ms = s->have_cpu ? 0 : INFINITY;
        return false;
    }
    bool changed = s->hash != r->last.hash;
    double busy = 0;
    if (s->have_cpu && r->last.have_cpu) {
        busy = busy_share(&r->last, s);
        r->work_ms += (double)(s->run_ns - r->last.run_ns) / 1e6;
    } else {
        r->work_ms = INFINITY; /* no way to tell an idle guest: the whole window, on the screen alone */
    }
    r->last = *s;
    if (changed || s->disk || busy > SETTLE_BUSY_MAX) {
        r->why = changed ? "screen changing" : s->disk ? "disk busy" : "guest busy";
        r->still = 0;
        r->still_since = s->t_ms;
        return false;
    }
    r->still++;
    if (r->still < intervals_needed(r) || s->t_ms - r->still_since < settle_rule_window_ms(r))
        return false;
    r->why = "settled";
    return true;
}

/* One look at the env: a fresh frame (QEMU's next display refresh, SETTLE_REFRESH_MS at most: each
 * fetch pokes its refresh timer), then the counters. t_ms: when the sample counts from (now, or
 * when the guest was paused before the look). */
static int look(env *e, double t_ms, bool *cpu_ok, bool *io_ok, uint64_t *io_last, settle_sample *s, em_err *err)
{
    const uint8_t *px;
    em_err cerr = {0};
    if (env_frame(e, &px, err) < 0 || env_frame_held(e, &px, &s->hash, err) < 0 || check_interrupt(err) < 0)
        return -1;
    s->t_ms = t_ms > 0 ? t_ms : now_ms();
    s->have_cpu = *cpu_ok && (*cpu_ok = env_vcpu_time(e, &s->run_ns, &s->wait_ns, &cerr) == 0);
    /* an application loading from disk leaves the vCPUs idle while it waits: not settled. QEMU
     * counts a request once it completes, so one that a loaded host disk takes seconds to answer
     * shows only as a QEMU thread waiting for it. */
    uint64_t io = 0;
    s->disk = env_io_waiting(e);
    if (*io_ok && (*io_ok = env_block_ops(e, &io, &cerr) == 0)) {
        s->disk = s->disk || io != *io_last;
        *io_last = io;
    }
    return 0;
}

int screen_settle(env *e, double settle_ms, double max_ms, bool freeze, settle_info *info, em_err *err)
{
    double t0 = now_ms(), deadline = t0 + max_ms;
    settle_rule rule;
    settle_rule_init(&rule, settle_ms);
    bool cpu_ok = true, io_ok = true, settled = false, frozen = false;
    uint64_t io_last = 0;
    em_err cerr = {0};
    io_ok = env_block_ops(e, &io_last, &cerr) == 0;
    uint64_t act_run = 0;
    bool since_act = env_act_vcpu_start(e, &act_run) == 0;
    do {
        /* the look that would settle it, on the refresh expected after the last one */
        double pause_at = rule.started ? rule.last.t_ms + SETTLE_REFRESH_MS - SETTLE_PAUSE_LEAD_MS : 0;
        bool freezing = freeze && rule.started && pause_at < deadline && settle_rule_would_settle(&rule, pause_at);
        double t_pause = 0; /* the guest ran until then: the sample counts from there */
        if (freezing) {
            if (pause_at > now_ms())
                sleep_ms(pause_at - now_ms());
            t_pause = now_ms();
            if (env_hold(e, true, err) < 0)
                return -1;
        }
        settle_sample s;
        if (look(e, t_pause, &cpu_ok, &io_ok, &io_last, &s, err) < 0)
            return -1;
        bool first = !rule.started;
        settled = settle_rule_feed(&rule, &s);
        /* the guest's work counts from the action's start: what it did during a WAIT, or while keys
         * were typed, asks for as long a window as work after it. With no action on this QEMU (the
         * wait after a task's setup, before the first observation) there is nothing to measure
         * from: the whole window (an application just launched may take the focus after a gap). */
        if (first && since_act && s.have_cpu && s.run_ns >= act_run)
            settle_rule_add_work(&rule, (double)(s.run_ns - act_run) / 1e6);
        else if (first && !since_act)
            settle_rule_add_work(&rule, INFINITY);
        frozen = freezing && settled;
        if (freezing && !settled && env_hold(e, false, err) < 0)
            return -1;
    } while (!settled && now_ms() < deadline);
    if (info)
        *info = (settle_info){.ms = now_ms() - t0, .window_ms = settle_rule_window_ms(&rule), .work_ms = rule.work_ms,
                              .frames = rule.frames, .settled = settled, .frozen = frozen, .why = rule.why};
    return 0;
}

/* episode_env over a real env: its frames and input, restores and the guest agent, all through env.h. */
#include "envmgr/episode/episode_env.h"

#include "envmgr/env/guest_ops.h"
#include "envmgr/state/states.h"
#include "envmgr/episode/setup.h"

static int op_frame(void *ctx, bool fresh, const uint8_t **px, uint64_t *hash, em_err *err)
{
    env *e = ctx;
    if (fresh && env_frame(e, px, err) < 0)
        return -1;
    return env_frame_held(e, px, hash, err);
}

static int op_act(void *ctx, const action *a, em_err *err) { return env_act(ctx, a, err); }

static void op_pointer(void *ctx, int *x, int *y)
{
    em_err ignored;
    if (env_pointer(ctx, x, y, &ignored) < 0)
        *x = *y = 0;
}

static int op_settle(void *ctx, double settle_ms, double max_ms, bool freeze, settle_info *info, em_err *err)
{
    return screen_settle(ctx, settle_ms, max_ms, freeze, info, err);
}

static int op_reset(void *ctx, em_err *err)
{
    env_timings tm;
    return env_reset(ctx, &tm, err);
}

static int op_network(void *ctx, netpolicy *cur, em_err *err) { return env_network(ctx, cur, err); }

static int op_set_network(void *ctx, const netpolicy *p, bool *changed, em_err *err)
{
    return env_set_network(ctx, p, changed, err);
}

static int op_setup_step(void *ctx, const task *t, const task_step *s, const char *cache_dir, double deadline_ms,
                         json_t **detail, em_err *err)
{
    return setup_run_step(ctx, t, s, cache_dir, deadline_ms, detail, err);
}

static void op_guest_ops(void *ctx, em_env_ops *ops) { guest_ops_bind(ctx, ops); }

static json_t *op_boundaries(void *ctx) { return env_boundaries(ctx); }

static int op_hold(void *ctx, bool hold, em_err *err) { return env_hold(ctx, hold, err); }

static int op_guest_off(void *ctx, bool *off, em_err *err) { return env_guest_off(ctx, off, err); }

static int op_gone(void *ctx, double wait_ms, em_err *err) { return env_gone(ctx, wait_ms, err); }

static int op_golden_id(void *ctx, char id[65], em_err *err) { return env_golden_id(ctx, id, err); }

static int op_state_restore(void *ctx, const char *name, char id[33], em_err *err)
{
    env_timings tm;
    state *s = NULL;
    if (state_load(name, &s, err) < 0) /* absent: 0; unreadable: refused */
        return err->code == EM_EXIT_USAGE ? 0 : -1;
    state_free(s);
    if (env_state_restore(ctx, name, &tm, err) < 0)
        return -1;
    snprintf(id, 33, "%s", env_state_id(ctx) ? env_state_id(ctx) : "");
    return 1;
}

static int op_state_save(void *ctx, const char *name, json_t *since, em_err *err)
{
    if (env_state_save(ctx, name, since, NULL, err) < 0)
        return -1;
    /* The setup cache saves a state to restore it: its flat RAM file is built now, in this
     * episode, not at the next one's start. Best effort: that restore builds it otherwise. */
    double ms;
    em_err ignored;
    env_state_prepare(ctx, name, &ms, &ignored);
    return 0;
}

void episode_env_bind(env *e, episode_env *out)
{
    *out = (episode_env){.ctx = e,
                         .width = env_width(e),
                         .height = env_height(e),
                         .accel = env_accel(e),
                         .image_sha256 = env_image_sha256(e),
                         .dir = env_dir(e),
                         .frame = op_frame,
                         .act = op_act,
                         .pointer = op_pointer,
                         .settle = op_settle,
                         .reset = op_reset,
                         .network = op_network,
                         .set_network = op_set_network,
                         .setup_step = op_setup_step,
                         .guest_ops = op_guest_ops,
                         .hold = op_hold,
                         .boundaries = op_boundaries,
                         .guest_off = op_guest_off,
                         .gone = op_gone,
                         .golden_id = op_golden_id,
                         .state_restore = op_state_restore,
                         .state_save = op_state_save};
}

/* What an episode needs of its env, as a table of operations: the real env (episode_env_bind)
 * in production, scripted fakes in the unit tests that check the episode rules (step limits,
 * timeouts, exit causes, refusals) without a QEMU. */
#ifndef ENVMGR_EPISODE_ENV_H
#define ENVMGR_EPISODE_ENV_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/err.h"
#include "envmgr/env/env.h"
#include "envmgr/episode/settle.h"
#include "envmgr/episode/setup.h"
#include "envmgr/net/netpolicy.h"
#include "evaluator/env_ops.h"
#include "envmgr/task/task.h"

typedef struct episode_env {
    void *ctx;
    int width, height;
    const char *accel;        /* "kvm", "tcg" */
    const char *image_sha256; /* of the image manifest */
    const char *dir;          /* the env's run directory (its egress log lives there) */
    /* A frame (RGBX, width*4 stride, valid until the next call) and a hash of its pixels: a fresh
     * one, or (fresh false) the one settle last looked at. */
    int (*frame)(void *ctx, bool fresh, const uint8_t **px, uint64_t *hash, em_err *err);
    int (*act)(void *ctx, const action *a, em_err *err);
    /* Where the pointer is (the screen pixel actions left it on); NULL: the top-left corner. */
    void (*pointer)(void *ctx, int *x, int *y);
    /* Wait for the screen and the guest to settle after an action (never an error when they do
     * not); *info says how it ended (may be NULL). freeze: it may end with the guest paused
     * (info->frozen: settle.h's screen_settle). */
    int (*settle)(void *ctx, double settle_ms, double max_ms, bool freeze, settle_info *info, em_err *err);
    int (*reset)(void *ctx, em_err *err);
    int (*network)(void *ctx, netpolicy *cur, em_err *err);
    int (*set_network)(void *ctx, const netpolicy *p, bool *changed, em_err *err);
    /* One setup or postconfig step; *detail gets facts for the trace; cache_dir is the episode's
     * cache; deadline_ms 0 or when the episode ends (setup.h: 0, SETUP_FAILED or -1). */
    int (*setup_step)(void *ctx, const task *t, const task_step *s, const char *cache_dir, double deadline_ms,
                      json_t **detail, em_err *err);
    /* The evaluator's view of the env. */
    void (*guest_ops)(void *ctx, em_env_ops *ops);
    /* Pause the guest while the agent thinks (true) or resume it (false); may be NULL. */
    int (*hold)(void *ctx, bool hold, em_err *err);
    /* The boundaries the env's QEMU runs under (a new object, or NULL), for the trace header. */
    json_t *(*boundaries)(void *ctx);
    /* Has the guest powered itself off? */
    int (*guest_off)(void *ctx, bool *off, em_err *err);
    /* 1 with why in *err when the env's QEMU is gone (waiting up to wait_ms for one that is exiting),
     * else 0; NULL: never gone (a test's fake). */
    int (*gone)(void *ctx, double wait_ms, em_err *err);
    /* Saved states, for the setup cache (setup_cache.h); NULL: none. golden_id: the golden state the
     * env runs on. state_restore: 1 restored (*id: the state's id), 0 no such state, -1 refused or
     * failed (the env may need a reset). state_save: the env as it is now, as state name. */
    int (*golden_id)(void *ctx, char id[65], em_err *err);
    int (*state_restore)(void *ctx, const char *name, char id[33], em_err *err);
    int (*state_save)(void *ctx, const char *name, json_t *since, em_err *err);
} episode_env;

/* The operations of a real env. */
void episode_env_bind(env *e, episode_env *out);

#endif

/* The setup cache (docs/states.md): the first episode of a task saves the env right after the
 * task's setup (before the first observation) as a saved state named by a key; later episodes of
 * the same task restore it instead of running the setup. The key covers what decides that state:
 * envmgr's version, the golden state (its id: a rebuilt one is another), the image, the
 * accelerator, the screen, the network policy, every setup step as written, and the content of
 * every file a step copies in (task files by their sha256, downloads by the hash the task's asset
 * lock pins). A setup whose result depends on when it runs is never cached: a task with network
 * access (its setup may read the web), a browser step opening a web URL, update_browse_history
 * (visit times relative to now), a download no lock pins; nor a task with "setup_cache": false,
 * nor any when the operator sets ENVMGR_SETUP_CACHE=off. */
#ifndef ENVMGR_EPISODE_SETUP_CACHE_H
#define ENVMGR_EPISODE_SETUP_CACHE_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/state/states.h"
#include "envmgr/episode/episode_env.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/task/task.h"

#define SETUP_CACHE_PREFIX STATE_SETUP_PREFIX

typedef struct setup_cache {
    bool on;           /* the setup may come from (and go to) the cache */
    char key[65];
    char name[48];     /* the state's name: SETUP_CACHE_PREFIX + 32 hex digits of the key */
    char off[256];     /* why not, when !on */
    bool restored;     /* this episode's setup came from the cache */
    char id[33];       /* the restored state's id */
    char refused[EM_ERR_MAX]; /* a cached state that was there but could not be restored: why */
} setup_cache;

/* Decide for task t on ev under net (the episode's policy): sc->on and the key, or sc->off.
 * from_state: the episode began from a saved state (its setup ran before that was saved). */
void setup_cache_plan(const task *t, const episode_env *ev, const netpolicy *net, bool from_state, setup_cache *sc);
/* Restore the cached state into ev when there is one: true when the setup came from it. A state
 * that is there but refused (damaged, tampered with) is said in sc->refused: the setup runs. */
bool setup_cache_restore(const episode_env *ev, setup_cache *sc);
/* After a setup that ran and ended well: save the env as the key's state (best effort: a state saved
 * meanwhile by another episode, or a failed save, only means the next episode runs setup too). */
void setup_cache_save(const episode_env *ev, const task *t, const char *task_sha256, setup_cache *sc);
/* For the trace header: {"key", "state", "used": "restored"|"ran", "id", "refused"} or {"off": why}. */
json_t *setup_cache_json(const setup_cache *sc);

#endif

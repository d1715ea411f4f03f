/* Inside the saved-state store: what states.c (a state, its chain and integrity) and
 * state_store.c (users, listing, removal, eviction) share. */
#ifndef ENVMGR_STATE_STATES_INT_H
#define ENVMGR_STATE_STATES_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"

#define STATE_JSON "state.json"
#define STATE_STAMP "verified.json"
#define STATE_USED "used"
#define STATE_USERS "users"
#define STATE_FLAT "ram.flat"        /* derived: the flat RAM file a restore maps (state_flat.c) */
#define STATE_FLAT_STAMP "flat.json"  /* which flat file was built, when */
#define STATE_FLAT_LOCK "flat.lock"
#define STATE_USE_LOCK "use.lock"     /* restores hold it shared, a removal exclusive (state_hold) */
#define STATE_FLAT_TMP ".ram.flat-"   /* a build in progress: .ram.flat-<pid> */
#define STATE_RAMFS_LOG "ramfs.log"   /* what the server of its RAM (ramfs.h) said */
#define NEW_PREFIX ".new-" /* a save in progress: .new-<name>-<pid> */
#define RM_PREFIX ".rm-"   /* a removal in progress: .rm-<name>-<pid> */

/* <state root>/<name> (caller frees). */
char *state_dir(const char *name);
/* o[key] as a string, or NULL. */
const char *state_str(json_t *o, const char *key);
/* Remove the flat RAM file of the state in dir unless a restore or a build holds it: true if
 * removed (or there was none). */
bool state_flat_drop(const char *dir);
/* Stop serving the RAM of the state in dir (state_ram.c): a lazy unmount, so QEMUs that map the
 * file keep it until they end. Refused while a restore is starting from it. */
int state_ram_unserve(const char *dir, em_err *err);

#endif

/* Inside the saved-state store: what states.c (a state, its chain and integrity) and
 * state_store.c (users, listing, removal, eviction) share. */
#ifndef ENVMGR_ENV_STATES_INT_H
#define ENVMGR_ENV_STATES_INT_H

#include <jansson.h>

#define STATE_JSON "state.json"
#define STATE_STAMP "verified.json"
#define STATE_USED "used"
#define STATE_USERS "users"
#define NEW_PREFIX ".new-" /* a save in progress: .new-<name>-<pid> */
#define RM_PREFIX ".rm-"   /* a removal in progress: .rm-<name>-<pid> */

/* <state root>/<name> (caller frees). */
char *state_dir(const char *name);
/* o[key] as a string, or NULL. */
const char *state_str(json_t *o, const char *key);

#endif

/* The evaluator's and the task setup's view of an env: an em_env_ops bound
 * to an env handle (commands through the guest agent, frames over VNC), and
 * helpers to run commands as the desktop user. */
#ifndef ENVMGR_GUEST_OPS_H
#define ENVMGR_GUEST_OPS_H

#include "envmgr/env/env.h"
#include "evaluator/env_ops.h"

#define GUEST_DESKTOP_USER "user" /* the image's autologin user (vm-images/README.md) */

void guest_ops_bind(env *e, em_env_ops *ops);
/* Only the host side of the seam (asset cache, egress log), for getters run without a guest. */
void guest_ops_bind_host(em_env_ops *ops);

/* Run argv in the guest. as_user: as the desktop user with its display and
 * home, as OSWorld's in-guest server does; else as root with DISPLAY=:0. On a qga
 * image: as root, argv as given, whatever as_user (no desktop user, no display).
 * detach: start it in its own session and return at once (GUI apps). */
int guest_ops_run(env *e, const char *const *argv, int as_user, int detach, double timeout_s, size_t cap,
                  guest_exec_result *res, em_err *err);

/* Does this env's guest run OSWorld's server (guest interface osworld)? Then the setup steps it does
 * itself go to it: guest_ops_server_step. */
bool guest_ops_osworld(env *e);
/* POST body to the server's endpoint ("/setup/activate_window"); *status its HTTP status, *reply up
 * to 300 printable characters of its answer (caller frees). */
int guest_ops_server_step(env *e, const char *endpoint, json_t *body, double timeout_s, long *status, char **reply,
                          em_err *err);

#endif

/* What every command run in a guest gets, whichever interface carries it (the guest agent's
 * guest-exec, OSWorld's /execute): the checks of its argv and timeout, coreutils' timeout(1) around
 * it in the guest (it stops a runaway command even when the host gives up), and how to tell that
 * timeout stopped it. */
#ifndef ENVMGR_VM_GUEST_CMD_H
#define ENVMGR_VM_GUEST_CMD_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"

/* timeout(1)'s arguments for argv under timeout_s: ["-k", "2", SECS, argv...]; NULL (err: the field
 * and why) for an empty argv, a timeout outside (0, 86400] s or an argument that is not UTF-8. */
json_t *guest_cmd_timeout_args(const char *const *argv, double timeout_s, em_err *err);

/* Whether timeout(1) stopped a command that exited exit_code, sent at started_ms (now_ms) with
 * timeout_s: it exits 124 (137 after -k), but so may the program itself, so only a command that ran
 * for its whole timeout was stopped by it. The host's clock starts before the guest's and stops after
 * it, so a real timeout always passes this test. */
bool guest_cmd_timed_out(int exit_code, double started_ms, double timeout_s);

#endif

/* An agent process speaking the stdio agent protocol (docs/agent-protocol.md):
 * one JSON observation line in, one JSON action line out. The agent is
 * untrusted: its lines are size-capped, its replies time out, and it runs in
 * its own process group so everything it started dies with it. */
#ifndef ENVMGR_AGENT_H
#define ENVMGR_AGENT_H

#include <jansson.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

#define AGENT_LINE_MAX (256u << 10)

typedef struct agent agent;

typedef enum { AGENT_OK, AGENT_TIMEOUT, AGENT_GONE, AGENT_GARBAGE } agent_status;

/* Start `/bin/sh -c cmd` (the operator's --agent command line) with env_kv ("K=V" strings,
 * NULL-terminated) added; its stderr goes to log_path. */
int agent_start(const char *cmd, const char *const *env_kv, const char *log_path, agent **out, em_err *err);
/* The same for an argv built by envmgr itself (no shell: nothing in it is ever parsed as shell). */
int agent_start_argv(const char *const *argv, const char *const *env_kv, const char *log_path, agent **out,
                     em_err *err);
int agent_send(agent *a, json_t *obs, em_err *err);
/* Next reply within timeout_ms. On a status other than AGENT_OK, err says what happened. */
agent_status agent_receive(agent *a, double timeout_ms, json_t **reply, em_err *err);
/* Close its stdin, give it grace_ms to exit, then kill its process group. */
void agent_stop(agent *a, double grace_ms);

#endif

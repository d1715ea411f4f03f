/* An agent process speaking the stdio agent protocol (docs/agent-protocol.md):
 * one JSON observation line in, one JSON action line out. The agent is
 * untrusted: its lines are size-capped, its replies time out, and it runs in
 * its own process group so everything it started dies with it. */
#ifndef ENVMGR_AGENT_H
#define ENVMGR_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "envmgr/base/err.h"
#include "envmgr/episode/agent_sandbox.h"

#define AGENT_LINE_MAX (256u << 10)

typedef struct agent agent;

typedef enum { AGENT_OK, AGENT_TIMEOUT, AGENT_GONE, AGENT_GARBAGE } agent_status;

/* How an agent starts. Its environment is explicit (docs/agent-protocol.md, "Environment"): the
 * variables of envmgr's environment agent_env_passes allows, then env_kv. */
typedef struct agent_opts {
    const char *const *env_kv;    /* envmgr's own variables for the agent ("K=V"), NULL-terminated */
    const char *const *pass_env;  /* the operator's --agent-env names, passed on when set */
    const agent_sandbox *sandbox; /* NULL: no sandbox */
} agent_opts;

/* Whether envmgr's variable `name` reaches the agent: never an ENVMGR_* name (envmgr's own, its
 * trace key and API token among them); a name of the fixed list (PATH, HOME, LANG, LC_*, proxies,
 * ...), a name ending in _API_KEY, _API_BASE or _BASE_URL (agents call model APIs), or one of
 * pass_env (NULL-terminated; may be NULL). */
bool agent_env_passes(const char *name, size_t len, const char *const *pass_env);
/* The agent's environment: the entries of env ("K=V") agent_env_passes allows, then env_kv (a
 * same-named entry of env is left out). The array is allocated, its strings are env's and
 * env_kv's: free the array only. */
char **agent_env(char *const *env, const char *const *pass_env, const char *const *env_kv);
/* An operator's --agent-env name: a shell identifier, not ENVMGR_*. */
int agent_env_name_check(const char *name, em_err *err);

/* Start `/bin/sh -c cmd` (the operator's --agent command line); its stderr goes to log_path. */
int agent_start(const char *cmd, const agent_opts *o, const char *log_path, agent **out, em_err *err);
/* The same for an argv built by envmgr itself (no shell: nothing in it is ever parsed as shell). */
int agent_start_argv(const char *const *argv, const agent_opts *o, const char *log_path, agent **out, em_err *err);
int agent_send(agent *a, json_t *obs, em_err *err);
/* Next reply within timeout_ms. On a status other than AGENT_OK, err says what happened. */
agent_status agent_receive(agent *a, double timeout_ms, json_t **reply, em_err *err);
/* Close its stdin, give it grace_ms to exit, then kill its process group. */
void agent_stop(agent *a, double grace_ms);

#endif

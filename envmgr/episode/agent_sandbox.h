/* The agent's sandbox: a mount view of its own, where the host allows it.
 *
 * An agent needs most of the host (its own files, python, the network for its model's API), so
 * unlike the evaluator sandbox (evaluator/sandbox.h) this one binds the host's root as it is and
 * only takes envmgr's state out of reach. bubblewrap (/usr/bin/bwrap) gives the agent
 *   - the host's root (`--bind / /`), the network as it is (no network namespace);
 *   - envmgr's run root (every env's QMP, VNC and guest-agent sockets, pids, overlays) and cache
 *     (golden states, overlays, task assets), and the episode's trace folder and artifacts,
 *     replaced by empty tmpfs folders; the trace's frames/ and a11y/ (what observations name)
 *     bound back read-only: the trace header holds the task's text, expected values included;
 *   - a pid namespace of its own with its own /proc (no /proc/PID/environ or /proc/PID/root of
 *     envmgr or QEMU), a minimal /dev, no capabilities, death with envmgr.
 * It stays in envmgr's process group for the agent (SPAWN_PGROUP), so stopping the agent kills
 * it and everything inside; when the namespace's first process dies the kernel kills the rest.
 *
 * bwrap missing or unable to create namespaces: the agent runs without a sandbox; the caller says
 * so (stderr, trace header `agent_sandbox`). */
#ifndef ENVMGR_AGENT_SANDBOX_H
#define ENVMGR_AGENT_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

#define AGENT_BWRAP "/usr/bin/bwrap"

typedef struct agent_sandbox {
    const char *const *hide; /* folders replaced by an empty tmpfs (NULL-terminated; missing ones skipped) */
    const char *const *show; /* folders bound back read-only afterwards (missing ones skipped) */
} agent_sandbox;

/* Whether the sandbox can run here: bwrap installed and a trial run of /bin/true in it exits 0.
 * Decided once per process. When not, why (one line) goes into why. */
bool agent_sandbox_available(char *why, size_t len);

/* bwrap's argv running argv inside sb (built before fork; every string allocated). Paths of hide
 * and show are resolved (realpath); parents are mounted before their children. */
char **agent_sandbox_argv(const agent_sandbox *sb, const char *const *argv);
void agent_sandbox_argv_free(char **v);

#endif

/* The evaluator sandbox: every evaluator script (the registry's metrics through
 * evaluator/metrics/run.py, and the `script` metric) runs here, never on the host as is.
 *
 * bubblewrap (/usr/bin/bwrap) gives the program
 *   - new user, pid, network, IPC, UTS and cgroup namespaces (--unshare-all: no network at all),
 *     no capabilities, no further user namespaces, a new session, death with envmgr;
 *   - a read-only root with /usr (and the merged-/usr links), /etc/ld.so.cache and
 *     /etc/alternatives (shared libraries), the metrics folder at /metrics, the `script` metric's
 *     program at /script/NAME, and the input files read-only at /in/result/N.EXT and
 *     /in/expected/N.EXT; nothing else of the host (no home, no run directory, no /etc/shadow);
 *   - a private /tmp (tmpfs, SANDBOX_TMPFS_MAX bytes), /proc of its own pid namespace, a minimal /dev;
 *   - a cleared environment (PATH, HOME=/tmp, LANG, TMPDIR, one-thread BLAS);
 *   - rlimits set before bwrap starts (CPU seconds, address space, file size, no core files) and a process limit set inside the user namespace (prlimit --nproc), where the kernel
 *     counts only the sandbox's processes;
 *   - a wall-clock deadline after which the whole sandbox dies, and stdout capped.
 *
 * Run by root, the kernel would not enforce the process limit (uid 0 is exempt from RLIMIT_NPROC),
 * so root runs the sandbox as nobody (65534, through setpriv) and hands it copies of the input
 * files owned by nobody instead of the originals (root's run directories are 0700).
 *
 * bwrap missing, or unable to create namespaces, is an error naming the fix: never an unsandboxed
 * run. */
#ifndef ENVMGR_EVALUATOR_SANDBOX_H
#define ENVMGR_EVALUATOR_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/base/spawn.h"

#define SANDBOX_BWRAP "/usr/bin/bwrap"
#define SANDBOX_PYTHON "/usr/bin/python3"
#define SANDBOX_OUTPUT_MAX (64u << 10)             /* bytes of stdout (and of stderr kept) */
#define SANDBOX_TIMEOUT_S 180.0                    /* default wall clock; also the CPU-seconds limit */
#define SANDBOX_MEM_MAX ((unsigned long long)4 << 30) /* address space of each process */
#define SANDBOX_FILE_MAX ((unsigned long long)256 << 20) /* largest file it may write (RLIMIT_FSIZE) */
#define SANDBOX_TMPFS_MAX ((unsigned long long)256 << 20) /* its /tmp */
#define SANDBOX_NPROC 64                           /* processes and threads inside */
#define SANDBOX_NOBODY 65534                       /* the uid and gid root runs it as */

typedef struct sandbox_bind {
    char *host, *inside; /* inside: an absolute path in the sandbox */
} sandbox_bind;

/* What one run binds: built with sandbox_add / sandbox_*_value, freed with sandbox_free. */
typedef struct sandbox {
    sandbox_bind *binds;
    size_t nbinds, cap;
    size_t count[2]; /* files bound per side (result, expected) */
    size_t out_cap;  /* bytes of stdout kept; 0: SANDBOX_OUTPUT_MAX (getters that hand back a file need more) */
} sandbox;

void sandbox_init(sandbox *sb);
void sandbox_free(sandbox *sb);
/* Bind a host file or folder read-only at `inside`. */
void sandbox_add(sandbox *sb, const char *host, const char *inside);

/* An artifact (getters.h) as OSWorld's getters hand it to a metric: a file → its path in the
 * sandbox (bound read-only at /in/<side>/<n>.<ext>), or None (JSON null) when the file does not
 * exist; text → the string; json → its value; a JSON array of artifacts → the list of their
 * values; NULL or null → null. side: "result" or "expected". New reference. */
json_t *sandbox_osworld_value(sandbox *sb, json_t *artifact, const char *side);
/* The artifact itself for the `script` metric, with a file's "path" replaced by its path in the
 * sandbox (null when the file does not exist). New reference; NULL stays NULL. */
json_t *sandbox_script_artifact(sandbox *sb, json_t *artifact, const char *side);

/* Whether the sandbox can run here: bwrap installed and able to create its namespaces. Cached
 * after the first success. The message names the fix. */
int sandbox_check(em_err *err);

/* Run argv (absolute paths inside the sandbox) with input on stdin, cwd /tmp. Returns 0 when the
 * program ran, whatever it did (res says: status, timed_out, overflow; free with
 * spawn_result_free), or -1 when the sandbox itself could not be set up (err names the problem
 * and the fix). timeout_s <= 0 means SANDBOX_TIMEOUT_S. */
int sandbox_run(const sandbox *sb, const char *const *argv, const char *input, size_t input_len, double timeout_s,
                spawn_result *res, em_err *err);

/* Run argv with the request (JSON) on stdin and read one JSON object from its stdout. Returns 0
 * when the program exited 0, with *answer its object (NULL when stdout is not one: the caller
 * says what it wanted); -1 when it did not, err "label: ..." with its {"error": "..."} (not
 * repeating a label it starts with) or why the run failed. */
int sandbox_run_json(const sandbox *sb, const char *const *argv, json_t *request, double timeout_s, const char *label,
                     json_t **answer, em_err *err);

/* One line on a run that did not end well ("timed out after 5 s", "killed by SIGXCPU (CPU limit
 * of 5 s)", "exited with status 1: <last stderr line>"). Caller frees. */
char *sandbox_failure(const spawn_result *res, double timeout_s);

#endif

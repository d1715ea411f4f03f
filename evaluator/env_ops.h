/* The evaluator's only way into an env and the host around it. The env layer (guest agent, VNC,
 * the asset cache, the egress log) fills this in; getters call through it and never learn about
 * QEMU, libcurl or the proxy, so evaluator/ includes nothing above envmgr/base.
 * Tests fill it with callbacks that record calls and return canned data.
 *
 * Every callback returns 0 or a negative status with err set. Buffers
 * handed back (*out, *data) are malloc'd and NUL-terminated one past
 * their length; the caller frees them. Guest output is untrusted: the
 * caps below are hard limits, not hints. */
#ifndef ENVMGR_ENV_OPS_H
#define ENVMGR_ENV_OPS_H

#include <jansson.h>
#include <stddef.h>

#include "envmgr/base/err.h"

/* The desktop user's home: `~` in a guest path a getter or setup step names means this, as in
 * OSWorld (whose in-guest server runs as that user). */
#define EM_GUEST_HOME "/home/user"

enum {
    EM_EXEC_ROOT = 1 << 0, /* as root (envmgr's `as_root`), not as the desktop user */
};

typedef struct em_env_ops {
    void *ctx;
    /* Run argv (no shell unless argv says so) in the guest as the desktop user, with its HOME,
     * its home as working directory, DISPLAY=:0, XDG_RUNTIME_DIR and the session's D-Bus address, as OSWorld's
     * in-guest server runs getter commands (flags EM_EXEC_ROOT: as root with DISPLAY=:0); at
     * most out_cap bytes of stdout come back, and, when err_out is not NULL, of stderr (NUL-terminated;
     * a getter's flags read it); exit_code is -1 when the command was killed or timed out. */
    int (*exec)(void *ctx, const char *const *argv, unsigned flags, double timeout_s, size_t out_cap, char **out,
                size_t *out_len, char **err_out, int *exit_code, em_err *err);
    /* Read a guest file; a file larger than cap is an error, not a truncation. */
    int (*read_file)(void *ctx, const char *guest_path, size_t cap, char **data, size_t *len, em_err *err);
    /* Write the current screen as a PNG file on the host. */
    int (*screenshot_png)(void *ctx, const char *host_png_path, em_err *err);
    /* An http(s) URL (url_is_remote) through the host's asset cache, pinned by the task folder's
     * lock file (task_dir may be NULL): *host_path (malloc'd) is the cached copy to read. */
    int (*fetch_asset)(void *ctx, const char *url, const char *task_dir, char **host_path, em_err *err);
    /* The episode's egress events (what the episode runner recorded in artifact_dir), at most max,
     * appended to the array *events (created when NULL). No record is an error. */
    int (*egress_events)(void *ctx, const char *artifact_dir, size_t max, json_t **events, em_err *err);
    /* Only on a guest that runs OSWorld's server (guest interface osworld), else NULL: one request to
     * its path, GET when body is NULL, else POST of body as JSON; *status its HTTP status, *data its
     * body (at most cap bytes: a longer one is an error). Getters the server answers itself use it. */
    int (*server)(void *ctx, const char *path, json_t *body, size_t cap, long *status, char **data, size_t *len,
                  em_err *err);
    int screen_w, screen_h;
} em_env_ops;

#endif

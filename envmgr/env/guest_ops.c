#include "envmgr/env/guest_ops.h"

#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "envmgr/base/png.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/net/assets.h"
#include "envmgr/net/egress_log.h"
#include "envmgr/vm/manifest.h"

#define ARGV_WRAP_MAX 16

int guest_ops_run(env *e, const char *const *argv, int as_user, int detach, double timeout_s, size_t cap,
                  guest_exec_result *res, em_err *err)
{
    guest *g;
    if (env_guest(e, &g, err) < 0)
        return -1;
    size_t n = 0;
    while (argv[n])
        n++;
    const char **full = xcalloc(n + ARGV_WRAP_MAX + 1, sizeof *full);
    size_t k = 0;
    /* A qga image has no desktop user nor display envmgr knows of: its commands run as the agent
     * runs them (root), argv as given (docs/images.md, "What a qga image can do"); an osworld image's
     * as its server runs them (the desktop user, with its display, in its home). */
    bool plain = env_manifest(e)->guest == MANIFEST_GUEST_QGA || env_manifest(e)->guest == MANIFEST_GUEST_OSWORLD;
    if (plain)
        as_user = 0;
    if (as_user) {
        full[k++] = "runuser";
        full[k++] = "-u";
        full[k++] = GUEST_DESKTOP_USER;
        full[k++] = "--";
    }
    if (!plain) {
        full[k++] = "env";
        full[k++] = "DISPLAY=:0";
    }
    if (as_user) {
        full[k++] = "HOME=/home/" GUEST_DESKTOP_USER;
        full[k++] = "USER=" GUEST_DESKTOP_USER;
        /* The session bus lives wherever dbus-launch put it: take its address from the running session. */
        full[k++] = "sh";
        full[k++] = "-c";
        /* XDG_RUNTIME_DIR too (gio, gsettings, xdg-open and pactl find the user's services there);
         * without a session address, the user bus of dbus-user-session in it. */
        full[k++] = "cd \"$HOME\" 2>/dev/null; a=; r=/run/user/$(id -u); [ -d \"$r\" ] && export XDG_RUNTIME_DIR=\"$r\"; "
                    "s=$(pgrep -u " GUEST_DESKTOP_USER " -x xfce4-session | head -n 1); "
                    "[ -n \"$s\" ] && a=$(tr '\\0' '\\n' </proc/$s/environ | sed -n 's/^DBUS_SESSION_BUS_ADDRESS=//p'); "
                    "[ -z \"$a\" ] && [ -S \"$r/bus\" ] && a=unix:path=$r/bus; "
                    "[ -n \"$a\" ] && export DBUS_SESSION_BUS_ADDRESS=\"$a\"; exec \"$@\"";
        full[k++] = "sh";
    }
    if (detach) {
        /* Its own session with stdio on /dev/null: the agent waits for the output pipes of what it
         * runs to close, so a detached app must not inherit them or the exec never returns. */
        full[k++] = "sh";
        full[k++] = "-c";
        /* setsid -f forks before it execs: a program that is not there would still "start" (exit 0),
         * so look it up first; 127 is the shell's own "not found". */
        full[k++] = "command -v \"$1\" >/dev/null 2>&1 || exit 127; exec setsid -f \"$@\" </dev/null >/dev/null 2>&1";
        full[k++] = "sh";
    }
    for (size_t i = 0; i < n; i++)
        full[k++] = argv[i];
    full[k] = NULL;
    int rc = guest_exec(g, full, NULL, 0, timeout_s, cap, res, err);
    free(full);
    return rc < 0 ? env_failed(e, err) : 0;
}

bool guest_ops_osworld(env *e) { return env_manifest(e)->guest == MANIFEST_GUEST_OSWORLD; }

int guest_ops_server_step(env *e, const char *endpoint, json_t *body, double timeout_s, long *status, char **reply,
                          em_err *err)
{
    guest *g;
    if (env_guest(e, &g, err) < 0)
        return -1;
    return guest_osworld_call(g, endpoint, body, timeout_s, status, reply, err) < 0 ? env_failed(e, err) : 0;
}

/* Getter commands: as the desktop user (as OSWorld's in-guest server runs them), root on request. */
static int op_exec(void *ctx, const char *const *argv, unsigned flags, double timeout_s, size_t out_cap, char **out,
                   size_t *out_len, char **err_out, int *exit_code, em_err *err)
{
    guest_exec_result r;
    if (guest_ops_run(ctx, argv, !(flags & EM_EXEC_ROOT), 0, timeout_s, out_cap, &r, err) < 0)
        return -1;
    *out = r.out;
    *out_len = r.out_len;
    *exit_code = r.timed_out ? -1 : r.exit_code;
    r.out = NULL;
    if (err_out) {
        *err_out = r.err ? r.err : xstrdup("");
        r.err = NULL;
    }
    guest_exec_result_free(&r);
    return 0;
}

#define SERVER_GETTER_TIMEOUT_S 60.0

static int op_server(void *ctx, const char *path, json_t *body, size_t cap, long *status, char **data, size_t *len,
                     em_err *err)
{
    guest *g;
    if (env_guest(ctx, &g, err) < 0)
        return -1;
    return guest_osworld_fetch(g, path, body, SERVER_GETTER_TIMEOUT_S, cap, status, data, len, err) < 0
               ? env_failed(ctx, err)
               : 0;
}

static int op_read_file(void *ctx, const char *guest_path, size_t cap, char **data, size_t *len, em_err *err)
{
    guest *g;
    if (env_guest(ctx, &g, err) < 0)
        return -1;
    return guest_file_read(g, guest_path, cap, data, len, err);
}

static int op_screenshot(void *ctx, const char *host_png_path, em_err *err)
{
    const png_buf *png;
    if (env_screenshot(ctx, &png, err) < 0)
        return -1;
    return write_file_atomic(host_png_path, png->data, png->len, 0644, err);
}

static int op_fetch_asset(void *ctx, const char *url, const char *task_dir, char **host_path, em_err *err)
{
    asset_lock *lock = NULL;
    asset_info ai;
    *host_path = NULL;
    if (asset_lock_for_task(task_dir, &lock, err) < 0)
        return -1;
    int rc = asset_get(url, lock, 0, &ai, err);
    asset_lock_free(lock);
    if (rc == 0)
        *host_path = ai.path;
    return rc;
}

static int op_egress_events(void *ctx, const char *artifact_dir, size_t max, json_t **events, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" EGRESS_ARTIFACT, artifact_dir);
    if (access(path, F_OK) != 0)
        return em_fail(err, "no egress record for this evaluation (the getter works inside an episode)");
    uint64_t off = 0;
    return egress_log_read(path, &off, max, events, err);
}

void guest_ops_bind_host(em_env_ops *ops)
{
    ops->fetch_asset = op_fetch_asset;
    ops->egress_events = op_egress_events;
}

void guest_ops_bind(env *e, em_env_ops *ops)
{
    memset(ops, 0, sizeof *ops);
    guest_ops_bind_host(ops);
    ops->ctx = e;
    ops->exec = op_exec;
    ops->read_file = op_read_file;
    ops->screenshot_png = op_screenshot;
    if (guest_ops_osworld(e)) /* the getters its server answers itself (getters_apps.c) */
        ops->server = op_server;
    ops->screen_w = env_width(e);
    ops->screen_h = env_height(e);
}

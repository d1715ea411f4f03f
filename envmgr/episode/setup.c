#include "envmgr/episode/setup.h"

#include <stdlib.h>
#include <string.h>

#include "envmgr/env/guest_ops.h"
#include "envmgr/base/png.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/util.h"

#define SETUP_OUTPUT_CAP (64u << 10)
#define FILE_UPLOAD_MAX (64u << 20)

static json_t *exec_detail(const guest_exec_result *r)
{
    json_t *d = json_pack("{s:i}", "exit_code", r->exit_code);
    if (r->timed_out)
        json_object_set_new(d, "timed_out", json_true());
    if (r->err_len) { /* a short excerpt helps when a task's setup goes wrong */
        /* guest bytes: made valid UTF-8, or the trace line (and the whole episode) fails to write */
        size_t n;
        _cleanup_free_ char *text = utf8_sanitize(r->err, r->err_len > 512 ? 512 : r->err_len, &n);
        json_object_set_new(d, "stderr", json_stringn(text, n));
    }
    return d;
}

static int run_cmd(env *e, const char *const *argv, int detach, double timeout_s, json_t **detail, em_err *err)
{
    guest_exec_result r;
    if (guest_ops_run(e, argv, 1, detach, timeout_s, SETUP_OUTPUT_CAP, &r, err) < 0)
        return -1;
    *detail = exec_detail(&r);
    int timed_out = r.timed_out;
    guest_exec_result_free(&r);
    if (timed_out)
        return em_fail(err, "`%s` did not finish within %.0f s", argv[0], timeout_s);
    return 0;
}

static int upload(env *e, const task *t, const task_step *s, json_t **detail, em_err *err)
{
    guest *g;
    if (env_guest(e, &g, err) < 0)
        return -1;
    json_t *done = json_array();
    *detail = json_pack("{s:o}", "files", done);
    for (size_t i = 0; i < s->nfiles; i++) {
        _cleanup_free_ char *real = NULL, *data = NULL;
        size_t len;
        /* Resolve now: a symlink placed after loading must not lead out of the task folder. */
        if (path_inside(t->dir, s->files[i].host_path, true, &real, err) < 0 ||
            read_file_capped(real, FILE_UPLOAD_MAX, &data, &len, err) < 0)
            return em_prefix(err, "files[%zu]: ", i);
        const char *dst = s->files[i].guest_path;
        const char *mkdir_argv[] = {"sh", "-c", "mkdir -p \"$(dirname \"$1\")\"", "sh", dst, NULL};
        guest_exec_result r;
        if (guest_ops_run(e, mkdir_argv, 0, 0, 30, 4096, &r, err) < 0)
            return -1;
        guest_exec_result_free(&r);
        if (guest_file_write(g, dst, data, len, err) < 0)
            return em_prefix(err, "files[%zu]: ", i);
        /* The desktop user owns what a task gives it, as on OSWorld's VM. */
        if (!strncmp(dst, "/home/" GUEST_DESKTOP_USER "/", strlen("/home/" GUEST_DESKTOP_USER "/")) ||
            !strncmp(dst, "/tmp/", 5)) {
            const char *chown_argv[] = {"chown", GUEST_DESKTOP_USER ":" GUEST_DESKTOP_USER, dst, NULL};
            if (guest_ops_run(e, chown_argv, 0, 0, 30, 4096, &r, err) < 0)
                return -1;
            guest_exec_result_free(&r);
        }
        json_array_append_new(done, json_pack("{s:s, s:I}", "path", dst, "bytes", (json_int_t)len));
    }
    return 0;
}

static int window_step(env *e, const task_step *s, json_t **detail, em_err *err)
{
    /* wmctrl: -a activates, -c closes gracefully; -F exact title, -x by WM_CLASS. */
    const char *argv[8];
    size_t k = 0;
    argv[k++] = "wmctrl";
    if (s->strict)
        argv[k++] = "-F";
    if (s->by_class)
        argv[k++] = "-x";
    argv[k++] = s->type == STEP_CLOSE_WINDOW ? "-c" : "-a";
    argv[k++] = s->window_name;
    argv[k] = NULL;
    return run_cmd(e, argv, 0, 30, detail, err);
}

int setup_run_step(env *e, const task *t, const task_step *s, json_t **detail, em_err *err)
{
    *detail = NULL;
    switch (s->type) {
    case STEP_EXECUTE:
    case STEP_COMMAND:
        return run_cmd(e, (const char *const *)s->argv, 0, s->timeout_s, detail, err);
    case STEP_LAUNCH:
        return run_cmd(e, (const char *const *)s->argv, 1, 30, detail, err);
    case STEP_OPEN: {
        const char *argv[] = {"exo-open", s->path, NULL};
        return run_cmd(e, argv, 1, 30, detail, err);
    }
    case STEP_UPLOAD_FILE:
    case STEP_DOWNLOAD:
        return upload(e, t, s, detail, err);
    case STEP_SLEEP:
        sleep_ms(s->seconds * 1000);
        return check_interrupt(err);
    case STEP_ACTIVATE_WINDOW:
    case STEP_CLOSE_WINDOW:
        return window_step(e, s, detail, err);
    case STEP_WAIT_SCREEN:
        return setup_wait_screen(e, s, err);
    }
    return em_fail(err, "unknown step type");
}

/* Fraction of pixels in the region whose colour differs from the reference. */
static double region_diff(const uint8_t *px, int w, const uint8_t *ref, int rw, const int region[4])
{
    size_t differ = 0, total = (size_t)region[2] * region[3];
    for (int y = 0; y < region[3]; y++)
        for (int x = 0; x < region[2]; x++) {
            const uint8_t *a = px + ((size_t)(region[1] + y) * w + region[0] + x) * 4;
            const uint8_t *b = ref + ((size_t)(region[1] + y) * rw + region[0] + x) * 4;
            if (memcmp(a, b, 3))
                differ++;
        }
    return total ? (double)differ / (double)total : 0;
}

int setup_wait_screen(env *e, const task_step *s, em_err *err)
{
    vnc_session *v;
    if (env_vnc(e, &v, err) < 0)
        return -1;
    int w = env_width(e), h = env_height(e);
    _cleanup_free_ uint8_t *ref = NULL;
    int rw = 0, rh = 0, region[4] = {0, 0, w, h};
    if (s->has_region)
        memcpy(region, s->region, sizeof region);
    if (region[0] < 0 || region[1] < 0 || region[2] <= 0 || region[3] <= 0 || region[0] + region[2] > w ||
        region[1] + region[3] > h)
        return em_fail_input(err, "region: outside the %dx%d screen", w, h);
    if (s->reference) {
        if (png_decode_file(s->reference, &ref, &rw, &rh, err) < 0)
            return -1;
        if (rw != w || rh != h)
            return em_fail_input(err, "reference: %dx%d, the screen is %dx%d", rw, rh, w, h);
    }
    double deadline = now_ms() + s->timeout_s * 1000, stable_since = now_ms();
    uint64_t last = 0;
    for (;;) {
        const uint8_t *px;
        if (env_frame(e, &px, err) < 0 || check_interrupt(err) < 0)
            return -1;
        if (ref) {
            if (region_diff(px, w, ref, rw, region) <= s->tolerance)
                return 0;
        } else {
            uint64_t hsh = vnc_frame_hash(v);
            if (hsh != last) {
                last = hsh;
                stable_since = now_ms();
            } else if (now_ms() - stable_since >= s->stable_ms) {
                return 0;
            }
        }
        if (now_ms() > deadline)
            return em_fail(err, "the screen %s within %.0f s", ref ? "never matched the reference" : "never settled",
                           s->timeout_s);
        sleep_ms(100);
    }
}

int screen_settle(env *e, double settle_ms, double max_ms, settle_info *info, em_err *err)
{
    vnc_session *v;
    if (env_vnc(e, &v, err) < 0)
        return -1;
    double t0 = now_ms(), deadline = t0 + max_ms;
    const uint8_t *px;
    if (env_frame(e, &px, err) < 0)
        return -1;
    uint64_t last = vnc_frame_hash(v), run_last = 0, wait_last = 0, run, wait;
    em_err cerr = {0};
    bool cpu_ok = env_vcpu_time(e, &run_last, &wait_last, &cerr) == 0; /* without it: the screen alone */
    double t_last = now_ms();
    settle_info out = {.why = "screen changing"};
    while (now_ms() < deadline) {
        double left = deadline - now_ms();
        sleep_ms(settle_ms < left ? settle_ms : left);
        if (env_frame(e, &px, err) < 0 || check_interrupt(err) < 0)
            return -1;
        uint64_t hsh = vnc_frame_hash(v);
        double t = now_ms();
        /* the share of the time the vCPUs could run that they did run: a guest with work never
         * sleeps (close to 1), an idle one mostly sleeps; time spent waiting for a host CPU counts
         * for neither, so host load does not make a busy guest look idle or the other way round */
        double busy = 0;
        if (cpu_ok && env_vcpu_time(e, &run, &wait, &cerr) == 0 && t > t_last) {
            double wall = (t - t_last) * 1e6, dr = (double)(run - run_last), dw = (double)(wait - wait_last);
            busy = wall - dw > 1e6 ? dr / (wall - dw) : 1; /* it waited the whole window: it had work */
            run_last = run;
            wait_last = wait;
        }
        t_last = t;
        if (hsh == last && busy <= SETTLE_BUSY_MAX) {
            out.settled = true;
            out.why = "settled";
            break;
        }
        out.why = hsh != last ? "screen changing" : "guest busy";
        last = hsh;
    }
    out.ms = now_ms() - t0;
    if (info)
        *info = out;
    return 0;
}

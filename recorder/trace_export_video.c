/* An episode as a video (recording.mp4, as OSWorld's runs keep one), built on the host from the
 * trace's frames and timings, so recording costs the guest nothing.
 *
 * Each frame is shown from when it appeared to when the next one did: a step's frame_before from
 * when the agent got it (the step's `t` less its agent, action and settle times), its frame_after
 * from `t`. The last frame stays one second.
 *
 * A trace may be hostile: every frame is loaded (its bytes must hash to its name) and decoded by
 * libpng within png.h's size caps before ffmpeg sees it, and ffmpeg reads copies of those bytes
 * (named by number in a private temp folder) through a concat list, with file access only, no
 * standard input, resource limits and a deadline. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/png.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "frames.h"
#include "trace.h"

#define MIN_SHOW_S 0.04     /* one frame at 25 fps: every frame the agent saw is in the video */
#define LAST_SHOW_S 1.0
#define FFMPEG_TIMEOUT_MS (15 * 60 * 1000.0)
#define FFMPEG_ERR_CAP 8192

typedef struct shown {
    const char *sha;
    double at; /* seconds since the trace was opened */
} shown;

typedef struct timeline {
    shown *v;
    size_t n, cap;
} timeline;

static double num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

static void show(timeline *tl, const char *sha, double at)
{
    if (!sha || (tl->n && !strcmp(tl->v[tl->n - 1].sha, sha)))
        return;
    if (tl->n && at < tl->v[tl->n - 1].at + MIN_SHOW_S)
        at = tl->v[tl->n - 1].at + MIN_SHOW_S;
    if (at < 0)
        at = 0;
    if (tl->n == tl->cap) {
        tl->cap = tl->cap ? 2 * tl->cap : 64;
        tl->v = xrealloc(tl->v, tl->cap * sizeof *tl->v);
    }
    tl->v[tl->n++] = (shown){.sha = sha, .at = at};
}

static void build_timeline(const trace *t, timeline *tl)
{
    for (size_t i = 0; i < trace_n_steps(t); i++) {
        json_t *s = trace_step(t, i);
        double at = num(s, "t");
        double waited = (num(s, "agent_ms") + num(s, "action_ms") + num(json_object_get(s, "settle"), "ms")) / 1000;
        show(tl, json_string_value(json_object_get(s, "frame_before")), at - waited);
        show(tl, json_string_value(json_object_get(s, "frame_after")), at);
    }
}

/* The index of sha among the frames copied so far, copying it (checked and decoded) when new. */
static int frame_file(const trace *t, const char *tmp, const char **copied, size_t *ncopied, const char *sha,
                      size_t *idx, em_err *err)
{
    for (size_t i = 0; i < *ncopied; i++)
        if (!strcmp(copied[i], sha)) {
            *idx = i;
            return 0;
        }
    char *png = NULL;
    size_t len = 0;
    if (frames_load(trace_dir(t), sha, &png, &len, err) < 0)
        return -1;
    uint8_t *px = NULL;
    int w, h;
    int rc = png_decode_mem(png, len, &px, &w, &h, err);
    free(px);
    if (rc == 0) {
        _cleanup_free_ char *dest = xasprintf("%s/%zu.png", tmp, *ncopied);
        rc = write_file_atomic(dest, png, len, 0600, err);
    }
    free(png);
    if (rc < 0)
        return em_prefix(err, "frame %.12s: ", sha);
    *idx = *ncopied;
    copied[(*ncopied)++] = sha;
    return 0;
}

/* The ffconcat list: each frame file with how long it shows; the last named twice, as the concat
 * demuxer wants, so its duration counts. */
static int write_list(const trace *t, const timeline *tl, const char *tmp, em_err *err)
{
    const char **copied = xcalloc(tl->n, sizeof *copied);
    size_t ncopied = 0, idx = 0;
    sbuf b = {0};
    sbuf_puts(&b, "ffconcat version 1.0\n");
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < tl->n; i++) {
        double until = i + 1 < tl->n ? tl->v[i + 1].at : tl->v[i].at + LAST_SHOW_S;
        rc = frame_file(t, tmp, copied, &ncopied, tl->v[i].sha, &idx, err);
        if (rc == 0)
            sbuf_printf(&b, "file %zu.png\nduration %.3f\n", idx, until - tl->v[i].at);
    }
    if (rc == 0) {
        sbuf_printf(&b, "file %zu.png\n", idx);
        _cleanup_free_ char *list = xasprintf("%s/frames.ffconcat", tmp);
        rc = write_file_atomic(list, b.s, b.len, 0600, err);
    }
    sbuf_release(&b);
    free(copied);
    return rc;
}

static int run_ffmpeg(const char *tmp, const char *out_tmp, em_err *err)
{
    const char *argv[] = {"ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
                          "-protocol_whitelist", "file", "-f", "concat", "-i", "frames.ffconcat",
                          /* yuv420p (what every player takes) needs even sides */
                          "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2,format=yuv420p", "-fps_mode", "vfr",
                          "-c:v", "libx264", "-preset", "veryfast", "-crf", "28", "-movflags", "+faststart",
                          "-f", "mp4", out_tmp, NULL};
    static const spawn_rlimit limits[] = {{RLIMIT_AS, (rlim_t)4 << 30}, {RLIMIT_FSIZE, (rlim_t)8 << 30},
                                          {RLIMIT_CORE, 0}};
    spawn_opts o = {.argv = argv, .cwd = tmp, .flags = SPAWN_NO_NEW_PRIVS, .rlimits = limits,
                    .nrlimits = ARRAY_LEN(limits)};
    spawn_io io = {.out_cap = FFMPEG_ERR_CAP, .err_cap = FFMPEG_ERR_CAP, .timeout_ms = FFMPEG_TIMEOUT_MS};
    spawn_result r = {0};
    if (spawn_run(&o, &io, &r, err) < 0)
        return em_prefix(err, "video: %s", errno == ENOENT ? "ffmpeg is not installed (apt-get install ffmpeg): " : "");
    char why[256];
    int rc = 0;
    if (r.timed_out || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
        rc = em_fail(err, "video: ffmpeg failed: %s%s", r.timed_out ? "no result within 15 minutes; " : "",
                     spawn_status_text(&r, why, sizeof why));
    spawn_result_free(&r);
    return rc;
}

int trace_export_video(const char *dir, const char *out_file, em_err *err)
{
    trace *t;
    if (trace_read(dir, &t, err) < 0)
        return -1;
    timeline tl = {0};
    build_timeline(t, &tl);
    if (tl.n == 0) {
        trace_free(t);
        return em_fail_input(err, "video of `%s`: the trace has no frames", dir);
    }
    /* The temp folder sits next to the output, so the finished file is renamed into place. */
    _cleanup_free_ char *copy = xstrdup(out_file);
    char *slash = strrchr(copy, '/');
    const char *out_dir = slash ? (slash == copy ? "/" : (*slash = '\0', copy)) : ".";
    _cleanup_free_ char *tmp = xasprintf("%s/.envmgr-video-XXXXXX", out_dir);
    int rc = -1;
    if (!mkdtemp(tmp)) {
        em_fail_errno(err, "video: a temp folder in `%s`", out_dir);
    } else {
        _cleanup_free_ char *out_tmp = xasprintf("%s/out.mp4", tmp);
        rc = write_list(t, &tl, tmp, err);
        if (rc == 0)
            rc = run_ffmpeg(tmp, out_tmp, err);
        if (rc == 0 && rename(out_tmp, out_file) < 0)
            rc = em_fail_errno(err, "video: rename into `%s`", out_file);
        remove_tree(tmp, NULL);
    }
    free(tl.v);
    trace_free(t);
    return rc < 0 ? em_prefix(err, "export video of `%s`: ", dir) : 0;
}

/* Export the screens of an episode as numbered PNGs: 0000.png before the
 * first step, then one after each step. Names are built from numbers only. */
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "frames.h"
#include "trace.h"

static int export_one(const trace *t, const char *sha, const char *out_dir, size_t n, em_err *err)
{
    _cleanup_free_ char *dest = xasprintf("%s/%04zu.png", out_dir, n);
    return frames_copy_to(trace_dir(t), sha, dest, err);
}

int trace_export_frames(const char *dir, const char *out_dir, em_err *err)
{
    trace *t;
    if (trace_read(dir, &t, err) < 0)
        return -1;
    int rc = mkdir_p(out_dir, 0755, err);
    for (size_t i = 0; rc == 0 && i < trace_n_steps(t); i++) {
        json_t *step = trace_step(t, i);
        const char *before = json_string_value(json_object_get(step, "frame_before"));
        const char *after = json_string_value(json_object_get(step, "frame_after"));
        if (i == 0)
            rc = export_one(t, before, out_dir, 0, err);
        if (rc == 0 && after)
            rc = export_one(t, after, out_dir, i + 1, err);
    }
    trace_free(t);
    return rc < 0 ? em_prefix(err, "export frames of `%s`: ", dir) : 0;
}

/* Comparing a replayed frame with the recorded one: exact (same sha256)
 * or within a per-pixel tolerance, with a diff image for people. */
#ifndef ENVMGR_RECORDER_FRAME_COMPARE_H
#define ENVMGR_RECORDER_FRAME_COMPARE_H

#include "envmgr/base/err.h"

typedef struct frame_diff {
    double fraction;   /* pixels whose colour differs, 0..1 */
    int exact;         /* byte-identical PNGs */
} frame_diff;

/* Compare two PNG files. diff_png (may be NULL) receives an image that shows
 * differing pixels in red over a dimmed copy of the recorded frame. */
int frame_compare(const char *recorded_png, const char *replayed_png, const char *diff_png, frame_diff *out,
                  em_err *err);

#endif

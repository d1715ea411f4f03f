/* A frame (4 bytes a pixel, the same layout in and out) scaled to another size, for a model that sees
 * the screen smaller than it is, or a region of it larger (a zoom). Shrinking averages every source
 * pixel a target pixel covers (pixman's box-filtered separable convolution), so text stays as legible as
 * the size allows; enlarging is bilinear. */
#ifndef ENVMGR_FRAME_SCALE_H
#define ENVMGR_FRAME_SCALE_H

#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define FRAME_SCALE_SIDE_MAX 8192

/* The region (x, y, w, h) of a frame of `stride` bytes a row, scaled to dw x dh; *out is a new
 * dw * 4 byte-a-row buffer the caller frees. */
int frame_scale(const uint8_t *pixels, size_t stride, int x, int y, int w, int h, int dw, int dh, uint8_t **out,
                em_err *err);

#endif

#include "envmgr/base/frame_scale.h"

#include <pixman.h>
#include <stdlib.h>

#include "envmgr/base/util.h"

#define SUBSAMPLE_BITS 4 /* pixman's phases per pixel for the convolution (cairo uses the same) */

static int shrink_filter(pixman_image_t *src, double sx, double sy, em_err *err)
{
    int n = 0;
    pixman_fixed_t *params = pixman_filter_create_separable_convolution(
        &n, pixman_double_to_fixed(sx), pixman_double_to_fixed(sy), PIXMAN_KERNEL_BOX, PIXMAN_KERNEL_BOX,
        PIXMAN_KERNEL_BOX, PIXMAN_KERNEL_BOX, SUBSAMPLE_BITS, SUBSAMPLE_BITS);
    if (!params)
        return em_fail(err, "scale a frame: out of memory for the filter");
    bool ok = pixman_image_set_filter(src, PIXMAN_FILTER_SEPARABLE_CONVOLUTION, params, n);
    free(params);
    return ok ? 0 : em_fail(err, "scale a frame: pixman refused the filter");
}

int frame_scale(const uint8_t *pixels, size_t stride, int x, int y, int w, int h, int dw, int dh, uint8_t **out,
                em_err *err)
{
    *out = NULL;
    if (x < 0 || y < 0 || w < 1 || h < 1 || dw < 1 || dh < 1 || dw > FRAME_SCALE_SIDE_MAX ||
        dh > FRAME_SCALE_SIDE_MAX || (size_t)(x + w) * 4 > stride)
        return em_fail(err, "scale a frame: bad region %dx%d+%d+%d to %dx%d", w, h, x, y, dw, dh);
    uint8_t *dst = try_malloc((size_t)dw * dh * 4, "a scaled frame", err);
    if (!dst)
        return -1;
    /* pixman reads the region in place: a view of the source rows, never written. */
    pixman_image_t *src = pixman_image_create_bits(PIXMAN_x8b8g8r8, w, h,
                                                   (uint32_t *)(void *)(pixels + (size_t)y * stride + (size_t)x * 4),
                                                   (int)stride);
    pixman_image_t *dimg = pixman_image_create_bits(PIXMAN_x8b8g8r8, dw, dh, (uint32_t *)(void *)dst, dw * 4);
    int rc = 0;
    if (!src || !dimg) {
        rc = em_fail(err, "scale a frame: pixman could not make its images");
        goto out;
    }
    double sx = (double)w / dw, sy = (double)h / dh;
    pixman_transform_t t;
    pixman_transform_init_scale(&t, pixman_double_to_fixed(sx), pixman_double_to_fixed(sy));
    pixman_image_set_transform(src, &t);
    pixman_image_set_repeat(src, PIXMAN_REPEAT_PAD); /* edges average the edge pixels, not black */
    if (sx >= 1 && sy >= 1)
        rc = shrink_filter(src, sx, sy, err);
    else
        pixman_image_set_filter(src, PIXMAN_FILTER_BILINEAR, NULL, 0);
    if (rc == 0)
        pixman_image_composite32(PIXMAN_OP_SRC, src, NULL, dimg, 0, 0, 0, 0, 0, 0, dw, dh);
out:
    if (src)
        pixman_image_unref(src);
    if (dimg)
        pixman_image_unref(dimg);
    if (rc < 0)
        free(dst);
    else
        *out = dst;
    return rc;
}

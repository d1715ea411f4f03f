/* PNG encoding of 32-bit RGBX framebuffers (what libvncclient hands us) and
 * decoding for frame comparison. */
#ifndef ENVMGR_PNG_H
#define ENVMGR_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

typedef struct png_buf {
    unsigned char *data;
    size_t len, cap;
} png_buf;

/* RGBX (4 bytes a pixel, X ignored) → PNG RGB in memory. Level 1 and the
 * SUB filter: a desktop frame encodes in a few ms and stays small. */
int png_encode_rgbx(const uint8_t *pixels, int width, int height, size_t stride, int level, png_buf *out,
                    em_err *err);
void png_buf_free(png_buf *b);

/* PNG file → RGBX pixels (stride = width * 4). */
int png_decode_file(const char *path, uint8_t **pixels, int *width, int *height, em_err *err);
int png_decode_mem(const void *data, size_t len, uint8_t **pixels, int *width, int *height, em_err *err);

/* Encode and write to path atomically. */
int png_write_rgbx(const char *path, const uint8_t *pixels, int width, int height, size_t stride, em_err *err);

#endif

/* PNG encoding of 32-bit RGBX framebuffers (what libvncclient hands us) and
 * decoding for frame comparison. */
#ifndef ENVMGR_PNG_H
#define ENVMGR_PNG_H

#include <stdbool.h>
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

/* Images decoded or encoded: at most PNG_MAX_SIDE a side and PNG_MAX_PIXELS in all, so one decode
 * allocates at most 160 MB of RGBX (a 16384x16384 file would have cost 1 GiB). Screens and
 * reference images are far smaller (a 4K screen is 8.3 Mpx). */
#define PNG_MAX_SIDE 8192
#define PNG_MAX_PIXELS 40000000u

/* PNG file → RGBX pixels (stride = width * 4). Larger images are refused before any pixel is
 * allocated ("png: 20000x20000 is over the limit of 8192 a side and 40000000 pixels"); the pixel
 * buffer comes from try_malloc (out of memory is an error, EM_EXIT_NOMEM). */
int png_decode_file(const char *path, uint8_t **pixels, int *width, int *height, em_err *err);
int png_decode_mem(const void *data, size_t len, uint8_t **pixels, int *width, int *height, em_err *err);

/* Whether data starts with the 8-byte PNG signature (which no content sniffer takes for markup). */
bool png_signature_ok(const void *data, size_t len);

/* Encode and write to path atomically. */
int png_write_rgbx(const char *path, const uint8_t *pixels, int width, int height, size_t stride, em_err *err);

#endif

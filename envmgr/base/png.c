#include "envmgr/base/png.h"

#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"


void png_buf_free(png_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static void buf_write(png_structp p, png_bytep data, png_size_t n)
{
    png_buf *b = png_get_io_ptr(p);
    if (b->len + n > b->cap) {
        size_t cap = (b->len + n) * 2;
        unsigned char *d = try_realloc(b->data, cap, "an encoded PNG", png_get_error_ptr(p));
        if (!d)
            png_longjmp(p, 1);
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void buf_flush(png_structp p)
{
    (void)p;
}

static void on_error(png_structp p, png_const_charp msg)
{
    em_err *err = png_get_error_ptr(p);
    if (err)
        em_fail(err, "png: %s", msg);
    png_longjmp(p, 1);
}

static void on_warning(png_structp p, png_const_charp msg)
{
    (void)p;
    (void)msg;
}

int png_encode_rgbx(const uint8_t *pixels, int width, int height, size_t stride, int level, png_buf *out,
                    em_err *err)
{
    if (width <= 0 || height <= 0 || width > PNG_MAX_SIDE || height > PNG_MAX_SIDE)
        return em_fail(err, "png: bad size %dx%d", width, height);
    out->len = 0;
    png_structp p = png_create_write_struct(PNG_LIBPNG_VER_STRING, err, on_error, on_warning);
    if (!p)
        return em_fail(err, "png: cannot create encoder");
    png_infop info = png_create_info_struct(p);
    if (!info || setjmp(png_jmpbuf(p))) {
        png_destroy_write_struct(&p, &info);
        return -1;
    }
    png_set_write_fn(p, out, buf_write, buf_flush);
    png_set_compression_level(p, level);
    if (level <= 1)
        png_set_filter(p, 0, PNG_FILTER_SUB);
    png_set_IHDR(p, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(p, info);
    png_set_filler(p, 0, PNG_FILLER_AFTER); /* rows are RGBX: drop X */
    for (int y = 0; y < height; y++)
        png_write_row(p, (png_const_bytep)(pixels + (size_t)y * stride));
    png_write_end(p, info);
    png_destroy_write_struct(&p, &info);
    return 0;
}

typedef struct mem_reader {
    const unsigned char *data;
    size_t len, off;
} mem_reader;

static void mem_read(png_structp p, png_bytep dst, png_size_t n)
{
    mem_reader *r = png_get_io_ptr(p);
    if (n > r->len - r->off)
        png_error(p, "truncated file");
    memcpy(dst, r->data + r->off, n);
    r->off += n;
}

bool png_signature_ok(const void *data, size_t len)
{
    return len >= 8 && !png_sig_cmp((png_const_bytep)data, 0, 8);
}

int png_decode_mem(const void *data, size_t len, uint8_t **pixels, int *width, int *height, em_err *err)
{
    if (!png_signature_ok(data, len))
        return em_fail(err, "png: not a PNG file");
    mem_reader r = {.data = data, .len = len};
    uint8_t *volatile px = NULL;
    png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, err, on_error, on_warning);
    if (!p)
        return em_fail(err, "png: cannot create decoder");
    png_infop info = png_create_info_struct(p);
    if (!info || setjmp(png_jmpbuf(p))) {
        png_destroy_read_struct(&p, &info, NULL);
        free(px);
        return -1;
    }
    png_set_read_fn(p, &r, mem_read);
    png_set_user_limits(p, 1u << 20, 1u << 20); /* libpng's own check; ours below says more */
    png_read_info(p, info);
    png_uint_32 w = png_get_image_width(p, info), h = png_get_image_height(p, info);
    if (w > PNG_MAX_SIDE || h > PNG_MAX_SIDE || (uint64_t)w * h > PNG_MAX_PIXELS) {
        png_destroy_read_struct(&p, &info, NULL);
        return em_fail_input(err, "png: %ux%u is over the limit of %d a side and %u pixels", (unsigned)w,
                             (unsigned)h, PNG_MAX_SIDE, PNG_MAX_PIXELS);
    }
    int type = png_get_color_type(p, info), depth = png_get_bit_depth(p, info);
    if (depth == 16)
        png_set_strip_16(p);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(p);
    if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) {
        if (depth < 8)
            png_set_expand_gray_1_2_4_to_8(p);
        png_set_gray_to_rgb(p);
    }
    if (png_get_valid(p, info, PNG_INFO_tRNS))
        png_set_tRNS_to_alpha(p);
    if (!(type & PNG_COLOR_MASK_ALPHA) && !png_get_valid(p, info, PNG_INFO_tRNS))
        png_set_filler(p, 0xff, PNG_FILLER_AFTER);
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
    if (png_get_rowbytes(p, info) != (size_t)w * 4)
        png_error(p, "unsupported pixel layout");
    px = try_malloc((size_t)w * h * 4, "a PNG's pixels", err);
    if (!px) {
        png_destroy_read_struct(&p, &info, NULL);
        return -1;
    }
    for (int pass = png_set_interlace_handling(p); pass > 0; pass--)
        for (png_uint_32 y = 0; y < h; y++)
            png_read_row(p, px + (size_t)y * w * 4, NULL);
    png_destroy_read_struct(&p, &info, NULL);
    *pixels = px;
    *width = (int)w;
    *height = (int)h;
    return 0;
}

int png_decode_file(const char *path, uint8_t **pixels, int *width, int *height, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (read_file_capped(path, 256u << 20, &data, &len, err) < 0)
        return -1;
    if (png_decode_mem(data, len, pixels, width, height, err) < 0)
        return em_prefix(err, "`%s`: ", path);
    return 0;
}

int png_write_rgbx(const char *path, const uint8_t *pixels, int width, int height, size_t stride, em_err *err)
{
    png_buf b = {0};
    if (png_encode_rgbx(pixels, width, height, stride, 1, &b, err) < 0)
        return -1;
    int rc = write_file_atomic(path, b.data, b.len, 0644, err);
    png_buf_free(&b);
    return rc;
}

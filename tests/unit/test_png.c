/* PNG encoding of RGBX frames, decoding back, and the base64 the guest agent uses. */
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/base64.h"
#include "envmgr/base/png.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

static uint8_t *pattern(int w, int h)
{
    uint8_t *px = malloc((size_t)w * h * 4);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = px + ((size_t)y * w + x) * 4;
            p[0] = (uint8_t)(x * 7);
            p[1] = (uint8_t)(y * 3);
            p[2] = (uint8_t)(x ^ y);
            p[3] = 0x5a; /* padding byte: must not leak into the PNG */
        }
    return px;
}

static void test_round_trip(void)
{
    int w = 320, h = 200;
    uint8_t *px = pattern(w, h);
    png_buf b = {0};
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(png_encode_rgbx(px, w, h, (size_t)w * 4, 1, &b, &err), 0);
    CU_ASSERT(b.len > 8 && !memcmp(b.data, "\x89PNG", 4));
    uint8_t *back = NULL;
    int bw, bh;
    CU_ASSERT_EQUAL_FATAL(png_decode_mem(b.data, b.len, &back, &bw, &bh, &err), 0);
    CU_ASSERT_EQUAL(bw, w);
    CU_ASSERT_EQUAL(bh, h);
    int same = 1;
    for (size_t i = 0; i < (size_t)w * h; i++)
        if (memcmp(px + i * 4, back + i * 4, 3) || back[i * 4 + 3] != 0xff)
            same = 0;
    CU_ASSERT(same);
    free(back);
    png_buf_free(&b);
    free(px);
}

static void test_file_and_stride(void)
{
    /* A stride wider than the row (as a framebuffer with padding would have). */
    int w = 64, h = 32;
    size_t stride = (size_t)w * 4 + 16;
    uint8_t *px = calloc(1, stride * h);
    for (int y = 0; y < h; y++)
        memset(px + y * stride, y * 8, (size_t)w * 4);
    em_err err = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/f.png", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(png_write_rgbx(path, px, w, h, stride, &err), 0);
    uint8_t *back;
    int bw, bh;
    CU_ASSERT_EQUAL_FATAL(png_decode_file(path, &back, &bw, &bh, &err), 0);
    CU_ASSERT_EQUAL(back[(size_t)(31 * w) * 4], 31 * 8);
    free(back);
    free(px);
}

static void test_bad_input(void)
{
    em_err err = {0};
    uint8_t *px;
    int w, h;
    CU_ASSERT_EQUAL(png_decode_mem("hello", 5, &px, &w, &h, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a PNG"));
    /* A real PNG cut in half is refused, not read past its end. */
    uint8_t *src = pattern(100, 100);
    png_buf b = {0};
    png_encode_rgbx(src, 100, 100, 400, 1, &b, &err);
    CU_ASSERT_EQUAL(png_decode_mem(b.data, b.len / 2, &px, &w, &h, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "png:"));
    png_buf_free(&b);
    free(src);
    CU_ASSERT_EQUAL(png_encode_rgbx((uint8_t *)"", 0, 10, 0, 1, &b, &err), -1);
    CU_ASSERT_EQUAL(png_decode_file("/nonexistent.png", &px, &w, &h, &err), -1);
}

static uint32_t crc32_of(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return ~c;
}

static void be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The signature, a valid IHDR of w x h RGB and an empty IDAT: what a decoder reads before
 * allocating pixels. */
static size_t png_head(uint8_t out[45], uint32_t w, uint32_t h)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(out, sig, 8);
    be32(out + 8, 13);
    memcpy(out + 12, "IHDR", 4);
    be32(out + 16, w);
    be32(out + 20, h);
    out[24] = 8; /* depth */
    out[25] = 2; /* RGB */
    out[26] = out[27] = out[28] = 0;
    be32(out + 29, crc32_of(out + 12, 17));
    be32(out + 33, 0);
    memcpy(out + 37, "IDAT", 4);
    be32(out + 41, crc32_of(out + 37, 4));
    return 45;
}

/* Dimensions over the caps are refused from the header, before any pixel is allocated, with the
 * size and the limit in the message; sizes within them get as far as the missing pixel data. */
static void test_dimension_caps(void)
{
    em_err err = {0};
    uint8_t head[45], *px = NULL;
    int w, h;
    const uint32_t over[][2] = {{16384, 16384}, {PNG_MAX_SIDE + 1, 1}, {1, PNG_MAX_SIDE + 1}, {8000, 8000},
                                {1u << 20, 1u << 20}};
    for (size_t i = 0; i < ARRAY_LEN(over); i++) {
        size_t n = png_head(head, over[i][0], over[i][1]);
        memset(&err, 0, sizeof err);
        CU_ASSERT_EQUAL(png_decode_mem(head, n, &px, &w, &h, &err), -1);
        CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
        _cleanup_free_ char *want = xasprintf("png: %ux%u is over the limit of 8192 a side and 40000000 pixels",
                                              over[i][0], over[i][1]);
        if (strcmp(err.msg, want))
            fprintf(stderr, "\n  got `%s`\n", err.msg);
        CU_ASSERT_STRING_EQUAL(err.msg, want);
    }
    size_t n = png_head(head, PNG_MAX_SIDE, PNG_MAX_PIXELS / PNG_MAX_SIDE); /* at the limit: read on */
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(png_decode_mem(head, n, &px, &w, &h, &err), -1);
    CU_ASSERT_PTR_NULL(strstr(err.msg, "over the limit"));
    /* the encoder keeps to the same side */
    png_buf b = {0};
    CU_ASSERT_EQUAL(png_encode_rgbx((uint8_t *)"", PNG_MAX_SIDE + 1, 1, 0, 1, &b, &err), -1);
}

static void test_base64(void)
{
    const char *cases[][2] = {{"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < 5; i++) {
        char *enc = base64_encode(cases[i][0], strlen(cases[i][0]));
        CU_ASSERT_STRING_EQUAL(enc, cases[i][1]);
        free(enc);
        unsigned char *dec;
        size_t n;
        CU_ASSERT_EQUAL(base64_decode(cases[i][1], &dec, &n), 0);
        CU_ASSERT_EQUAL(n, strlen(cases[i][0]));
        CU_ASSERT_EQUAL(memcmp(dec, cases[i][0], n), 0);
        free(dec);
    }
    unsigned char *dec;
    size_t n;
    CU_ASSERT_EQUAL(base64_decode("Zm9", &dec, &n), -1);
    CU_ASSERT_EQUAL(base64_decode("Z=9v", &dec, &n), -1);
    CU_ASSERT_EQUAL(base64_decode("Zm9v!A==", &dec, &n), -1);
    unsigned char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)i;
    char *enc = base64_encode(all, 256);
    CU_ASSERT_EQUAL(base64_decode(enc, &dec, &n), 0);
    CU_ASSERT_EQUAL(n, 256);
    CU_ASSERT_EQUAL(memcmp(dec, all, 256), 0);
    free(dec);
    free(enc);
}

static CU_TestInfo tests[] = {
    {"RGBX → PNG → RGBX is lossless", test_round_trip},
    {"file write, padded stride", test_file_and_stride},
    {"bad PNG input", test_bad_input},
    {"dimension caps: 8192 a side, 40 Mpx, refused before allocating", test_dimension_caps},
    {"base64", test_base64},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("png", tests);
}

#include "frame_compare.h"

#include <stdlib.h>
#include <string.h>

#include "envmgr/base/png.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"

int frame_compare(const char *recorded_png, const char *replayed_png, const char *diff_png, frame_diff *out,
                  em_err *err)
{
    char a_sha[65], b_sha[65];
    if (sha256_file_hex(recorded_png, a_sha, err) < 0 || sha256_file_hex(replayed_png, b_sha, err) < 0)
        return -1;
    memset(out, 0, sizeof *out);
    if (!strcmp(a_sha, b_sha)) {
        out->exact = 1;
        return 0;
    }
    _cleanup_free_ uint8_t *a = NULL, *b = NULL;
    int aw, ah, bw, bh;
    if (png_decode_file(recorded_png, &a, &aw, &ah, err) < 0 || png_decode_file(replayed_png, &b, &bw, &bh, err) < 0)
        return -1;
    if (aw != bw || ah != bh) {
        out->fraction = 1;
        return 0;
    }
    size_t n = (size_t)aw * ah, differ = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = a + i * 4;
        if (memcmp(p, b + i * 4, 3)) {
            differ++;
            p[0] = 255;
            p[1] = 0;
            p[2] = 0;
        } else {
            p[0] /= 3;
            p[1] /= 3;
            p[2] /= 3;
        }
    }
    out->fraction = (double)differ / (double)n;
    if (diff_png && png_write_rgbx(diff_png, a, aw, ah, (size_t)aw * 4, err) < 0)
        return -1;
    return 0;
}

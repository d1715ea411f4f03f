/* Test helper: facts about PNG frames for shell tests.
 *   pngtool info FILE            -> "WIDTH HEIGHT DISTINCT_COLOURS(capped at 4096)"
 *   pngtool diff A B             -> fraction of pixels that differ (0 = identical); exit 3 on size mismatch
 *   pngtool region FILE X Y W H  -> distinct colours inside the rectangle */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/png.h"

static int load(const char *path, uint8_t **px, int *w, int *h)
{
    em_err err = {0};
    if (png_decode_file(path, px, w, h, &err) < 0) {
        fprintf(stderr, "pngtool: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static unsigned distinct(const uint8_t *px, int stride_px, int x0, int y0, int w, int h)
{
    enum { CAP = 4096 };
    static uint32_t seen[CAP];
    unsigned n = 0;
    for (int y = y0; y < y0 + h; y++)
        for (int x = x0; x < x0 + w; x++) {
            const uint8_t *p = px + ((size_t)y * stride_px + x) * 4;
            uint32_t c = (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
            unsigned i;
            for (i = 0; i < n && seen[i] != c; i++)
                ;
            if (i == n) {
                if (n == CAP)
                    return n;
                seen[n++] = c;
            }
        }
    return n;
}

int main(int argc, char **argv)
{
    uint8_t *a, *b;
    int w, h, w2, h2;
    if (argc == 3 && !strcmp(argv[1], "info")) {
        if (load(argv[2], &a, &w, &h) < 0)
            return 1;
        printf("%d %d %u\n", w, h, distinct(a, w, 0, 0, w, h));
        free(a);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "diff")) {
        if (load(argv[2], &a, &w, &h) < 0 || load(argv[3], &b, &w2, &h2) < 0)
            return 1;
        if (w != w2 || h != h2) {
            printf("size %dx%d vs %dx%d\n", w, h, w2, h2);
            return 3;
        }
        size_t differ = 0, n = (size_t)w * h;
        for (size_t i = 0; i < n; i++)
            if (memcmp(a + i * 4, b + i * 4, 3))
                differ++;
        printf("%.6f\n", (double)differ / (double)n);
        free(a);
        free(b);
        return 0;
    }
    if (argc == 7 && !strcmp(argv[1], "region")) {
        if (load(argv[2], &a, &w, &h) < 0)
            return 1;
        int x = atoi(argv[3]), y = atoi(argv[4]), rw = atoi(argv[5]), rh = atoi(argv[6]);
        if (x < 0 || y < 0 || rw <= 0 || rh <= 0 || x + rw > w || y + rh > h) {
            fprintf(stderr, "pngtool: region outside the image\n");
            return 2;
        }
        printf("%u\n", distinct(a, w, x, y, rw, rh));
        free(a);
        return 0;
    }
    fprintf(stderr, "usage: pngtool info FILE | diff A B | region FILE X Y W H\n");
    return 2;
}

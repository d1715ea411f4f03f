/* libFuzzer target: what `envmgr image import` reads of a disk it did not build is the disk's
 * author's to choose: its first bytes (the format's magic, the qcow2 header and its extensions) and,
 * through qemu-img, the JSON qemu-img info prints about it. Whatever they are, the checks end with
 * a verdict (0, or -1 with one line of input error), never a crash or a read past the buffer. The
 * first byte picks the check; the rest is its input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/vm/image_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 17))
        return 0;
    const image_limits lim = {.max_virtual = (uint64_t)256 << 30, .max_file = (uint64_t)256 << 30};
    /* the input in a buffer of its own size, so a read past it is the sanitizer's to see */
    unsigned char *in = malloc(size - 1 ? size - 1 : 1);
    memcpy(in, data + 1, size - 1);
    em_err err = {0};
    int rc;
    if (data[0] & 1) {
        image_info info;
        rc = image_check_info((const char *)in, size - 1, (data[0] & 2) ? "raw" : "qcow2", &lim, &info, &err);
        if (rc == 0 && (info.virtual_size == 0 || info.virtual_size > lim.max_virtual))
            abort();
    } else {
        const char *format = NULL;
        uint64_t vs = 0;
        rc = image_probe_format(in, size - 1, &format, &err);
        if (rc == 0 && !strcmp(format, "qcow2"))
            rc = image_check_qcow2_header(in, size - 1, &lim, &vs, &err);
        if (rc == 0 && vs > lim.max_virtual)
            abort();
    }
    if (rc < 0 && (err.code != EM_EXIT_USAGE || !err.msg[0] || strchr(err.msg, '\n')))
        abort(); /* every refusal: one line, an input error */
    free(in);
    return 0;
}

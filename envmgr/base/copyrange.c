#include "envmgr/base/copyrange.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 20)

/* All of buf to out at *off (or its position): a short write to a regular file means a full disk. */
static int write_all(int out, off_t *off, const char *buf, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t w = off ? pwrite(out, buf + done, n - done, *off + (off_t)done) : write(out, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        done += (size_t)w;
    }
    if (off)
        *off += (off_t)n;
    return 0;
}

ssize_t copy_range(int in, off_t *in_off, int out, off_t *out_off, size_t len)
{
    ssize_t r = copy_file_range(in, in_off, out, out_off, len, 0);
    if (r >= 0 || (errno != EXDEV && errno != EOPNOTSUPP && errno != ENOSYS))
        return r;
    size_t n = len < CHUNK ? len : CHUNK;
    char *buf = malloc(n);
    if (!buf)
        return -1;
    r = in_off ? pread(in, buf, n, *in_off) : read(in, buf, n);
    if (r > 0 && write_all(out, out_off, buf, (size_t)r) < 0)
        r = -1;
    else if (r > 0 && in_off)
        *in_off += r;
    int saved = errno;
    free(buf);
    errno = saved;
    return r;
}

#include "trace_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/util.h"

int read_regular_capped(const char *path, size_t max, bool follow, char **data, size_t *len, em_err *err)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW);
    _cleanup_close_ int fd = open(path, flags);
    if (fd < 0 && errno == ELOOP && !follow)
        return em_fail_input(err, "`%s` is a symbolic link (refused)", path);
    if (fd < 0)
        return em_fail_errno(err, "open `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return em_fail_errno(err, "stat `%s`", path);
    if (!S_ISREG(st.st_mode))
        return em_fail_input(err, "`%s` is not a regular file", path);
    if ((uintmax_t)st.st_size > max)
        return em_fail_input(err, "`%s` is %lld bytes, more than the limit of %zu", path, (long long)st.st_size,
                             max);
    /* Read to EOF rather than trusting st_size: the file may change under us. */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    _cleanup_free_ char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max)
                return em_fail_input(err, "`%s` grew past the limit of %zu bytes", path, max);
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return em_fail_errno(err, "read `%s`", path);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > max)
        return em_fail_input(err, "`%s` grew past the limit of %zu bytes", path, max);
    buf[n] = '\0';
    *data = buf;
    buf = NULL;
    if (len)
        *len = n;
    return 0;
}

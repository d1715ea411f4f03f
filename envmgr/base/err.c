#include "envmgr/base/err.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int vfail(em_err *err, int code, int errnum, const char *fmt, va_list ap)
{
    if (!err)
        return -1;
    err->code = code;
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (errnum && n >= 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
    return -1;
}

int em_fail(em_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, EM_EXIT_FAIL, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int em_fail_errno(em_err *err, const char *fmt, ...)
{
    int saved = errno;
    va_list ap;
    va_start(ap, fmt);
    vfail(err, EM_EXIT_FAIL, saved, fmt, ap);
    va_end(ap);
    errno = saved;
    return -1;
}

int em_fail_input(em_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(err, EM_EXIT_USAGE, 0, fmt, ap);
    va_end(ap);
    return -1;
}

int em_fail_nomem(em_err *err, size_t n, const char *what)
{
    if (!err)
        return -1;
    err->code = EM_EXIT_NOMEM;
    snprintf(err->msg, sizeof err->msg, "out of memory: cannot allocate %zu bytes for %s", n, what);
    return -1;
}

int em_prefix(em_err *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char old[EM_ERR_MAX];
    memcpy(old, err->msg, sizeof old);
    old[EM_ERR_MAX - 1] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->msg) {
        size_t room = sizeof err->msg - (size_t)n - 1, len = strlen(old);
        memcpy(err->msg + n, old, len < room ? len : room);
        err->msg[n + (int)(len < room ? len : room)] = '\0';
    }
    return -1;
}

void em_err_clear(em_err *err)
{
    if (err) {
        err->code = 0;
        err->msg[0] = '\0';
    }
}

/* Error reporting: every call that can fail takes an em_err out-parameter and
 * returns a negative status; the message carries the context a user needs
 * ("qmp: connect `/run/x/qmp.sock`: No such file or directory"). */
#ifndef ENVMGR_ERR_H
#define ENVMGR_ERR_H

#include <stdarg.h>
#include <stddef.h>

#define EM_ERR_MAX 1024

/* Exit codes shared by every command so scripts can tell bad input from a broken env. */
enum {
    EM_EXIT_OK = 0,
    EM_EXIT_FAIL = 1,   /* the env or the host failed */
    EM_EXIT_USAGE = 2,  /* bad input: nothing was changed */
    EM_EXIT_NOMEM = 3,  /* the host had no memory for a guest- or client-sized buffer (try_malloc): the
                         * request failed, the process lives on; retry later */
};

typedef struct em_err {
    int code;           /* EM_EXIT_* the CLI should exit with */
    char msg[EM_ERR_MAX];
} em_err;

/* Set the message and return -1, so call sites read `return em_fail(err, ...)`. */
int em_fail(em_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, with ": strerror(errno)" appended. */
int em_fail_errno(em_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bad user input: exit code EM_EXIT_USAGE. */
int em_fail_input(em_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix an existing message with more context ("up e1: " + old). */
int em_prefix(em_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Out of memory for n bytes of what ("out of memory: cannot allocate 1073741824 bytes for a PNG's
 * pixels"): code EM_EXIT_NOMEM. */
int em_fail_nomem(em_err *err, size_t n, const char *what);
void em_err_clear(em_err *err);

#endif

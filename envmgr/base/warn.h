/* The library's one way to say something that is not an error: a warning, a note of progress.
 * Modelled on crun's libcrun_warning: a settable function pointer whose default writes the
 * line to stderr, so a program that embeds the library (envmgr serve, a suite worker) can route
 * or silence what the library says without the library knowing where it goes.
 *
 * Messages are one line, without the trailing newline (the sink adds it); they keep their own
 * prefix ("envmgr: ...", "suite: ..."). EM_LOG_PROGRESS is the exception: a terminal progress
 * line written as is (it starts with '\r' and has no newline); a sink that logs may drop it. */
#ifndef ENVMGR_WARN_H
#define ENVMGR_WARN_H

#include <stdarg.h>

typedef enum em_log_level {
    EM_LOG_ERROR,    /* something failed and the library went on without it */
    EM_LOG_WARNING,  /* something the operator should know: a setting ignored, a fallback taken */
    EM_LOG_INFO,     /* what happened: an env up, a golden state built */
    EM_LOG_PROGRESS, /* a progress line for a terminal: no newline added */
} em_log_level;

#define EM_WARN_LINE_MAX 2048 /* longer messages are cut (on a UTF-8 boundary is not promised) */

/* A sink gets the formatted message (no trailing newline, except as the caller wrote it). */
typedef void (*em_warn_fn)(em_log_level level, const char *msg, void *arg);

/* Install fn (NULL: the default, stderr). Set it before starting threads; the sink itself may
 * be called from any thread, so a sink that shares state locks it. */
void em_warn_set(em_warn_fn fn, void *arg);
/* The sink now set, so a caller that installs its own for a while can put it back. */
void em_warn_get(em_warn_fn *fn, void **arg);
/* The default sink: msg and a newline to stderr in one write (progress: msg as is, flushed). */
void em_warn_stderr(em_log_level level, const char *msg, void *arg);
/* The name of a level ("error", "warning", "info", "progress"). */
const char *em_log_level_name(em_log_level level);

void em_log(em_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void em_vlog(em_log_level level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Shorthands: em_log(EM_LOG_WARNING, ...) and em_log(EM_LOG_INFO, ...). */
void em_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void em_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

#include "envmgr/base/warn.h"

#include <stdio.h>
#include <string.h>

static em_warn_fn sink = em_warn_stderr;
static void *sink_arg;

void em_warn_set(em_warn_fn fn, void *arg)
{
    sink = fn ? fn : em_warn_stderr;
    sink_arg = fn ? arg : NULL;
}

void em_warn_get(em_warn_fn *fn, void **arg)
{
    *fn = sink;
    *arg = sink_arg;
}

void em_warn_stderr(em_log_level level, const char *msg, void *arg)
{
    if (level == EM_LOG_PROGRESS) {
        fputs(msg, stderr);
        fflush(stderr);
        return;
    }
    fprintf(stderr, "%s\n", msg); /* one call: stdio's lock keeps the line whole among threads */
}

const char *em_log_level_name(em_log_level level)
{
    switch (level) {
    case EM_LOG_ERROR:
        return "error";
    case EM_LOG_WARNING:
        return "warning";
    case EM_LOG_INFO:
        return "info";
    case EM_LOG_PROGRESS:
        return "progress";
    }
    return "?";
}

void em_vlog(em_log_level level, const char *fmt, va_list ap)
{
    /* On the stack: the library also warns when memory ran out. */
    char line[EM_WARN_LINE_MAX];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    if (level != EM_LOG_PROGRESS && n && line[n - 1] == '\n')
        line[n - 1] = '\0';
    sink(level, line, sink_arg);
}

void em_log(em_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    em_vlog(level, fmt, ap);
    va_end(ap);
}

void em_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    em_vlog(EM_LOG_WARNING, fmt, ap);
    va_end(ap);
}

void em_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    em_vlog(EM_LOG_INFO, fmt, ap);
    va_end(ap);
}

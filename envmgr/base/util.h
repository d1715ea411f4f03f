/* Small helpers every module uses: allocation that dies cleanly on OOM,
 * cleanup attributes so early returns free and close, time, files. */
#ifndef ENVMGR_UTIL_H
#define ENVMGR_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Allocation of small or fixed sizes: aborts the process when the host has no memory left (a
 * failure there leaves nothing sensible to do). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
/* Allocation of sizes a guest, a client or a file decides (guest replies, request bodies, file
 * reads, decoded images): each is bounded by a cap checked first, and a failure is an error
 * (em_fail_nomem, EM_EXIT_NOMEM), not an abort, so `envmgr serve` fails that request (503) and
 * keeps serving. NULL on failure; try_realloc then leaves p as it was. */
void *try_malloc(size_t n, const char *what, em_err *err);
void *try_realloc(void *p, size_t n, const char *what, em_err *err);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void cleanup_freep(void *p);
void cleanup_closep(int *fd);
void cleanup_fclosep(FILE **f);
#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_fclose_ __attribute__((cleanup(cleanup_fclosep)))

/* Monotonic milliseconds, for timeouts and measurements. */
double now_ms(void);
/* Wall clock as seconds since the epoch with sub-second precision. */
double wall_time(void);
/* ISO 8601 UTC timestamp into buf (at least 32 bytes). */
void iso8601_now(char *buf, size_t len);
void sleep_ms(double ms);



/* Read exactly n bytes / write all, with a deadline (monotonic ms); EINTR-safe. */
int read_full_deadline(int fd, void *buf, size_t n, double deadline, em_err *err);
int write_full(int fd, const void *buf, size_t n, em_err *err);
/* write_full for sockets: a peer that went away is an error, never a SIGPIPE. */
int send_full(int fd, const void *buf, size_t n, em_err *err);
/* send_full on a non-blocking socket: waits (at most wait_ms in all) for room while the peer has not read. */
int send_full_wait(int fd, const void *buf, size_t n, int wait_ms, em_err *err);
/* Wait until fd is readable; 0 ready, -1 error or timeout (message says which). */
int wait_readable(int fd, double deadline, em_err *err);

/* Connect to a unix stream socket, with a deadline for servers still starting. */
int unix_connect(const char *path, double timeout_ms, em_err *err);

/* SIGINT/SIGTERM set a flag instead of killing us, so every command can tear
 * down what it started; long waits call interrupted() and give up. */
void install_interrupt_handlers(void);
int interrupted(void);
int check_interrupt(em_err *err);

/* The process exists and is not a zombie (containers may run a PID 1 that never reaps). */
bool pid_running(pid_t pid);

/* A DNS name: labels of 1..63 letters, digits and '-', not starting or ending
 * with '-', no empty label, at most 253 bytes. lowercase_only: the canonical
 * form the egress proxy compares against. */
bool dns_name_valid(const char *h, bool lowercase_only);
/* http:// or https:// (case-insensitive scheme) with a host: a URL fetched on the host (an
 * asset), not a file shipped with a task. */
bool url_is_remote(const char *url);

int parse_int(const char *s, long min, long max, long *out);
/* n bytes as lowercase hex into out (2n + 1 bytes, NUL-terminated). */
void hex_encode(const void *data, size_t n, char *out);
int parse_double(const char *s, double *out);

/* Names of envs, images and tasks become path components: keep them boring. */
int check_name(const char *what, const char *name, em_err *err);

#endif

/* The worker side of a suite's pool (suite_pool.h): one process per env.
 *
 * Protocol over a socketpair, one JSON object a line:
 *   worker -> parent  {"type":"ready","up_s":S}          the env is up (a golden-state restore)
 *                     {"type":"fatal","error":"..."}     the env could not start; the worker exits
 *                     {"type":"result","job":J,"result":{...}}   the episode's result.json object
 *                     {"type":"log","level":"warning"|"error","text":"..."}   what the library said (also in its log)
 *   parent -> worker  {"type":"job","job":J,"task":PATH,"task_id":ID,"out":REL,"image":IMG,"attempt":A}
 *                     EOF: no more work; the worker takes its env down and exits
 * An episode that a signal interrupted is not reported (it was in flight). */
#ifndef ENVMGR_SUITE_WORKER_H
#define ENVMGR_SUITE_WORKER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/base/exit_cause.h"
#include "envmgr/base/linebuf.h"
#include "envmgr/suite/suite_pool.h"

/* A line channel over a non-blocking socket ({.fd = fd} is a ready one: the scanner starts on
 * the first fill). */
typedef struct suite_chan {
    int fd;
    linebuf in;
    bool eof;
} suite_chan;

/* One line (compact JSON + newline); -1 when the peer is gone. */
int suite_chan_send(int fd, json_t *msg);
/* Read whatever is there; EOF, an error or a flood past 8 MiB without a newline sets eof. */
void suite_chan_fill(suite_chan *c);
/* The next complete line that is a JSON object, or NULL. */
json_t *suite_chan_next(suite_chan *c);
/* Free what it buffered (the fd is the caller's). */
void suite_chan_release(suite_chan *c);
/* The text of a worker's {"type":"log"} message as the pool prints it on the operator's terminal:
 * it may quote a guest, so controls, bidi overrides and invalid UTF-8 become visible escapes, and
 * at most SUITE_LOG_TEXT_MAX bytes are taken. Never NULL; caller frees. */
#define SUITE_LOG_TEXT_MAX 1000
char *suite_log_text(json_t *msg);

typedef struct suite_worker_ctx {
    const pool_opts *o;
    const char *dir;    /* absolute run directory */
    const char *accel;  /* resolved: kvm or tcg */
    char name[64];      /* the env: suite-<parent pid>-<k> */
} suite_worker_ctx;

/* The worker's life: boot the env, run jobs until EOF or a signal, take the
 * env down. Returns the process's exit status. fd: its end of the socketpair. */
int suite_worker_main(const suite_worker_ctx *w, int fd, const char *first_image);

/* A result.json-shaped object for an episode that produced none. */
json_t *suite_synth_result(const char *task_id, exit_cause cause, const char *reason, double total_s);

#endif

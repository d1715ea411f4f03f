/* Newline-delimited JSON over a stream socket: the framing QMP and the QEMU
 * guest agent share. A reply larger than the cap is refused, not buffered. */
#ifndef ENVMGR_JSONLINE_H
#define ENVMGR_JSONLINE_H

#include <jansson.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/base/linebuf.h"

typedef struct jsonline {
    int fd;
    const char *label; /* for messages: the socket path */
    linebuf in;
} jsonline;

#define JSONLINE_VALUES_MAX 65536u /* values in one reply: bounds what parsing it can allocate */
void jsonline_init(jsonline *c, int fd, const char *label, size_t max_line);
void jsonline_release(jsonline *c); /* frees the buffer; closes fd */
/* Next JSON object, skipping bytes up to and including a 0xFF if skip_to_ff. */
int jsonline_read(jsonline *c, double deadline_ms, json_t **msg, em_err *err);
/* Drop buffered bytes up to the first 0xFF (guest-sync-delimited); 0 when found. */
int jsonline_skip_to_ff(jsonline *c, double deadline_ms, em_err *err);
/* Send one object followed by a newline; fd >= 0 travels with it (SCM_RIGHTS). */
int jsonline_send(jsonline *c, json_t *msg, int fd, em_err *err);

#endif

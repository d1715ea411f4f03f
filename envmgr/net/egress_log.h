/* The egress log: one JSON object per line, one line per egress attempt
 * (see docs/security.md for the fields). The proxy appends with one write()
 * per line on an O_APPEND descriptor, so readers (the episode runner, `envmgr
 * net log`, the egress_log getter) see whole lines or nothing of a line. */
#ifndef ENVMGR_EGRESS_LOG_H
#define ENVMGR_EGRESS_LOG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define EGRESS_LOG_MAX ((uint64_t)64 << 20) /* bytes per env life; later refusals are counted, not written */
/* Was this event a connection the proxy let through (verdict "allowed")? Those are always kept. */
bool egress_event_allowed(json_t *event);
#define EGRESS_LOG_HARD_MAX (4 * EGRESS_LOG_MAX) /* allowed connections are written up to this */
#define EGRESS_LINE_MAX (64u * 1024)        /* a longer line is skipped by readers */

typedef struct egress_log egress_log;

int egress_log_open(const char *path, egress_log **out, em_err *err);
/* Writes a last line counting the events the size cap dropped, if any. */
void egress_log_close(egress_log *l);
/* Append one event (borrowed). Thread-safe. */
void egress_log_write(egress_log *l, json_t *event);

/* An episode's copy of its egress events, in its artifact folder: a leading dot, so no vm_file
 * dest (sanitized names never start with one) can overwrite it. */
#define EGRESS_ARTIFACT ".egress.jsonl"

/* Complete lines of path from byte *offset on, at most max events, appended
 * to the array *events (created when NULL); *offset moves past the lines
 * consumed. A missing file has no events. Lines that are not JSON objects
 * are skipped. */
int egress_log_read(const char *path, uint64_t *offset, size_t max, json_t **events, em_err *err);
/* Current size of the log (0 when missing). */
uint64_t egress_log_size(const char *path);

#endif

/* Internal: the pieces of the trace format that the writer, the reader and
 * the verifier share, so all three agree on what a valid trace is. */
#ifndef ENVMGR_RECORDER_TRACE_FORMAT_H
#define ENVMGR_RECORDER_TRACE_FORMAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/base/linebuf.h"

#define TRACE_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
/* Caps on strings inside lines (bytes). */
#define TRACE_MAX_ID 256         /* task_id, versions, names */
#define TRACE_MAX_TEXT (64 << 10) /* reason, error */

/* ---- splitting trace.jsonl into lines ---- */

typedef struct trace_scan {
    linebuf in; /* over the caller's text */
    int lineno; /* of the line last returned, 1-based */
} trace_scan;

void trace_scan_init(trace_scan *s, const char *data, size_t len);
/* 1 and the next line (without its newline) in *line and *n, 0 at the end, -1
 * when a line is too long, there are too many or the last one is cut off. */
int trace_scan_next(trace_scan *s, const char **line, size_t *n, em_err *err);
/* One line → a JSON object (new reference); messages name the line. */
int trace_line_parse(const char *line, size_t n, int lineno, json_t **out, em_err *err);

/* ---- what each line must hold, and in which order ---- */

typedef enum { TL_HEADER, TL_SETUP, TL_STEP, TL_POSTCONFIG, TL_EGRESS, TL_EVALUATION, TL_TRAILER } trace_line_type;

typedef struct trace_schema {
    int lines;  /* lines accepted so far */
    int format; /* the header's */
    size_t setups, steps, postconfig, egress;
    bool have_eval, have_trailer;
} trace_schema;

/* Check `line` as line number schema->lines + 1 and, when it passes, count
 * it. Errors are "trace.jsonl line N: ..." (EM_EXIT_USAGE). */
int trace_schema_check(trace_schema *st, json_t *line, trace_line_type *type, em_err *err);

/* ---- the HMAC key ---- */

/* 1 and a copy of the key (free with trace_key_free), 0 when the variable is
 * unset, -1 when it is empty or longer than TRACE_KEY_MAX. */
int trace_key_from_env(char **key, size_t *len, em_err *err);
void trace_key_free(char *key, size_t len);

/* ---- files ---- */

/* dir/trace.jsonl, whole, within TRACE_MAX_BYTES. */
int trace_load(const char *dir, char **data, size_t *len, em_err *err);

#endif

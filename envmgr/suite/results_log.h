/* DIR/results.jsonl: one JSON object a line, one line per finished episode
 * (and per attempt that ended in env_error before a retry). Only one process
 * writes it (the suite's parent), each line with a single write() followed
 * by fsync, so a crash (even kill -9 or a power cut) can at worst leave a
 * partial last line, which results_open_append cuts off before appending
 * again and results_read never returns. */
#ifndef ENVMGR_RESULTS_LOG_H
#define ENVMGR_RESULTS_LOG_H

#include <jansson.h>
#include <stddef.h>

#include "envmgr/base/err.h"

#define RESULTS_MAX_BYTES ((size_t)256 << 20)
#define RESULTS_LINE_MAX ((size_t)1 << 20)

/* Open (creating it 0644) for appending; a partial last line is cut off
 * first and *dropped says how many bytes that was. */
int results_open_append(const char *path, int *fd, size_t *dropped, em_err *err);
/* Append one line: compact JSON + '\n' in one write(), then fsync. */
int results_append(int fd, json_t *line, em_err *err);
/* Every complete line that is a JSON object with a string task_id, in file
 * order (a missing file is an empty list). *skipped counts the others. */
int results_read(const char *path, json_t **lines, size_t *skipped, em_err *err);
/* The episodes that are over: key (suite_episode_key) -> the last line of
 * that episode marked final (a line without "final" counts as final). */
json_t *results_final(json_t *lines);

#endif

/* A JSON document written to a file atomically: every state and report file envmgr writes. */
#ifndef ENVMGR_BASE_JSON_SAVE_H
#define ENVMGR_BASE_JSON_SAVE_H

#include <jansson.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

/* json_dumps(j, flags) + a newline, replacing path atomically (write_file_atomic). A value
 * jansson cannot encode (NULL, invalid UTF-8 in a string, out of memory) is an error naming
 * path, not a crash. */
int json_save(const char *path, json_t *j, size_t flags, mode_t mode, em_err *err);

#endif

/* Internal: reading files a trace directory holds. The directory may come from
 * anywhere, so a file must be a regular file (not a FIFO that blocks open, not
 * a device that never ends) and no larger than the cap. */
#ifndef ENVMGR_RECORDER_TRACE_IO_H
#define ENVMGR_RECORDER_TRACE_IO_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

/* Read path whole into *data (NUL-terminated, free()). follow=false refuses a
 * symbolic link as the last component. */
int read_regular_capped(const char *path, size_t max, bool follow, char **data, size_t *len, em_err *err);

#endif

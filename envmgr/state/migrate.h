/* Device state in and out of a QEMU through an fd passed over QMP (spawn=deny forbids exec:
 * URIs, and a QEMU running as an env's own user may not open envmgr's files by path). */
#ifndef ENVMGR_STATE_MIGRATE_H
#define ENVMGR_STATE_MIGRATE_H

#include "envmgr/base/err.h"
#include "envmgr/vm/qmp.h"

/* `migrate` (save) or `migrate-incoming` (restore) through fd, RAM shared with a file left out
 * (x-ignore-shared), and wait until it completes. */
int vm_migrate_fd(qmp *q, const char *command, int fd, em_err *err);

#endif

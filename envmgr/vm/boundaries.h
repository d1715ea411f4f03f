/* Which boundaries a running QEMU is actually under, read from the process itself (its command
 * line, credentials and cgroups in /proc), not from what envmgr meant to start: what a trace and
 * `envmgr ls --json` record so a result can show which boundary held. */
#ifndef ENVMGR_VM_BOUNDARIES_H
#define ENVMGR_VM_BOUNDARIES_H

#include <jansson.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

/* {"qemu_sandbox": "on,obsolete=deny,...", "netdev": "user,...", "uid": 0, "user": "root",
 *  "cgroup": {"memory": {"path": "/...", "limit_bytes": null}, "pids": {...}, "cpu": {...}}}
 * A field that cannot be read is null. */
int vm_boundaries(pid_t pid, json_t **out, em_err *err);
/* The real, effective, saved and file-system user ids of process pid, from its status (its
 * /proc folder is root's once it changed ids). -1 when it is gone or unreadable. */
int vm_proc_uids(pid_t pid, unsigned long ids[4]);

#endif

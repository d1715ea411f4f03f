/* QEMU's own log (`qemu.log`), capped: QEMU writes its messages to a pipe, and a small keeper
 * process (`envmgr __qemu-log RUN_DIR`, started beside QEMU) copies them to the file up to
 * VM_LOG_MAX bytes, then says so once and drops the rest. A guest that makes QEMU print (a
 * virtio device it keeps breaking, say) cannot fill the host's disk, and QEMU never blocks on
 * its log. */
#ifndef ENVMGR_VM_QEMU_LOG_H
#define ENVMGR_VM_QEMU_LOG_H

#define VM_LOG_MAX (4u << 20)

#include <stddef.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

/* Start the keeper of run directory dir's QEMU log (the previous one becomes `qemu.log.prev`), in
 * the cgroups whose cgroup.procs fds are cg: *wfd is the pipe's end for QEMU's stdout and stderr
 * (close it once QEMU has it), *pid the keeper's. */
int vm_log_keeper_start(const char *dir, const int *cg, size_t ncg, int *wfd, pid_t *pid, em_err *err);
/* Wait (briefly) for a keeper whose QEMU is gone, so the log holds QEMU's last words. */
void vm_log_keeper_wait(pid_t pid);

/* The keeper: stdin is QEMU's stderr, stdout the log file. Runs as the env's user (after reading
 * RUN_DIR's) until every writer is gone. Returns the exit status. */
int vm_log_keeper_main(const char *dir);

#endif

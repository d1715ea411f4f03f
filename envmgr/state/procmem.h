/* A running QEMU's guest memory seen from the host, for saved states: which pages of its RAM
 * mapping the guest wrote, and reading or writing them, through /proc/PID/{maps,pagemap,mem}.
 * An env's RAM is a private mapping of the golden RAM file, so a page the guest wrote is an
 * anonymous copy and every other page is still the file's: pagemap tells them apart without
 * reading a byte. The kernel lets only a process that may ptrace QEMU do this: root (which
 * envmgr is when QEMU runs as an env user of its own), or QEMU's own user when
 * kernel.yama.ptrace_scope is 0 (QEMU is not our child). A refusal is an error saying so. */
#ifndef ENVMGR_STATE_PROCMEM_H
#define ENVMGR_STATE_PROCMEM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

typedef struct procmem procmem;

int procmem_open(pid_t pid, procmem **out, em_err *err);
void procmem_close(procmem *m);
/* Where the process maps `file` (the same inode) from offset 0, len bytes long. */
int procmem_find_mapping(procmem *m, const char *file, uint64_t len, uint64_t *addr, em_err *err);
/* The pages of [addr, addr + pages * 4096) that are no longer the file's: written (an anonymous
 * copy) or swapped out. *idx (malloc'd) lists their numbers, in order. */
int procmem_written_pages(procmem *m, uint64_t addr, uint64_t pages, uint64_t **idx, size_t *n, em_err *err);
int procmem_read(procmem *m, uint64_t addr, void *buf, size_t len, em_err *err);
/* Many pieces in few calls (process_vm_readv/writev, IOV_MAX pieces each): piece i is p[i].len
 * bytes at p[i].addr in the process and at p[i].local here. */
typedef struct procmem_piece {
    uint64_t addr;
    void *local;
    size_t len;
} procmem_piece;
int procmem_readv(procmem *m, const procmem_piece *p, size_t n, em_err *err);
int procmem_writev(procmem *m, const procmem_piece *p, size_t n, em_err *err);

#endif

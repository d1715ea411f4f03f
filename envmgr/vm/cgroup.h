/* Each env's QEMU (and its egress proxy and relays) in a cgroup of its own, so a guest cannot
 * take more of the host than its limits: memory, processes and CPU.
 *
 * cgroup v2 where the host has its controllers, else the v1 controllers it mounts (memory, pids,
 * cpu). The env's cgroup sits below the cgroup envmgr itself runs in (per controller), in a
 * folder `envmgr/`, named after a hash of the env's run directory (unique per run directory, so
 * two run roots never share one). Where no cgroup can be had (not root, nothing mounted or
 * writable), QEMU runs without one: envmgr says so once per process, and the env's recorded
 * boundaries show the limits it inherited. ENVMGR_CGROUP=off (operator only) skips them. */
#ifndef ENVMGR_VM_CGROUP_H
#define ENVMGR_VM_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define VM_CGROUP_MAX_FDS 4

typedef struct vm_cgroup_limits {
    uint64_t memory_bytes; /* RAM + page cache charged to the env */
    unsigned pids;         /* processes and threads */
    unsigned cpu_percent;  /* of one core */
    bool restoring;        /* a restore: the CPU goes to it first until vm_cgroup_restored */
} vm_cgroup_limits;

/* The limits for a guest of memory_mb and cpus vCPUs: its RAM plus QEMU's own (TCG's code
 * buffer, device state, VNC) plus the proxy; pids for QEMU's threads and one relay per open
 * guest connection; a core per vCPU plus half of one for QEMU's I/O and display threads. */
void vm_cgroup_limits_for(int memory_mb, int cpus, vm_cgroup_limits *out);

/* Create (or reuse) the cgroup of run directory dir with lim and open its cgroup.procs files:
 * fds[0..*nfds) are for spawn_opts.join_fds (close them after the spawn). *nfds is 0 when no
 * cgroup could be had; that is not an error (said once on stderr). -1 only for a cgroup that
 * exists but refuses its limits. */
int vm_cgroup_prepare(const char *dir, const vm_cgroup_limits *lim, int fds[VM_CGROUP_MAX_FDS], size_t *nfds,
                      em_err *err);
/* A restore is what an agent or trainer waits for, and its QEMU is a short burst of CPU (start,
 * device state, the first frames), where a running guest is throughput: while restoring, the env's
 * cgroup has ten times the CPU weight of a running one (cpu.shares, cpu.weight), so a neighbour's
 * busy vCPU does not stretch the restore's tail. This puts it back to a running guest's weight once
 * the guest runs (best effort: an env without a cgroup has nothing to put back). */
void vm_cgroup_restored(const char *dir);
/* Remove the cgroup of dir once its processes are gone (waits up to a second for them). */
void vm_cgroup_remove(const char *dir);
/* Remove every env cgroup with no process in it (a run directory removed by hand, a reboot's
 * leftovers are not, but a crash's are), except one an env of the run root still has (its next QEMU
 * joins it); returns how many (would be) removed. */
int vm_cgroup_orphans(bool dry_run);

#endif

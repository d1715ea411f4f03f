/* What the host allows a suite: how many envs to run at once by default
 * (cores and memory), and the memory an env's QEMU actually uses. */
#ifndef ENVMGR_SUITE_HOST_H
#define ENVMGR_SUITE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

/* QEMU, its worker and the agent beside the guest's RAM, per env (MiB). */
#define SUITE_ENV_OVERHEAD_MIB 300
/* Keep this share of the available memory for everything else. */
#define SUITE_MEM_RESERVE 0.15

typedef struct host_facts {
    int cores;             /* CPUs this process may run on (affinity: a Slurm allocation counts) */
    double mem_total_mib;
    double mem_avail_mib;  /* MemAvailable */
} host_facts;

int host_read(host_facts *h, em_err *err);

/* The default --envs: the smaller of what the cores allow (under TCG a busy
 * env keeps a core per vCPU busy; under KVM it mostly waits, so two vCPUs per
 * core) and what the memory allows (guest RAM + overhead each, a reserve
 * kept), at least 1 and at most the episodes to run. why gets a one-line
 * explanation. */
int suite_default_envs(const host_facts *h, int guest_memory_mb, int guest_cpus, bool kvm, size_t episodes, char *why,
                       size_t len);

/* Rss and Pss of a process in KiB (from /proc/PID/smaps_rollup); -1 when gone. */
int suite_proc_mem(pid_t pid, long *rss_kib, long *pss_kib);

#endif

#include "envmgr/suite/suite_host.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/util.h"

int host_read(host_facts *h, em_err *err)
{
    memset(h, 0, sizeof *h);
    cpu_set_t set;
    h->cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (h->cores < 1)
        h->cores = 1;
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return em_fail_errno(err, "open /proc/meminfo");
    char line[256];
    long v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %ld kB", &v) == 1)
            h->mem_total_mib = (double)v / 1024;
        else if (sscanf(line, "MemAvailable: %ld kB", &v) == 1)
            h->mem_avail_mib = (double)v / 1024;
    }
    fclose(f);
    if (h->mem_total_mib <= 0)
        return em_fail(err, "/proc/meminfo: no MemTotal");
    return 0;
}

int suite_default_envs(const host_facts *h, int guest_memory_mb, int guest_cpus, bool kvm, size_t episodes, char *why,
                       size_t len)
{
    int vcpus = guest_cpus > 0 ? guest_cpus : 1;
    int by_cpu = (kvm ? 2 * h->cores : h->cores) / vcpus;
    if (by_cpu < 1)
        by_cpu = 1;
    double per_env = (double)guest_memory_mb + SUITE_ENV_OVERHEAD_MIB;
    int by_mem = (int)(h->mem_avail_mib * (1 - SUITE_MEM_RESERVE) / per_env);
    int n = by_cpu < by_mem ? by_cpu : by_mem;
    if (n < 1)
        n = 1;
    if (episodes && (size_t)n > episodes)
        n = (int)episodes;
    if (why)
        snprintf(why, len,
                 "%d core%s -> %d busy %s env%s of %d vCPU%s; %.1f GiB available / ~%.1f GiB per env -> %d%s",
                 h->cores, h->cores == 1 ? "" : "s", by_cpu, kvm ? "KVM" : "TCG", by_cpu == 1 ? "" : "s", vcpus,
                 vcpus == 1 ? "" : "s",
                 h->mem_avail_mib / 1024, per_env / 1024, by_mem < 0 ? 0 : by_mem,
                 episodes && (size_t)(by_cpu < by_mem ? by_cpu : by_mem) > episodes ? "; capped at the episodes to run"
                                                                                    : "");
    return n;
}

int suite_proc_mem(pid_t pid, long *rss_kib, long *pss_kib)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "re");
    *rss_kib = *pss_kib = -1;
    if (!f)
        return -1;
    long v;
    while (fgets(buf, sizeof buf, f)) {
        if (sscanf(buf, "Rss: %ld kB", &v) == 1)
            *rss_kib = v;
        else if (sscanf(buf, "Pss: %ld kB", &v) == 1)
            *pss_kib = v;
    }
    fclose(f);
    return *rss_kib >= 0 ? 0 : -1;
}

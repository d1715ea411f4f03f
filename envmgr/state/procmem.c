#include "envmgr/state/procmem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "envmgr/base/util.h"

#define PAGE 4096u
#define PM_PRESENT (UINT64_C(1) << 63)
#define PM_SWAPPED (UINT64_C(1) << 62)
#define PM_FILE (UINT64_C(1) << 61) /* a page cache page (or shared anonymous): not written */
#define PAGEMAP_CHUNK 65536         /* entries read at once (512 KiB) */
#define IOV_BATCH 1024              /* pieces per process_vm_readv/writev (IOV_MAX) */

struct procmem {
    pid_t pid;
    int mem, pagemap;
};

static int refused(pid_t pid, const char *what, em_err *err)
{
    int e = errno;
    em_fail_errno(err, "open /proc/%d/%s", (int)pid, what);
    if (e == EACCES || e == EPERM)
        em_prefix(err, "reading the guest's memory needs the right to ptrace its QEMU (envmgr as root, or as "
                       "QEMU's user with kernel.yama.ptrace_scope=0): ");
    return -1;
}

int procmem_open(pid_t pid, procmem **out, em_err *err)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDWR | O_CLOEXEC);
    if (mem < 0)
        return refused(pid, "mem", err);
    snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
    int pagemap = open(path, O_RDONLY | O_CLOEXEC);
    if (pagemap < 0) {
        refused(pid, "pagemap", err);
        close(mem);
        return -1;
    }
    procmem *m = xcalloc(1, sizeof *m);
    m->pid = pid;
    m->mem = mem;
    m->pagemap = pagemap;
    *out = m;
    return 0;
}

void procmem_close(procmem *m)
{
    if (!m)
        return;
    close(m->mem);
    close(m->pagemap);
    free(m);
}

int procmem_find_mapping(procmem *m, const char *file, uint64_t len, uint64_t *addr, em_err *err)
{
    struct stat st;
    if (stat(file, &st) < 0)
        return em_fail_errno(err, "stat `%s`", file);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)m->pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return refused(m->pid, "maps", err);
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        uint64_t start, end, off, ino;
        unsigned maj, mnr;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %x:%x %" SCNu64, &start, &end, &off, &maj, &mnr,
                   &ino) != 6)
            continue;
        if (ino == (uint64_t)st.st_ino && maj == major(st.st_dev) && mnr == minor(st.st_dev) && off == 0 &&
            end - start == len) {
            *addr = start;
            return 0;
        }
    }
    return em_fail(err, "QEMU pid %d does not map `%s` (%" PRIu64 " MiB) as its guest RAM", (int)m->pid, file,
                   len >> 20);
}

int procmem_written_pages(procmem *m, uint64_t addr, uint64_t pages, uint64_t **idx, size_t *n, em_err *err)
{
    *idx = NULL;
    *n = 0;
    _cleanup_free_ uint64_t *buf = xmalloc(PAGEMAP_CHUNK * sizeof *buf);
    uint64_t *out = NULL;
    size_t count = 0, cap = 0;
    for (uint64_t first = 0; first < pages; first += PAGEMAP_CHUNK) {
        uint64_t want = pages - first < PAGEMAP_CHUNK ? pages - first : PAGEMAP_CHUNK;
        off_t at = (off_t)((addr / PAGE + first) * sizeof *buf);
        ssize_t r = pread(m->pagemap, buf, want * sizeof *buf, at);
        if (r != (ssize_t)(want * sizeof *buf)) {
            free(out);
            return r < 0 ? em_fail_errno(err, "read /proc/%d/pagemap", (int)m->pid)
                         : em_fail(err, "read /proc/%d/pagemap: short read", (int)m->pid);
        }
        for (uint64_t i = 0; i < want; i++) {
            bool written = (buf[i] & PM_SWAPPED) || ((buf[i] & PM_PRESENT) && !(buf[i] & PM_FILE));
            if (!written)
                continue;
            if (count == cap) {
                cap = cap ? cap * 2 : 4096;
                out = xrealloc(out, cap * sizeof *out);
            }
            out[count++] = first + i;
        }
    }
    *idx = out;
    *n = count;
    return 0;
}

int procmem_read(procmem *m, uint64_t addr, void *buf, size_t len, em_err *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(m->mem, (char *)buf + done, len - done, (off_t)(addr + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? em_fail_errno(err, "read QEMU pid %d's memory at 0x%" PRIx64, (int)m->pid, addr + done)
                         : em_fail(err, "read QEMU pid %d's memory at 0x%" PRIx64 ": nothing mapped", (int)m->pid,
                                   addr + done);
        done += (size_t)r;
    }
    return 0;
}

static int procmem_write(procmem *m, uint64_t addr, const void *buf, size_t len, em_err *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t r = pwrite(m->mem, (const char *)buf + done, len - done, (off_t)(addr + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? em_fail_errno(err, "write QEMU pid %d's memory at 0x%" PRIx64, (int)m->pid, addr + done)
                         : em_fail(err, "write QEMU pid %d's memory at 0x%" PRIx64 ": nothing mapped",
                                   (int)m->pid, addr + done);
        done += (size_t)r;
    }
    return 0;
}

/* One batch through process_vm_readv/writev; whatever it did not move (a short count) goes piece
 * by piece through /proc/PID/mem, whose error names the address. */
static int batch(procmem *m, const procmem_piece *p, size_t n, bool write, em_err *err)
{
    struct iovec lo[IOV_BATCH], re[IOV_BATCH];
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        lo[i] = (struct iovec){p[i].local, p[i].len};
        re[i] = (struct iovec){(void *)(uintptr_t)p[i].addr, p[i].len};
        total += p[i].len;
    }
    ssize_t r = write ? process_vm_writev(m->pid, lo, n, re, n, 0) : process_vm_readv(m->pid, lo, n, re, n, 0);
    size_t done = r > 0 ? (size_t)r : 0;
    if (done == total)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (done >= p[i].len) {
            done -= p[i].len;
            continue;
        }
        uint64_t addr = p[i].addr + done;
        char *local = (char *)p[i].local + done;
        size_t len = p[i].len - done;
        done = 0;
        if ((write ? procmem_write(m, addr, local, len, err) : procmem_read(m, addr, local, len, err)) < 0)
            return -1;
    }
    return 0;
}

static int pieces(procmem *m, const procmem_piece *p, size_t n, bool write, em_err *err)
{
    for (size_t i = 0; i < n; i += IOV_BATCH)
        if (batch(m, p + i, n - i < IOV_BATCH ? n - i : IOV_BATCH, write, err) < 0)
            return -1;
    return 0;
}

int procmem_readv(procmem *m, const procmem_piece *p, size_t n, em_err *err) { return pieces(m, p, n, false, err); }

int procmem_writev(procmem *m, const procmem_piece *p, size_t n, em_err *err) { return pieces(m, p, n, true, err); }

#include "envmgr/state/savestate.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/copyrange.h"
#include "envmgr/base/util.h"
#include "envmgr/state/migrate.h"
#include "envmgr/vm/overlay.h"
#include "envmgr/state/procmem.h"
#include "envmgr/vm/qmp.h"
#include "envmgr/vm/vm.h"

#define PAGE RAMDELTA_PAGE
#define QMP_TIMEOUT_MS 10000.0
#define RUN_PAGES 256u  /* pages in one piece written (1 MiB) */
#define BATCH_PAGES 1024u /* pages read and compared at once (4 MiB) */
#define ZERO_PAGES 16u  /* a run of zero pages is written from this many at a time */
#define VGA_CLASS 0x0300 /* PCI class of a VGA controller */

static const uint8_t zero_page[PAGE];

/* ---- the VGA memory ---- */

/* Where QEMU keeps the VGA memory (host address in its process) and its size: the VGA device's
 * BAR 0, translated by the monitor. size 0: no VGA device. */
static int vga_memory(qmp *q, uint64_t *host, uint64_t *size, em_err *err)
{
    *host = *size = 0;
    json_t *ret = NULL;
    if (qmp_execute(q, "query-pci", NULL, QMP_TIMEOUT_MS, &ret, err) < 0)
        return em_prefix(err, "VGA memory: ");
    uint64_t gpa = 0;
    size_t i, j, k;
    json_t *bus, *dev, *r;
    json_array_foreach(ret, i, bus)
    {
        json_array_foreach(json_object_get(bus, "devices"), j, dev)
        {
            json_t *cls = json_object_get(json_object_get(dev, "class_info"), "class");
            if (json_integer_value(cls) != VGA_CLASS || *size)
                continue;
            json_array_foreach(json_object_get(dev, "regions"), k, r)
            {
                const char *type = json_string_value(json_object_get(r, "type"));
                json_int_t addr = json_integer_value(json_object_get(r, "address"));
                json_int_t len = json_integer_value(json_object_get(r, "size"));
                if (json_integer_value(json_object_get(r, "bar")) == 0 && type && !strcmp(type, "memory") &&
                    addr > 0 && len > 0 && len % PAGE == 0) {
                    gpa = (uint64_t)addr;
                    *size = (uint64_t)len;
                }
            }
        }
    }
    json_decref(ret);
    if (!*size)
        return 0;
    char cmd[64], *out = NULL;
    snprintf(cmd, sizeof cmd, "gpa2hva 0x%" PRIx64, gpa);
    if (qmp_hmp(q, cmd, QMP_TIMEOUT_MS, 1, &out, err) < 0)
        return em_prefix(err, "VGA memory: ");
    const char *is = out ? strstr(out, " is 0x") : NULL;
    bool ok = is && sscanf(is + 4, "%" SCNx64, host) == 1 && *host;
    free(out);
    return ok ? 0 : em_fail(err, "VGA memory: QEMU did not say where it keeps it (gpa2hva)");
}

/* ---- saving ---- */

/* The device state, through an fd QEMU gets in an fd set (it may not open our files by path),
 * then the (empty) description section QEMU's loader expects after the end: without it, every
 * restore logs "Expected vmdescription section". */
static int save_devices(qmp *q, const char *path, uint64_t *bytes, em_err *err)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return em_fail_errno(err, "create `%s`", path);
    json_t *ret = NULL;
    json_t *noargs = json_object();
    int rc = qmp_execute_with_fd(q, "add-fd", noargs, fd, QMP_TIMEOUT_MS, &ret, err);
    json_decref(noargs);
    if (rc < 0)
        return em_prefix(err, "device state: ");
    json_int_t set = json_integer_value(json_object_get(ret, "fdset-id"));
    json_decref(ret);
    char fdset[40];
    snprintf(fdset, sizeof fdset, "/dev/fdset/%lld", (long long)set);
    /* live=false: a live save would deactivate the disks for another QEMU to take over */
    json_t *args = json_pack("{s:s, s:b}", "filename", fdset, "live", 0);
    rc = qmp_execute(q, "xen-save-devices-state", args, QMP_TIMEOUT_MS, NULL, err);
    json_decref(args);
    args = json_pack("{s:I}", "fdset-id", (json_int_t)set);
    em_err ignored;
    qmp_execute(q, "remove-fd", args, QMP_TIMEOUT_MS, NULL, &ignored);
    json_decref(args);
    if (rc < 0)
        return em_prefix(err, "device state (xen-save-devices-state): ");
    static const uint8_t vmdesc[] = {0x06, 0, 0, 0, 2, '{', '}'}; /* QEMU_VM_VMDESCRIPTION, be32 size, JSON */
    struct stat st;
    if (lseek(fd, 0, SEEK_END) < 0 || write_full(fd, vmdesc, sizeof vmdesc, err) < 0 || fsync(fd) < 0 ||
        fstat(fd, &st) < 0)
        return em_fail_errno(err, "write `%s`", path);
    *bytes = (uint64_t)st.st_size;
    return 0;
}

typedef struct candidate {
    uint64_t page;
    const uint8_t *parent; /* the parent's view of the page */
} candidate;

/* The pages to compare: those the guest wrote, and those the chain holds (a page the guest put
 * back as it was in the golden file still differs from the parent's), in order. */
static candidate *candidates(const uint64_t *written, size_t nw, const ramdelta_page *inh, size_t ni,
                             const uint8_t *ram, size_t *n)
{
    candidate *c = xmalloc((nw + ni + 1) * sizeof *c);
    size_t a = 0, b = 0, m = 0;
    while (a < nw || b < ni) {
        uint64_t pa = a < nw ? written[a] : UINT64_MAX, pb = b < ni ? inh[b].page : UINT64_MAX;
        if (pb <= pa) {
            c[m].page = pb;
            c[m].parent = inh[b].data ? inh[b].data : zero_page;
            b++;
            a += pa == pb;
        } else {
            c[m].page = pa;
            c[m].parent = ram + pa * PAGE;
            a++;
        }
        m++;
    }
    *n = m;
    return c;
}

static int save_ram(procmem *pm, const golden *g, const char *ram_file, uint64_t ram_bytes, ramdelta *const *chain,
                    size_t n, ramdelta_writer *w, uint64_t *written, em_err *err)
{
    uint64_t addr, pages = ram_bytes / PAGE;
    if (procmem_find_mapping(pm, ram_file, ram_bytes, &addr, err) < 0)
        return -1;
    _cleanup_free_ uint64_t *idx = NULL;
    _cleanup_free_ ramdelta_page *inh = NULL;
    size_t nidx = 0, ninh = 0;
    if (procmem_written_pages(pm, addr, pages, &idx, &nidx, err) < 0 ||
        ramdelta_merge(chain, n, RAMDELTA_RAM, &inh, &ninh, err) < 0)
        return -1;
    *written = nidx;
    _cleanup_close_ int fd = open(g->ram, O_RDONLY | O_CLOEXEC);
    const uint8_t *ram = fd < 0 ? MAP_FAILED : mmap(NULL, ram_bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (ram == MAP_FAILED)
        return em_fail_errno(err, "map `%s`", g->ram);
    size_t nc = 0;
    _cleanup_free_ candidate *c = candidates(idx, nidx, inh, ninh, ram, &nc);
    _cleanup_free_ uint8_t *buf = xmalloc((size_t)BATCH_PAGES * PAGE);
    _cleanup_free_ procmem_piece *pc = xmalloc(BATCH_PAGES * sizeof *pc);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nc;) { /* a batch of candidates: read, then compared */
        size_t np = 0, first = i, got = 0;
        while (i < nc && got < BATCH_PAGES) {
            size_t run = 1; /* consecutive pages make one piece */
            while (i + run < nc && got + run < BATCH_PAGES && c[i + run].page == c[i].page + run)
                run++;
            pc[np++] = (procmem_piece){addr + c[i].page * PAGE, buf + got * PAGE, run * PAGE};
            got += run;
            i += run;
        }
        rc = procmem_readv(pm, pc, np, err);
        for (size_t k = 0; rc == 0 && k < got; k++)
            if (memcmp(buf + k * PAGE, c[first + k].parent, PAGE))
                rc = ramdelta_add(w, RAMDELTA_RAM, c[first + k].page, buf + k * PAGE, err);
    }
    munmap((void *)ram, ram_bytes);
    return rc;
}

/* The whole VGA memory, but its zero pages: a restore starts from zeros. */
static int save_vram(procmem *pm, uint64_t host, uint64_t size, ramdelta_writer *w, em_err *err)
{
    _cleanup_free_ uint8_t *buf = xmalloc((size_t)RUN_PAGES * PAGE);
    for (uint64_t off = 0; off < size; off += (uint64_t)RUN_PAGES * PAGE) {
        size_t len = size - off < (uint64_t)RUN_PAGES * PAGE ? (size_t)(size - off) : (size_t)RUN_PAGES * PAGE;
        if (procmem_read(pm, host + off, buf, len, err) < 0)
            return em_prefix(err, "VGA memory: ");
        for (size_t k = 0; k < len / PAGE; k++)
            if (!ramdelta_page_is_zero(buf + k * PAGE) &&
                ramdelta_add(w, RAMDELTA_VRAM, off / PAGE + k, buf + k * PAGE, err) < 0)
                return -1;
    }
    return 0;
}

/* The env's overlay as it is (QEMU is stopped: `stop` flushed qcow2's caches to the file). */
static int copy_disk(const char *env_dir, const char *dst, uint64_t *bytes, em_err *err)
{
    _cleanup_free_ char *src = xasprintf("%s/" VM_OVERLAY, env_dir);
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return em_fail_errno(err, "open `%s`", src);
    _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return em_fail_errno(err, "create `%s`", dst);
    uint64_t total = 0;
    for (;;) {
        ssize_t r = copy_range(in, NULL, out, NULL, 64u << 20);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return em_fail_errno(err, "copy `%s` to `%s`", src, dst);
        if (r == 0)
            break;
        total += (uint64_t)r;
    }
    if (fsync(out) < 0)
        return em_fail_errno(err, "fsync `%s`", dst);
    *bytes = total;
    return 0;
}

static int save_stopped(qmp *q, const golden *g, const manifest *m, const char *env_dir, pid_t pid,
                        const char *ram_file, ramdelta *const *chain, size_t n, const char *out_dir,
                        savestate_stats *st, em_err *err)
{
    _cleanup_free_ char *dev = xasprintf("%s/" SAVESTATE_DEVICES, out_dir);
    _cleanup_free_ char *ram = xasprintf("%s/" SAVESTATE_RAM, out_dir);
    _cleanup_free_ char *disk = xasprintf("%s/" SAVESTATE_DISK, out_dir);
    uint64_t ram_bytes = (uint64_t)m->memory_mb << 20, vhost, vsize;
    procmem *pm = NULL;
    if (save_devices(q, dev, &st->devices_bytes, err) < 0 || vga_memory(q, &vhost, &vsize, err) < 0 ||
        procmem_open(pid, &pm, err) < 0)
        return -1;
    ramdelta_writer *w = NULL;
    uint64_t pages[RAMDELTA_REGIONS] = {ram_bytes / PAGE, vsize / PAGE};
    int rc = ramdelta_create(ram, pages, &w, err);
    if (rc == 0)
        rc = save_ram(pm, g, ram_file, ram_bytes, chain, n, w, &st->written_pages, err);
    if (rc == 0 && vsize)
        rc = save_vram(pm, vhost, vsize, w, err);
    procmem_close(pm);
    if (rc < 0) {
        ramdelta_abort(w);
        return -1;
    }
    if (ramdelta_finish(w, &st->delta, err) < 0)
        return -1;
    return copy_disk(env_dir, disk, &st->disk_bytes, err);
}

int savestate_write(const golden *g, const manifest *m, const char *env_dir, pid_t pid, const char *ram_file,
                    ramdelta *const *chain, size_t n, const char *out_dir, savestate_stats *st, em_err *err)
{
    memset(st, 0, sizeof *st);
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, env_dir);
    qmp *q = NULL;
    char *status = NULL;
    if (qmp_open(sock, QMP_TIMEOUT_MS, &q, err) < 0)
        return em_prefix(err, "save: ");
    int rc = qmp_status(q, QMP_TIMEOUT_MS, &status, err);
    bool was_running = rc == 0 && !strcmp(status, "running");
    if (rc == 0 && !was_running && strcmp(status, "paused"))
        rc = em_fail(err, "the guest is `%s`, neither running nor paused: nothing to save", status);
    free(status);
    double t0 = now_ms();
    if (rc == 0 && was_running) {
        vm_mark_paused(env_dir, true); /* said by `ls` if this process is killed before it resumes the guest */
        rc = qmp_execute(q, "stop", NULL, QMP_TIMEOUT_MS, NULL, err);
    }
    if (rc == 0)
        rc = save_stopped(q, g, m, env_dir, pid, ram_file, chain, n, out_dir, st, err);
    if (was_running) { /* the guest runs again whatever happened */
        em_err cont_err;
        if (qmp_execute(q, "cont", NULL, QMP_TIMEOUT_MS, NULL, &cont_err) < 0 && rc == 0)
            rc = em_fail(err, "%s", cont_err.msg);
        else
            vm_mark_paused(env_dir, false);
    }
    st->paused_ms = now_ms() - t0;
    qmp_close(q);
    return rc < 0 ? em_prefix(err, "save: ") : 0;
}

/* ---- restoring ---- */

/* Write pages (in page order) at base: neighbours whose data is contiguous in the delta make one
 * piece, zero pages come from a buffer of zeros; the pieces go in batches. */
static int write_pages(procmem *pm, uint64_t base, const ramdelta_page *p, size_t n, em_err *err)
{
    static const uint8_t zeros[ZERO_PAGES * PAGE];
    procmem_piece *pc = xmalloc((n ? n : 1) * sizeof *pc);
    size_t np = 0;
    for (size_t i = 0; i < n;) {
        size_t run = 1;
        size_t cap = p[i].data ? RUN_PAGES : ZERO_PAGES;
        while (i + run < n && run < cap && p[i + run].page == p[i].page + run &&
               (p[i].data ? p[i + run].data == p[i].data + run * PAGE : !p[i + run].data))
            run++;
        pc[np++] = (procmem_piece){base + p[i].page * PAGE, (void *)(p[i].data ? p[i].data : zeros), run * PAGE};
        i += run;
    }
    int rc = procmem_writev(pm, pc, np, err);
    free(pc);
    return rc;
}

static int load_vram(qmp *q, procmem *pm, ramdelta *self, em_err *err)
{
    uint64_t pages = ramdelta_region_pages(self, RAMDELTA_VRAM), host, size;
    if (!pages)
        return 0;
    if (vga_memory(q, &host, &size, err) < 0)
        return -1;
    if (size != pages * PAGE)
        return em_fail(err, "the state's VGA memory is %" PRIu64 " MiB, this QEMU's %" PRIu64 " MiB",
                       (pages * PAGE) >> 20, size >> 20);
    _cleanup_free_ ramdelta_page *p = NULL;
    size_t np = 0;
    if (ramdelta_merge(&self, 1, RAMDELTA_VRAM, &p, &np, err) < 0)
        return -1;
    return write_pages(pm, host, p, np, err) < 0 ? em_prefix(err, "VGA memory: ") : 0;
}

int savestate_start(const manifest *m, const char *accel, const char *env_dir, const char *name, const char *state_dir,
                    const char *ram_file, ramdelta *self, pid_t *pid_out, em_err *err)
{
    uint64_t ram_bytes = (uint64_t)m->memory_mb << 20;
    struct stat rs;
    if (stat(ram_file, &rs) < 0)
        return em_fail_errno(err, "restore: `%s`", ram_file);
    if ((uint64_t)rs.st_size != ram_bytes || ramdelta_region_pages(self, RAMDELTA_RAM) != ram_bytes / PAGE)
        return em_fail(err, "restore: the state's RAM is not the image's %d MiB", m->memory_mb);
    _cleanup_free_ char *disk = xasprintf("%s/" SAVESTATE_DISK, state_dir);
    _cleanup_free_ char *dev = xasprintf("%s/" SAVESTATE_DEVICES, state_dir);
    _cleanup_free_ char *overlay = NULL, *sock = xasprintf("%s/" VM_QMP_SOCK, env_dir);
    _cleanup_close_ int fd = open(dev, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return em_fail_errno(err, "restore: open `%s`", dev);
    if (vm_overlay_place(env_dir, &overlay, err) < 0 || vm_create_overlay(disk, overlay, err) < 0)
        return em_prefix(err, "restore: ");
    vm_spec spec = {.image = m, .accel = accel, .dir = env_dir, .disk = overlay, .ram_file = ram_file,
                    .ram_shared = false, .incoming = true, .devices_only = true, .name = name};
    pid_t pid;
    if (vm_spawn(&spec, &pid, err) < 0)
        return em_prefix(err, "restore: ");
    procmem *pm = NULL;
    qmp *q = NULL;
    /* The RAM is already the state's (the flat file); the device state comes in over it. */
    int rc = qmp_open(sock, QMP_TIMEOUT_MS, &q, err);
    if (rc == 0)
        rc = procmem_open(pid, &pm, err);
    if (rc == 0)
        rc = vm_migrate_fd(q, "migrate-incoming", fd, err);
    /* The VGA memory once the device state mapped it; no display has drawn from it yet (no VNC
     * client is connected), so the first frame is the restored one. */
    if (rc == 0)
        rc = load_vram(q, pm, self, err);
    if (rc == 0)
        rc = qmp_execute(q, "cont", NULL, QMP_TIMEOUT_MS, NULL, err);
    qmp_close(q);
    procmem_close(pm);
    if (rc < 0) {
        em_err ignored;
        vm_stop(env_dir, pid, &ignored);
        return em_prefix(err, "restore: ");
    }
    *pid_out = pid;
    return 0;
}

/* Saved states without a guest: the RAM delta format (written, read back, merged along a chain,
 * damaged files refused), state.json and its chain, the integrity check (a changed byte is
 * refused), and which states eviction picks. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/owned.h"
#include "envmgr/base/util.h"
#include "envmgr/state/states.h"
#include "envmgr/state/ramdelta.h"
#include "envmgr/state/ramflat.h"
#include "envmgr/state/ramfs.h"
#include "envmgr/state/savestate.h"
#include "helpers/cunit_main.h"

static void fill(uint8_t *p, uint8_t v)
{
    memset(p, v, RAMDELTA_PAGE);
}

/* A delta of region RAM (8 pages) and VRAM (2): pages[i] gets byte vals[i] (0: a zero page). */
static void make_delta(const char *path, const uint64_t *pages, const uint8_t *vals, size_t n, int region)
{
    ramdelta_writer *w = NULL;
    em_err err = {0};
    uint64_t sizes[RAMDELTA_REGIONS] = {8, 2};
    unlink(path);
    CU_ASSERT_EQUAL_FATAL(ramdelta_create(path, sizes, &w, &err), 0);
    uint8_t page[RAMDELTA_PAGE];
    for (size_t i = 0; i < n; i++) {
        fill(page, vals[i]);
        CU_ASSERT_EQUAL(ramdelta_add(w, region, pages[i], page, &err), 0);
    }
    ramdelta_stats st;
    CU_ASSERT_EQUAL(ramdelta_finish(w, &st, &err), 0);
    CU_ASSERT_EQUAL(st.pages[region], n);
}

static void test_delta_roundtrip(void)
{
    _cleanup_free_ char *path = xasprintf("%s/a.delta", test_tmpdir());
    ramdelta_writer *w = NULL;
    em_err err = {0};
    uint64_t sizes[RAMDELTA_REGIONS] = {8, 2};
    CU_ASSERT_EQUAL_FATAL(ramdelta_create(path, sizes, &w, &err), 0);
    uint8_t page[RAMDELTA_PAGE];
    fill(page, 7);
    CU_ASSERT_EQUAL(ramdelta_add(w, RAMDELTA_RAM, 1, page, &err), 0);
    CU_ASSERT_EQUAL(ramdelta_add(w, RAMDELTA_RAM, 3, NULL, &err), 0); /* a zero page: no data */
    fill(page, 9);
    CU_ASSERT_EQUAL(ramdelta_add(w, RAMDELTA_RAM, 2, page, &err), -1); /* out of order */
    CU_ASSERT_EQUAL(ramdelta_add(w, RAMDELTA_RAM, 8, page, &err), -1); /* outside the region */
    CU_ASSERT_EQUAL(ramdelta_add(w, RAMDELTA_RAM, 5, page, &err), 0);
    CU_ASSERT_EQUAL(ramdelta_add(w, RAMDELTA_VRAM, 0, page, &err), 0);
    ramdelta_stats st;
    CU_ASSERT_EQUAL_FATAL(ramdelta_finish(w, &st, &err), 0);
    CU_ASSERT_EQUAL(st.pages[RAMDELTA_RAM], 3);
    CU_ASSERT_EQUAL(st.pages[RAMDELTA_VRAM], 1);
    CU_ASSERT_EQUAL(st.zero_pages, 1);
    CU_ASSERT_EQUAL(st.bytes, 4096 + 3 * 4096 + 4 * 16); /* header, three data pages, four entries */

    ramdelta *d = NULL;
    CU_ASSERT_EQUAL_FATAL(ramdelta_open(path, &d, &err), 0);
    CU_ASSERT_EQUAL(ramdelta_region_pages(d, RAMDELTA_RAM), 8);
    const uint8_t *data;
    CU_ASSERT(ramdelta_find(d, RAMDELTA_RAM, 1, &data) && data && data[0] == 7 && data[4095] == 7);
    CU_ASSERT(ramdelta_find(d, RAMDELTA_RAM, 3, &data) && data == NULL);
    CU_ASSERT(ramdelta_find(d, RAMDELTA_RAM, 5, &data) && data && data[100] == 9);
    CU_ASSERT(!ramdelta_find(d, RAMDELTA_RAM, 0, &data));
    CU_ASSERT(!ramdelta_find(d, RAMDELTA_VRAM, 1, &data));
    CU_ASSERT(ramdelta_find(d, RAMDELTA_VRAM, 0, &data) && data && data[0] == 9);
    ramdelta_close(d);
}

static void test_delta_merge(void)
{
    _cleanup_free_ char *pa = xasprintf("%s/parent.delta", test_tmpdir());
    _cleanup_free_ char *pc = xasprintf("%s/child.delta", test_tmpdir());
    const uint64_t parent_pages[] = {0, 2, 4}, child_pages[] = {2, 3};
    const uint8_t parent_vals[] = {1, 2, 4}, child_vals[] = {0, 33}; /* the child zeroes page 2 */
    make_delta(pa, parent_pages, parent_vals, 3, RAMDELTA_RAM);
    make_delta(pc, child_pages, child_vals, 2, RAMDELTA_RAM);
    ramdelta *chain[2] = {NULL, NULL};
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(ramdelta_open(pa, &chain[0], &err), 0);
    CU_ASSERT_EQUAL_FATAL(ramdelta_open(pc, &chain[1], &err), 0);
    ramdelta_page *p = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(ramdelta_merge(chain, 2, RAMDELTA_RAM, &p, &n, &err), 0);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    CU_ASSERT(p[0].page == 0 && p[0].data && p[0].data[0] == 1);
    CU_ASSERT(p[1].page == 2 && p[1].data == NULL); /* the child's page wins, a zero page */
    CU_ASSERT(p[2].page == 3 && p[2].data && p[2].data[0] == 33);
    CU_ASSERT(p[3].page == 4 && p[3].data && p[3].data[0] == 4);
    free(p);
    CU_ASSERT_EQUAL(ramdelta_merge(chain, 2, RAMDELTA_VRAM, &p, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 0);
    free(p);
    CU_ASSERT_EQUAL(ramdelta_merge(chain, 0, RAMDELTA_RAM, &p, &n, &err), 0); /* the golden state: nothing */
    CU_ASSERT_EQUAL(n, 0);
    free(p);
    ramdelta_close(chain[0]);
    ramdelta_close(chain[1]);
}

/* The flat RAM file: the golden file's pages (its holes kept) with a chain applied, the child's
 * pages winning, a zero page punched out. */
static void test_flat_build(void)
{
    _cleanup_free_ char *pa = xasprintf("%s/fparent.delta", test_tmpdir());
    _cleanup_free_ char *pc = xasprintf("%s/fchild.delta", test_tmpdir());
    _cleanup_free_ char *gold = xasprintf("%s/gold.ram", test_tmpdir());
    _cleanup_free_ char *flat = xasprintf("%s/state.flat", test_tmpdir());
    const uint64_t parent_pages[] = {0, 2, 4}, child_pages[] = {2, 3};
    const uint8_t parent_vals[] = {1, 2, 4}, child_vals[] = {0, 33};
    make_delta(pa, parent_pages, parent_vals, 3, RAMDELTA_RAM);
    make_delta(pc, child_pages, child_vals, 2, RAMDELTA_RAM);
    uint8_t page[RAMDELTA_PAGE];
    int fd = open(gold, O_WRONLY | O_CREAT | O_TRUNC, 0600); /* pages 0-2 data (10, 11, 12), 3-7 a hole */
    CU_ASSERT_FATAL(fd >= 0);
    for (int i = 0; i < 3; i++) {
        fill(page, (uint8_t)(10 + i));
        CU_ASSERT_EQUAL(write(fd, page, sizeof page), (ssize_t)sizeof page);
    }
    CU_ASSERT_EQUAL(ftruncate(fd, 8 * RAMDELTA_PAGE), 0);
    close(fd);
    ramdelta *chain[2] = {NULL, NULL};
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(ramdelta_open(pa, &chain[0], &err), 0);
    CU_ASSERT_EQUAL_FATAL(ramdelta_open(pc, &chain[1], &err), 0);
    ramflat_stats st;
    unlink(flat);
    CU_ASSERT_EQUAL_FATAL(ramflat_build(gold, 8 * RAMDELTA_PAGE, chain, 2, flat, &st, &err), 0);
    CU_ASSERT_EQUAL(st.copied_bytes, 3 * RAMDELTA_PAGE);
    CU_ASSERT_EQUAL(st.delta_pages, 4);
    /* pages 0, 1, 3, 4: the zero page is a hole; with reflink pages 0-1 may be the golden file's */
    CU_ASSERT_EQUAL(st.disk_bytes + st.shared_bytes, 4 * RAMDELTA_PAGE);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(read_file_capped(flat, 1 << 20, &text, &len, &err), 0);
    CU_ASSERT_EQUAL_FATAL(len, 8 * RAMDELTA_PAGE);
    const uint8_t want[8] = {1, 11, 0, 33, 4, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        CU_ASSERT(text[i * RAMDELTA_PAGE] == want[i] && text[i * RAMDELTA_PAGE + 4095] == want[i]);
    /* refused: an existing file, a golden file of another size, a chain of another size */
    CU_ASSERT_EQUAL(ramflat_build(gold, 8 * RAMDELTA_PAGE, chain, 2, flat, &st, &err), -1);
    unlink(flat);
    CU_ASSERT_EQUAL(ramflat_build(gold, 16 * RAMDELTA_PAGE, chain, 2, flat, &st, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is not the image's"));
    CU_ASSERT_EQUAL(access(flat, F_OK), -1); /* nothing left behind */
    ramdelta_close(chain[0]);
    ramdelta_close(chain[1]);
}

/* A RAM server for o in a child process, once it said it is mounted ("ok"): its pid. */
static pid_t serve_forked(const ramfs_opts *o)
{
    int p[2];
    CU_ASSERT_FATAL(pipe(p) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        em_err cerr = {0};
        _exit(ramfs_serve(o, p[1], &cerr) == 0 ? 0 : 1);
    }
    close(p[1]);
    char ready[64] = {0};
    CU_ASSERT(read(p[0], ready, sizeof ready - 1) > 0 && !strcmp(ready, "ok\n"));
    close(p[0]);
    return pid;
}

/* A state's RAM served over FUSE answers the bytes the flat RAM file holds (the golden file with
 * the chain over it: test_flat_build's), refuses writes, and its server leaves once nothing has it
 * open and the state's lock is free, unmounting. Needs /dev/fuse and root (CI has both); without
 * them there is nothing to serve with, and restores write the flat file (test_state_flat). */
static void test_ramfs_serve(void)
{
    if (!ramfs_available()) {
        fprintf(stderr, "\n  (no /dev/fuse here: the RAM server is not tested) ");
        return;
    }
    _cleanup_free_ char *gold = xasprintf("%s/gold.ram", test_tmpdir());
    _cleanup_free_ char *mnt = xasprintf("%s/served.mnt", test_tmpdir());
    _cleanup_free_ char *lock = xasprintf("%s/served.lock", test_tmpdir());
    _cleanup_free_ char *warm = xasprintf("%s/served.warm", test_tmpdir());
    _cleanup_free_ char *file = xasprintf("%s/ident", mnt);
    char *deltas[] = {xasprintf("%s/fparent.delta", test_tmpdir()), xasprintf("%s/fchild.delta", test_tmpdir())};
    ramfs_opts o = {.mountpoint = mnt, .file_name = "ident", .golden_ram = gold, .ram_bytes = 8 * RAMDELTA_PAGE,
                    .deltas = (const char *const *)deltas, .ndeltas = 2, .lock_path = lock, .warm_path = warm,
                    .idle_s = 0.2};
    CU_ASSERT_EQUAL_FATAL(mkdir(mnt, 0700), 0);
    int p[2];
    /* inputs not of the RAM's size: refused before it mounts, saying why on the ready pipe */
    o.ram_bytes = 16 * RAMDELTA_PAGE;
    CU_ASSERT_EQUAL_FATAL(pipe(p), 0);
    em_err serr = {0};
    CU_ASSERT_EQUAL(ramfs_serve(&o, p[1], &serr), -1);
    char why[256] = {0};
    CU_ASSERT(read(p[0], why, sizeof why - 1) > 0 && strstr(why, "is not the image's"));
    close(p[0]);
    CU_ASSERT(!ramfs_live(mnt, "ident", 16 * RAMDELTA_PAGE));
    o.ram_bytes = 8 * RAMDELTA_PAGE;
    pid_t pid = serve_forked(&o);
    CU_ASSERT(ramfs_live(mnt, "ident", 8 * RAMDELTA_PAGE));
    CU_ASSERT(!ramfs_live(mnt, "other", 8 * RAMDELTA_PAGE));
    /* its warm-up read the pages holding data (the golden file's 0-2, the deltas' 0, 2, 3, 4) into
     * the kernel's cache before anything else read the file, then said so */
    double until = now_ms() + 30000; /* valgrind is slow */
    while (access(warm, F_OK) != 0 && now_ms() < until)
        sleep_ms(10);
    CU_ASSERT_EQUAL(access(warm, F_OK), 0);
    int wfd = open(file, O_RDONLY);
    void *map = wfd < 0 ? MAP_FAILED : mmap(NULL, 8 * RAMDELTA_PAGE, PROT_READ, MAP_SHARED, wfd, 0);
    unsigned char resident[8] = {0};
    CU_ASSERT(map != MAP_FAILED && mincore(map, 8 * RAMDELTA_PAGE, resident) == 0);
    for (int i = 0; i < 5; i++)
        CU_ASSERT(resident[i] & 1);
    if (map != MAP_FAILED)
        munmap(map, 8 * RAMDELTA_PAGE);
    if (wfd >= 0)
        close(wfd);
    DIR *dir = opendir(mnt);
    struct dirent *de;
    int listed = 0;
    while (dir && (de = readdir(dir)))
        listed += !strcmp(de->d_name, "ident") ? 10 : 1;
    if (dir)
        closedir(dir);
    CU_ASSERT_EQUAL(listed, 12); /* ".", "..", the file */
    int fd = open(file, O_RDWR); /* as QEMU opens its memory file */
    CU_ASSERT_FATAL(fd >= 0);
    uint8_t buf[8 * RAMDELTA_PAGE + 64];
    CU_ASSERT_EQUAL(pread(fd, buf, sizeof buf, 0), 8 * RAMDELTA_PAGE); /* and not a byte past the end */
    const uint8_t want[8] = {1, 11, 0, 33, 4, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        CU_ASSERT(buf[i * RAMDELTA_PAGE] == want[i] && buf[i * RAMDELTA_PAGE + 4095] == want[i]);
    CU_ASSERT_EQUAL(pread(fd, buf, 20, RAMDELTA_PAGE - 10), 20); /* across pages: the golden's, the parent's */
    CU_ASSERT(buf[0] == 1 && buf[9] == 1 && buf[10] == 11 && buf[19] == 11);
    CU_ASSERT_EQUAL(pwrite(fd, "X", 1, 0), -1);
    CU_ASSERT_EQUAL(open(file, O_RDWR | O_TRUNC), -1);
    /* the lock shared (a restore starting from it): the server stays though nothing is open */
    close(fd);
    int lfd = open(lock, O_RDWR | O_CREAT, 0600);
    CU_ASSERT_EQUAL(flock(lfd, LOCK_SH), 0);
    sleep_ms(1500);
    CU_ASSERT(waitpid(pid, NULL, WNOHANG) == 0 && ramfs_live(mnt, "ident", 8 * RAMDELTA_PAGE));
    close(lfd);
    int status = -1;
    double deadline = now_ms() + 30000; /* valgrind is slow */
    while (waitpid(pid, &status, WNOHANG) == 0 && now_ms() < deadline)
        sleep_ms(50);
    CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CU_ASSERT(!ramfs_live(mnt, "ident", 8 * RAMDELTA_PAGE));
    CU_ASSERT_EQUAL(access(warm, F_OK), -1); /* its marker went with it */
    em_err err = {0};
    CU_ASSERT_EQUAL(ramfs_unmount(mnt, &err), 0);
    CU_ASSERT_EQUAL(access(mnt, F_OK), -1);
    if (status == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    /* a server killed: its mount is dead, not live, and is detached and removed */
    CU_ASSERT_EQUAL_FATAL(mkdir(mnt, 0700), 0);
    pid = serve_forked(&o);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    CU_ASSERT(ramfs_dead(mnt) && !ramfs_live(mnt, "ident", 8 * RAMDELTA_PAGE));
    CU_ASSERT_EQUAL(ramfs_unmount(mnt, &err), 0);
    CU_ASSERT(!ramfs_dead(mnt) && access(mnt, F_OK) == -1);
    free(deltas[0]);
    free(deltas[1]);
}

static int owned_of(const char *path, bool sync, uint64_t *owned, uint64_t *shared)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    em_err err = {0};
    int rc = fd < 0 ? -1 : file_owned_bytes(fd, sync, owned, shared, &err);
    if (rc < 0)
        fprintf(stderr, "owned bytes of %s: %s\n", path, fd < 0 ? "open failed" : err.msg);
    return rc;
}

/* Where nothing is shared (ext4, this test's folder) a file owns what st_blocks says, written back
 * or not. (Four runs of data: ext4 keeps their map in the inode; a file of more has extent-tree
 * blocks, which st_blocks counts and FIEMAP, a map of the data, does not.) */
static void test_owned_unshared(void)
{
    _cleanup_free_ char *path = xasprintf("%s/sparse", test_tmpdir());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL(fd >= 0);
    uint8_t page[RAMDELTA_PAGE];
    fill(page, 5);
    for (int i = 0; i < 12; i += 3) /* a page, a hole of two, ... */
        CU_ASSERT_EQUAL(pwrite(fd, page, sizeof page, (off_t)i * RAMDELTA_PAGE), (ssize_t)sizeof page);
    CU_ASSERT_EQUAL(ftruncate(fd, 1 << 20), 0);
    close(fd);
    for (int sync = 0; sync < 2; sync++) {
        uint64_t owned = 1, shared = 1;
        struct stat st;
        CU_ASSERT_EQUAL_FATAL(owned_of(path, sync, &owned, &shared), 0);
        CU_ASSERT_EQUAL_FATAL(stat(path, &st), 0);
        if (shared) /* a reflink file system under the test's folder: the XFS test below covers it */
            continue;
        CU_ASSERT_EQUAL(owned, (uint64_t)st.st_blocks * 512);
        CU_ASSERT(owned >= 4 * RAMDELTA_PAGE && owned < (1 << 20));
    }
    bool reflink = true;
    em_err err = {0};
    CU_ASSERT_EQUAL(dir_has_reflink(test_tmpdir(), &reflink, &err), 0);
    if (reflink)
        fprintf(stderr, "note: %s has reflink\n", test_tmpdir());
    CU_ASSERT_EQUAL(dir_has_reflink("/nonexistent-envmgr", &reflink, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a temp file in `/nonexistent-envmgr`"));
}

/* With reflink (XFS on a loop device: root and mkfs.xfs needed, else skipped, said on stderr) the
 * flat RAM file shares the golden file's extents and owns only the page the chain wrote, where
 * st_blocks counts every extent as its own. */
static void test_owned_reflink(void)
{
    if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null 2>&1") != 0) {
        fprintf(stderr, "SKIP reflink: needs root and mkfs.xfs (xfsprogs)\n");
        return;
    }
    _cleanup_free_ char *img = xasprintf("%s/xfs.img", test_tmpdir());
    _cleanup_free_ char *mnt = xasprintf("%s/xfs", test_tmpdir());
    _cleanup_free_ char *mk = xasprintf("truncate -s 320M %s && mkfs.xfs -q -m reflink=1 %s && mkdir -p %s", img,
                                        img, mnt);
    _cleanup_free_ char *mount = xasprintf("mount -o loop %s %s 2>&1", img, mnt);
    CU_ASSERT_EQUAL_FATAL(system(mk), 0);
    if (system(mount) != 0) {
        fprintf(stderr, "SKIP reflink: no loop mount here (above)\n");
        unlink(img);
        return;
    }
    bool reflink = false;
    em_err perr = {0};
    CU_ASSERT(dir_has_reflink(mnt, &reflink, &perr) == 0 && reflink);
    _cleanup_free_ char *gold = xasprintf("%s/gold.ram", mnt);
    _cleanup_free_ char *delta = xasprintf("%s/d.delta", mnt);
    _cleanup_free_ char *flat = xasprintf("%s/state.flat", mnt);
    int fd = open(gold, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    uint8_t page[RAMDELTA_PAGE];
    for (int i = 0; fd >= 0 && i < 8; i++) {
        fill(page, (uint8_t)(10 + i));
        CU_ASSERT_EQUAL(write(fd, page, sizeof page), (ssize_t)sizeof page);
    }
    CU_ASSERT(fd >= 0 && fsync(fd) == 0 && close(fd) == 0);
    const uint64_t pages[] = {2, 3};
    const uint8_t vals[] = {0, 33}; /* page 2 punched, page 3 written over the golden's */
    make_delta(delta, pages, vals, 2, RAMDELTA_RAM);
    ramdelta *chain[1] = {NULL};
    em_err err = {0};
    ramflat_stats st;
    uint64_t owned = 0, shared = 0;
    struct stat fs;
    if (ramdelta_open(delta, &chain[0], &err) == 0 &&
        ramflat_build(gold, 8 * RAMDELTA_PAGE, chain, 1, flat, &st, &err) == 0) {
        CU_ASSERT(st.shared_bytes >= 6 * RAMDELTA_PAGE);
        CU_ASSERT(st.disk_bytes <= 2 * RAMDELTA_PAGE);
        CU_ASSERT_EQUAL(owned_of(flat, true, &owned, &shared), 0); /* written back: page 3 is its own */
        CU_ASSERT_EQUAL(owned, RAMDELTA_PAGE);
        CU_ASSERT_EQUAL(shared, 6 * RAMDELTA_PAGE);
        CU_ASSERT(stat(flat, &fs) == 0 && (uint64_t)fs.st_blocks * 512 >= 7 * RAMDELTA_PAGE);
        fprintf(stderr, "reflink: flat file owns %llu bytes, shares %llu, st_blocks says %llu\n",
                (unsigned long long)owned, (unsigned long long)shared, (unsigned long long)fs.st_blocks * 512);
    } else {
        CU_FAIL("flat RAM file on XFS");
        fprintf(stderr, "%s\n", err.msg);
    }
    if (chain[0])
        ramdelta_close(chain[0]);
    /* lazily if still busy: a loop mount must not outlive the test (an earlier run left one behind) */
    _cleanup_free_ char *umount = xasprintf("umount %s || umount -l %s", mnt, mnt);
    CU_ASSERT_EQUAL(system(umount), 0);
    unlink(img);
}

/* Overwrite 8 bytes of a file at off with v (little-endian). */
static void poke64(const char *path, off_t off, uint64_t v)
{
    int fd = open(path, O_WRONLY);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT_EQUAL(pwrite(fd, &v, sizeof v, off), (ssize_t)sizeof v);
    close(fd);
}

static void expect_damaged(const char *path, const char *why)
{
    ramdelta *d = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(ramdelta_open(path, &d, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, why));
    if (!strstr(err.msg, why))
        fprintf(stderr, "expected `%s`, got: %s\n", why, err.msg);
}

static void test_delta_damaged(void)
{
    _cleanup_free_ char *path = xasprintf("%s/bad.delta", test_tmpdir());
    const uint64_t pages[] = {1, 5};
    const uint8_t vals[] = {1, 5};
    /* index at 4096 + 2 pages; entries {key, slot} */
    off_t index = 4096 + 2 * 4096;
    make_delta(path, pages, vals, 2, RAMDELTA_RAM);
    poke64(path, 0, 0x1122334455667788ULL);
    expect_damaged(path, "not a RAM delta");
    make_delta(path, pages, vals, 2, RAMDELTA_RAM);
    poke64(path, index + 16, 1); /* the second key before the first's successor */
    expect_damaged(path, "not in order");
    make_delta(path, pages, vals, 2, RAMDELTA_RAM);
    poke64(path, index + 16, 99); /* a page outside the 8-page region */
    expect_damaged(path, "outside its region");
    make_delta(path, pages, vals, 2, RAMDELTA_RAM);
    poke64(path, index + 8, 7); /* data slot 7 of 2 */
    expect_damaged(path, "data outside the file");
    make_delta(path, pages, vals, 2, RAMDELTA_RAM);
    poke64(path, 16 + 8 * RAMDELTA_REGIONS, 1000); /* count */
    expect_damaged(path, "do not add up");
    make_delta(path, pages, vals, 2, RAMDELTA_RAM);
    CU_ASSERT_EQUAL(truncate(path, index + 20), 0);
    expect_damaged(path, "do not add up");
    CU_ASSERT_EQUAL(truncate(path, 100), 0);
    expect_damaged(path, "too short");
}

/* ---- the store ---- */

static char golden_dir[512];

/* A state with dummy files; parent NULL: from the golden state. Returns its id (caller frees). */
static char *make_state(const char *name, const char *parent, const char *parent_id)
{
    char *tmp = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(state_begin(name, &tmp, &err), 0);
    const char *files[] = {SAVESTATE_DISK, SAVESTATE_RAM, SAVESTATE_DEVICES};
    for (size_t i = 0; i < 3; i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", tmp, files[i]), *body = xasprintf("%s of %s", files[i], name);
        CU_ASSERT_EQUAL(write_file_atomic(p, body, strlen(body), 0600, &err), 0);
    }
    char gid[65];
    CU_ASSERT_EQUAL_FATAL(state_golden_id(golden_dir, gid, &err), 0);
    json_t *meta = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:i, s:o, s:[i, i]}", "golden", "key",
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "dir", golden_dir, "id",
                             gid, "image", "/images/desktop", "image_sha256",
                             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "accel", "tcg",
                             "memory_mb", 1024, "parent",
                             parent ? json_pack("{s:s, s:s}", "name", parent, "id", parent_id) : json_null(),
                             "pointer", 10, 20);
    CU_ASSERT_EQUAL_FATAL(state_commit(tmp, name, meta, &err), 0);
    char *id = xstrdup(json_string_value(json_object_get(meta, "id")));
    json_decref(meta);
    free(tmp);
    return id;
}

static void test_state_chain(void)
{
    em_err err = {0};
    _cleanup_free_ char *id1 = make_state("base", NULL, NULL);
    _cleanup_free_ char *id2 = make_state("step3", "base", id1);
    CU_ASSERT_EQUAL(strlen(id1), 32);
    state **chain = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL_FATAL(state_chain_load("step3", &chain, &n, &err), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(chain[0]->name, "base"); /* root first */
    CU_ASSERT_STRING_EQUAL(chain[1]->parent, "base");
    CU_ASSERT_EQUAL(chain[1]->pointer_x, 10);
    state_chain_free(chain, n);

    /* the name taken */
    char *tmp = NULL;
    CU_ASSERT_EQUAL(state_begin("base", &tmp, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exists"));
    CU_ASSERT_EQUAL(state_begin("../x", &tmp, &err), -1);
    CU_ASSERT_EQUAL(state_check_user_name("mine", &err), 0);
    CU_ASSERT_EQUAL(state_check_user_name("setup-0123", &err), -1); /* the setup cache's */
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    CU_ASSERT_EQUAL(state_check_user_name("a/b", &err), -1);

    /* a parent removed and saved again under its name is another state: its child is refused */
    CU_ASSERT_EQUAL(state_remove("base", &err), -1); /* while step3 needs it */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "step3"));
    _cleanup_free_ char *id3 = make_state("other", NULL, NULL);
    _cleanup_free_ char *id4 = make_state("orphan", "other", id1); /* names `other` with base's id */
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(state_chain_load("orphan", &chain, &n, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "ids differ"));
    CU_ASSERT_EQUAL(state_remove("orphan", &err), 0);
    CU_ASSERT_EQUAL(state_remove("other", &err), 0);
    CU_ASSERT_EQUAL(state_load("other", &chain[0], &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "does not exist"));

    json_t *list = NULL;
    CU_ASSERT_EQUAL_FATAL(state_list(&list, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(list), 2);
    json_decref(list);
}

static void test_state_tamper(void)
{
    em_err err = {0};
    _cleanup_free_ char *id = make_state("tamper", NULL, NULL);
    state *s = NULL;
    CU_ASSERT_EQUAL_FATAL(state_load("tamper", &s, &err), 0);
    CU_ASSERT_EQUAL(state_verify(s, &err), 0);
    /* one byte changed (its ctime moves): hashed again and refused */
    _cleanup_free_ char *ram = xasprintf("%s/" SAVESTATE_RAM, s->dir);
    CU_ASSERT_EQUAL(chmod(ram, 0600), 0);
    int fd = open(ram, O_WRONLY);
    CU_ASSERT_EQUAL(pwrite(fd, "X", 1, 0), 1);
    close(fd);
    CU_ASSERT_EQUAL(state_verify(s, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "does not match its sha256"));
    state **chain = NULL;
    size_t n = 0;
    CU_ASSERT_EQUAL(state_chain_load("tamper", &chain, &n, &err), -1);
    /* a missing file */
    unlink(ram);
    CU_ASSERT_EQUAL(state_verify(s, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "missing"));
    state_free(s);

    /* a damaged record */
    _cleanup_free_ char *idj = make_state("badjson", NULL, NULL);
    _cleanup_free_ char *dir = xasprintf("%s/states/badjson", test_tmpdir()), *path = xasprintf("%s/state.json", dir);
    const char *bad[] = {"{", "[]", "{\"format\": \"envmgr-state-v1\", \"name\": \"other\"}",
                         "{\"format\": \"envmgr-state-v1\", \"name\": \"badjson\", \"id\": \"x\"}"};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        unlink(path);
        CU_ASSERT_EQUAL(write_file_atomic(path, bad[i], strlen(bad[i]), 0600, &err), 0);
        memset(&err, 0, sizeof err);
        CU_ASSERT_EQUAL(state_load("badjson", &s, &err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "badjson"));
    }
    CU_ASSERT_EQUAL(state_remove("tamper", &err), 0);
    CU_ASSERT_EQUAL(state_remove("badjson", &err), 0);
}

/* A state's flat RAM file: built at the first call, then taken as it is; changed behind envmgr's
 * back, built again; counted apart in the listing; gone with its state. (Runs after
 * test_flat_build, whose golden file and delta it uses.) */
static void test_state_flat(void)
{
    _cleanup_free_ char *pa = xasprintf("%s/fparent.delta", test_tmpdir());
    _cleanup_free_ char *gold = xasprintf("%s/gold.ram", test_tmpdir());
    free(make_state("flatty", NULL, NULL));
    state *s = NULL;
    ramdelta *d = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(state_load("flatty", &s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(ramdelta_open(pa, &d, &err), 0);
    char *path = NULL;
    int lfd = -1;
    double ms = 0;
    CU_ASSERT_EQUAL_FATAL(state_flat_ready(s, gold, 8 * RAMDELTA_PAGE, &d, 1, &path, &lfd, &ms, &err), 0);
    CU_ASSERT(ms > 0 && lfd >= 0 && access(path, R_OK) == 0);
    close(lfd);
    free(path);
    CU_ASSERT_EQUAL(state_flat_ready(s, gold, 8 * RAMDELTA_PAGE, &d, 1, &path, &lfd, &ms, &err), 0);
    CU_ASSERT(ms == 0); /* as built: taken as it is */
    close(lfd);
    CU_ASSERT_EQUAL(chmod(path, 0600), 0);
    int fd = open(path, O_WRONLY);
    CU_ASSERT_EQUAL(pwrite(fd, "X", 1, 0), 1); /* page 0 is the parent's page of 1s */
    close(fd);
    free(path);
    CU_ASSERT_EQUAL(state_flat_ready(s, gold, 8 * RAMDELTA_PAGE, &d, 1, &path, &lfd, &ms, &err), 0);
    CU_ASSERT(ms > 0); /* changed: built again */
    close(lfd);
    _cleanup_free_ char *text = NULL;
    CU_ASSERT_EQUAL(read_file_capped(path, 1 << 20, &text, NULL, &err), 0);
    CU_ASSERT(text && text[0] == 1);
    json_t *list = NULL;
    CU_ASSERT_EQUAL(state_list(&list, &err), 0);
    size_t i;
    json_t *row;
    bool listed = false;
    json_array_foreach(list, i, row) if (!strcmp(json_string_value(json_object_get(row, "name")), "flatty"))
        listed = json_real_value(json_object_get(row, "flat_mib")) > 0;
    CU_ASSERT(listed);
    json_decref(list);
    CU_ASSERT_EQUAL(state_remove("flatty", &err), 0);
    CU_ASSERT_EQUAL(access(path, F_OK), -1);
    free(path);
    ramdelta_close(d);
    state_free(s);
}

static void test_eviction_order(void)
{
    /* MiB sizes; last_used times */
    state_row rows[] = {
        {.name = "root", .parent = NULL, .bytes = 10, .last_used = 1},    /* oldest, but a parent */
        {.name = "child", .parent = "root", .bytes = 10, .last_used = 5}, /* its child */
        {.name = "busy", .parent = NULL, .bytes = 10, .last_used = 0, .pinned = true},
        {.name = "fresh", .parent = NULL, .bytes = 10, .last_used = 9},
        {.name = "old", .parent = NULL, .bytes = 10, .last_used = 2},
    };
    bool evict[5], flat[5];
    state_pick_evictions(rows, 5, 50, evict, flat); /* at the cap: nothing */
    for (size_t i = 0; i < 5; i++)
        CU_ASSERT(!evict[i]);
    state_pick_evictions(rows, 5, 40, evict, flat); /* one: the least recently used leaf */
    CU_ASSERT(evict[4] && !evict[0] && !evict[1] && !evict[2] && !evict[3]);
    state_pick_evictions(rows, 5, 20, evict, flat); /* then child (5), and then its parent is free to go (1) */
    CU_ASSERT(evict[4] && evict[1] && evict[0] && !evict[2] && !evict[3]);
    state_pick_evictions(rows, 5, 0, evict, flat); /* all but the pinned one */
    CU_ASSERT(evict[0] && evict[1] && !evict[2] && evict[3] && evict[4]);
    rows[3].stale = true; /* its golden state is gone: out whatever the cap */
    state_pick_evictions(rows, 5, 1000, evict, flat);
    CU_ASSERT(evict[3] && !evict[0] && !evict[1] && !evict[2] && !evict[4]);
    for (size_t i = 0; i < 5; i++)
        CU_ASSERT(!flat[i]);
}

/* Flat RAM files go before any state: least recently used first, a parent's too (only its own
 * state must stay for its children), never a pinned state's. */
static void test_eviction_flat_first(void)
{
    state_row rows[] = {
        {.name = "root", .parent = NULL, .bytes = 10, .flat_bytes = 100, .last_used = 1},
        {.name = "child", .parent = "root", .bytes = 10, .flat_bytes = 100, .last_used = 5},
        {.name = "busy", .parent = NULL, .bytes = 10, .flat_bytes = 100, .last_used = 0, .pinned = true},
        {.name = "bare", .parent = NULL, .bytes = 10, .last_used = 0}, /* no flat file */
    };
    bool evict[4], flat[4];
    state_pick_evictions(rows, 4, 340, evict, flat); /* at the cap: nothing */
    CU_ASSERT(!flat[0] && !flat[1] && !flat[2] && !flat[3] && !evict[0] && !evict[1] && !evict[2] && !evict[3]);
    state_pick_evictions(rows, 4, 300, evict, flat); /* one flat file: the root's, least recently used */
    CU_ASSERT(flat[0] && !flat[1] && !flat[2] && !evict[0] && !evict[1] && !evict[3]);
    state_pick_evictions(rows, 4, 140, evict, flat); /* both flat files, and still no state */
    CU_ASSERT(flat[0] && flat[1] && !flat[2] && !evict[0] && !evict[1] && !evict[2] && !evict[3]);
    state_pick_evictions(rows, 4, 125, evict, flat); /* then states: bare (0), the leaf child */
    CU_ASSERT(flat[0] && flat[1] && evict[3] && evict[1] && !evict[0] && !evict[2]);
}

static CU_TestInfo tests[] = {
    {"RAM delta: written, read back, zero pages, order and bounds", test_delta_roundtrip},
    {"RAM delta: a chain merged, the child's pages winning", test_delta_merge},
    {"RAM delta: damaged files refused with the reason", test_delta_damaged},
    {"flat RAM file: the golden file's pages, the chain applied, zero pages as holes", test_flat_build},
    {"served RAM: the flat file's bytes over FUSE, no writes, leaves when idle and unlocked", test_ramfs_serve},
    {"owned bytes: st_blocks where nothing is shared", test_owned_unshared},
    {"owned bytes: a flat RAM file on XFS with reflink owns only the chain's pages", test_owned_reflink},
    {"states: chain loaded root first, linked by id; removal refused while needed", test_state_chain},
    {"states: a changed or missing file is refused; damaged records", test_state_tamper},
    {"states: the flat RAM file built once, rebuilt when changed, gone with its state", test_state_flat},
    {"states: eviction picks least recently used leaves, keeps pinned ones", test_eviction_order},
    {"states: eviction removes flat RAM files before states", test_eviction_flat_first},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    _cleanup_free_ char *states = xasprintf("%s/states", test_tmpdir());
    snprintf(golden_dir, sizeof golden_dir, "%s/golden/abc", test_tmpdir());
    setenv("ENVMGR_STATE_DIR", states, 1);
    _cleanup_free_ char *gj = xasprintf("%s/golden.json", golden_dir);
    em_err err = {0};
    if (mkdir_p(golden_dir, 0700, &err) < 0 || write_file_atomic(gj, "{}", 2, 0600, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    return run_suite("states", tests);
}

#include "envmgr/state/ramflat.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "envmgr/base/copyrange.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/owned.h"
#include "envmgr/base/util.h"

#define PAGE RAMDELTA_PAGE
#define IOV_PIECES 1024 /* at most IOV_MAX */

typedef struct copy_job {
    int in, out;
    const char *src;
    uint64_t *copied;
} copy_job;

/* One data extent of the golden file, copied at the same offset. */
static int copy_extent(void *ctx, uint64_t off, uint64_t end, em_err *err)
{
    copy_job *c = ctx;
    off_t a = (off_t)off, b = (off_t)off;
    while ((uint64_t)a < end) {
        ssize_t r = copy_range(c->in, &a, c->out, &b, (size_t)(end - (uint64_t)a));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? em_fail_errno(err, "copy `%s`", c->src) : em_fail(err, "`%s` shrank", c->src);
        *c->copied += (uint64_t)r;
    }
    return 0;
}

/* The golden file's data extents, copied at the same offsets: its holes (pages the guest never
 * touched) stay holes. */
static int copy_data(int in, int out, uint64_t len, const char *src, uint64_t *copied, em_err *err)
{
    copy_job c = {.in = in, .out = out, .src = src, .copied = copied};
    return file_data_extents(in, src, len, copy_extent, &c, err);
}

/* A run of zero pages: a hole where the golden file had data. */
static int punch(int fd, uint64_t page, size_t run, em_err *err)
{
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(page * PAGE), (off_t)(run * PAGE)) == 0)
        return 0;
    if (errno != EOPNOTSUPP)
        return em_fail_errno(err, "punch a hole");
    static const uint8_t zeros[PAGE];
    for (size_t k = 0; k < run; k++)
        if (pwrite(fd, zeros, PAGE, (off_t)((page + k) * PAGE)) != (ssize_t)PAGE)
            return em_fail_errno(err, "write a page of zeros");
    return 0;
}

/* The chain's pages over the copy: consecutive pages with data in one pwritev, zero pages punched. */
static int apply(int fd, const ramdelta_page *p, size_t n, em_err *err)
{
    struct iovec *iov = xmalloc(IOV_PIECES * sizeof *iov);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n;) {
        size_t run = 1;
        while (i + run < n && p[i + run].page == p[i].page + run && !p[i + run].data == !p[i].data &&
               (!p[i].data || run < IOV_PIECES))
            run++;
        if (!p[i].data) {
            rc = punch(fd, p[i].page, run, err);
        } else {
            for (size_t k = 0; k < run; k++)
                iov[k] = (struct iovec){(void *)p[i + k].data, PAGE};
            off_t at = (off_t)(p[i].page * PAGE);
            ssize_t want = (ssize_t)(run * PAGE), got = pwritev(fd, iov, (int)run, at);
            if (got != want) /* a short write to a regular file is a full disk: said as such */
                rc = got < 0 ? em_fail_errno(err, "write the state's pages") : em_fail(err, "disk full");
        }
        i += run;
    }
    free(iov);
    return rc;
}

int ramflat_inputs_check(int golden_fd, const char *golden_ram, uint64_t ram_bytes, ramdelta *const *chain, size_t n,
                         em_err *err)
{
    struct stat gs;
    if (fstat(golden_fd, &gs) < 0)
        return em_fail_errno(err, "stat `%s`", golden_ram);
    if ((uint64_t)gs.st_size != ram_bytes)
        return em_fail(err, "`%s` is not the image's %llu MiB", golden_ram, (unsigned long long)(ram_bytes >> 20));
    for (size_t k = 0; k < n; k++)
        if (ramdelta_region_pages(chain[k], RAMDELTA_RAM) != ram_bytes / PAGE)
            return em_fail(err, "a delta of the chain is not the image's %llu MiB",
                           (unsigned long long)(ram_bytes >> 20));
    return 0;
}

int ramflat_build(const char *golden_ram, uint64_t ram_bytes, ramdelta *const *chain, size_t n, const char *path,
                  ramflat_stats *st, em_err *err)
{
    *st = (ramflat_stats){0};
    _cleanup_close_ int in = open(golden_ram, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return em_fail_errno(err, "flat RAM file: open `%s`", golden_ram);
    if (ramflat_inputs_check(in, golden_ram, ram_bytes, chain, n, err) < 0)
        return em_prefix(err, "flat RAM file: ");
    _cleanup_close_ int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return em_fail_errno(err, "flat RAM file: create `%s`", path);
    _cleanup_free_ ramdelta_page *p = NULL;
    size_t np = 0;
    int rc = ftruncate(out, (off_t)ram_bytes) < 0 ? em_fail_errno(err, "set its size") : 0;
    if (rc == 0)
        rc = copy_data(in, out, ram_bytes, golden_ram, &st->copied_bytes, err);
    if (rc == 0)
        rc = ramdelta_merge(chain, n, RAMDELTA_RAM, &p, &np, err);
    if (rc == 0)
        rc = apply(out, p, np, err);
    if (rc == 0)
        rc = file_owned_bytes(out, false, &st->disk_bytes, &st->shared_bytes, err);
    if (rc < 0) {
        unlink(path);
        return em_prefix(err, "flat RAM file `%s`: ", path);
    }
    st->delta_pages = np;
    return 0;
}

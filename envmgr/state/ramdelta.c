#include "envmgr/state/ramdelta.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/util.h"

#define MAGIC "EMRAMDL1"
#define VERSION 1u
#define HEADER 4096u
#define ENTRY 16u
#define REGION_PAGES_MAX ((uint64_t)1 << 28) /* 1 TiB of guest memory: far above any image */
#define WRITE_BATCH 64                       /* data pages buffered per write() */

struct ramdelta {
    char *path;
    const uint8_t *map;
    size_t len;
    uint64_t pages[RAMDELTA_REGIONS], count, data_pages, index_off;
};

struct ramdelta_writer {
    char *path;
    int fd;
    uint64_t pages[RAMDELTA_REGIONS], count, cap, data_pages, last_key, zero_pages, per_region[RAMDELTA_REGIONS];
    bool any;
    uint8_t *index; /* count entries, already little-endian */
    uint8_t *batch; /* data pages not yet written */
    size_t nbatch;
};

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

static void wr64(uint8_t *p, uint64_t v)
{
    v = htole64(v);
    memcpy(p, &v, sizeof v);
}

static uint64_t make_key(int region, uint64_t page)
{
    return (uint64_t)region << 56 | page;
}

bool ramdelta_page_is_zero(const uint8_t *p)
{
    static const uint8_t zeros[256];
    for (size_t off = 0; off < RAMDELTA_PAGE; off += sizeof zeros)
        if (memcmp(p + off, zeros, sizeof zeros))
            return false;
    return true;
}

/* ---- reading ---- */

static int bad(const ramdelta *d, em_err *err, const char *what)
{
    return em_fail(err, "RAM delta `%s` is damaged: %s", d->path, what);
}

static int check(ramdelta *d, em_err *err)
{
    if (d->len < HEADER || memcmp(d->map, MAGIC, 8))
        return bad(d, err, "not a RAM delta (no header)");
    if (rd64(d->map + 8) != ((uint64_t)RAMDELTA_PAGE << 32 | VERSION))
        return bad(d, err, "unknown version or page size");
    for (int r = 0; r < RAMDELTA_REGIONS; r++)
        if ((d->pages[r] = rd64(d->map + 16 + 8 * r)) > REGION_PAGES_MAX)
            return bad(d, err, "a region larger than 1 TiB");
    d->count = rd64(d->map + 16 + 8 * RAMDELTA_REGIONS);
    d->data_pages = rd64(d->map + 24 + 8 * RAMDELTA_REGIONS);
    d->index_off = rd64(d->map + 32 + 8 * RAMDELTA_REGIONS);
    uint64_t max_pages = d->len / RAMDELTA_PAGE;
    if (d->data_pages > max_pages || d->count > d->len / ENTRY ||
        d->index_off != HEADER + d->data_pages * RAMDELTA_PAGE || d->index_off + d->count * ENTRY != d->len)
        return bad(d, err, "its sizes do not add up to the file's");
    uint64_t prev = 0;
    for (uint64_t i = 0; i < d->count; i++) {
        const uint8_t *e = d->map + d->index_off + i * ENTRY;
        uint64_t key = rd64(e), slot = rd64(e + 8);
        uint64_t region = key >> 56, page = key & ((UINT64_C(1) << 56) - 1);
        if (region >= RAMDELTA_REGIONS || page >= d->pages[region])
            return bad(d, err, "a page outside its region");
        if (i > 0 && key <= prev)
            return bad(d, err, "its index is not in order");
        if (slot != RAMDELTA_ZERO && slot >= d->data_pages)
            return bad(d, err, "a page's data outside the file");
        prev = key;
    }
    return 0;
}

int ramdelta_open(const char *path, ramdelta **out, em_err *err)
{
    ramdelta *d = xcalloc(1, sizeof *d);
    d->path = xstrdup(path);
    d->map = MAP_FAILED;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    int rc = 0;
    if (fd < 0 || fstat(fd, &st) < 0)
        rc = em_fail_errno(err, "open RAM delta `%s`", path);
    else if (!S_ISREG(st.st_mode) || st.st_size < (off_t)HEADER)
        rc = bad(d, err, "not a RAM delta (too short)");
    if (rc == 0) {
        d->len = (size_t)st.st_size;
        void *m = mmap(NULL, d->len, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            rc = em_fail_errno(err, "map RAM delta `%s`", path);
        else
            d->map = m;
    }
    if (rc == 0)
        rc = check(d, err);
    if (rc < 0) {
        ramdelta_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

void ramdelta_close(ramdelta *d)
{
    if (!d)
        return;
    if (d->map != MAP_FAILED && d->map)
        munmap((void *)d->map, d->len);
    free(d->path);
    free(d);
}

uint64_t ramdelta_region_pages(const ramdelta *d, int region)
{
    return region >= 0 && region < RAMDELTA_REGIONS ? d->pages[region] : 0;
}

static uint64_t key_at(const ramdelta *d, uint64_t i)
{
    return rd64(d->map + d->index_off + i * ENTRY);
}

static const uint8_t *data_at(const ramdelta *d, uint64_t i)
{
    uint64_t slot = rd64(d->map + d->index_off + i * ENTRY + 8);
    return slot == RAMDELTA_ZERO ? NULL : d->map + HEADER + slot * RAMDELTA_PAGE;
}

/* The first entry whose key is >= key. */
static uint64_t lower_bound(const ramdelta *d, uint64_t key)
{
    uint64_t lo = 0, hi = d->count;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (key_at(d, mid) < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool ramdelta_find(const ramdelta *d, int region, uint64_t page, const uint8_t **data)
{
    uint64_t key = make_key(region, page), i = lower_bound(d, key);
    if (i >= d->count || key_at(d, i) != key)
        return false;
    *data = data_at(d, i);
    return true;
}

int ramdelta_merge(ramdelta *const *chain, size_t n, int region, ramdelta_page **out, size_t *count, em_err *err)
{
    *out = NULL;
    *count = 0;
    uint64_t *pos = xcalloc(n ? n : 1, sizeof *pos), *end = xcalloc(n ? n : 1, sizeof *end);
    uint64_t total = 0;
    for (size_t k = 0; k < n; k++) {
        pos[k] = lower_bound(chain[k], make_key(region, 0));
        end[k] = lower_bound(chain[k], make_key(region + 1, 0));
        total += end[k] - pos[k];
    }
    ramdelta_page *pages = total ? try_malloc(total * sizeof *pages, "a state's page list", err) : NULL;
    if (total && !pages) {
        free(pos);
        free(end);
        return -1;
    }
    size_t m = 0;
    for (;;) {
        uint64_t best = UINT64_MAX;
        size_t from = n;
        for (size_t k = 0; k < n; k++) { /* the smallest key; on a tie the later (child) delta wins */
            if (pos[k] < end[k] && key_at(chain[k], pos[k]) <= best) {
                best = key_at(chain[k], pos[k]);
                from = k;
            }
        }
        if (from == n)
            break;
        pages[m].page = best & ((UINT64_C(1) << 56) - 1);
        pages[m].data = data_at(chain[from], pos[from]);
        m++;
        for (size_t k = 0; k < n; k++)
            if (pos[k] < end[k] && key_at(chain[k], pos[k]) == best)
                pos[k]++;
    }
    free(pos);
    free(end);
    *out = pages;
    *count = m;
    return 0;
}

/* ---- writing ---- */

int ramdelta_create(const char *path, const uint64_t pages[RAMDELTA_REGIONS], ramdelta_writer **out, em_err *err)
{
    for (int r = 0; r < RAMDELTA_REGIONS; r++)
        if (pages[r] > REGION_PAGES_MAX)
            return em_fail(err, "RAM delta `%s`: a region of %llu pages is too large", path,
                           (unsigned long long)pages[r]);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return em_fail_errno(err, "create RAM delta `%s`", path);
    if (lseek(fd, HEADER, SEEK_SET) < 0) {
        close(fd);
        unlink(path);
        return em_fail_errno(err, "seek in `%s`", path);
    }
    ramdelta_writer *w = xcalloc(1, sizeof *w);
    w->path = xstrdup(path);
    w->fd = fd;
    memcpy(w->pages, pages, sizeof w->pages);
    w->batch = xmalloc((size_t)WRITE_BATCH * RAMDELTA_PAGE);
    *out = w;
    return 0;
}

static int flush_batch(ramdelta_writer *w, em_err *err)
{
    if (w->nbatch && write_full(w->fd, w->batch, w->nbatch * RAMDELTA_PAGE, err) < 0)
        return em_prefix(err, "RAM delta `%s`: ", w->path);
    w->nbatch = 0;
    return 0;
}

int ramdelta_add(ramdelta_writer *w, int region, uint64_t page, const uint8_t *data, em_err *err)
{
    if (region < 0 || region >= RAMDELTA_REGIONS || page >= w->pages[region])
        return em_fail(err, "RAM delta `%s`: page %llu is outside region %d", w->path, (unsigned long long)page,
                       region);
    uint64_t key = make_key(region, page);
    if (w->any && key <= w->last_key)
        return em_fail(err, "RAM delta `%s`: pages added out of order", w->path);
    if (w->count == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 1024;
        uint8_t *grown = try_realloc(w->index, w->cap * ENTRY, "a RAM delta's index", err);
        if (!grown)
            return -1;
        w->index = grown;
    }
    uint64_t slot = RAMDELTA_ZERO;
    if (data && !ramdelta_page_is_zero(data)) {
        memcpy(w->batch + w->nbatch * RAMDELTA_PAGE, data, RAMDELTA_PAGE);
        slot = w->data_pages++;
        if (++w->nbatch == WRITE_BATCH && flush_batch(w, err) < 0)
            return -1;
    } else {
        w->zero_pages++;
    }
    wr64(w->index + w->count * ENTRY, key);
    wr64(w->index + w->count * ENTRY + 8, slot);
    w->count++;
    w->per_region[region]++;
    w->last_key = key;
    w->any = true;
    return 0;
}

static void writer_free(ramdelta_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    free(w->index);
    free(w->batch);
    free(w->path);
    free(w);
}

void ramdelta_abort(ramdelta_writer *w)
{
    if (!w)
        return;
    unlink(w->path);
    writer_free(w);
}

int ramdelta_finish(ramdelta_writer *w, ramdelta_stats *st, em_err *err)
{
    uint8_t header[HEADER] = {0};
    memcpy(header, MAGIC, 8);
    wr64(header + 8, (uint64_t)RAMDELTA_PAGE << 32 | VERSION);
    for (int r = 0; r < RAMDELTA_REGIONS; r++)
        wr64(header + 16 + 8 * r, w->pages[r]);
    wr64(header + 16 + 8 * RAMDELTA_REGIONS, w->count);
    wr64(header + 24 + 8 * RAMDELTA_REGIONS, w->data_pages);
    wr64(header + 32 + 8 * RAMDELTA_REGIONS, HEADER + w->data_pages * RAMDELTA_PAGE);
    int rc = flush_batch(w, err);
    if (rc == 0 && w->count && write_full(w->fd, w->index, w->count * ENTRY, err) < 0)
        rc = em_prefix(err, "RAM delta `%s`: ", w->path);
    if (rc == 0 && pwrite(w->fd, header, sizeof header, 0) != (ssize_t)sizeof header)
        rc = em_fail_errno(err, "RAM delta `%s`: write the header", w->path);
    if (rc == 0 && fsync(w->fd) < 0)
        rc = em_fail_errno(err, "fsync `%s`", w->path);
    if (rc < 0) {
        ramdelta_abort(w);
        return -1;
    }
    if (st) {
        memcpy(st->pages, w->per_region, sizeof st->pages);
        st->zero_pages = w->zero_pages;
        st->bytes = HEADER + w->data_pages * RAMDELTA_PAGE + w->count * ENTRY;
    }
    writer_free(w);
    return 0;
}

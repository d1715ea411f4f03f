#include "envmgr/base/owned.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/util.h"

#define EXTENTS 512 /* per ioctl; a flat RAM file has tens of thousands */

int file_owned_bytes(int fd, bool sync, uint64_t *owned, uint64_t *shared, em_err *err)
{
    *owned = 0;
    uint64_t sh = 0, start = 0;
    size_t size = sizeof(struct fiemap) + EXTENTS * sizeof(struct fiemap_extent);
    struct fiemap *fm = xmalloc(size);
    int rc = 0;
    for (bool last = false; !last;) {
        /* zeroed each time: valgrind does not know what FS_IOC_FIEMAP writes, and would take the
         * extents the kernel filled in for uninitialised memory */
        memset(fm, 0, size);
        *fm = (struct fiemap){.fm_start = start, .fm_length = FIEMAP_MAX_OFFSET - start,
                              .fm_flags = sync ? FIEMAP_FLAG_SYNC : 0, .fm_extent_count = EXTENTS};
        if (ioctl(fd, FS_IOC_FIEMAP, fm) < 0) {
            struct stat st;
            if ((errno == EOPNOTSUPP || errno == ENOTTY) && start == 0 && fstat(fd, &st) == 0) {
                *owned = (uint64_t)st.st_blocks * 512; /* no extent map: nothing shared */
                break;
            }
            rc = em_fail_errno(err, "map the file's extents");
            break;
        }
        if (fm->fm_mapped_extents == 0)
            break;
        for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
            const struct fiemap_extent *e = &fm->fm_extents[i];
            *(e->fe_flags & FIEMAP_EXTENT_SHARED ? &sh : owned) += e->fe_length;
            last = e->fe_flags & FIEMAP_EXTENT_LAST;
            start = e->fe_logical + e->fe_length;
        }
    }
    free(fm);
    if (shared)
        *shared = sh;
    return rc;
}

int dir_has_reflink(const char *dir, bool *yes, em_err *err)
{
    *yes = false;
    _cleanup_close_ int a = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    _cleanup_close_ int b = a < 0 ? -1 : open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (a < 0 || b < 0)
        return em_fail_errno(err, "a temp file in `%s`", dir);
    static const char page[4096];
    if (write(a, page, sizeof page) != (ssize_t)sizeof page)
        return em_fail_errno(err, "write a temp file in `%s`", dir);
    *yes = ioctl(b, FICLONE, a) == 0;
    return 0;
}

/* Files: capped reads that a hostile file cannot hang or bloat, atomic replacement, trees, and
 * paths kept inside a folder. One implementation for every caller (traces, tasks, run dirs). */
#include "envmgr/base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/util.h"

int mkdir_p(const char *path, mode_t mode, em_err *err)
{
    _cleanup_free_ char *copy = xstrdup(path);
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(copy, mode) < 0 && errno != EEXIST)
            return em_fail_errno(err, "mkdir `%s`", copy);
        *p = '/';
    }
    if (mkdir(copy, mode) < 0 && errno != EEXIST)
        return em_fail_errno(err, "mkdir `%s`", copy);
    return 0;
}

static int remove_at(int parent, const char *name, em_err *err)
{
    if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return em_fail_errno(err, "unlink `%s`", name);
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return em_fail_errno(err, "open `%s`", name);
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return em_fail_errno(err, "opendir `%s`", name);
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        rc = remove_at(dirfd(d), de->d_name, err);
    }
    closedir(d);
    if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return em_fail_errno(err, "rmdir `%s`", name);
    return rc;
}

int remove_tree(const char *path, em_err *err)
{
    return remove_at(AT_FDCWD, path, err);
}

int read_file_flags(const char *path, size_t max, int flags, char **out, size_t *len, em_err *err)
{
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
    int oflags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | ((flags & FILE_NOFOLLOW) ? O_NOFOLLOW : 0);
    _cleanup_close_ int fd = open(path, oflags);
    if (fd < 0 && errno == ELOOP && (flags & FILE_NOFOLLOW))
        return em_fail_input(err, "`%s` is a symbolic link (refused)", path);
    if (fd < 0)
        return em_fail_errno(err, "open `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return em_fail_errno(err, "stat `%s`", path);
    if (!S_ISREG(st.st_mode))
        return em_fail_input(err, "`%s` is not a regular file", path);
    if ((uintmax_t)st.st_size > max)
        return em_fail_input(err, "`%s` is %lld bytes, more than the limit of %zu", path, (long long)st.st_size,
                             max);
    /* Read to EOF rather than trusting st_size: the file may change under us. */
    _cleanup_free_ char *what = xasprintf("`%s`", path);
    return read_fd_capped(fd, what, max, (size_t)st.st_size + 1, out, len, err);
}

int read_fd_capped(int fd, const char *what, size_t max, size_t hint, char **out, size_t *len, em_err *err)
{
    *out = NULL;
    size_t cap = hint ? hint : 65536, n = 0;
    if (cap > max + 1)
        cap = max + 1;
    _cleanup_free_ char *buf = try_malloc(cap + 1, "input", err);
    if (!buf)
        return em_prefix(err, "read %s: ", what);
    for (;;) {
        if (n == cap) {
            if (cap > max)
                return em_fail_input(err, "%s: more than the limit of %zu bytes", what, max);
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *grown = try_realloc(buf, cap + 1, "input", err);
            if (!grown)
                return em_prefix(err, "read %s: ", what);
            buf = grown;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return em_fail_errno(err, "read %s", what);
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > max)
        return em_fail_input(err, "%s: more than the limit of %zu bytes", what, max);
    buf[n] = '\0';
    *out = buf;
    buf = NULL;
    if (len)
        *len = n;
    return 0;
}

int read_file_capped(const char *path, size_t max, char **out, size_t *len, em_err *err)
{
    return read_file_flags(path, max, 0, out, len, err);
}

/* The directory part of path ("." when there is none), for fsync after a rename. */
static int open_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (slash == path)
        return open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char dir[PATH_MAX];
    if ((size_t)(slash - path) >= sizeof dir)
        return errno = ENAMETOOLONG, -1;
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, em_err *err)
{
    /* Unique across processes and threads; O_EXCL|O_NOFOLLOW: never write through a planted file or link. */
    static atomic_uint counter;
    _cleanup_free_ char *tmp =
        xasprintf("%s.tmp.%d.%u", path, (int)getpid(), atomic_fetch_add(&counter, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return em_fail_errno(err, "create `%s`", tmp);
    if (write_full(fd, data, len, err) < 0 || fsync(fd) < 0) {
        if (err && !err->msg[0])
            em_fail_errno(err, "fsync `%s`", tmp);
        close(fd);
        unlink(tmp);
        return em_prefix(err, "write `%s`: ", path);
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        em_fail_errno(err, "rename `%s` to `%s`", tmp, path);
        unlink(tmp);
        return -1;
    }
    /* The rename is durable only once the directory entry is. */
    _cleanup_close_ int dfd = open_parent(path);
    if (dfd < 0 || fsync(dfd) < 0)
        return em_fail_errno(err, "fsync the folder of `%s`", path);
    return 0;
}

static bool has_dotdot(const char *p)
{
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 2 && s[0] == '.' && s[1] == '.')
            return true;
        if (!e)
            break;
        s = e + 1;
    }
    return false;
}

static bool under(const char *dir, const char *p)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return p[0] == '/' && p[1] != '\0';
    return strncmp(p, dir, n) == 0 && p[n] == '/' && p[n + 1] != '\0';
}

int path_inside(const char *dir, const char *p, bool must_exist, char **abs, em_err *err)
{
    *abs = NULL;
    if (!p || !*p)
        return em_fail_input(err, "an empty path");
    if (has_dotdot(p))
        return em_fail_input(err, "`%.200s` must not contain `..`", p);
    _cleanup_free_ char *joined = NULL;
    if (p[0] == '/') {
        if (!under(dir, p))
            return em_fail_input(err, "`%.200s` is outside the task folder `%.200s`", p, dir);
        joined = xstrdup(p);
    } else {
        joined = xasprintf("%s/%s", dir, p);
    }
    if (!must_exist) {
        *abs = joined;
        joined = NULL;
        return 0;
    }
    _cleanup_free_ char *real_dir = realpath(dir, NULL);
    if (!real_dir)
        return em_fail_errno(err, "task folder `%.200s`", dir);
    char *real = realpath(joined, NULL);
    if (!real)
        return em_fail_errno(err, "`%.200s`", p);
    if (!under(real_dir, real)) {
        free(real);
        return em_fail_input(err, "`%.200s` resolves outside the task folder", p);
    }
    *abs = real;
    return 0;
}

int lock_file_try(const char *path, bool shared, double wait_ms, const char *what, int *fd, em_err *err)
{
    *fd = -1;
    int lfd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lfd < 0)
        return em_fail_errno(err, "open `%s`", path);
    double deadline = now_ms() + wait_ms;
    while (flock(lfd, (shared ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
        int rc = 1;
        if (errno != EWOULDBLOCK && errno != EINTR)
            rc = em_fail_errno(err, "lock `%s`", path);
        else if (check_interrupt(err) < 0)
            rc = em_prefix(err, "waiting for %s of another envmgr: ", what);
        else if (now_ms() > deadline)
            rc = 0;
        if (rc <= 0) {
            close(lfd);
            return rc;
        }
        sleep_ms(wait_ms < 2000 ? 20 : 200);
    }
    *fd = lfd;
    return 1;
}

int lock_file_wait(const char *path, bool shared, double wait_ms, const char *what, int *fd, em_err *err)
{
    int rc = lock_file_try(path, shared, wait_ms, what, fd, err);
    if (rc == 0)
        return em_fail(err, "waited %.0f s for %s of another envmgr (`%s`)", wait_ms / 1000, what, path);
    return rc < 0 ? -1 : 0;
}

int file_data_extents(int fd, const char *what, uint64_t len, file_extent_fn fn, void *ctx, em_err *err)
{
    for (off_t pos = 0; (uint64_t)pos < len;) {
        off_t data = lseek(fd, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break; /* only a hole is left */
        off_t hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
        if (hole < 0)
            return em_fail_errno(err, "find the data of `%s`", what);
        if ((uint64_t)hole > len)
            hole = (off_t)len;
        if ((uint64_t)data >= len)
            break;
        if (fn(ctx, (uint64_t)data, (uint64_t)hole, err) < 0)
            return -1;
        pos = hole;
    }
    return 0;
}

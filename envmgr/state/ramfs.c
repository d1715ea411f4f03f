/* The server of a state's RAM file over FUSE (ramfs.h): libfuse's low-level API, one thread, our
 * own loop around its session so the server can leave when idle, and a child process that reads
 * the state's pages once into the kernel's cache (start_warm). The file is immutable (a state
 * never changes), so the kernel may keep its pages for as long as it likes (keep_cache, long
 * attribute timeouts); writes are refused (a private mapping never writes back). */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/state/ramdelta.h"
#include "envmgr/state/ramflat.h"
#include "envmgr/state/ramfs.h"

#define FILE_INO 2
#define READ_MAX ((size_t)1 << 20) /* the kernel asks for at most 128 KiB-1 MiB at a time */
#define FOREVER 1e9                /* attribute and entry timeouts: the file never changes */

typedef struct server {
    const ramfs_opts *o;
    int golden_fd;
    ramdelta **deltas;
    uint8_t *buf;
    long opens;
    double idle_since; /* now_ms() when the last open file was released */
    pid_t warmer;      /* the warm-up's process while it runs */
} server;

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

/* The attributes of the root folder or of the file; false for any other inode. */
static bool node_attr(const server *s, fuse_ino_t ino, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (ino == FUSE_ROOT_ID) {
        st->st_mode = S_IFDIR | 0500;
        st->st_nlink = 2;
    } else if (ino == FILE_INO) {
        st->st_mode = S_IFREG | 0400;
        st->st_nlink = 1;
        st->st_size = (off_t)s->o->ram_bytes; /* st_blocks 0: it owns no disk */
    }
    return ino == FUSE_ROOT_ID || ino == FILE_INO;
}

/* The request is for inode want; otherwise it is answered with error and false. */
static bool request_for(fuse_req_t req, fuse_ino_t ino, fuse_ino_t want, int error)
{
    if (ino == want)
        return true;
    fuse_reply_err(req, error);
    return false;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    server *s = fuse_req_userdata(req);
    if (parent != FUSE_ROOT_ID || strcmp(name, s->o->file_name)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e = {.ino = FILE_INO, .attr_timeout = FOREVER, .entry_timeout = FOREVER};
    node_attr(s, FILE_INO, &e.attr);
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    if (node_attr(fuse_req_userdata(req), ino, &st))
        fuse_reply_attr(req, &st, FOREVER);
    else
        fuse_reply_err(req, ENOENT);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    server *s = fuse_req_userdata(req);
    if (!request_for(req, ino, FILE_INO, EISDIR))
        return;
    /* QEMU opens its memory file read-write even to map it privately: allowed, writes are not */
    if (fi->flags & (O_TRUNC | O_APPEND)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    fi->keep_cache = 1;
    s->opens++;
    if (fuse_reply_open(req, fi) != 0)
        s->opens--; /* the opener was interrupted: no release will come */
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    server *s = fuse_req_userdata(req);
    if (--s->opens == 0)
        s->idle_since = now_ms();
    fuse_reply_err(req, 0);
}

/* ".", ".." and the file, so that ls and du see what is there */
static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    server *s = fuse_req_userdata(req);
    if (!request_for(req, ino, FUSE_ROOT_ID, ENOTDIR))
        return;
    const char *names[] = {".", "..", s->o->file_name};
    const fuse_ino_t inos[] = {FUSE_ROOT_ID, FUSE_ROOT_ID, FILE_INO};
    char buf[512];
    size_t used = 0;
    for (off_t i = off; i < 3; i++) {
        struct stat st;
        node_attr(s, inos[i], &st);
        size_t need = fuse_add_direntry(req, buf + used, sizeof buf - used, names[i], &st, i + 1);
        if (need > sizeof buf - used || used + need > size)
            break;
        used += need;
    }
    fuse_reply_buf(req, buf, used);
}

/* The golden file's bytes [off, off+len) into out; past its end (or a hole) is zeros. */
static int golden_read(const server *s, uint64_t off, uint8_t *out, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(s->golden_fd, out + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    memset(out + got, 0, len - got);
    return 0;
}

/* The state's bytes [off, off+len): each page from the last delta holding it, runs of the others
 * from the golden file in one read each. */
static int fill(const server *s, uint64_t off, uint8_t *out, size_t len)
{
    uint64_t pos = off, end = off + len, run = off; /* [run, pos): golden bytes not yet read */
    while (pos < end) {
        uint64_t page = pos / RAMDELTA_PAGE, in_page = pos % RAMDELTA_PAGE;
        size_t n = RAMDELTA_PAGE - in_page < end - pos ? RAMDELTA_PAGE - in_page : end - pos;
        const uint8_t *data = NULL;
        bool held = false;
        for (size_t i = s->o->ndeltas; i-- > 0 && !held;)
            held = ramdelta_find(s->deltas[i], RAMDELTA_RAM, page, &data);
        if (held) {
            int rc = golden_read(s, run, out + (run - off), pos - run);
            if (rc < 0)
                return rc;
            if (data)
                memcpy(out + (pos - off), data + in_page, n);
            else
                memset(out + (pos - off), 0, n);
            run = pos + n;
        }
        pos += n;
    }
    return golden_read(s, run, out + (run - off), end - run);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    server *s = fuse_req_userdata(req);
    if (!request_for(req, ino, FILE_INO, EISDIR))
        return;
    if (off < 0 || (uint64_t)off >= s->o->ram_bytes) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if (size > READ_MAX)
        size = READ_MAX;
    if (size > s->o->ram_bytes - (uint64_t)off)
        size = (size_t)(s->o->ram_bytes - (uint64_t)off);
    int rc = fill(s, (uint64_t)off, s->buf, size);
    if (rc < 0) {
        fprintf(stderr, "envmgr ramfs: read of %zu bytes at %lld: %s\n", size, (long long)off, strerror(-rc));
        fuse_reply_err(req, EIO);
        return;
    }
    fuse_reply_buf(req, (const char *)s->buf, size);
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = op_lookup,
    .getattr = op_getattr,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .readdir = op_readdir,
};

/* ---- warm-up: the state's data pages into the kernel's cache, read through the mount ---- */

typedef struct warm_job {
    int fd;          /* the served file, through the mount */
    const char *path;
    uint8_t *buf;
    uint64_t bytes;  /* read so far */
} warm_job;

/* Read [off, end) of the served file, for the cache: the bytes are dropped. */
static int read_range(void *ctx, uint64_t off, uint64_t end, em_err *err)
{
    warm_job *w = ctx;
    while (off < end) {
        size_t want = end - off < READ_MAX ? (size_t)(end - off) : READ_MAX;
        ssize_t r = pread(w->fd, w->buf, want, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? em_fail_errno(err, "read `%s`", w->path) : em_fail(err, "`%s` ended early", w->path);
        off += (uint64_t)r;
        w->bytes += (uint64_t)r;
    }
    return 0;
}

/* The deltas' pages (each once, in runs of consecutive pages), then the golden file's data. */
static int warm_pages(server *s, warm_job *w, em_err *err)
{
    ramdelta_page *pages = NULL;
    size_t count = 0;
    if (ramdelta_merge(s->deltas, s->o->ndeltas, RAMDELTA_RAM, &pages, &count, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0, j; i < count && rc == 0; i = j) {
        for (j = i + 1; j < count && pages[j].page == pages[j - 1].page + 1;)
            j++;
        rc = read_range(w, pages[i].page * RAMDELTA_PAGE, (pages[j - 1].page + 1) * RAMDELTA_PAGE, err);
    }
    free(pages);
    if (rc < 0)
        return -1;
    _cleanup_close_ int g = open(s->o->golden_ram, O_RDONLY | O_CLOEXEC); /* its own offset for lseek */
    if (g < 0)
        return em_fail_errno(err, "open `%s`", s->o->golden_ram);
    return file_data_extents(g, s->o->golden_ram, s->o->ram_bytes, read_range, w, err);
}

static void mark_warm(const ramfs_opts *o)
{
    int m = open(o->warm_path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (m >= 0)
        close(m);
}

/* The warm-up runs in a child process, never in a thread of the server: a thread's file on the
 * server's own mount, closed as a killed server exits, waits forever for a FLUSH answer from the
 * process that is exiting, and the server would hang as it exits. The child keeps nothing
 * of the server's (no /dev/fuse, no lock), so a killed server's connection aborts and the child's
 * reads fail. Its reads are answered like any QEMU's. It creates the marker once the pages are
 * read; a warm-up that failed is said in the log and the server creates the marker then (the guest
 * merely runs slower on its first touches, and nobody waits for a marker that never comes). */
static void start_warm(server *s)
{
    s->warmer = fork(); /* the server is single-threaded: the child may do anything */
    if (s->warmer < 0) {
        mark_warm(s->o);
        return;
    }
    if (s->warmer > 0)
        return;
    close_range(3, ~0U, 0); /* stdout and stderr are the server's log */
    double t0 = now_ms();
    em_err err = {0};
    warm_job w = {.path = xasprintf("%s/%s", s->o->mountpoint, s->o->file_name), .buf = xmalloc(READ_MAX)};
    w.fd = open(w.path, O_RDONLY | O_CLOEXEC);
    if ((w.fd < 0 ? em_fail_errno(&err, "open `%s`", w.path) : warm_pages(s, &w, &err)) < 0) {
        fprintf(stderr, "envmgr ramfs: warm-up stopped after %.0f MiB: %s\n", (double)w.bytes / (1 << 20), err.msg);
        _exit(1);
    }
    mark_warm(s->o);
    fprintf(stderr, "envmgr ramfs: warm-up: %.0f MiB in %.0f ms\n", (double)w.bytes / (1 << 20), now_ms() - t0);
    _exit(0);
}

/* The warm-up's child ended (wait: until it does): a failed one leaves the marker to the server. */
static void reap_warm(server *s, bool wait)
{
    int status;
    if (s->warmer <= 0 || waitpid(s->warmer, &status, wait ? 0 : WNOHANG) != s->warmer)
        return;
    s->warmer = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        mark_warm(s->o);
}

/* Leave when nothing has been open for idle_s (at once when asked to stop), under the state's
 * lock taken exclusively: a restore holds it shared until its QEMU has the file open. */
static bool may_leave(server *s, int lock_fd)
{
    if (s->opens > 0 || (!stop_asked && now_ms() - s->idle_since < s->o->idle_s * 1000))
        return false;
    return flock(lock_fd, LOCK_EX | LOCK_NB) == 0;
}

static int open_inputs(server *s, em_err *err)
{
    s->golden_fd = open(s->o->golden_ram, O_RDONLY | O_CLOEXEC);
    if (s->golden_fd < 0)
        return em_fail_errno(err, "open `%s`", s->o->golden_ram);
    s->deltas = xcalloc(s->o->ndeltas ? s->o->ndeltas : 1, sizeof *s->deltas);
    for (size_t i = 0; i < s->o->ndeltas; i++)
        if (ramdelta_open(s->o->deltas[i], &s->deltas[i], err) < 0)
            return -1;
    s->buf = xmalloc(READ_MAX);
    return ramflat_inputs_check(s->golden_fd, s->o->golden_ram, s->o->ram_bytes, s->deltas, s->o->ndeltas, err);
}

static void close_inputs(server *s)
{
    for (size_t i = 0; s->deltas && i < s->o->ndeltas; i++)
        if (s->deltas[i])
            ramdelta_close(s->deltas[i]);
    free(s->deltas);
    free(s->buf);
    if (s->golden_fd >= 0)
        close(s->golden_fd);
}

static void tell(int fd, const char *line)
{
    if (fd < 0)
        return;
    size_t len = strlen(line);
    ssize_t w = write(fd, line, len);
    (void)w;
    close(fd);
}

static int loop(server *s, struct fuse_session *se, int lock_fd)
{
    struct fuse_buf fbuf = {.mem = NULL};
    int rc = 0;
    while (!fuse_session_exited(se)) {
        reap_warm(s, false);
        struct pollfd p = {.fd = fuse_session_fd(se), .events = POLLIN};
        int r = poll(&p, 1, 1000);
        if (r < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
        if (r > 0) {
            int got = fuse_session_receive_buf(se, &fbuf);
            if (got == -EINTR || got == -EAGAIN)
                continue;
            if (got <= 0) { /* 0 or -ENODEV: unmounted, the last user gone */
                rc = got == -ENODEV ? 0 : got;
                break;
            }
            fuse_session_process_buf(se, &fbuf);
            continue;
        }
        if (may_leave(s, lock_fd))
            break;
    }
    free(fbuf.mem);
    return rc;
}

int ramfs_serve(const ramfs_opts *o, int ready_fd, em_err *err)
{
    server s = {.o = o, .golden_fd = -1, .idle_since = now_ms()};
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    unlink(o->warm_path); /* a killed server's */
    int lock_fd = open(o->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = lock_fd < 0 ? em_fail_errno(err, "open `%s`", o->lock_path) : open_inputs(&s, err);
    struct fuse_session *se = NULL;
    bool mounted = false;
    if (rc == 0) {
        _cleanup_free_ char *opt = xasprintf("fsname=envmgr-state-%s,subtype=envmgr,noatime", o->file_name);
        char *argv[] = {"envmgr-ramfs", "-o", opt, NULL};
        struct fuse_args args = FUSE_ARGS_INIT(3, argv);
        se = fuse_session_new(&args, &ops, sizeof ops, &s);
        fuse_opt_free_args(&args);
        if (!se)
            rc = em_fail(err, "FUSE session for `%s`: libfuse refused it (its message is above)", o->mountpoint);
    }
    if (rc == 0 && fuse_session_mount(se, o->mountpoint) != 0)
        rc = em_fail(err, "mount FUSE at `%s` (is /dev/fuse there, and are we root or is fusermount3?)",
                     o->mountpoint);
    mounted = rc == 0;
    if (rc == 0) {
        start_warm(&s);
        tell(ready_fd, "ok\n");
        int lr = loop(&s, se, lock_fd);
        if (lr < 0)
            rc = em_fail(err, "serving `%s`: %s", o->mountpoint, strerror(-lr));
    } else {
        _cleanup_free_ char *line = xasprintf("%s\n", err->msg);
        tell(ready_fd, line);
    }
    if (mounted)
        fuse_session_unmount(se);
    if (se)
        fuse_session_destroy(se);
    reap_warm(&s, true); /* its reads failed once the session was gone, if any were left */
    unlink(o->warm_path);
    close_inputs(&s);
    if (lock_fd >= 0)
        close(lock_fd); /* after the unmount: a restore waiting for the lock finds the folder empty */
    return rc;
}

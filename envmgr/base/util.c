#include "envmgr/base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "envmgr/base/warn.h"

static volatile sig_atomic_t interrupt_signal;

static void oom(void)
{
    em_log(EM_LOG_ERROR, "envmgr: out of memory"); /* em_vlog formats on the stack */
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *try_malloc(size_t n, const char *what, em_err *err)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        em_fail_nomem(err, n, what);
    return p;
}

void *try_realloc(void *p, size_t n, const char *what, em_err *err)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        em_fail_nomem(err, n, what);
    return q;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        oom();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        oom();
    return s;
}

void cleanup_freep(void *p)
{
    free(*(void **)p);
}

void cleanup_closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

void cleanup_fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void iso8601_now(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !interrupt_signal)
        ;
}

static void on_interrupt(int sig)
{
    interrupt_signal = sig;
}

void install_interrupt_handlers(void)
{
    struct sigaction sa = {.sa_handler = on_interrupt}; /* no SA_RESTART: poll and sleep return early */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int interrupted(void)
{
    return interrupt_signal != 0;
}

int check_interrupt(em_err *err)
{
    return interrupt_signal ? em_fail(err, "interrupted by signal %d", (int)interrupt_signal) : 0;
}

/* Wait until fd has one of events (POLLIN, POLLOUT); 0 ready, -1 error, interrupt or timeout. */
static int wait_ready(int fd, short events, double deadline, em_err *err)
{
    for (;;) {
        if (check_interrupt(err) < 0)
            return -1;
        double left = deadline - now_ms();
        if (left <= 0)
            return em_fail(err, "timed out");
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)(left + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return em_fail_errno(err, "poll");
        if (r > 0)
            return 0;
    }
}

int wait_readable(int fd, double deadline, em_err *err)
{
    return wait_ready(fd, POLLIN, deadline, err);
}

int read_full_deadline(int fd, void *buf, size_t n, double deadline, em_err *err)
{
    size_t got = 0;
    while (got < n) {
        if (wait_readable(fd, deadline, err) < 0)
            return -1;
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0)
            return em_fail_errno(err, "read");
        if (r == 0)
            return em_fail(err, "connection closed");
        got += (size_t)r;
    }
    return 0;
}

int write_full(int fd, const void *buf, size_t n, em_err *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return em_fail_errno(err, "write");
        done += (size_t)w;
    }
    return 0;
}

int send_full(int fd, const void *buf, size_t n, em_err *err)
{
    return send_full_wait(fd, buf, n, 0, err);
}

int send_full_wait(int fd, const void *buf, size_t n, int wait_ms, em_err *err)
{
    size_t done = 0;
    double deadline = wait_ms > 0 ? now_ms() + wait_ms : 0; /* send_full's sends read no clock */
    while (done < n) {
        ssize_t w = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_ms > 0) {
            /* a non-blocking socket whose peer has not read the last bytes yet: wait for room */
            if (wait_ready(fd, POLLOUT, deadline, err) < 0)
                return now_ms() >= deadline ? em_fail(err, "send: the peer read nothing for %d ms", wait_ms) : -1;
            continue;
        }
        if (w < 0)
            return em_fail_errno(err, "send");
        done += (size_t)w;
    }
    return 0;
}

int unix_connect(const char *path, double timeout_ms, em_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return em_fail(err, "socket path `%s` is longer than %zu bytes", path, sizeof sa.sun_path - 1);
    strcpy(sa.sun_path, path);
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return em_fail_errno(err, "socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        int e = errno;
        close(fd);
        if ((e != ENOENT && e != ECONNREFUSED) || now_ms() >= deadline) {
            errno = e;
            return em_fail_errno(err, "connect `%s`", path);
        }
        sleep_ms(20);
    }
}

int parse_int(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || v != v)
        return -1;
    *out = v;
    return 0;
}

int check_name(const char *what, const char *name, em_err *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > 48)
        return em_fail_input(err, "%s: must be 1 to 48 characters, got %zu", what, n);
    if (name[0] == '.' || name[0] == '-')
        return em_fail_input(err, "%s: `%s` must not start with '.' or '-'", what, name);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.'))
            return em_fail_input(err, "%s: `%s` may only contain letters, digits, '.', '-' and '_'", what, name);
    }
    return 0;
}

bool pid_running(pid_t pid)
{
    if (pid <= 1 || (kill(pid, 0) < 0 && errno == ESRCH))
        return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

bool dns_name_valid(const char *h, bool lowercase_only)
{
    size_t n = strlen(h);
    if (n == 0 || n > 253 || h[n - 1] == '.') /* no empty last label (the loop stops before it) */
        return false;
    for (const char *s = h; *s;) {
        const char *e = strchr(s, '.');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 0 || len > 63 || s[0] == '-' || s[len - 1] == '-')
            return false;
        for (size_t i = 0; i < len; i++) {
            char c = s[i];
            bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                      (!lowercase_only && c >= 'A' && c <= 'Z');
            if (!ok)
                return false;
        }
        if (!e)
            break;
        s = e + 1;
    }
    return true;
}

void hex_encode(const void *data, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *d = data;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

bool url_is_remote(const char *url)
{
    size_t n = !strncasecmp(url, "http://", 7) ? 7 : !strncasecmp(url, "https://", 8) ? 8 : 0;
    return n && url[n] && url[n] != '/';
}

#include "envmgr/base/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "envmgr/base/util.h"

/* Is something at path a socket nobody answers on (a server that died)? Then it may go. */
static int clear_stale(const char *path, em_err *err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : em_fail_errno(err, "`%s`", path);
    if (!S_ISSOCK(st.st_mode))
        return em_fail_input(err, "`%s` exists and is not a socket", path);
    int probe = unix_connect(path, 0, NULL);
    if (probe >= 0) {
        close(probe);
        return em_fail_input(err, "`%s` is in use by a running server", path);
    }
    if (unlink(path) < 0 && errno != ENOENT)
        return em_fail_errno(err, "remove stale socket `%s`", path);
    return 0;
}

int listen_unix(const char *path, int *fd_out, em_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    *fd_out = -1;
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) : 0;
    /* The private folder's name is the path's folder + "/.listen-XXXXXX/s": it must fit too. */
    if (strlen(path) >= sizeof sa.sun_path || dirlen + 17 >= sizeof sa.sun_path)
        return em_fail_input(err, "`%s`: socket path longer than %zu bytes", path, sizeof sa.sun_path - 18);
    if (clear_stale(path, err) < 0)
        return -1;
    char tmpdir[sizeof sa.sun_path - 2]; /* room for "/s" after it */
    snprintf(tmpdir, sizeof tmpdir, "%.*s%s.listen-XXXXXX", (int)dirlen, path, slash ? "/" : "");
    if (!mkdtemp(tmpdir)) /* mode 0700: nobody else can reach the socket inside */
        return em_fail_errno(err, "`%s`: private folder for the socket", path);
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s", tmpdir);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
    if (rc == 0)
        rc = chmod(sa.sun_path, 0600);
    if (rc == 0)
        rc = listen(fd, LISTEN_BACKLOG);
    if (rc == 0)
        rc = rename(sa.sun_path, path);
    int e = errno;
    unlink(sa.sun_path);
    rmdir(tmpdir);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        errno = e;
        return em_fail_errno(err, "listen on `%s`", path);
    }
    *fd_out = fd;
    return 0;
}

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

static void format_where(const struct sockaddr_storage *ss, char where[LISTEN_WHERE_MAX])
{
    char num[INET6_ADDRSTRLEN] = "?";
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a6->sin6_addr, num, sizeof num);
        snprintf(where, LISTEN_WHERE_MAX, "[%s]:%d", num, ntohs(a6->sin6_port));
    } else {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a4->sin_addr, num, sizeof num);
        snprintf(where, LISTEN_WHERE_MAX, "%s:%d", num, ntohs(a4->sin_port));
    }
}

int listen_tcp(const char *spec, bool loopback_only, int *fd_out, char where[LISTEN_WHERE_MAX], em_err *err)
{
    *fd_out = -1;
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec)
        return em_fail_input(err, "expected HOST:PORT, got `%.100s`", spec);
    size_t hl = (size_t)(colon - spec);
    if (hl >= sizeof host)
        return em_fail_input(err, "host too long");
    memcpy(host, spec, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    long port;
    if (parse_int(colon + 1, 0, 65535, &port) < 0)
        return em_fail_input(err, "bad port `%.20s`", colon + 1);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0)
        return em_fail_input(err, "`%.100s`: %s", host, gai_strerror(g));
    if (loopback_only && !is_loopback(ai->ai_addr)) {
        freeaddrinfo(ai);
        return em_fail_input(err, "`%.100s`: loopback addresses only", spec);
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return em_fail_errno(err, "socket");
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
        int e = errno;
        freeaddrinfo(ai);
        close(fd);
        errno = e;
        return em_fail_errno(err, "bind %.100s", spec);
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return em_fail_errno(err, "getsockname %.100s", spec);
    }
    format_where(&ss, where);
    *fd_out = fd;
    return 0;
}

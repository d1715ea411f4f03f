/* `envmgr view`: a view-only VNC endpoint for any VNC viewer. It needs no env
 * handle (and takes no env lock): each viewer gets its own connection to the
 * env's VNC socket through the relay's input filter, so watching never
 * competes with the agent or the CLI. After a reset QEMU's socket is new:
 * viewers reconnect. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "envmgr/view/view.h"

#include <pthread.h>
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/view/relay.h"
#include "envmgr/vm/vm.h"

typedef struct viewer {
    int fd;
    const char *vnc_sock;
    bool view_only;
    const volatile int *stop;
    int *running;
    pthread_mutex_t *mu;
} viewer;

static void *viewer_main(void *arg)
{
    viewer *v = arg;
    view_relay(v->fd, false, v->vnc_sock, v->view_only, v->stop);
    close(v->fd);
    pthread_mutex_lock(v->mu);
    (*v->running)--;
    pthread_mutex_unlock(v->mu);
    free(v);
    return NULL;
}

static int bind_listener(const char *listen_spec, const char *socket_path, char *where, size_t wlen, em_err *err)
{
    int fd;
    if (socket_path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(socket_path) >= sizeof sa.sun_path)
            return em_fail_input(err, "--socket: path too long");
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", socket_path);
        struct stat st;
        if (lstat(socket_path, &st) == 0) {
            if (!S_ISSOCK(st.st_mode))
                return em_fail_input(err, "--socket: `%s` exists and is not a socket", socket_path);
            unlink(socket_path);
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        mode_t old = umask(0177);
        int rc = fd < 0 ? -1 : bind(fd, (struct sockaddr *)&sa, sizeof sa);
        umask(old);
        if (rc < 0 || listen(fd, 8) < 0) {
            em_fail_errno(err, "--socket: bind `%s`", socket_path);
            if (fd >= 0)
                close(fd);
            return -1;
        }
        snprintf(where, wlen, "%s", socket_path);
        return fd;
    }
    char host[128];
    const char *colon = strrchr(listen_spec, ':');
    if (!colon || (size_t)(colon - listen_spec) >= sizeof host)
        return em_fail_input(err, "--listen: expected HOST:PORT, got `%s`", listen_spec);
    memcpy(host, listen_spec, (size_t)(colon - listen_spec));
    host[colon - listen_spec] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0)
        return em_fail_input(err, "--listen: `%s`: %s", listen_spec, gai_strerror(g));
    struct sockaddr_in *a4 = (struct sockaddr_in *)ai->ai_addr;
    if ((ntohl(a4->sin_addr.s_addr) >> 24) != 127) {
        freeaddrinfo(ai);
        return em_fail_input(err, "--listen: a viewer endpoint has no password: loopback addresses only");
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 8) < 0) {
        em_fail_errno(err, "--listen: bind %s", listen_spec);
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    char num[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, num, sizeof num);
    snprintf(where, wlen, "%s:%d", num, ntohs(sa.sin_port));
    return fd;
}

int view_serve(const char *name, const char *listen_spec, const char *socket_path, bool control,
                   void (*ready)(const char *where, void *arg), void *arg, em_err *err)
{
    if (check_name("env", name, err) < 0)
        return -1;
    _cleanup_free_ char *dir = paths_env_dir(name), *sock = xasprintf("%s/" VM_VNC_SOCK, dir);
    struct stat st;
    if (stat(dir, &st) < 0)
        return em_fail_input(err, "env `%s` does not exist (envmgr ls lists the envs)", name);
    if (stat(sock, &st) < 0 || !S_ISSOCK(st.st_mode))
        return em_fail(err, "env %s: no VNC socket at %s (is its QEMU running? envmgr ls)", name, sock);
    char where[300];
    int lfd = bind_listener(listen_spec ? listen_spec : "127.0.0.1:0", socket_path, where, sizeof where, err);
    if (lfd < 0)
        return -1;
    ready(where, arg);
    int stop = 0, running = 0;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    while (!interrupted()) {
        struct pollfd pf = {.fd = lfd, .events = POLLIN};
        if (poll(&pf, 1, 250) <= 0)
            continue;
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        viewer *v = xcalloc(1, sizeof *v);
        *v = (viewer){c, sock, !control, &stop, &running, &mu};
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&mu);
        running++;
        pthread_mutex_unlock(&mu);
        if (pthread_create(&th, &at, viewer_main, v) != 0) {
            pthread_mutex_lock(&mu);
            running--;
            pthread_mutex_unlock(&mu);
            close(c);
            free(v);
        }
        pthread_attr_destroy(&at);
    }
    stop = 1;
    close(lfd);
    if (socket_path)
        unlink(socket_path);
    for (int i = 0; i < 100; i++) { /* relays poll every 250 ms */
        pthread_mutex_lock(&mu);
        int n = running;
        pthread_mutex_unlock(&mu);
        if (!n)
            break;
        sleep_ms(20);
    }
    return 0;
}

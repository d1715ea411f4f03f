/* `envmgr view`: a view-only VNC endpoint for any VNC viewer. It needs no env
 * handle (and takes no env lock): each viewer gets its own connection to the
 * env's VNC socket through the relay's input filter, so watching never
 * competes with the agent or the CLI. After a reset QEMU's socket is new:
 * viewers reconnect. */
#include "envmgr/view/view.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/listen.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/view/relay.h"
#include "envmgr/vm/vm.h"

typedef struct viewer {
    int fd;
    const char *vnc_sock;
    bool view_only;
    const atomic_int *stop;
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
        if (listen_unix(socket_path, &fd, err) < 0)
            return em_prefix(err, "--socket: ");
        snprintf(where, wlen, "%s", socket_path);
        return fd;
    }
    char bound[LISTEN_WHERE_MAX];
    /* a viewer endpoint has no password: loopback only */
    if (listen_tcp(listen_spec, true, &fd, bound, err) < 0)
        return em_prefix(err, "--listen: ");
    snprintf(where, wlen, "%s", bound);
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
    atomic_int stop = 0;
    int running = 0;
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

/* The gate thread: accepts on the API's listen socket, holds each connection until its request
 * head is complete (api_gate_head.c) or its deadline passes, under the caps of api_gate_book.c,
 * and hands it to libmicrohttpd with MHD_add_connection. It only peeks: MHD reads the bytes.
 * Edge-triggered epoll wakes it once per arrival of bytes, so a peeked connection that stays
 * readable costs nothing until more comes. It never forks and holds no lock of the server's. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "envmgr/api/api_gate.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

#define GATE_ACCEPT_BATCH 64 /* connections accepted per wakeup, so held ones are looked at too */
#define GATE_QUEUED_STALE_MS 1000.0

struct api_gate {
    int listen_fd, epfd, wake_fd;
    pthread_t th;
    bool running;
    struct MHD_Daemon *mhd;
    const char *master;  /* the server's token (borrowed) */
    api_metrics *metrics;
    atomic_int active;   /* MHD's open connections, from its notifications */
    atomic_int queued;   /* handed to MHD, not yet started by its thread */
    double last_hand;    /* when the gate last handed one over (gate thread only) */
    api_gate_book book;  /* gate thread only */
    char head[API_GATE_HEAD_MAX + 1];
};

static void drop(api_gate *g, int i)
{
    close(g->book.c[i].fd); /* also leaves the epoll set: the fd has no other copy */
    api_gate_book_remove(&g->book, i);
}

/* A short answer, then close: the head the client sent is read first (once: a client that keeps
 * sending cannot keep the gate here), so the close is a FIN after the answer and not a reset that
 * could destroy it. */
static void refuse(api_gate *g, int i, int status, const char *reason, const char *msg)
{
    int fd = g->book.c[i].fd;
    (void)recv(fd, g->head, API_GATE_HEAD_MAX, MSG_DONTWAIT); /* a failure: the answer goes out all the same */
    api_error ae;
    api_fail(&ae, status, "", "%s", msg);
    json_t *j = api_error_json(&ae);
    char *body = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    char out[1024];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\nCache-Control: no-store\r\nRetry-After: 1\r\n\r\n%s\n",
                     status, reason, body ? strlen(body) + 1 : 1, body ? body : "");
    free(body);
    if (n > 0 && (size_t)n < sizeof out) /* a client that is gone or reads nothing gets nothing */
        (void)send(fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    api_metrics_http(g->metrics, status);
    drop(g, i);
}

/* MHD's connections now, counting those handed over and not yet started; a count of queued
 * ones that MHD dropped without a notification (out of memory) is forgotten after a second. */
static int load(api_gate *g)
{
    int q = atomic_load(&g->queued);
    if (q && now_ms() - g->last_hand > GATE_QUEUED_STALE_MS) {
        atomic_store(&g->queued, 0);
        q = 0;
    }
    return atomic_load(&g->active) + (q > 0 ? q : 0);
}

static void admit(api_gate *g, int i, size_t head_len)
{
    int busy = load(g);
    if (busy >= API_CONN_LIMIT - API_GATE_RESERVE) {
        bool cred = api_gate_head_credential(g->head, head_len, g->master, (long)time(NULL));
        if (!cred || busy >= API_CONN_LIMIT) {
            refuse(g, i, 503, "Service Unavailable",
                   "the server is busy: its connections are in use or kept for requests with a token; "
                   "try again later");
            return;
        }
    }
    api_gate_conn c = g->book.c[i];
    if (c.watched)
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, c.fd, NULL);
    api_gate_book_remove(&g->book, i);
    atomic_fetch_add(&g->queued, 1);
    g->last_hand = now_ms();
    if (MHD_add_connection(g->mhd, c.fd, (struct sockaddr *)&c.addr, c.alen) != MHD_YES)
        atomic_fetch_sub(&g->queued, 1); /* MHD closed it and said why on stderr */
}

/* Bytes arrived on held connection i (or it was just accepted); true when it is still held. */
static bool look(api_gate *g, int i, uint32_t events)
{
    api_gate_conn *c = &g->book.c[i];
    ssize_t n = recv(c->fd, g->head, API_GATE_HEAD_MAX, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return true;
    if (n <= 0) {
        drop(g, i);
        return false;
    }
    size_t end = api_gate_head_end(g->head, (size_t)n);
    if (end) {
        admit(g, i, end);
        return false;
    }
    if (n >= API_GATE_HEAD_MAX) {
        char msg[80];
        snprintf(msg, sizeof msg, "the request head is over %d bytes", API_GATE_HEAD_MAX);
        refuse(g, i, 431, "Request Header Fields Too Large", msg);
        return false;
    }
    if (++c->peeks > API_GATE_PEEKS_MAX || (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
        drop(g, i); /* in too many pieces, or the client stopped sending before the end */
        return false;
    }
    return true;
}

static void accept_new(api_gate *g)
{
    for (int k = 0; k < GATE_ACCEPT_BATCH; k++) {
        api_gate_conn c = {.alen = sizeof c.addr};
        c.fd = accept4(g->listen_fd, (struct sockaddr *)&c.addr, &c.alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c.fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: the oldest held connection makes room, or wait a little
                 * (the listen socket stays readable; do not spin on it) */
                if (!g->book.n) {
                    sleep_ms(20);
                    return;
                }
                drop(g, 0);
                continue;
            }
            return; /* EAGAIN: all taken */
        }
        c.t0 = now_ms();
        api_gate_addr_key((struct sockaddr *)&c.addr, c.alen, c.key);
        int victim = api_gate_book_victim(&g->book, c.key, API_GATE_PER_ADDR, API_GATE_PENDING_MAX);
        if (victim >= 0)
            drop(g, victim);
        api_gate_book_add(&g->book, &c);
        int i = g->book.n - 1;
        /* A client usually sent its head before it was accepted: then it goes on at once and
         * never enters the epoll set. Bytes arriving after this peek are reported by the add. */
        if (!look(g, i, 0))
            continue;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = c.fd};
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, c.fd, &ev) < 0)
            drop(g, i);
        else
            g->book.c[i].watched = true;
    }
}

static void *gate_main(void *arg)
{
    api_gate *g = arg;
    struct epoll_event ev[64];
    for (;;) {
        int timeout = -1;
        if (g->book.n) {
            double left = g->book.c[0].t0 + API_GATE_HEAD_MS - now_ms();
            timeout = left <= 0 ? 0 : (int)left + 1;
        }
        int n = epoll_wait(g->epfd, ev, (int)ARRAY_LEN(ev), timeout);
        if (n < 0 && errno != EINTR) {
            em_log(EM_LOG_ERROR, "envmgr serve: the connection gate: epoll_wait: %s", strerror(errno));
            sleep_ms(100);
        }
        for (int k = 0; k < n; k++) {
            int fd = ev[k].data.fd;
            if (fd == g->wake_fd)
                goto stop;
            if (fd == g->listen_fd) {
                accept_new(g);
            } else {
                int i = api_gate_book_find(&g->book, fd);
                if (i >= 0)
                    look(g, i, ev[k].events);
            }
        }
        double now = now_ms();
        while (g->book.n && now - g->book.c[0].t0 >= API_GATE_HEAD_MS)
            drop(g, 0); /* no complete head within the deadline */
    }
stop:
    return NULL;
}

static int watch(api_gate *g, int fd, em_err *err)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return em_fail_errno(err, "serve: epoll_ctl");
    return 0;
}

int api_gate_start(int listen_fd, struct MHD_Daemon *mhd, const char *master, api_metrics *metrics,
                   api_gate **out, em_err *err)
{
    api_gate *g = xcalloc(1, sizeof *g);
    g->listen_fd = listen_fd;
    g->mhd = mhd;
    g->master = master;
    g->metrics = metrics;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int rc = 0;
    if (g->epfd < 0 || g->wake_fd < 0)
        rc = em_fail_errno(err, "serve: the connection gate's epoll or eventfd");
    int fl = fcntl(listen_fd, F_GETFL);
    if (rc == 0 && (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0))
        rc = em_fail_errno(err, "serve: making the listen socket non-blocking");
    if (rc == 0)
        rc = watch(g, listen_fd, err);
    if (rc == 0)
        rc = watch(g, g->wake_fd, err);
    if (rc == 0) {
        int e = pthread_create(&g->th, NULL, gate_main, g);
        if (e) {
            errno = e;
            rc = em_fail_errno(err, "serve: starting the connection gate's thread");
        }
        g->running = e == 0;
    }
    if (rc < 0) {
        api_gate_stop(g);
        api_gate_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

void api_gate_note(api_gate *g, int delta)
{
    atomic_fetch_add(&g->active, delta);
    if (delta > 0)
        atomic_fetch_sub(&g->queued, 1);
}

void api_gate_stop(api_gate *g)
{
    if (!g)
        return;
    if (g->running) {
        uint64_t one = 1;
        if (write(g->wake_fd, &one, sizeof one) < 0)
            em_log(EM_LOG_ERROR, "envmgr serve: waking the connection gate: %s", strerror(errno));
        pthread_join(g->th, NULL);
        g->running = false;
    }
    while (g->book.n)
        drop(g, g->book.n - 1);
    if (g->epfd >= 0)
        close(g->epfd);
    if (g->wake_fd >= 0)
        close(g->wake_fd);
    g->epfd = g->wake_fd = -1;
}

void api_gate_free(api_gate *g)
{
    free(g);
}

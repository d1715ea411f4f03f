#include "envmgr/net/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/net/proxy_http.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/listen.h"
#include "envmgr/base/util.h"
#include "envmgr/base/linebuf.h"
#include "envmgr/base/warn.h"
#include "envmgr/vm/runas.h"

#define CONTROL_MAX 512
#define CONTROL_TIMEOUT_MS 1000.0
#define REPLY_TIMEOUT_MS 5000.0   /* writing a refusal to a guest that does not read */
#define PUMP_BUF (64 * 1024)
#define THREAD_STACK (512 * 1024)
#define STOP_WAIT_MS 15000.0      /* a thread in getaddrinfo cannot be woken early */

typedef enum { ST_HEAD, ST_DECIDE, ST_PUMP, ST_DONE } conn_state;

typedef struct conn {
    proxy_server *srv;
    struct conn *prev, *next;
    int gfd, ufd;
    char tag[CONTROL_MAX];
    bool http; /* through the HTTP proxy; else a raw TCP relay */
    char time[40];
    double wall, t0;
    _Atomic int state;
    _Atomic uint64_t out, in;
    /* What the log line says. Fields above `reason` are fixed before ST_PUMP. */
    char method[PROXY_METHOD_MAX + 1];
    char dest[PROXY_TARGET_LOG_MAX + NETPOLICY_HOST_MAX + 1];
    int port;
    char *url;
    char rule[NETPOLICY_HOST_MAX + 40];
    char address[INET6_ADDRSTRLEN];
    const char *verdict; /* allowed, denied, failed */
    char reason[320];
    int status; /* the HTTP status sent (proxy only) */
} conn;

struct proxy_server {
    proxy_config cfg;
    int listen_fd;
    char *sock_path;
    int stop_pipe[2];
    bool stopping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    conn *conns;
    int nconns;
    _Atomic uint64_t bytes_out;
    double *starts; /* ring of the last upstream connect times, for the per-minute limit */
    size_t nstarts, next_start;
};

void proxy_config_defaults(proxy_config *c)
{
    memset(c, 0, sizeof *c);
    netpolicy_init(&c->policy);
    c->head_timeout_ms = 10000;
    c->connect_timeout_ms = 10000;
    c->idle_timeout_ms = 300000;
    c->max_conns = 256;
}

/* ---- the log line ---------------------------------------------------------- */

static void set_reason(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
}

static json_t *event_json(conn *c, bool open)
{
    json_t *ev = json_pack("{s:s, s:f, s:s, s:s, s:s, s:s, s:I, s:I, s:f}", "time", c->time, "t", c->wall, "env",
                           c->srv->cfg.env_name, "via", c->http ? "proxy" : "relay", "method",
                           c->method[0] ? c->method : "-", "verdict", c->verdict ? c->verdict : "denied",
                           "bytes_out", (json_int_t)atomic_load(&c->out), "bytes_in",
                           (json_int_t)atomic_load(&c->in), "duration_ms", now_ms() - c->t0);
    json_object_set_new(ev, "dest", c->dest[0] ? json_string(c->dest) : json_null());
    json_object_set_new(ev, "port", c->port > 0 ? json_integer(c->port) : json_null());
    json_object_set_new(ev, "rule", c->rule[0] ? json_string(c->rule) : json_null());
    if (c->address[0])
        json_object_set_new(ev, "address", json_string(c->address));
    if (c->url)
        json_object_set_new(ev, "url", json_string(c->url));
    if (open) {
        json_object_set_new(ev, "open", json_true());
    } else {
        if (c->reason[0])
            json_object_set_new(ev, "reason", json_string(c->reason));
        if (c->status)
            json_object_set_new(ev, "status", json_integer(c->status));
    }
    return ev;
}

static void log_event(conn *c, bool open)
{
    json_t *ev = event_json(c, open);
    egress_log_write(c->srv->cfg.log, ev);
    json_decref(ev);
}

/* ---- small I/O helpers -------------------------------------------------------- */

/* Wait for fd (events) or the stop pipe until deadline: 1 ready, 0 timeout, -1 stopping or error. */
static int wait_fd(proxy_server *s, int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd pf[2] = {{.fd = fd, .events = events}, {.fd = s->stop_pipe[0], .events = POLLIN}};
        int r = poll(pf, 2, (int)(left + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || pf[1].revents)
            return -1;
        if (r > 0)
            return 1;
    }
}

static int send_all(proxy_server *s, int fd, const char *buf, size_t n, double deadline)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(fd, buf + done, n - done, MSG_NOSIGNAL);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(s, fd, POLLOUT, deadline) <= 0)
                return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

static void refuse_http(conn *c, int status, const char *why)
{
    c->status = status;
    char body[512];
    int bn = snprintf(body, sizeof body, "envmgr egress proxy: %s\n", why);
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n"
                      "X-Envmgr-Egress: denied\r\n\r\n",
                      status, proxy_status_text(status), bn);
    double deadline = now_ms() + REPLY_TIMEOUT_MS;
    if (send_all(c->srv, c->gfd, head, (size_t)hn, deadline) == 0)
        send_all(c->srv, c->gfd, body, (size_t)bn, deadline);
}

/* ---- decisions -------------------------------------------------------------- */

static int deny(conn *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int deny(conn *c, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof c->reason, fmt, ap);
    va_end(ap);
    if (!c->verdict)
        c->verdict = "denied";
    if (c->http && status)
        refuse_http(c, status, c->reason);
    return -1;
}

static bool rate_ok(proxy_server *s)
{
    unsigned lim = s->cfg.policy.max_conn_per_min;
    if (!lim)
        return true;
    double now = now_ms();
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    if (s->nstarts == lim && now - s->starts[s->next_start] < 60000)
        ok = false;
    if (ok) {
        s->starts[s->next_start] = now;
        s->next_start = (s->next_start + 1) % lim;
        if (s->nstarts < lim)
            s->nstarts++;
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
    else
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)len);
}

static int connect_upstream(conn *c, const struct sockaddr *sa, socklen_t sl)
{
    proxy_server *s = c->srv;
    addr_text(sa, c->address, sizeof c->address);
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        c->verdict = "failed";
        return deny(c, 502, "socket: %s", strerror(errno));
    }
    if (connect(fd, sa, sl) < 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        c->verdict = "failed";
        return deny(c, 502, "connect %s port %d: %s", c->address, c->port, strerror(e));
    }
    int w = wait_fd(s, fd, POLLOUT, now_ms() + s->cfg.connect_timeout_ms);
    if (w <= 0) {
        close(fd);
        c->verdict = "failed";
        if (w < 0)
            return deny(c, 0, "the proxy is shutting down");
        return deny(c, 504, "connect %s port %d: no answer within %.0f s", c->address, c->port,
                    s->cfg.connect_timeout_ms / 1000);
    }
    int soerr = 0;
    socklen_t elen = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &elen) < 0 || soerr) {
        close(fd);
        c->verdict = "failed";
        return deny(c, 502, "connect %s port %d: %s", c->address, c->port, strerror(soerr ? soerr : errno));
    }
    c->ufd = fd;
    return 0;
}

/* Policy, limits, resolution on the host, the address check, connect. */
static int decide_and_connect(conn *c, const nethost *h, int port)
{
    proxy_server *s = c->srv;
    const netpolicy *p = &s->cfg.policy;
    atomic_store(&c->state, ST_DECIDE);
    snprintf(c->dest, sizeof c->dest, "%s", h->name);
    c->port = port;
    char dest[NETPOLICY_HOST_MAX + 16];
    netrule_format(h, port, dest, sizeof dest);
    if (p->mode == NETPOLICY_NONE)
        return deny(c, 403, "the env's network mode is none");
    int r = netpolicy_match(p, h, port);
    if (r >= 0)
        netrule_format(&p->rules[r].host, p->rules[r].port, c->rule, sizeof c->rule);
    else if (p->mode == NETPOLICY_OPEN)
        snprintf(c->rule, sizeof c->rule, "open (--unsafe-open-network)");
    else
        return deny(c, 403, "%s is not in the allowlist", dest);
    if (p->max_bytes_out && atomic_load(&s->bytes_out) >= p->max_bytes_out)
        return deny(c, 403, "the episode's egress byte limit (%llu) is used up", (unsigned long long)p->max_bytes_out);
    if (!rate_ok(s))
        return deny(c, 429, "more than %u new connections in a minute", p->max_conn_per_min);

    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t sl = 0;
    if (h->kind == NETHOST_IPV4) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        inet_pton(AF_INET, h->name, &in->sin_addr);
        sl = sizeof *in;
    } else if (h->kind == NETHOST_IPV6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        inet_pton(AF_INET6, h->name, &in6->sin6_addr);
        sl = sizeof *in6;
    }
    if (sl) {
        const char *cls = netpolicy_addr_class((struct sockaddr *)&ss);
        if (cls && !netpolicy_addr_listed(p, (struct sockaddr *)&ss, port))
            return deny(c, 403, "%s is a %s address and no rule lists it by address", h->name, cls);
        return connect_upstream(c, (struct sockaddr *)&ss, sl);
    }
    /* A name: resolve here, on the host, and connect to the address checked
     * (never resolve twice: a second answer could differ). */
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo *res = NULL;
    int gr = getaddrinfo(h->name, ps, &hints, &res);
    if (gr) {
        c->verdict = "failed";
        return deny(c, 502, "cannot resolve %s: %s", h->name, gai_strerror(gr));
    }
    const struct addrinfo *pick = NULL;
    char refused[INET6_ADDRSTRLEN] = "";
    const char *refused_cls = NULL;
    for (int pass = 0; pass < 2 && !pick; pass++) { /* IPv4 first */
        for (const struct addrinfo *a = res; a && !pick; a = a->ai_next) {
            if ((pass == 0) != (a->ai_family == AF_INET) || (a->ai_family != AF_INET && a->ai_family != AF_INET6))
                continue;
            const char *cls = netpolicy_addr_class(a->ai_addr);
            if (cls && !netpolicy_addr_listed(p, a->ai_addr, port)) {
                if (!refused_cls) {
                    refused_cls = cls;
                    addr_text(a->ai_addr, refused, sizeof refused);
                }
                continue;
            }
            pick = a;
        }
    }
    int rc;
    if (!pick && refused_cls) {
        snprintf(c->address, sizeof c->address, "%s", refused);
        rc = deny(c, 403, "%s resolves to %s, a %s address that no rule lists by address", h->name, refused,
                  refused_cls);
    } else if (!pick) {
        c->verdict = "failed";
        rc = deny(c, 502, "%s has no IPv4 or IPv6 address", h->name);
    } else {
        rc = connect_upstream(c, pick->ai_addr, pick->ai_addrlen);
    }
    freeaddrinfo(res);
    return rc;
}

/* ---- moving bytes ---------------------------------------------------------- */

/* Count bytes going out against the env's limit; false when over it. */
static bool charge_out(conn *c, size_t n)
{
    uint64_t max = c->srv->cfg.policy.max_bytes_out;
    uint64_t before = atomic_fetch_add(&c->srv->bytes_out, (uint64_t)n);
    if (max && before + n > max) {
        set_reason(c, "cut: the episode's egress byte limit (%llu) was reached", (unsigned long long)max);
        return false;
    }
    return true;
}

typedef struct half {
    int from, to;
    char *buf;
    size_t len, off;
    bool eof;
    bool outward; /* guest to upstream */
} half;

static void pump(conn *c)
{
    proxy_server *s = c->srv;
    half d[2] = {{c->gfd, c->ufd, xmalloc(PUMP_BUF), 0, 0, false, true},
                 {c->ufd, c->gfd, xmalloc(PUMP_BUF), 0, 0, false, false}};
    double last = now_ms();
    for (;;) {
        if (d[0].eof && !d[0].len && d[1].eof && !d[1].len)
            break; /* both directions done */
        struct pollfd pf[3] = {{.fd = c->gfd}, {.fd = c->ufd}, {.fd = s->stop_pipe[0], .events = POLLIN}};
        for (int i = 0; i < 2; i++) {
            struct pollfd *fp = d[i].from == c->gfd ? &pf[0] : &pf[1], *tp = fp == &pf[0] ? &pf[1] : &pf[0];
            if (!d[i].eof && !d[i].len)
                fp->events |= POLLIN;
            if (d[i].len)
                tp->events |= POLLOUT;
        }
        double left = s->cfg.idle_timeout_ms - (now_ms() - last);
        if (left <= 0) {
            set_reason(c, "closed after %.0f s without traffic", s->cfg.idle_timeout_ms / 1000);
            break;
        }
        int r = poll(pf, 3, (int)(left + 1));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            set_reason(c, "poll: %s", strerror(errno));
            break;
        }
        if (pf[2].revents) {
            set_reason(c, "closed: the env stopped");
            break;
        }
        if ((pf[0].revents | pf[1].revents) & (POLLERR | POLLNVAL)) {
            set_reason(c, "closed: socket error on the %s side", pf[0].revents & (POLLERR | POLLNVAL) ? "guest" : "upstream");
            break;
        }
        bool fail = false;
        for (int i = 0; i < 2 && !fail; i++) {
            half *h = &d[i];
            struct pollfd *fp = h->from == c->gfd ? &pf[0] : &pf[1], *tp = fp == &pf[0] ? &pf[1] : &pf[0];
            if (!h->eof && !h->len && (fp->revents & (POLLIN | POLLHUP))) {
                ssize_t n = read(h->from, h->buf, PUMP_BUF);
                if (n > 0) {
                    if (h->outward && !charge_out(c, (size_t)n)) {
                        fail = true;
                        break;
                    }
                    h->len = (size_t)n;
                    h->off = 0;
                    last = now_ms();
                } else if (n == 0) {
                    h->eof = true;
                    shutdown(h->to, SHUT_WR);
                } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    set_reason(c, "read from the %s: %s", h->outward ? "guest" : "upstream", strerror(errno));
                    fail = true;
                    break;
                }
            }
            if (h->len && (tp->revents & (POLLOUT | POLLHUP))) {
                ssize_t w = send(h->to, h->buf + h->off, h->len, MSG_NOSIGNAL);
                if (w > 0) {
                    h->off += (size_t)w;
                    h->len -= (size_t)w;
                    atomic_fetch_add(h->outward ? &c->out : &c->in, (uint64_t)w);
                    last = now_ms();
                } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    h->len = 0; /* the reader is gone: what it would have read is dropped */
                    h->eof = true;
                }
            }
        }
        if (fail)
            break;
        /* A peer that hung up entirely reads nothing more: stop sending to it. */
        for (int i = 0; i < 2; i++) {
            int target = d[i].to;
            struct pollfd *tp = target == c->gfd ? &pf[0] : &pf[1];
            half *back = &d[i ^ 1]; /* the direction reading from target */
            if ((tp->revents & POLLHUP) && back->eof && !back->len) {
                d[i].eof = true;
                d[i].len = 0;
            }
        }
    }
    free(d[0].buf);
    free(d[1].buf);
}

/* ---- one connection ---------------------------------------------------------- */

static void serve_http(conn *c)
{
    proxy_server *s = c->srv;
    char *buf = xmalloc(PROXY_HEAD_MAX + 1);
    size_t len = 0;
    proxy_request req;
    int status = 0, pr;
    const char *why = NULL;
    double deadline = c->t0 + s->cfg.head_timeout_ms;
    bool parse = true;
    for (;;) {
        if (parse) {
            pr = proxy_http_parse(buf, len, &req, &status, &why);
            if (pr != 1)
                break;
            proxy_request_free(&req);
        }
        int w = wait_fd(s, c->gfd, POLLIN, deadline);
        if (w < 0) {
            deny(c, 0, "closed: the env stopped");
            goto out;
        }
        if (w == 0) {
            snprintf(c->dest, sizeof c->dest, "%s", req.target);
            deny(c, 408, "no complete request head within %.0f s (%zu bytes received)",
                 s->cfg.head_timeout_ms / 1000, len);
            goto out;
        }
        ssize_t n = read(c->gfd, buf + len, PROXY_HEAD_MAX - len);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        if (n <= 0) {
            snprintf(c->dest, sizeof c->dest, "%s", req.target);
            deny(c, 0, len ? "the client closed the connection in the middle of a request head"
                           : "the client closed the connection without a request");
            goto out;
        }
        /* Parse again only when a line may have ended or the buffer is full
         * (a guest sending one byte at a time costs no quadratic work). */
        parse = len == 0 || memchr(buf + len, '\n', (size_t)n) || len + (size_t)n >= PROXY_HEAD_MAX;
        len += (size_t)n;
    }
    if (req.method[0])
        snprintf(c->method, sizeof c->method, "%s", req.method);
    if (pr < 0) {
        snprintf(c->dest, sizeof c->dest, "%s", req.host.name[0] ? req.host.name : req.target);
        c->port = req.port;
        deny(c, status, "%s", why);
        proxy_request_free(&req);
        goto out;
    }
    c->url = req.url;
    req.url = NULL;
    if (decide_and_connect(c, &req.host, req.port) < 0) {
        proxy_request_free(&req);
        goto out;
    }
    c->verdict = "allowed";
    double d2 = now_ms() + REPLY_TIMEOUT_MS;
    const char *rest = buf + req.head_len;
    size_t rest_len = len - req.head_len;
    int rc = 0;
    if (req.is_connect) {
        static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
        c->status = 200;
        rc = send_all(s, c->gfd, ok, sizeof ok - 1, d2);
    } else {
        if (!charge_out(c, req.forward_len))
            rc = -1;
        else if ((rc = send_all(s, c->ufd, req.forward, req.forward_len, d2)) == 0)
            atomic_fetch_add(&c->out, req.forward_len);
    }
    if (rc == 0 && rest_len) { /* bytes the guest sent after its head: body or TLS hello */
        if (!charge_out(c, rest_len))
            rc = -1;
        else if ((rc = send_all(s, c->ufd, rest, rest_len, d2)) == 0)
            atomic_fetch_add(&c->out, rest_len);
    }
    proxy_request_free(&req);
    free(buf);
    buf = NULL;
    if (rc == 0) {
        atomic_store(&c->state, ST_PUMP);
        pump(c);
    } else if (!c->reason[0]) {
        set_reason(c, "closed while starting the transfer");
    }
out:
    free(buf);
}

static void serve_tcp(conn *c)
{
    nethost h;
    int port = 0;
    const char *why = NULL;
    snprintf(c->method, sizeof c->method, "TCP");
    const char *auth = c->tag + 4;
    if (proxy_parse_authority(auth, strlen(auth), 0, &h, &port, &why) < 0) {
        snprintf(c->dest, sizeof c->dest, "%.*s", PROXY_TARGET_LOG_MAX, auth);
        deny(c, 0, "bad relay tag: %s", why);
        return;
    }
    if (decide_and_connect(c, &h, port) < 0)
        return;
    c->verdict = "allowed";
    atomic_store(&c->state, ST_PUMP);
    pump(c);
}

static void finish(conn *c)
{
    proxy_server *s = c->srv;
    atomic_store(&c->state, ST_DONE);
    if (!c->verdict)
        c->verdict = "denied";
    log_event(c, false);
    if (c->gfd >= 0)
        close(c->gfd);
    if (c->ufd >= 0)
        close(c->ufd);
    pthread_mutex_lock(&s->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(c->url);
    free(c);
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    if (c->http)
        serve_http(c);
    else if (!strncmp(c->tag, "tcp:", 4))
        serve_tcp(c);
    else
        deny(c, 0, "unknown relay tag");
    finish(c);
    return NULL;
}

void proxy_server_start(proxy_server *s, int fd, const char *tag)
{
    conn *c = xcalloc(1, sizeof *c);
    c->srv = s;
    c->gfd = fd;
    c->ufd = -1;
    snprintf(c->tag, sizeof c->tag, "%s", tag);
    c->http = !strcmp(tag, "proxy");
    c->t0 = now_ms();
    c->wall = wall_time();
    iso8601_now(c->time, sizeof c->time);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    pthread_mutex_lock(&s->mu);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    bool full = s->nconns > s->cfg.max_conns, stopping = s->stopping;
    pthread_mutex_unlock(&s->mu);
    if (full || stopping) {
        deny(c, full ? 503 : 0, full ? "more than %d connections open at once" : "the env is stopping",
             s->cfg.max_conns);
        finish(c);
        return;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, THREAD_STACK);
    pthread_t th;
    int e = pthread_create(&th, &attr, conn_main, c);
    pthread_attr_destroy(&attr);
    if (e) {
        deny(c, 503, "cannot start a thread: %s", strerror(e));
        finish(c);
    }
}

void proxy_server_flush(proxy_server *s)
{
    pthread_mutex_lock(&s->mu);
    for (conn *c = s->conns; c; c = c->next)
        if (atomic_load(&c->state) == ST_PUMP)
            log_event(c, true);
    pthread_mutex_unlock(&s->mu);
}

int proxy_server_active(proxy_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->nconns;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- the server ------------------------------------------------------------ */

int proxy_server_new(const proxy_config *cfg, proxy_server **out, em_err *err)
{
    proxy_server *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    s->listen_fd = -1;
    if (pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
        free(s);
        return em_fail_errno(err, "egress proxy: pipe");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (s->cfg.policy.max_conn_per_min)
        s->starts = xcalloc(s->cfg.policy.max_conn_per_min, sizeof *s->starts);
    if (s->cfg.max_conns <= 0)
        s->cfg.max_conns = 256;
    *out = s;
    return 0;
}

int proxy_server_listen(proxy_server *s, const char *sock_path, em_err *err)
{
    int fd;
    if (listen_unix(sock_path, &fd, err) < 0)
        return em_prefix(err, "egress proxy: ");
    s->listen_fd = fd;
    free(s->sock_path);
    s->sock_path = xstrdup(sock_path);
    return 0;
}

static void reply(int fd, const char *text)
{
    em_err ignored;
    send_full(fd, text, strlen(text), &ignored);
}

/* One client of the control socket: a relay handing over a connection, or a command. */
static void handle_client(proxy_server *s, int cfd)
{
    linebuf in;
    linebuf_init(&in, CONTROL_MAX - 1);
    const char *line = NULL;
    size_t len = 0;
    int passed = -1;
    double deadline = now_ms() + CONTROL_TIMEOUT_MS;
    while (linebuf_next(&in, &line, &len) == LINEBUF_NONE) {
        char *room;
        size_t space;
        em_err ignored;
        if (linebuf_room(&in, &room, &space, &ignored) < 0)
            break;
        struct pollfd pf = {.fd = cfd, .events = POLLIN};
        double left = deadline - now_ms();
        if (left <= 0 || poll(&pf, 1, (int)left + 1) <= 0)
            break;
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int) * 4)];
        } ctl;
        struct iovec iov = {.iov_base = room, .iov_len = space};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm)) {
            if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                continue;
            size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                if (passed < 0)
                    passed = fd;
                else
                    close(fd); /* one connection per message */
            }
        }
        if (n <= 0)
            break;
        linebuf_commit(&in, (size_t)n);
    }
    char msg[CONTROL_MAX]; /* a line is at most CONTROL_MAX - 1 bytes */
    const char *cmd = NULL;
    if (line && len >= 9 && !memcmp(line, "envmgr/1 ", 9)) {
        memcpy(msg, line, len);
        msg[len] = '\0';
        cmd = msg + 9;
    }
    linebuf_release(&in);
    struct stat st;
    if (!cmd) {
        reply(cfd, "error malformed request\n");
    } else if (!strcmp(cmd, "ping")) {
        reply(cfd, "ok\n");
    } else if (!strcmp(cmd, "flush")) {
        proxy_server_flush(s);
        reply(cfd, "ok\n");
    } else if (!strncmp(cmd, "conn ", 5) && passed >= 0 && fstat(passed, &st) == 0 && S_ISSOCK(st.st_mode) &&
               (!strcmp(cmd + 5, "proxy") || !strncmp(cmd + 5, "tcp:", 4))) {
        reply(cfd, "ok\n");
        proxy_server_start(s, passed, cmd + 5);
        passed = -1;
    } else {
        reply(cfd, "error unknown command or no connection passed\n");
    }
    if (passed >= 0)
        close(passed);
}

int proxy_server_run(proxy_server *s, int stop_fd, em_err *err)
{
    if (s->listen_fd < 0)
        return em_fail(err, "egress proxy: not listening");
    for (;;) {
        struct pollfd pf[2] = {{.fd = s->listen_fd, .events = POLLIN}, {.fd = stop_fd, .events = POLLIN}};
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return em_fail_errno(err, "egress proxy: poll");
        }
        if (pf[1].revents)
            return 0;
        if (pf[0].revents & POLLIN) {
            int cfd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (cfd < 0)
                continue;
            handle_client(s, cfd);
            close(cfd);
        }
    }
}

void proxy_server_free(proxy_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    ssize_t w = write(s->stop_pipe[1], "x", 1); /* wakes every connection: each ends and is logged */
    (void)w;
    double deadline = now_ms() + STOP_WAIT_MS;
    pthread_mutex_lock(&s->mu);
    while (s->nconns > 0 && now_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    int left = s->nconns;
    pthread_mutex_unlock(&s->mu);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->sock_path)
        unlink(s->sock_path);
    if (left > 0) /* threads still use s: leave it to the process exit */
        return;
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->starts);
    free(s->sock_path);
    free(s);
}

/* ---- the helper process ------------------------------------------------------ */

/* Reap every child that exited (QEMU, and the relays it spawned, which
 * become ours because we are a child subreaper); true once qemu is among them. */
static bool reap(pid_t qemu)
{
    bool gone = false;
    for (;;) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p <= 0)
            break;
        if (p == qemu) {
            gone = true;
            em_info("envmgr net serve: QEMU (pid %d) exited (%s %d)", (int)qemu,
                    WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
    }
    return gone;
}

int proxy_serve_main(const char *dir, pid_t qemu, em_err *err)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    _cleanup_free_ char *logp = xasprintf("%s/" NETPOLICY_PROXY_LOG, dir);
    int lfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lfd >= 0) {
        dup2(lfd, 1);
        dup2(lfd, 2);
        close(lfd);
    }
    int nfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nfd >= 0) {
        dup2(nfd, 0);
        close(nfd);
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL); /* before any thread: they inherit the mask */
    _cleanup_close_ int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        return em_fail_errno(err, "net serve: signalfd");
    if (qemu > 0) {
        int st;
        pid_t p = waitpid(qemu, &st, WNOHANG);
        if (p < 0)
            return em_fail(err, "net serve: QEMU pid %d is not our child", (int)qemu);
        if (p == qemu)
            return em_fail(err, "net serve: QEMU pid %d exited before the proxy started", (int)qemu);
    }
    json_object_seed(0);
    proxy_config cfg;
    proxy_config_defaults(&cfg);
    if (netpolicy_load(dir, &cfg.policy, err) < 0)
        return em_prefix(err, "net serve: ");
    const char *base = strrchr(dir, '/');
    snprintf(cfg.env_name, sizeof cfg.env_name, "%s", base ? base + 1 : dir);
    _cleanup_free_ char *logpath = NULL;
    if (netpolicy_log_claim(dir, &logpath, err) < 0)
        return em_prefix(err, "net serve: ");
    _cleanup_free_ char *sock = xasprintf("%s/" NETPOLICY_SOCK, dir), *pidf = xasprintf("%s/" NETPOLICY_PID_FILE, dir);
    if (egress_log_open(logpath, &cfg.log, err) < 0)
        return em_prefix(err, "net serve: ");
    /* Run as the env's own user (as its QEMU is), the proxy listens where that user's relays reach
     * it, and the run directory's socket name links there. */
    proxy_server *s = NULL;
    vm_runas ra = {0};
    _cleanup_free_ char *listen_at = NULL;
    int rc = vm_runas_read(dir, &ra, err);
    if (rc == 0) {
        listen_at = ra.drop ? vm_runas_socket(&ra) : xstrdup(sock);
        rc = proxy_server_new(&cfg, &s, err);
    }
    if (rc == 0)
        rc = proxy_server_listen(s, listen_at, err);
    if (rc == 0 && ra.drop && chown(listen_at, ra.uid, ra.gid) < 0)
        rc = em_fail_errno(err, "chown `%s`", listen_at);
    if (rc == 0 && ra.drop && (unlink(sock), symlink(listen_at, sock) < 0))
        rc = em_fail_errno(err, "link `%s`", sock);
    if (rc == 0) {
        char pidtext[32];
        int n = snprintf(pidtext, sizeof pidtext, "%d\n", (int)getpid());
        rc = write_file_atomic(pidf, pidtext, (size_t)n, 0600, err);
    }
    if (rc == 0) /* its socket and logs are open: from here on, the env's user */
        rc = vm_runas_become(&ra, err);
    if (rc == 0)
        em_info("envmgr net serve: %s: mode %s, %zu rules, QEMU pid %d", cfg.env_name,
                netpolicy_mode_name(cfg.policy.mode), cfg.policy.nrules, (int)qemu);
    bool stop = false, qemu_gone = false;
    while (rc == 0 && !stop) {
        if ((rc = proxy_server_run(s, sfd, err)) < 0)
            break;
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if (si.ssi_signo != SIGCHLD) {
                em_info("envmgr net serve: signal %u: stopping", si.ssi_signo);
                stop = true;
            }
        }
        if (reap(qemu) && qemu > 0)
            stop = qemu_gone = true;
    }
    proxy_server_free(s);
    /* No allowlist env runs without its proxy. QEMU's parent-death signal does not survive its
     * -runas drop, so the proxy ends QEMU itself (a proxy killed outright leaves a QEMU whose
     * relays find no socket: its guest reaches nothing). */
    if (qemu > 0 && !qemu_gone && !reap(qemu)) /* still our unreaped child: its pid is not reused */
        kill(qemu, SIGKILL);
    reap(qemu);
    unlink(pidf);
    egress_log_close(cfg.log);
    return rc < 0 ? em_prefix(err, "net serve: ") : 0;
}

int proxy_relay_main(const char *sock, const char *tag)
{
    /* stdout and stderr are the guest's connection: nothing of ours goes there. */
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
        dup2(devnull, 1);
        dup2(devnull, 2);
        close(devnull);
    }
    struct stat st;
    if (fstat(0, &st) < 0 || !S_ISSOCK(st.st_mode))
        return 2;
    if (strlen(tag) > 300 || strchr(tag, '\n'))
        return 2;
    em_err err;
    _cleanup_close_ int fd = unix_connect(sock, 2000, &err);
    if (fd < 0)
        return 1;
    char msg[CONTROL_MAX];
    int n = snprintf(msg, sizeof msg, "envmgr/1 conn %s\n", tag);
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = msg, .iov_len = (size_t)n};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    int zero = 0;
    memcpy(CMSG_DATA(cm), &zero, sizeof zero);
    ssize_t w;
    while ((w = sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (w != n)
        return 1;
    linebuf in;
    linebuf_init(&in, 63);
    const char *rep;
    size_t got;
    int rc = linebuf_read_line(&in, fd, now_ms() + REPLY_TIMEOUT_MS, &rep, &got, &err) == 0 && got == 2 &&
                     !memcmp(rep, "ok", 2)
                 ? 0
                 : 1;
    linebuf_release(&in);
    return rc;
}

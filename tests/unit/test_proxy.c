/* The egress proxy: its request parser on good and hostile heads, then the
 * server end to end against small upstream servers on 127.0.0.1 (an HTTP
 * responder and a TCP echo), through socketpairs standing in for guest
 * connections and through the real relay hand-off over the unix socket.
 * Every attempt must be answered fast and logged, allowed or not. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/env/guest_ops.h"
#include "envmgr/net/egress_log.h"
#include "envmgr/net/proxy.h"
#include "envmgr/net/proxy_http.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "helpers/cunit_main.h"

/* ---- the parser ------------------------------------------------------------- */

static int parse(const char *head, proxy_request *req, int *status, const char **why)
{
    return proxy_http_parse(head, strlen(head), req, status, why);
}

static void refused(const char *head, int want_status, const char *want_why)
{
    proxy_request req;
    int status;
    const char *why;
    int rc = parse(head, &req, &status, &why);
    if (rc != -1 || status != want_status || !why || !strstr(why, want_why))
        fprintf(stderr, "\n  `%.60s`: rc %d status %d why `%s`, want %d `%s`\n", head, rc, status,
                why ? why : "", want_status, want_why);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(status, want_status);
    CU_ASSERT_PTR_NOT_NULL(why && strstr(why, want_why) ? why : NULL);
    proxy_request_free(&req);
}

static void test_parse_good(void)
{
    proxy_request req;
    int status;
    const char *why;
    const char *get = "GET http://Example.ORG:8080/a/b?c=1 HTTP/1.1\r\nHost: evil.example\r\nUser-Agent: t\r\n"
                      "Proxy-Connection: keep-alive\r\nProxy-Authorization: x\r\nAccept: */*\r\n\r\nBODY";
    CU_ASSERT_EQUAL_FATAL(parse(get, &req, &status, &why), 0);
    CU_ASSERT_STRING_EQUAL(req.method, "GET");
    CU_ASSERT_FALSE(req.is_connect);
    CU_ASSERT_STRING_EQUAL(req.host.name, "example.org");
    CU_ASSERT_EQUAL(req.port, 8080);
    CU_ASSERT_EQUAL(req.head_len, strlen(get) - 4);
    CU_ASSERT_STRING_EQUAL(req.url, "http://example.org:8080/a/b?c=1");
    /* origin form, the guest's Host replaced, hop-by-hop headers gone, Connection: close */
    _cleanup_free_ char *fwd = xasprintf("%.*s", (int)req.forward_len, req.forward);
    CU_ASSERT_STRING_EQUAL(fwd, "GET /a/b?c=1 HTTP/1.1\r\nUser-Agent: t\r\nAccept: */*\r\nHost: example.org:8080\r\n"
                                "Connection: close\r\n\r\n");
    proxy_request_free(&req);

    CU_ASSERT_EQUAL(parse("POST http://10.1.2.3?q HTTP/1.0\r\nContent-Length: 3\r\n\r\n", &req, &status, &why), 0);
    CU_ASSERT_EQUAL(req.port, 80);
    CU_ASSERT_STRING_EQUAL(req.url, "http://10.1.2.3/?q");
    CU_ASSERT_EQUAL(strncmp(req.forward, "POST /?q HTTP/1.0\r\n", 19), 0);
    proxy_request_free(&req);

    CU_ASSERT_EQUAL(parse("CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n\x16\x03", &req, &status,
                          &why),
                    0);
    CU_ASSERT_TRUE(req.is_connect);
    CU_ASSERT_EQUAL(req.port, 443);
    CU_ASSERT_PTR_NULL(req.forward);
    CU_ASSERT_PTR_NULL(req.url);
    proxy_request_free(&req);

    CU_ASSERT_EQUAL(parse("CONNECT [2001:DB8::1]:443 HTTP/1.1\r\n\r\n", &req, &status, &why), 0);
    CU_ASSERT_EQUAL(req.host.kind, NETHOST_IPV6);
    CU_ASSERT_STRING_EQUAL(req.host.name, "2001:db8::1");
    proxy_request_free(&req);

    /* incomplete heads ask for more */
    const char *parts[] = {"", "G", "GET http://x.org/ HTTP/1.1", "GET http://x.org/ HTTP/1.1\r",
                           "GET http://x.org/ HTTP/1.1\r\n", "GET http://x.org/ HTTP/1.1\r\nA: b\r\n",
                           "GET http://x.org/ HTTP/1.1\r\nA: b\r\n\r"};
    for (size_t i = 0; i < ARRAY_LEN(parts); i++) {
        CU_ASSERT_EQUAL(parse(parts[i], &req, &status, &why), 1);
        proxy_request_free(&req);
    }
}

static void test_parse_hostile(void)
{
    refused("CONNECT example.org:0 HTTP/1.1\r\n\r\n", 400, "port out of range");
    refused("CONNECT example.org:65536 HTTP/1.1\r\n\r\n", 400, "port out of range");
    refused("CONNECT example.org:999999999999 HTTP/1.1\r\n\r\n", 400, "port out of range");
    refused("CONNECT example.org:+443 HTTP/1.1\r\n\r\n", 400, "not a decimal number");
    refused("CONNECT example.org:-1 HTTP/1.1\r\n\r\n", 400, "not a decimal number");
    refused("CONNECT example.org HTTP/1.1\r\n\r\n", 400, "no port");
    refused("CONNECT example.org: HTTP/1.1\r\n\r\n", 400, "empty port");
    refused("CONNECT ::1:443 HTTP/1.1\r\n\r\n", 400, "brackets");
    refused("CONNECT [::1 HTTP/1.1\r\n\r\n", 400, "unterminated IPv6");
    refused("CONNECT [::1]x:443 HTTP/1.1\r\n\r\n", 400, "junk after an IPv6 literal");
    refused("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", 400, "percent-encoded");
    refused("CONNECT %31%32%37.0.0.1:80 HTTP/1.1\r\n\r\n", 400, "percent-encoded");
    refused("CONNECT 127.1:80 HTTP/1.1\r\n\r\n", 400, "dotted-quad");
    refused("CONNECT 2130706433:80 HTTP/1.1\r\n\r\n", 400, "dotted-quad");
    refused("CONNECT 0x7f000001:80 HTTP/1.1\r\n\r\n", 400, "numeric IPv4");
    refused("CONNECT user@example.org:443 HTTP/1.1\r\n\r\n", 400, "credentials");
    refused("GET http://user:pw@example.org/ HTTP/1.1\r\n\r\n", 400, "credentials");
    refused("GET http://ex%61mple.org/ HTTP/1.1\r\n\r\n", 400, "percent-encoded");
    refused("GET http://b\xc3\xbc" "cher.example/ HTTP/1.1\r\n\r\n", 400, "invalid character in the request target");
    refused("GET https://example.org/ HTTP/1.1\r\n\r\n", 400, "CONNECT");
    refused("GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n", 400, "not a proxy request");
    refused("GET ftp://example.org/ HTTP/1.1\r\n\r\n", 400, "not a proxy request");
    refused("GET http:///x HTTP/1.1\r\n\r\n", 400, "without a host");
    refused("GET http://example.org/#frag HTTP/1.1\r\n\r\n", 400, "fragment");
    refused("GET http://example.org/ HTTP/2.0\r\n\r\n", 505, "HTTP/1.0");
    refused("GET http://example.org/ FOO/1.1\r\n\r\n", 400, "HTTP/1.0");
    refused("GET http://example.org/ HTTP/1.1\n\n", 400, "CRLF");
    refused("GET http://example.org/ HTTP/1.1\r\nA: b\n\r\n", 400, "CRLF");
    refused("GET http://example.org/ HTTP/1.1\rX", 400, "CRLF");
    refused("GET  http://example.org/ HTTP/1.1\r\n\r\n", 400, "malformed request line");
    refused("GET  HTTP/1.1\r\n\r\n", 400, "empty request target");
    refused("GET http://example.org/ HTTP/1.1 x\r\n\r\n", 400, "malformed request line");
    refused(" http://example.org/ HTTP/1.1\r\n\r\n", 400, "empty method");
    refused("GE(T http://example.org/ HTTP/1.1\r\n\r\n", 400, "invalid character in the method");
    refused("AAAAAAAAAAAAAAAAAAAAAAAAAAAA http://example.org/ HTTP/1.1\r\n\r\n", 405, "method name too long");
    refused("GET http://example.org/ HTTP/1.1\r\n folded: x\r\n\r\n", 400, "folded");
    refused("GET http://example.org/ HTTP/1.1\r\nno colon\r\n\r\n", 400, "without a name");
    refused("GET http://example.org/ HTTP/1.1\r\n: x\r\n\r\n", 400, "without a name");
    refused("GET http://example.org/ HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "header name");
    refused("GET http://example.org/ HTTP/1.1\r\nA: x\x01y\r\n\r\n", 400, "control character");
    refused("POST http://example.org/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
            "both Content-Length");
    refused("POST http://example.org/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400, "conflicting");
    refused("POST http://example.org/ HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "not a number");
    refused("\x01\x02\x03", 400, "control character in the request line");
    refused("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, "control character");

    /* absurd sizes */
    size_t big = PROXY_HEAD_MAX + 100;
    char *b = xmalloc(big + 1);
    memset(b, 'A', big);
    b[big] = '\0';
    refused(b, 414, "request line longer");
    memcpy(b, "GET http://example.org/ HTTP/1.1\r\nX: ", 37);
    refused(b, 431, "longer than 8192");
    /* many small headers */
    size_t n = 0;
    n += (size_t)sprintf(b + n, "GET http://example.org/ HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++)
        n += (size_t)sprintf(b + n, "X%d: y\r\n", i);
    n += (size_t)sprintf(b + n, "\r\n");
    refused(b, 431, "more than 100 header lines");
    /* a head that never ends within the cap */
    free(b);
    big = 2 * PROXY_HEAD_MAX;
    b = xmalloc(big + 1);
    n = (size_t)sprintf(b, "GET http://example.org/ HTTP/1.1\r\n");
    while (n + 1010 < big) {
        n += (size_t)sprintf(b + n, "X: ");
        memset(b + n, 'v', 1000);
        n += 1000;
        n += (size_t)sprintf(b + n, "\r\n");
    }
    b[n] = '\0';
    refused(b, 431, "larger than 16384");
    free(b);
}

/* ---- upstream servers on 127.0.0.1 --------------------------------------------- */

typedef struct upstream {
    int lfd, port;
    bool echo;            /* else: an HTTP responder */
    int stop[2];
    pthread_t th;
    char last_head[4096]; /* what the last HTTP client sent */
    pthread_mutex_t mu;
    int accepted;
    int serving; /* connections being served, each by its own thread */
} upstream;

typedef struct upstream_conn {
    upstream *u;
    int c;
} upstream_conn;

/* One connection, served by its own thread: a client that keeps its connection open (a test of
 * the proxy's limits) never holds up the next (served one at a time, the next test's connect sat
 * in a full backlog past the proxy's 2 s connect timeout). */
static void *upstream_serve(void *arg)
{
    upstream_conn *uc = arg;
    upstream *u = uc->u;
    int c = uc->c;
    free(uc);
    char buf[4096];
    size_t len = 0;
    for (;;) {
        struct pollfd cp[2] = {{.fd = c, .events = POLLIN}, {.fd = u->stop[0], .events = POLLIN}};
        if (poll(cp, 2, 5000) <= 0 || cp[1].revents)
            break;
        ssize_t r = read(c, buf + len, sizeof buf - 1 - len);
        if (r <= 0)
            break;
        if (u->echo) {
            em_err ignored;
            send_full(c, buf, (size_t)r, &ignored);
            continue;
        }
        len += (size_t)r;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n") || len == sizeof buf - 1) {
            pthread_mutex_lock(&u->mu);
            snprintf(u->last_head, sizeof u->last_head, "%s", buf);
            pthread_mutex_unlock(&u->mu);
            const char *resp = "HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\nhello-egress";
            em_err ignored;
            send_full(c, resp, strlen(resp), &ignored);
            break;
        }
    }
    close(c);
    pthread_mutex_lock(&u->mu);
    u->serving--;
    pthread_mutex_unlock(&u->mu);
    return NULL;
}

static void *upstream_main(void *arg)
{
    upstream *u = arg;
    for (;;) {
        struct pollfd pf[2] = {{.fd = u->lfd, .events = POLLIN}, {.fd = u->stop[0], .events = POLLIN}};
        if (poll(pf, 2, -1) < 0 || pf[1].revents)
            break;
        int c = accept(u->lfd, NULL, NULL);
        if (c < 0)
            continue;
        upstream_conn *uc = xmalloc(sizeof *uc);
        *uc = (upstream_conn){.u = u, .c = c};
        pthread_mutex_lock(&u->mu);
        u->accepted++;
        u->serving++;
        pthread_mutex_unlock(&u->mu);
        pthread_t th;
        if (pthread_create(&th, NULL, upstream_serve, uc) == 0) {
            pthread_detach(th);
            continue;
        }
        close(c);
        free(uc);
        pthread_mutex_lock(&u->mu);
        u->serving--;
        pthread_mutex_unlock(&u->mu);
    }
    return NULL;
}

static void upstream_start(upstream *u, bool echo)
{
    memset(u, 0, sizeof *u);
    u->echo = echo;
    pthread_mutex_init(&u->mu, NULL);
    u->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (u->lfd < 0 || bind(u->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(u->lfd, 16) < 0 ||
        getsockname(u->lfd, (struct sockaddr *)&sa, &sl) < 0 || pipe(u->stop) < 0 ||
        pthread_create(&u->th, NULL, upstream_main, u)) {
        perror("test upstream on 127.0.0.1");
        exit(2);
    }
    u->port = ntohs(sa.sin_port);
}

static void upstream_stop(upstream *u)
{
    ssize_t w = write(u->stop[1], "x", 1);
    (void)w;
    pthread_join(u->th, NULL);
    /* every connection's thread sees the stop byte too (nobody reads it): wait for them */
    for (double until = now_ms() + 10000; now_ms() < until;) {
        pthread_mutex_lock(&u->mu);
        int n = u->serving;
        pthread_mutex_unlock(&u->mu);
        if (n == 0)
            break;
        sleep_ms(10);
    }
    close(u->lfd);
    close(u->stop[0]);
    close(u->stop[1]);
    pthread_mutex_destroy(&u->mu);
}

/* A port with nothing listening (bound, then closed). */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&sa, sizeof sa);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---- the server ---------------------------------------------------------------- */

static upstream web, echo;
static char log_path[512];

typedef struct fixture {
    proxy_server *s;
    egress_log *log;
    uint64_t log_off;
} fixture;

static void fixture_start(fixture *f, const char *const *allow, void (*tweak)(proxy_config *))
{
    em_err err = {0};
    memset(f, 0, sizeof *f);
    snprintf(log_path, sizeof log_path, "%s/egress.jsonl", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(egress_log_open(log_path, &f->log, &err), 0);
    f->log_off = egress_log_size(log_path);
    proxy_config cfg;
    proxy_config_defaults(&cfg);
    cfg.policy.mode = NETPOLICY_ALLOWLIST;
    for (size_t i = 0; allow && allow[i]; i++)
        /* the test servers live on 127.0.0.1: address rules are the operator's (--allow-private) */
        CU_ASSERT_EQUAL_FATAL(strchr("0123456789[", allow[i][0]) ? netpolicy_add_private(&cfg.policy, allow[i], &err)
                                                                 : netpolicy_add(&cfg.policy, allow[i], &err),
                              0);
    snprintf(cfg.env_name, sizeof cfg.env_name, "unit");
    cfg.log = f->log;
    cfg.head_timeout_ms = 400;
    cfg.connect_timeout_ms = 2000;
    if (tweak)
        tweak(&cfg);
    CU_ASSERT_EQUAL_FATAL(proxy_server_new(&cfg, &f->s, &err), 0);
}

static void fixture_stop(fixture *f)
{
    proxy_server_free(f->s);
    egress_log_close(f->log);
}

/* The events logged since the fixture started. */
static json_t *events(fixture *f)
{
    em_err err = {0};
    json_t *ev = NULL;
    uint64_t off = f->log_off;
    CU_ASSERT_EQUAL(egress_log_read(log_path, &off, 1000, &ev, &err), 0);
    return ev;
}

static json_t *last_event(fixture *f, json_t **all)
{
    *all = events(f);
    size_t n = json_array_size(*all);
    return n ? json_array_get(*all, n - 1) : NULL;
}

/* A guest connection: our end of a socketpair whose other end the proxy serves. */
static int guest_conn(fixture *f, const char *tag)
{
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    proxy_server_start(f->s, sv[1], tag);
    return sv[0];
}

/* Everything the proxy sends until it closes (or timeout_ms passes). */
/* Read until `want` bytes came, the peer closed, or timeout_ms passed. */
static char *read_upto(int fd, size_t want, double timeout_ms, size_t *len, bool *closed)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = xmalloc(cap + 1);
    double deadline = now_ms() + timeout_ms;
    *closed = false;
    while (n < want) {
        double left = deadline - now_ms();
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, (int)left + 1) <= 0)
            break;
        ssize_t r = read(fd, buf + n, cap - n);
        if (r <= 0) {
            *closed = true;
            break;
        }
        n += (size_t)r;
        if (n == cap)
            break;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static char *read_all(int fd, double timeout_ms, size_t *len, bool *closed)
{
    return read_upto(fd, SIZE_MAX, timeout_ms, len, closed);
}

static char *request(fixture *f, const char *tag, const char *data, double timeout_ms, bool *closed)
{
    int fd = guest_conn(f, tag);
    em_err err;
    if (data)
        send_full(fd, data, strlen(data), &err);
    char *out = read_all(fd, timeout_ms, NULL, closed);
    close(fd);
    return out;
}

static void wait_idle(fixture *f)
{
    double deadline = now_ms() + 5000;
    while (proxy_server_active(f->s) > 0 && now_ms() < deadline)
        sleep_ms(2);
}

static const char *ev_str(json_t *ev, const char *k)
{
    const char *s = json_string_value(json_object_get(ev, k));
    return s ? s : "";
}

static void test_allowed_and_denied(void)
{
    fixture f;
    _cleanup_free_ char *r1 = xasprintf("127.0.0.1:%d", web.port), *r2 = xasprintf("127.0.0.1:%d", echo.port);
    const char *allow[] = {r1, r2, NULL};
    fixture_start(&f, allow, NULL);
    bool closed;

    /* plain HTTP, allowed: the upstream sees our rewritten head, the guest gets the answer */
    _cleanup_free_ char *get = xasprintf("GET http://127.0.0.1:%d/ok HTTP/1.1\r\nHost: spoof.example\r\n"
                                         "Proxy-Connection: keep-alive\r\n\r\n",
                                         web.port);
    double t0 = now_ms();
    _cleanup_free_ char *out = request(&f, "proxy", get, 3000, &closed);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hello-egress"));
    CU_ASSERT_TRUE(closed);
    CU_ASSERT(now_ms() - t0 < 2000);
    pthread_mutex_lock(&web.mu);
    CU_ASSERT_EQUAL(strncmp(web.last_head, "GET /ok HTTP/1.1\r\n", 18), 0);
    CU_ASSERT_PTR_NULL(strstr(web.last_head, "spoof"));
    CU_ASSERT_PTR_NULL(strstr(web.last_head, "Proxy-Connection"));
    CU_ASSERT_PTR_NOT_NULL(strstr(web.last_head, "Connection: close\r\n"));
    pthread_mutex_unlock(&web.mu);
    wait_idle(&f);
    json_t *all, *ev = last_event(&f, &all);
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "verdict"), "allowed");
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "method"), "GET");
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "dest"), "127.0.0.1");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "port")), web.port);
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "rule"), r1);
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "env"), "unit");
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "via"), "proxy");
    CU_ASSERT(json_integer_value(json_object_get(ev, "bytes_out")) > 20);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "bytes_in")), 51);
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(ev, "url"), "/ok"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(ev, "time"), "T"));
    json_decref(all);

    /* not listed: a fast 403, logged, nothing reaches the upstream */
    int before = web.accepted;
    _cleanup_free_ char *get2 = xasprintf("GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", dead_port());
    t0 = now_ms();
    _cleanup_free_ char *out2 = request(&f, "proxy", get2, 3000, &closed);
    CU_ASSERT_EQUAL(strncmp(out2, "HTTP/1.1 403 Forbidden\r\n", 24), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out2, "is not in the allowlist"));
    CU_ASSERT_TRUE(closed);
    CU_ASSERT(now_ms() - t0 < 1000);
    CU_ASSERT_EQUAL(web.accepted, before);
    wait_idle(&f);
    ev = last_event(&f, &all);
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "verdict"), "denied");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "status")), 403);
    CU_ASSERT_TRUE(json_is_null(json_object_get(ev, "rule")));
    json_decref(all);

    /* CONNECT to the echo server: a tunnel both ways */
    int fd = guest_conn(&f, "proxy");
    em_err err;
    _cleanup_free_ char *con = xasprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\nearly-bytes|", echo.port);
    send_full(fd, con, strlen(con), &err);
    char buf[256] = "";
    size_t got = 0;
    double deadline = now_ms() + 3000;
    while (now_ms() < deadline && !strstr(buf, "early-bytes|")) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) > 0) {
            ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        buf[got] = '\0';
    }
    CU_ASSERT_EQUAL(strncmp(buf, "HTTP/1.1 200 Connection Established\r\n\r\nearly-bytes|", 52), 0);
    send_full(fd, "ping", 4, &err);
    shutdown(fd, SHUT_WR); /* half-close travels: the echo server closes after echoing */
    _cleanup_free_ char *rest = read_all(fd, 3000, NULL, &closed);
    CU_ASSERT_STRING_EQUAL(rest, "ping");
    CU_ASSERT_TRUE(closed);
    close(fd);
    wait_idle(&f);
    ev = last_event(&f, &all);
    CU_ASSERT_STRING_EQUAL(ev_str(ev, "method"), "CONNECT");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "bytes_out")), 16);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "bytes_in")), 16);
    json_decref(all);

    /* a raw TCP relay to a listed endpoint, and to one that is not */
    _cleanup_free_ char *tag = xasprintf("tcp:127.0.0.1:%d", echo.port);
    fd = guest_conn(&f, tag);
    send_full(fd, "raw-bytes", 9, &err);
    shutdown(fd, SHUT_WR);
    _cleanup_free_ char *raw = read_all(fd, 3000, NULL, &closed);
    CU_ASSERT_STRING_EQUAL(raw, "raw-bytes");
    close(fd);
    wait_idle(&f); /* logged when it ends: before the refusal below, however slow the build */
    _cleanup_free_ char *tag2 = xasprintf("tcp:127.0.0.1:%d", dead_port());
    t0 = now_ms();
    _cleanup_free_ char *none = request(&f, tag2, "x", 3000, &closed);
    CU_ASSERT_STRING_EQUAL(none, "");
    CU_ASSERT_TRUE(closed);
    CU_ASSERT(now_ms() - t0 < 1000);
    wait_idle(&f);
    all = events(&f);
    size_t n = json_array_size(all);
    CU_ASSERT_EQUAL_FATAL(n, 5);
    CU_ASSERT_STRING_EQUAL(ev_str(json_array_get(all, 3), "method"), "TCP");
    CU_ASSERT_STRING_EQUAL(ev_str(json_array_get(all, 3), "via"), "relay");
    CU_ASSERT_STRING_EQUAL(ev_str(json_array_get(all, 3), "verdict"), "allowed");
    CU_ASSERT_STRING_EQUAL(ev_str(json_array_get(all, 4), "verdict"), "denied");
    json_decref(all);
    fixture_stop(&f);
}

static void test_hostile_clients(void)
{
    fixture f;
    _cleanup_free_ char *r1 = xasprintf("127.0.0.1:%d", web.port), *r2 = xasprintf("localhost:%d", echo.port);
    _cleanup_free_ char *r3 = xasprintf("127.0.0.1:%d", dead_port());
    const char *allow[] = {r1, r2, r3, NULL};
    fixture_start(&f, allow, NULL);
    bool closed;
    struct {
        const char *req;
        const char *want;
    } cases[] = {
        {"CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"CONNECT 127.0.0.1:70000 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", "HTTP/1.1 403 "},
        {"CONNECT 0x7f.0.0.1:80 HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"GET http://%6c%6fcalhost/ HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"GET http://example.org/ HTTP/9.9\r\n\r\n", "HTTP/1.1 505 "},
        {"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03", "HTTP/1.1 400 "},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        _cleanup_free_ char *out = request(&f, "proxy", cases[i].req, 3000, &closed);
        if (strncmp(out, cases[i].want, strlen(cases[i].want)))
            fprintf(stderr, "\n  case %zu: got `%.60s`\n", i, out);
        CU_ASSERT_EQUAL(strncmp(out, cases[i].want, strlen(cases[i].want)), 0);
        CU_ASSERT_TRUE(closed);
    }
    /* a name that resolves to loopback is refused unless the address itself is listed */
    _cleanup_free_ char *lo = xasprintf("CONNECT localhost:%d HTTP/1.1\r\n\r\n", echo.port);
    _cleanup_free_ char *out = request(&f, "proxy", lo, 3000, &closed);
    CU_ASSERT_EQUAL(strncmp(out, "HTTP/1.1 403 ", 13), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "resolves to 127.0.0.1, a loopback address"));
    /* an allowed destination where nothing listens: 502, verdict failed */
    _cleanup_free_ char *dead = xasprintf("GET http://%s/ HTTP/1.1\r\n\r\n", r3);
    _cleanup_free_ char *out3 = request(&f, "proxy", dead, 3000, &closed);
    CU_ASSERT_EQUAL(strncmp(out3, "HTTP/1.1 502 ", 13), 0);
    /* slowloris: a head that trickles in gets 408 after the head timeout, not a hang */
    int fd = guest_conn(&f, "proxy");
    em_err err;
    double t0 = now_ms();
    send_full(fd, "GET http://127.0.0.1/ HTTP/1.1\r\nX-a: ", 37, &err);
    for (int i = 0; i < 3; i++) {
        sleep_ms(100);
        send_full(fd, "a", 1, &err);
    }
    _cleanup_free_ char *slow = read_all(fd, 3000, NULL, &closed);
    close(fd);
    CU_ASSERT_EQUAL(strncmp(slow, "HTTP/1.1 408 ", 13), 0);
    CU_ASSERT(now_ms() - t0 < 1500);
    /* an absurd header: 431 as soon as the cap is passed */
    fd = guest_conn(&f, "proxy");
    char *big = xmalloc(PROXY_HEAD_MAX + 1);
    memset(big, 'x', PROXY_HEAD_MAX);
    memcpy(big, "GET http://127.0.0.1/ HTTP/1.1\r\nX: ", 35);
    send_full(fd, big, PROXY_HEAD_MAX, &err);
    free(big);
    _cleanup_free_ char *huge = read_all(fd, 3000, NULL, &closed);
    close(fd);
    CU_ASSERT_EQUAL(strncmp(huge, "HTTP/1.1 431 ", 13), 0);
    /* connect and close without a word, and an unknown tag */
    close(guest_conn(&f, "proxy"));
    close(guest_conn(&f, "tcp:[::1"));
    wait_idle(&f);
    json_t *all = events(&f);
    size_t n = json_array_size(all);
    CU_ASSERT_EQUAL(n, ARRAY_LEN(cases) + 6);
    size_t i;
    json_t *ev;
    json_array_foreach(all, i, ev)
    {
        const char *v = ev_str(ev, "verdict");
        CU_ASSERT(!strcmp(v, "denied") || !strcmp(v, "failed"));
        CU_ASSERT_PTR_NOT_NULL(json_object_get(ev, "reason"));
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(json_array_get(all, ARRAY_LEN(cases) + 2), "reason"), "no complete request head"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(json_array_get(all, ARRAY_LEN(cases)), "reason"), "loopback"));
    CU_ASSERT_STRING_EQUAL(ev_str(json_array_get(all, ARRAY_LEN(cases) + 1), "verdict"), "failed");
    json_decref(all);
    fixture_stop(&f);
}

static void two_per_minute(proxy_config *c)
{
    c->policy.max_conn_per_min = 2;
}

static void ten_bytes(proxy_config *c)
{
    c->policy.max_bytes_out = 100;
}

static void test_limits(void)
{
    fixture f;
    _cleanup_free_ char *r1 = xasprintf("127.0.0.1:%d", web.port), *r2 = xasprintf("127.0.0.1:%d", echo.port);
    const char *allow[] = {r1, r2, NULL};
    fixture_start(&f, allow, two_per_minute);
    bool closed;
    _cleanup_free_ char *get = xasprintf("GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", web.port);
    for (int i = 0; i < 3; i++) {
        _cleanup_free_ char *out = request(&f, "proxy", get, 3000, &closed);
        CU_ASSERT_PTR_NOT_NULL(i < 2 ? strstr(out, "hello-egress") : strstr(out, "HTTP/1.1 429 "));
    }
    fixture_stop(&f);

    fixture_start(&f, allow, ten_bytes);
    int fd = guest_conn(&f, "proxy");
    em_err err;
    _cleanup_free_ char *con = xasprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", echo.port);
    send_full(fd, con, strlen(con), &err);
    char buf[200];
    memset(buf, 'z', sizeof buf);
    sleep_ms(100);
    send_full(fd, buf, 60, &err); /* within the limit */
    sleep_ms(100);
    send_full(fd, buf, 60, &err); /* over it: the connection is cut */
    _cleanup_free_ char *out = read_all(fd, 3000, NULL, &closed);
    close(fd);
    CU_ASSERT_TRUE(closed);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "200 Connection Established")); /* and the first 60 bytes echoed */
    wait_idle(&f);
    json_t *all, *ev = last_event(&f, &all);
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(ev, "reason"), "byte limit"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "bytes_out")), 60);
    json_decref(all);
    /* once used up, new connections are refused */
    _cleanup_free_ char *out2 = request(&f, "proxy", con, 3000, &closed);
    CU_ASSERT_EQUAL(strncmp(out2, "HTTP/1.1 403 ", 13), 0);
    fixture_stop(&f);
}

/* No limits set: the defaults (netpolicy.h) are in force; the connection after the 600th in a
 * minute is refused. */
static void test_default_limits(void)
{
    proxy_config c;
    proxy_config_defaults(&c);
    CU_ASSERT_EQUAL(c.policy.max_bytes_out, NETPOLICY_DEFAULT_BYTES_OUT);
    CU_ASSERT_EQUAL(c.policy.max_conn_per_min, NETPOLICY_DEFAULT_CONN_PER_MIN);
    fixture f;
    _cleanup_free_ char *r1 = xasprintf("127.0.0.1:%d", web.port), *r2 = xasprintf("127.0.0.1:%d", echo.port);
    const char *allow[] = {r1, r2, NULL};
    fixture_start(&f, allow, NULL);
    _cleanup_free_ char *tag = xasprintf("tcp:127.0.0.1:%d", echo.port);
    for (unsigned i = 0; i < NETPOLICY_DEFAULT_CONN_PER_MIN; i++) {
        close(guest_conn(&f, tag));
        if (i % 64 == 63)
            wait_idle(&f); /* under max_conns open at once */
    }
    wait_idle(&f);
    bool closed;
    _cleanup_free_ char *get = xasprintf("GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", web.port);
    _cleanup_free_ char *out = request(&f, "proxy", get, 3000, &closed);
    CU_ASSERT_EQUAL(strncmp(out, "HTTP/1.1 429 ", 13), 0);
    wait_idle(&f);
    json_t *all = events(&f);
    size_t i, denied = 0;
    json_t *ev;
    json_array_foreach(all, i, ev)
        denied += !strcmp(ev_str(ev, "verdict"), "denied");
    CU_ASSERT_EQUAL(json_array_size(all), NETPOLICY_DEFAULT_CONN_PER_MIN + 1);
    CU_ASSERT_EQUAL(denied, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(json_array_get(all, json_array_size(all) - 1), "reason"),
                                  "more than 600 new connections in a minute"));
    json_decref(all);
    fixture_stop(&f);
}

static void test_flush_and_shutdown(void)
{
    fixture f;
    _cleanup_free_ char *r2 = xasprintf("127.0.0.1:%d", echo.port);
    const char *allow[] = {r2, NULL};
    fixture_start(&f, allow, NULL);
    _cleanup_free_ char *tag = xasprintf("tcp:127.0.0.1:%d", echo.port);
    int fd = guest_conn(&f, tag);
    em_err err;
    send_full(fd, "abc", 3, &err);
    bool closed;
    _cleanup_free_ char *back = read_upto(fd, 3, 10000, NULL, &closed); /* the echo, however loaded the host */
    CU_ASSERT_STRING_EQUAL(back, "abc");
    proxy_server_flush(f.s);
    json_t *all, *ev = last_event(&f, &all);
    CU_ASSERT_TRUE(json_is_true(json_object_get(ev, "open")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ev, "bytes_out")), 3);
    json_decref(all);
    /* stopping the server ends the open connection, which is logged */
    proxy_server_free(f.s);
    f.s = NULL;
    _cleanup_free_ char *after = read_all(fd, 1000, NULL, &closed);
    CU_ASSERT_TRUE(closed);
    CU_ASSERT_STRING_EQUAL(after, "");
    close(fd);
    ev = last_event(&f, &all);
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(ev, "reason"), "the env stopped"));
    CU_ASSERT_PTR_NULL(json_object_get(ev, "open"));
    json_decref(all);
    egress_log_close(f.log);
}

static void *run_server(void *arg)
{
    void **a = arg;
    em_err err;
    proxy_server_run(a[0], *(int *)a[1], &err);
    return NULL;
}

/* The real hand-off: `envmgr net relay` code in a child with the guest
 * connection as its stdin, the control socket, ping and flush. */
static void test_relay_handoff(void)
{
    fixture f;
    _cleanup_free_ char *r1 = xasprintf("127.0.0.1:%d", web.port);
    const char *allow[] = {r1, NULL};
    fixture_start(&f, allow, NULL);
    em_err err = {0};
    _cleanup_free_ char *dir = xasprintf("%s/relay", test_tmpdir()), *sock = xasprintf("%s/" NETPOLICY_SOCK, dir);
    CU_ASSERT_EQUAL_FATAL(mkdir_p(dir, 0700, &err), 0);
    CU_ASSERT_EQUAL_FATAL(proxy_server_listen(f.s, sock, &err), 0);
    int stop[2];
    CU_ASSERT_EQUAL_FATAL(pipe(stop), 0);
    void *args[] = {f.s, &stop[0]};
    pthread_t th;
    pthread_create(&th, NULL, run_server, args);
    CU_ASSERT_EQUAL(netpolicy_control(dir, "ping", 2000, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_control(dir, "nonsense", 2000, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "unknown command"));

    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(sv[1], 0);
        close(sv[0]);
        close(sv[1]);
        _exit(proxy_relay_main(sock, "proxy"));
    }
    close(sv[1]);
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    _cleanup_free_ char *get = xasprintf("GET http://127.0.0.1:%d/relayed HTTP/1.1\r\n\r\n", web.port);
    send_full(sv[0], get, strlen(get), &err);
    bool closed;
    _cleanup_free_ char *out = read_all(sv[0], 3000, NULL, &closed);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hello-egress"));
    close(sv[0]);
    /* a relay run by hand, with no socket on stdin, refuses */
    wait_idle(&f); /* no connection thread at fork time: a child must not inherit one mid-transfer */
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", 0);
        dup2(devnull, 0);
        _exit(proxy_relay_main(sock, "proxy"));
    }
    waitpid(pid, &st, 0);
    CU_ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    CU_ASSERT_EQUAL(netpolicy_control(dir, "flush", 2000, &err), 0);
    ssize_t w = write(stop[1], "x", 1);
    (void)w;
    pthread_join(th, NULL);
    close(stop[0]);
    close(stop[1]);
    wait_idle(&f);
    json_t *all, *ev = last_event(&f, &all);
    CU_ASSERT_PTR_NOT_NULL(strstr(ev_str(ev, "url"), "/relayed"));
    json_decref(all);
    fixture_stop(&f);
    CU_ASSERT_NOT_EQUAL(access(sock, F_OK), 0); /* the socket goes with the server */
}

static void test_log_reader(void)
{
    em_err err = {0};
    _cleanup_free_ char *p = xasprintf("%s/partial.jsonl", test_tmpdir());
    const char *text = "{\"a\":1}\nnot json\n[1]\n{\"b\":2}\n{\"c\":";
    CU_ASSERT_EQUAL(write_file_atomic(p, text, strlen(text), 0600, &err), 0);
    uint64_t off = 0;
    json_t *ev = NULL;
    CU_ASSERT_EQUAL(egress_log_read(p, &off, 100, &ev, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(ev), 2); /* junk skipped, the unfinished last line left for later */
    CU_ASSERT_EQUAL(off, strlen(text) - 5);
    json_decref(ev);
    ev = NULL;
    off = 0;
    CU_ASSERT_EQUAL(egress_log_read(p, &off, 1, &ev, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(ev), 1);
    CU_ASSERT_EQUAL(off, 8);
    json_decref(ev);
    ev = NULL;
    _cleanup_free_ char *missing = xasprintf("%s/none.jsonl", test_tmpdir());
    off = 0;
    CU_ASSERT_EQUAL(egress_log_read(missing, &off, 10, &ev, &err), 0);
    CU_ASSERT_EQUAL(json_array_size(ev), 0);
    json_decref(ev);
    CU_ASSERT_EQUAL(egress_log_size(missing), 0);
}

/* Each env life gets its own log (the last moves aside); refusals stop at EGRESS_LOG_MAX,
 * allowed connections are still written past it. */
static void test_log_caps(void)
{
    em_err err = {0};
    _cleanup_free_ char *p = xasprintf("%s/caps.jsonl", test_tmpdir()), *prev = xasprintf("%s.prev", p);
    egress_log *l;
    CU_ASSERT_EQUAL_FATAL(egress_log_open(p, &l, &err), 0);
    json_t *one = json_pack("{s:s}", "verdict", "denied");
    egress_log_write(l, one);
    egress_log_close(l);
    CU_ASSERT_EQUAL_FATAL(egress_log_open(p, &l, &err), 0); /* a new life: the last log moved aside */
    CU_ASSERT_EQUAL(egress_log_size(p), 0);
    CU_ASSERT(egress_log_size(prev) > 0);
    char *pad = xmalloc(60001);
    memset(pad, 'x', 60000);
    pad[60000] = '\0';
    json_t *denied = json_pack("{s:s, s:s}", "verdict", "denied", "reason", pad);
    json_t *allowed = json_pack("{s:s, s:s}", "verdict", "allowed", "reason", pad);
    for (uint64_t i = 0; i < EGRESS_LOG_MAX / 60000 + 10; i++)
        egress_log_write(l, denied);
    uint64_t full = egress_log_size(p);
    CU_ASSERT(full <= EGRESS_LOG_MAX);
    egress_log_write(l, denied);
    CU_ASSERT_EQUAL(egress_log_size(p), full); /* refusals: counted, not written */
    egress_log_write(l, allowed);
    CU_ASSERT(egress_log_size(p) > full); /* what the guest reached: written */
    egress_log_close(l);
    json_decref(one);
    json_decref(denied);
    json_decref(allowed);
    free(pad);
}

/* The evaluator's egress_log getter reads what the episode runner wrote to
 * artifacts/.egress.jsonl (through the env seam's host side), optionally keeping one verdict. */
static void test_getter(void)
{
    em_err err = {0};
    _cleanup_free_ char *dir = xasprintf("%s/artifacts", test_tmpdir()), *p = xasprintf("%s/.egress.jsonl", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir_p(dir, 0700, &err), 0);
    json_t *spec = json_pack("{s:s}", "type", "egress_log"), *art = NULL;
    em_env_ops host = {0};
    guest_ops_bind_host(&host);
    CU_ASSERT_EQUAL(getter_run(&host, spec, dir, NULL, &art, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "egress_log: no egress record"));
    const char *text = "{\"verdict\":\"allowed\",\"dest\":\"a.org\"}\n{\"verdict\":\"denied\",\"dest\":\"b.org\"}\n";
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(p, text, strlen(text), 0600, &err), 0);
    CU_ASSERT_EQUAL_FATAL(getter_run(&host, spec, dir, NULL, &art, &err), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(art, "type")), "json");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(art, "value")), 2);
    json_decref(art);
    json_object_set_new(spec, "verdict", json_string("denied"));
    CU_ASSERT_EQUAL_FATAL(getter_run(&host, spec, dir, NULL, &art, &err), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(art, "count")), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(json_object_get(art, "value"), 0), "dest")),
                           "b.org");
    json_decref(art);
    json_object_set_new(spec, "verdict", json_string("maybe"));
    CU_ASSERT_EQUAL(getter_check(spec, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "verdict"));
    json_decref(spec);
}

static CU_TestInfo tests[] = {
    {"parser: proxy requests", test_parse_good},
    {"parser: hostile heads get a status and a reason", test_parse_hostile},
    {"allowed and denied: HTTP, CONNECT, raw TCP, all logged", test_allowed_and_denied},
    {"hostile clients: bad ports, encodings, slowloris, huge heads", test_hostile_clients},
    {"limits: connections per minute, bytes out", test_limits},
    {"limits on by default: the 601st connection in a minute is refused", test_default_limits},
    {"flush logs open connections; stopping ends them", test_flush_and_shutdown},
    {"relay hand-off over the unix socket", test_relay_handoff},
    {"log reader: whole lines only", test_log_reader},
    {"log per env life, refusals capped, allowed kept", test_log_caps},
    {"the egress_log getter", test_getter},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    json_object_seed(1);
    upstream_start(&web, false);
    upstream_start(&echo, true);
    int rc = run_suite("proxy", tests);
    upstream_stop(&web);
    upstream_stop(&echo);
    return rc;
}

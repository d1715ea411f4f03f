/* The host's asset fetcher against real HTTP servers on 127.0.0.1 (threads here): where a
 * transfer may connect (the address libcurl resolved, for the URL and each redirect, whatever
 * the URL's spelling), what the operator can allow (--allow-private, ENVMGR_ASSET_ALLOW_PRIVATE,
 * a mirror's own host), that a refusal caches nothing and reaches no server, and a caller's
 * deadline cutting a server that trickles just above the stall limit. */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/listen.h"
#include "envmgr/base/util.h"
#include "envmgr/net/assets.h"
#include "helpers/cunit_main.h"

#define SECRET "the host's secret\n"

typedef enum { SERVE_SECRET, SERVE_REDIRECT, SERVE_TRICKLE } serve_mode;

/* One connection at a time: read the request head, answer as mode says, close. */
typedef struct server {
    serve_mode mode;
    char location[256]; /* SERVE_REDIRECT */
    int lfd, port;
    bool stopping;
    pthread_t th;
    int connections;    /* accepted so far (read after server_stop) */
} server;

static void answer(server *s, int c)
{
    char head[4096];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof head - 1 && (r = read(c, head + len, sizeof head - 1 - len)) > 0) {
        len += (size_t)r;
        head[len] = '\0';
        if (strstr(head, "\r\n\r\n"))
            break;
    }
    em_err ignored;
    _cleanup_free_ char *resp = NULL;
    if (s->mode == SERVE_SECRET)
        resp = xasprintf("HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(SECRET),
                         SECRET);
    else if (s->mode == SERVE_REDIRECT)
        resp = xasprintf("HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                         s->location);
    else
        resp = xstrdup("HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\nConnection: close\r\n\r\n");
    if (send_full(c, resp, strlen(resp), &ignored) < 0 || s->mode != SERVE_TRICKLE)
        return;
    /* 2 KiB a second, forever: above the 1 KiB/s stall limit, so only a deadline ends it. */
    char chunk[512];
    memset(chunk, 'x', sizeof chunk);
    while (!__atomic_load_n(&s->stopping, __ATOMIC_RELAXED) && send_full(c, chunk, sizeof chunk, &ignored) == 0)
        sleep_ms(250);
}

static void *server_main(void *arg)
{
    server *s = arg;
    for (;;) {
        int c = accept(s->lfd, NULL, NULL); /* fails once server_stop shuts the socket down */
        if (c < 0 && __atomic_load_n(&s->stopping, __ATOMIC_RELAXED))
            return NULL;
        if (c < 0)
            continue;
        __atomic_add_fetch(&s->connections, 1, __ATOMIC_RELAXED);
        answer(s, c);
        close(c);
    }
}

static void server_start(server *s, serve_mode mode, const char *location)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    snprintf(s->location, sizeof s->location, "%s", location ? location : "");
    char where[LISTEN_WHERE_MAX];
    em_err err = {0};
    if (listen_tcp("127.0.0.1:0", true, &s->lfd, where, &err) < 0 || pthread_create(&s->th, NULL, server_main, s)) {
        fprintf(stderr, "test server on 127.0.0.1: %s\n", err.msg);
        exit(2);
    }
    s->port = atoi(strrchr(where, ':') + 1);
}

/* Stops the server; returns how many connections it accepted. */
static int server_stop(server *s)
{
    __atomic_store_n(&s->stopping, true, __ATOMIC_RELAXED);
    shutdown(s->lfd, SHUT_RDWR);
    pthread_join(s->th, NULL);
    close(s->lfd);
    return s->connections;
}

/* A fresh cache and no allowances: each test starts as a task with no operator behind it. */
static void fresh(const char *name)
{
    _cleanup_free_ char *dir = xasprintf("%s/%s", test_tmpdir(), name);
    setenv("ENVMGR_ASSET_CACHE", dir, 1);
    unsetenv("ENVMGR_ASSET_ALLOW_PRIVATE");
    assets_reset();
    assets_settings()->progress = 0;
    assets_settings()->retries = 1;
}

/* Files with bytes under the cache's blobs/ and urls/ (partial/ keeps empty lock files). */
static int cached_files(void)
{
    int n = 0;
    const char *subs[] = {"blobs", "urls"};
    for (size_t i = 0; i < 2; i++) {
        _cleanup_free_ char *d = xasprintf("%s/%s", getenv("ENVMGR_ASSET_CACHE"), subs[i]);
        DIR *dir = opendir(d);
        for (struct dirent *e; dir && (e = readdir(dir));)
            n += e->d_name[0] != '.';
        if (dir)
            closedir(dir);
    }
    return n;
}

/* asset_get fails with a message holding every one of want (NULL-terminated). */
static void refused(const char *url, const char *const *want)
{
    asset_info ai = {0};
    em_err err = {0};
    int rc = asset_get(url, NULL, 0, &ai, &err);
    bool all = rc < 0;
    for (size_t i = 0; want[i]; i++)
        all = all && strstr(err.msg, want[i]);
    if (!all)
        fprintf(stderr, "\n  %s: rc %d: %s\n", url, rc, err.msg);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_TRUE(all);
    CU_ASSERT_PTR_NULL(ai.path);
    asset_info_free(&ai);
}

static void test_loopback_spellings(void)
{
    fresh("spellings");
    server s;
    server_start(&s, SERVE_SECRET, NULL);
    _cleanup_free_ char *allow = xasprintf("--allow-private 127.0.0.1:%d)", s.port);
    const char *forms[] = {"127.0.0.1", "0177.0.0.1", "2130706433", "x@127.0.0.1", "[::ffff:127.0.0.1]",
                           "127.1", "0x7f.0.0.1"};
    for (size_t i = 0; i < ARRAY_LEN(forms); i++) {
        _cleanup_free_ char *url = xasprintf("http://%s:%d/secret", forms[i], s.port);
        refused(url, (const char *[]){"a loopback address: only the operator may allow it", allow, NULL});
    }
    /* A name is judged by what it resolves to (curl may try ::1 first). */
    _cleanup_free_ char *url = xasprintf("http://localhost:%d/secret", s.port);
    refused(url, (const char *[]){"a loopback address: only the operator may allow it", NULL});
    CU_ASSERT_EQUAL(server_stop(&s), 0);
    CU_ASSERT_EQUAL(cached_files(), 0);
}

static void test_other_classes(void)
{
    fresh("classes");
    /* Never connected to: the refusal comes before the first packet. */
    refused("http://169.254.169.254/latest/meta-data/", (const char *[]){"169.254.169.254:80, a link-local", NULL});
    refused("http://[::ffff:169.254.169.254]/", (const char *[]){"169.254.169.254:80, a link-local", NULL});
    refused("http://10.1.2.3:8080/x", (const char *[]){"10.1.2.3:8080, a private address", NULL});
    refused("https://[::1]:8443/x", (const char *[]){"[::1]:8443, a loopback", NULL});
    refused("http://0.0.0.0:1/x", (const char *[]){"0.0.0.0:1, an unspecified address", NULL});
    CU_ASSERT_EQUAL(cached_files(), 0);
}

static void test_operator_allows(void)
{
    fresh("allowed");
    server s;
    server_start(&s, SERVE_SECRET, NULL);
    _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/secret", s.port),
                        *rule = xasprintf("127.0.0.1:%d", s.port), *other = xasprintf("127.0.0.1:%d", s.port + 1);
    em_err err = {0};
    /* Another port of the same address is not enough. */
    CU_ASSERT_EQUAL(assets_allow_private(other, &err), 0);
    refused(url, (const char *[]){"a loopback address", NULL});
    CU_ASSERT_EQUAL(assets_allow_private(rule, &err), 0);
    /* An environment proxy must not carry the transfer elsewhere (nothing listens on port 1). */
    setenv("http_proxy", "http://127.0.0.1:1", 1);
    setenv("ALL_PROXY", "http://127.0.0.1:1", 1);
    asset_info ai = {0};
    int rc = asset_get(url, NULL, 0, &ai, &err);
    unsetenv("http_proxy");
    unsetenv("ALL_PROXY");
    if (rc < 0)
        fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL(read_file_capped(ai.path, 1024, &text, &len, &err), 0);
    CU_ASSERT_EQUAL(len, strlen(SECRET));
    asset_info_free(&ai);
    /* The same through ENVMGR_ASSET_ALLOW_PRIVATE, another URL of the same server. */
    fresh("allowed-env");
    setenv("ENVMGR_ASSET_ALLOW_PRIVATE", rule, 1);
    assets_reset();
    assets_settings()->progress = 0;
    _cleanup_free_ char *url2 = xasprintf("http://127.0.0.1:%d/again", s.port);
    CU_ASSERT_EQUAL(asset_get(url2, NULL, 0, &ai, &err), 0);
    asset_info_free(&ai);
    unsetenv("ENVMGR_ASSET_ALLOW_PRIVATE");
    /* A rule that is not ADDR:PORT is refused. */
    CU_ASSERT_EQUAL(assets_allow_private("localhost:80", &err), -1);
    CU_ASSERT_EQUAL(server_stop(&s), 2);
}

static void test_redirects(void)
{
    fresh("redirect");
    server secret, hop;
    server_start(&secret, SERVE_SECRET, NULL);
    _cleanup_free_ char *to = xasprintf("http://127.0.0.1:%d/secret", secret.port);
    server_start(&hop, SERVE_REDIRECT, to);
    _cleanup_free_ char *first = xasprintf("127.0.0.1:%d", hop.port), *url = xasprintf("http://%s/r", first),
                        *where = xasprintf("to 127.0.0.1:%d, a loopback address", secret.port);
    em_err err = {0};
    /* The first hop allowed by the operator, the redirect's target not. */
    CU_ASSERT_EQUAL(assets_allow_private(first, &err), 0);
    refused(url, (const char *[]){"redirected (1 hop, to `", to, where, NULL});
    /* The same first hop as a URL mirror the operator configured (a name no resolver knows). */
    fresh("redirect-mirror");
    _cleanup_free_ char *mirror = xasprintf("http://assets.envmgr-test.invalid/=http://%s/", first);
    CU_ASSERT_EQUAL(assets_add_mirror(mirror, &err), 0);
    refused("http://assets.envmgr-test.invalid/r", (const char *[]){"redirected (1 hop", where, NULL});
    CU_ASSERT_EQUAL(server_stop(&hop), 2);
    CU_ASSERT_EQUAL(server_stop(&secret), 0);
    CU_ASSERT_EQUAL(cached_files(), 0);
    /* A mirror straight at the server holding the file: the operator named it, so it is fetched. */
    server_start(&secret, SERVE_SECRET, NULL);
    free(mirror);
    mirror = xasprintf("http://assets.envmgr-test.invalid/=http://localhost:%d/", secret.port);
    fresh("mirror");
    CU_ASSERT_EQUAL(assets_add_mirror(mirror, &err), 0);
    asset_info ai = {0};
    int rc = asset_get("http://assets.envmgr-test.invalid/secret", NULL, 0, &ai, &err);
    if (rc < 0)
        fprintf(stderr, "\n  %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, 0);
    asset_info_free(&ai);
    CU_ASSERT_EQUAL(server_stop(&secret), 1);
    assets_reset();
}

static void test_deadline(void)
{
    fresh("deadline");
    server s;
    server_start(&s, SERVE_TRICKLE, NULL);
    _cleanup_free_ char *url = xasprintf("http://127.0.0.1:%d/slow", s.port), *rule = xasprintf("127.0.0.1:%d", s.port);
    em_err err = {0};
    CU_ASSERT_EQUAL(assets_allow_private(rule, &err), 0);
    asset_info ai = {0};
    double t0 = now_ms();
    int rc = asset_get(url, NULL, t0 + 2500, &ai, &err);
    double took = now_ms() - t0;
    if (rc == 0 || !strstr(err.msg, "not fetched by its deadline") || took < 2400 || took > 4500)
        fprintf(stderr, "\n  rc %d after %.0f ms: %s\n", rc, took, err.msg);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not fetched by its deadline"));
    CU_ASSERT_TRUE(took >= 2400 && took <= 4500);
    /* A deadline already past: no transfer at all. */
    t0 = now_ms();
    CU_ASSERT_EQUAL(asset_get(url, NULL, t0 - 1, &ai, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not fetched by its deadline"));
    CU_ASSERT_TRUE(now_ms() - t0 < 1000);
    CU_ASSERT_EQUAL(server_stop(&s), 1);
    CU_ASSERT_EQUAL(cached_files(), 0);
    assets_reset();
}

int main(void)
{
    CU_TestInfo tests[] = {
        {"loopback in every spelling is refused, no connection, nothing cached", test_loopback_spellings},
        {"link-local (metadata), private, IPv6 loopback, unspecified refused", test_other_classes},
        {"--allow-private and ENVMGR_ASSET_ALLOW_PRIVATE allow an exact address:port", test_operator_allows},
        {"a redirect past an allowed first hop or a mirror is refused", test_redirects},
        {"a caller's deadline ends a trickling transfer", test_deadline},
        CU_TEST_INFO_NULL,
    };
    return run_suite("assets", tests);
}

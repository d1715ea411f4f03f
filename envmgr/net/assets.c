/* Host-side asset cache (assets.h): libcurl transfers into partial files, renamed into
 * content-addressed blobs once complete and hashed; lock files pin URL -> sha256. Every socket a
 * transfer opens is checked against the operator's private allowances (on_open). */
#include "envmgr/net/assets.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/net/netpolicy.h"

#define LOCK_WAIT_MS 600000.0 /* another process fetching the same URL: wait this long for it */
#define REDIRECTS_MAX 10L
#define COPY_CHUNK (1u << 20)

typedef struct mirror {
    char *prefix, *target;
    bool is_dir;
} mirror;

static pthread_mutex_t cfg_mu = PTHREAD_MUTEX_INITIALIZER;
static bool cfg_loaded;
static asset_settings cfg;
static mirror mirrors[ASSET_MIRRORS_MAX];
static size_t nmirrors;
static char *ca_file;
static netpolicy allowed; /* the operator's private allowances: only their private_ok rules */

static void load_env_locked(void)
{
    if (cfg_loaded)
        return;
    cfg_loaded = true;
    cfg = (asset_settings){.max_bytes = ASSET_MAX_BYTES_DEFAULT, .timeout_s = ASSET_TIMEOUT_S_DEFAULT,
                           .retries = ASSET_RETRIES_DEFAULT, .progress = -1};
    long v;
    double d;
    const char *s;
    if ((s = getenv("ENVMGR_ASSET_MAX_BYTES")) && parse_int(s, 1, LONG_MAX, &v) == 0)
        cfg.max_bytes = (uint64_t)v;
    if ((s = getenv("ENVMGR_ASSET_TIMEOUT_S")) && parse_double(s, &d) == 0 && d > 0)
        cfg.timeout_s = d;
    if ((s = getenv("ENVMGR_ASSETS_OFFLINE")) && !strcmp(s, "1"))
        cfg.offline = true;
    free(ca_file);
    ca_file = (s = getenv("ENVMGR_ASSET_CA_FILE")) && *s ? xstrdup(s) : NULL;
    netpolicy_init(&allowed);
    if ((s = getenv("ENVMGR_ASSET_ALLOW_PRIVATE")) && *s) {
        _cleanup_free_ char *copy = xstrdup(s);
        char *save = NULL;
        for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
            em_err bad;
            if (netpolicy_add_private(&allowed, tok, &bad) < 0)
                em_warn("envmgr: ENVMGR_ASSET_ALLOW_PRIVATE: %s", bad.msg);
        }
    }
}

asset_settings *assets_settings(void)
{
    pthread_mutex_lock(&cfg_mu);
    load_env_locked();
    pthread_mutex_unlock(&cfg_mu);
    static bool mirrors_from_env;
    const char *m = getenv("ENVMGR_ASSET_MIRRORS");
    if (!mirrors_from_env && m && *m) {
        mirrors_from_env = true;
        _cleanup_free_ char *copy = xstrdup(m);
        char *save = NULL;
        for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
            em_err ignored;
            if (assets_add_mirror(tok, &ignored) < 0)
                em_warn("envmgr: ENVMGR_ASSET_MIRRORS: %s", ignored.msg);
        }
    }
    return &cfg;
}

int assets_allow_private(const char *spec, em_err *err)
{
    pthread_mutex_lock(&cfg_mu);
    load_env_locked(); /* first, or loading later would drop the rule */
    int rc = netpolicy_add_private(&allowed, spec, err);
    pthread_mutex_unlock(&cfg_mu);
    return rc;
}

void assets_reset(void)
{
    pthread_mutex_lock(&cfg_mu);
    for (size_t i = 0; i < nmirrors; i++) {
        free(mirrors[i].prefix);
        free(mirrors[i].target);
    }
    nmirrors = 0;
    cfg_loaded = false;
    load_env_locked();
    pthread_mutex_unlock(&cfg_mu);
}

int assets_add_mirror(const char *spec, em_err *err)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1])
        return em_fail_input(err, "--asset-mirror: expected PREFIX=DIR or PREFIX=URL, got `%.200s`", spec);
    _cleanup_free_ char *prefix = xasprintf("%.*s", (int)(eq - spec), spec);
    const char *target = eq + 1;
    if (!url_is_remote(prefix))
        return em_fail_input(err, "--asset-mirror: `%.200s`: PREFIX must be an http(s) URL prefix", prefix);
    bool is_dir = !url_is_remote(target);
    struct stat st;
    if (is_dir && (stat(target, &st) < 0 || !S_ISDIR(st.st_mode)))
        return em_fail_input(err, "--asset-mirror: `%.200s` is neither a folder nor an http(s) URL", target);
    pthread_mutex_lock(&cfg_mu);
    int rc = 0;
    if (nmirrors >= ASSET_MIRRORS_MAX)
        rc = em_fail_input(err, "--asset-mirror: more than %d mirrors", ASSET_MIRRORS_MAX);
    else
        mirrors[nmirrors++] = (mirror){.prefix = prefix, .target = xstrdup(target), .is_dir = is_dir};
    pthread_mutex_unlock(&cfg_mu);
    if (rc == 0)
        prefix = NULL;
    return rc;
}

/* The URL a mirror rewrites `url` to (caller frees), or NULL when none applies. *is_dir: the
 * result is a host path. */
static char *assets_mirror_for(const char *url, bool *is_dir)
{
    char *out = NULL;
    pthread_mutex_lock(&cfg_mu);
    for (size_t i = 0; i < nmirrors && !out; i++) {
        size_t pl = strlen(mirrors[i].prefix);
        if (strncmp(url, mirrors[i].prefix, pl))
            continue;
        const char *rest = url + pl;
        *is_dir = mirrors[i].is_dir;
        if (mirrors[i].is_dir) {
            /* A folder mirror maps the rest of the URL to a path under it: no query, no `..`. */
            size_t rl = strcspn(rest, "?#");
            _cleanup_free_ char *rel = xasprintf("%.*s", (int)rl, rest);
            em_err ignored;
            while (*rel == '/')
                memmove(rel, rel + 1, strlen(rel));
            if (path_inside(mirrors[i].target, rel, false, &out, &ignored) < 0)
                out = NULL;
        } else {
            out = xasprintf("%s%s", mirrors[i].target, rest);
        }
    }
    pthread_mutex_unlock(&cfg_mu);
    return out;
}

/* ---- the cache ---- */

/* ENVMGR_ASSET_CACHE, else <cache root>/assets (tests and shared caches move it alone, without
 * moving the golden states). */
static char *assets_dir(const char *sub)
{
    const char *root = getenv("ENVMGR_ASSET_CACHE");
    return root && *root ? xasprintf("%s/%s", root, sub) : xasprintf("%s/assets/%s", paths_cache_root(), sub);
}

static char *blob_path(const char *sha)
{
    _cleanup_free_ char *d = assets_dir("blobs");
    return xasprintf("%s/%s", d, sha);
}

static void url_key(const char *url, char key[65])
{
    sha256_hex(url, strlen(url), key);
}

static char *index_path(const char *url)
{
    char key[65];
    url_key(url, key);
    _cleanup_free_ char *d = assets_dir("urls");
    return xasprintf("%s/%s.json", d, key);
}

/* What the cache index says the last fetch of url gave; NULL when nothing. */
static json_t *index_read(const char *url)
{
    _cleanup_free_ char *p = index_path(url), *text = NULL;
    size_t len;
    em_err ignored;
    if (read_file_capped(p, JSON_DOC_MAX, &text, &len, &ignored) < 0)
        return NULL;
    json_t *j = json_loadb(text, len, 0, NULL);
    const char *sha = json_string_value(json_object_get(j, "sha256"));
    if (!j || !sha || !is_sha256_hex(sha)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static int index_write(const char *url, const char *sha, uint64_t size, const char *when, em_err *err)
{
    _cleanup_free_ char *d = assets_dir("urls"), *p = index_path(url);
    if (mkdir_p(d, 0755, err) < 0)
        return -1;
    json_t *j = json_pack("{s:s, s:s, s:I, s:s}", "url", url, "sha256", sha, "size", (json_int_t)size, "fetched_at",
                          when);
    int rc = json_save(p, j, JSON_INDENT(2) | JSON_SORT_KEYS, 0644, err);
    json_decref(j);
    return rc;
}

static bool regular_size(const char *p, uint64_t *size)
{
    struct stat st;
    if (stat(p, &st) < 0 || !S_ISREG(st.st_mode))
        return false;
    *size = (uint64_t)st.st_size;
    return true;
}

/* Move a complete download into the blob store under its hash. */
static int adopt_blob(const char *tmp, char sha[65], uint64_t *size, em_err *err)
{
    if (sha256_file_hex(tmp, sha, err) < 0)
        return -1;
    if (!regular_size(tmp, size))
        return em_fail_errno(err, "`%s`", tmp);
    _cleanup_free_ char *d = assets_dir("blobs"), *blob = blob_path(sha);
    if (mkdir_p(d, 0755, err) < 0)
        return -1;
    chmod(tmp, 0444);
    if (rename(tmp, blob) < 0)
        return em_fail_errno(err, "asset cache: rename into `%s`", blob);
    return 0;
}

/* ---- transfers ---- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct xfer {
    int fd;
    uint64_t written, offset, cap;
    bool too_big, restarted;
    CURL *c;
    volatile uint64_t *live; /* progress counter shared with the fetch-all reporter, or NULL */
    const netpolicy *allow;  /* where, beyond public unicast addresses, it may connect */
    double deadline;         /* 0, or the now_ms() time it must end by */
    long http;
    /* The first connection refused: the address as a rule names it, what it is, how many
     * redirects led there and the URL it was for. */
    const char *refused_cls;
    char refused[NETPOLICY_HOST_MAX + 16];
    long refused_hops;
    char refused_url[512];
} xfer;

static int sockaddr_port(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    return 0;
}

/* Every socket libcurl opens, for the URL and for each redirect, for each address it tries: the
 * address it is about to connect to must be public unicast, or allowed by the operator. The
 * resolved address, not the URL's text: 0177.0.0.1, 2130706433, x@127.0.0.1, [::ffff:127.0.0.1]
 * and a name that resolves to loopback all arrive here as what they are. */
static curl_socket_t on_open(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
    xfer *x = ud;
    const struct sockaddr *sa = &a->addr;
    int port = sockaddr_port(sa);
    const char *cls = netpolicy_addr_class(sa);
    if (!cls || netpolicy_addr_listed(x->allow, sa, port))
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (!x->refused_cls) {
        nethost h;
        x->refused_cls = cls;
        if (netpolicy_addr_host(sa, &h))
            netrule_format(&h, port, x->refused, sizeof x->refused);
        else
            snprintf(x->refused, sizeof x->refused, "a socket of family %d", a->family);
        const char *at = NULL;
        curl_easy_getinfo(x->c, CURLINFO_REDIRECT_COUNT, &x->refused_hops);
        curl_easy_getinfo(x->c, CURLINFO_EFFECTIVE_URL, &at);
        snprintf(x->refused_url, sizeof x->refused_url, "%s", at ? at : "");
    }
    return CURL_SOCKET_BAD;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
    xfer *x = ud;
    size_t n = sz * nm;
    if (x->offset && !x->restarted) {
        /* Asked to resume, but the server sends the whole file (200, not 206): start over. */
        long code = 0;
        curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &code);
        x->restarted = true;
        if (code != 206) {
            if (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0)
                return 0;
            x->offset = 0;
        }
    }
    if (x->offset + x->written + n > x->cap) {
        x->too_big = true;
        return 0;
    }
    em_err ignored;
    if (write_full(x->fd, p, n, &ignored) < 0)
        return 0;
    x->written += n;
    if (x->live)
        __atomic_add_fetch(x->live, n, __ATOMIC_RELAXED);
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    return interrupted() ? 1 : 0;
}

static bool transient(CURLcode rc, long http)
{
    if (rc == CURLE_HTTP_RETURNED_ERROR)
        return http >= 500 || http == 429 || http == 408;
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_PARTIAL_FILE ||
           rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_SSL_CONNECT_ERROR;
}

/* One attempt into x->fd (which may hold a partial file to resume); x->fd, live, allow and
 * deadline set by the caller, the rest reset here. */
static CURLcode transfer(const char *src, xfer *x, const asset_settings *s, char *ebuf)
{
    struct stat st;
    *x = (xfer){.fd = x->fd, .cap = s->max_bytes, .live = x->live, .allow = x->allow, .deadline = x->deadline};
    ebuf[0] = '\0';
    double total_ms = s->timeout_s * 1000;
    if (x->deadline > 0 && x->deadline - now_ms() < total_ms)
        total_ms = x->deadline - now_ms();
    if (total_ms < 1)
        return CURLE_OPERATION_TIMEDOUT;
    if (fstat(x->fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size < s->max_bytes)
        x->offset = (uint64_t)st.st_size;
    else if (ftruncate(x->fd, 0) < 0)
        return CURLE_WRITE_ERROR;
    lseek(x->fd, 0, SEEK_END);
    CURL *c = curl_easy_init();
    if (!c)
        return CURLE_FAILED_INIT;
    x->c = c;
    curl_easy_setopt(c, CURLOPT_URL, src);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, REDIRECTS_MAX);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)ASSET_CONNECT_TIMEOUT_S);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)total_ms);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* none from the environment: we check where we connect */
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, on_open);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, x);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)ASSET_STALL_S);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)s->max_bytes);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "envmgr/" ENVMGR_VERSION);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    if (ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    if (x->offset)
        curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)x->offset);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->http);
    curl_easy_cleanup(c);
    x->c = NULL;
    if (rc == CURLE_HTTP_RETURNED_ERROR && x->http == 416) {
        /* The partial file is not a prefix the server can continue: start from zero next time. */
        if (ftruncate(x->fd, 0) < 0)
            return CURLE_WRITE_ERROR;
    }
    x->too_big = x->too_big || rc == CURLE_FILESIZE_EXCEEDED;
    return rc;
}

/* The operator named this mirror: the addresses its host has now, at its port, may be connected
 * to by the fetches through it (not by a redirect elsewhere, not by other URLs). */
static void allow_mirror_host(netpolicy *p, const char *mirror_url)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (u && curl_url_set(u, CURLUPART_URL, mirror_url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        size_t n = strlen(host);
        if (n > 2 && host[0] == '[' && host[n - 1] == ']') { /* an IPv6 literal */
            memmove(host, host + 1, n - 2);
            host[n - 2] = '\0';
        }
        if (getaddrinfo(host, port, &hints, &res) != 0)
            res = NULL;
    }
    for (const struct addrinfo *a = res; a; a = a->ai_next) {
        nethost h;
        char rule[NETPOLICY_HOST_MAX + 16];
        em_err full;
        if (!netpolicy_addr_host(a->ai_addr, &h))
            continue;
        netrule_format(&h, sockaddr_port(a->ai_addr), rule, sizeof rule);
        if (netpolicy_add_private(p, rule, &full) < 0)
            break;
    }
    if (res)
        freeaddrinfo(res);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
}

/* The one line for a connection on_open refused. */
static int refused_error(const char *url, const xfer *x, em_err *err)
{
    const char *cls = x->refused_cls, *an = strchr("aeiou", cls[0]) ? "n" : "";
    if (x->refused_hops > 0)
        return em_fail_input(err,
                             "asset `%.300s`: redirected (%ld hop%s, to `%.200s`) to %s, a%s %s address: only the "
                             "operator may allow it (--allow-private %s)",
                             url, x->refused_hops, x->refused_hops == 1 ? "" : "s", x->refused_url, x->refused, an, cls,
                             x->refused);
    return em_fail_input(err, "asset `%.300s`: connects to %s, a%s %s address: only the operator may allow it "
                              "(--allow-private %s)",
                         url, x->refused, an, cls, x->refused);
}

/* A local mirror file into the partial file, capped. */
static int copy_local(const char *src, int fd, uint64_t cap, volatile uint64_t *live, em_err *err)
{
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0)
        return em_fail_errno(err, "mirror file `%.200s`", src);
    if (!S_ISREG(st.st_mode))
        return em_fail_input(err, "mirror file `%.200s` is not a regular file", src);
    if ((uint64_t)st.st_size > cap)
        return em_fail_input(err, "mirror file `%.200s`: %lld bytes, more than the asset limit of %llu", src,
                             (long long)st.st_size, (unsigned long long)cap);
    if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        return em_fail_errno(err, "asset cache");
    _cleanup_free_ char *buf = xmalloc(COPY_CHUNK);
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(in, buf, COPY_CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return em_fail_errno(err, "read `%.200s`", src);
        if (r == 0)
            break;
        if ((total += (uint64_t)r) > cap)
            return em_fail_input(err, "mirror file `%.200s` grew past the asset limit", src);
        if (write_full(fd, buf, (size_t)r, err) < 0)
            return -1;
        if (live)
            __atomic_add_fetch(live, (uint64_t)r, __ATOMIC_RELAXED);
    }
    return 0;
}

static int lock_partial(int fd, const char *url, double deadline, em_err *err)
{
    double t0 = now_ms(), until = t0 + LOCK_WAIT_MS;
    if (deadline > 0 && deadline < until)
        until = deadline;
    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return em_fail_errno(err, "asset `%.200s`: lock", url);
        if (check_interrupt(err) < 0)
            return -1;
        if (now_ms() > until)
            return em_fail(err, "asset `%.200s`: another envmgr has been fetching it for %.0f s%s", url,
                           (now_ms() - t0) / 1000, until == deadline ? " (and the deadline came)" : "");
        sleep_ms(100);
    }
    return 0;
}

/* Fetch url (through its mirror, if any) into the blob store, by deadline (0: none). */
static int fetch(const char *url, volatile uint64_t *live, double deadline, char sha[65], uint64_t *size,
                 em_err *err)
{
    const asset_settings *s = assets_settings();
    struct timespec started;
    clock_gettime(CLOCK_REALTIME, &started);
    bool mirror_dir = false;
    _cleanup_free_ char *src = assets_mirror_for(url, &mirror_dir);
    if (s->offline && !(src && mirror_dir))
        return em_fail_input(err,
                             "offline: `%.300s` is not in the asset cache (`envmgr task fetch` gets it, or give "
                             "--asset-mirror)",
                             url);
    char key[65];
    url_key(url, key);
    _cleanup_free_ char *pdir = assets_dir("partial"), *part = xasprintf("%s/%s", pdir, key);
    if (mkdir_p(pdir, 0755, err) < 0)
        return -1;
    _cleanup_close_ int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return em_fail_errno(err, "asset cache `%s`", part);
    if (lock_partial(fd, url, deadline, err) < 0)
        return -1;
    /* Another process (or thread) may have finished it while we waited for the lock: an index
     * written since we started, naming a blob that exists. */
    json_t *idx = index_read(url);
    const char *done = json_string_value(json_object_get(idx, "sha256"));
    _cleanup_free_ char *blob = done ? blob_path(done) : NULL, *ip = index_path(url);
    struct stat ist;
    bool fresh = stat(ip, &ist) == 0 && (ist.st_mtim.tv_sec > started.tv_sec ||
                                         (ist.st_mtim.tv_sec == started.tv_sec && ist.st_mtim.tv_nsec >= started.tv_nsec));
    if (done && fresh && regular_size(blob, size)) {
        snprintf(sha, 65, "%s", done);
        json_decref(idx);
        return 0;
    }
    json_decref(idx);
    if (src && mirror_dir) {
        if (copy_local(src, fd, s->max_bytes, live, err) < 0)
            return em_prefix(err, "asset `%.200s`: ", url);
    } else {
        pthread_once(&curl_once, curl_init_once);
        const char *from = src ? src : url;
        _cleanup_free_ netpolicy *allow = xmalloc(sizeof *allow);
        pthread_mutex_lock(&cfg_mu);
        *allow = allowed;
        pthread_mutex_unlock(&cfg_mu);
        if (src)
            allow_mirror_host(allow, src);
        char ebuf[CURL_ERROR_SIZE];
        xfer x = {.fd = fd, .live = live, .allow = allow, .deadline = deadline};
        CURLcode rc = CURLE_OK;
        int tries = 0;
        uint64_t got = 0;
        double t0 = now_ms();
        bool late = false;
        for (int attempt = 0; attempt <= s->retries; attempt++) {
            if (attempt) {
                double nap = 500.0 * (1 << (attempt - 1));
                if ((late = deadline > 0 && now_ms() + nap >= deadline))
                    break;
                sleep_ms(nap);
                if (check_interrupt(err) < 0)
                    return -1;
            }
            tries++;
            rc = transfer(from, &x, s, ebuf);
            got += x.written;
            if (rc == CURLE_OK || x.too_big || x.refused_cls || !transient(rc, x.http) || interrupted())
                break;
        }
        long http = x.http;
        bool too_big = x.too_big;
        if (interrupted())
            return check_interrupt(err);
        if (rc != CURLE_OK && x.refused_cls) {
            if (ftruncate(fd, 0) < 0)
                return em_fail_errno(err, "asset cache `%s`", part);
            return refused_error(url, &x, err);
        }
        if (rc != CURLE_OK && (late || (deadline > 0 && now_ms() >= deadline - 1000)))
            return em_fail(err, "asset `%.300s`: not fetched by its deadline (the episode's end), %.1f s and %llu bytes "
                                "in: %s (%d tr%s)",
                           url, (now_ms() - t0) / 1000, (unsigned long long)got,
                           ebuf[0] ? ebuf : curl_easy_strerror(rc), tries, tries == 1 ? "y" : "ies");
        if (too_big) {
            ftruncate(fd, 0);
            return em_fail_input(err, "asset `%.300s`: larger than the limit of %llu bytes (ENVMGR_ASSET_MAX_BYTES)",
                                 url, (unsigned long long)s->max_bytes);
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR && (http == 404 || http == 410))
            return em_fail(err, "asset `%.300s`: upstream file vanished (HTTP %ld)", url, http);
        if (rc == CURLE_HTTP_RETURNED_ERROR)
            return em_fail(err, "asset `%.300s`: HTTP %ld (%d tr%s)", url, http, tries, tries == 1 ? "y" : "ies");
        if (rc != CURLE_OK)
            return em_fail(err, "asset `%.300s`: %s (%d tr%s)", url, ebuf[0] ? ebuf : curl_easy_strerror(rc), tries,
                           tries == 1 ? "y" : "ies");
    }
    if (adopt_blob(part, sha, size, err) < 0)
        return em_prefix(err, "asset `%.200s`: ", url);
    char when[40];
    iso8601_now(when, sizeof when);
    return index_write(url, sha, *size, when, err);
}

/* The blob of sha exists and still hashes to it. 1: good; 0: absent; -1: corrupt (err set). */
static int blob_check(const char *url, const char *sha, char **path, uint64_t *size, em_err *err)
{
    _cleanup_free_ char *p = blob_path(sha);
    if (!regular_size(p, size))
        return 0;
    char got[65];
    if (sha256_file_hex(p, got, err) < 0)
        return em_prefix(err, "asset `%.200s`: ", url);
    if (strcmp(got, sha))
        return em_fail(err,
                       "asset `%.300s`: the cached copy `%s` was modified (sha256 %.12s..., expected %.12s...); "
                       "remove it and fetch again",
                       url, p, got, sha);
    *path = p;
    p = NULL;
    return 1;
}

static json_t *lock_entry(const asset_lock *lock, const char *url)
{
    return lock && lock->assets ? json_object_get(lock->assets, url) : NULL;
}

static int get_one(const char *url, const asset_lock *lock, volatile uint64_t *live, double deadline, asset_info *out,
                   em_err *err)
{
    memset(out, 0, sizeof *out);
    json_t *pin = lock_entry(lock, url);
    const char *pinned = json_string_value(json_object_get(pin, "sha256"));
    json_t *idx = pinned ? NULL : index_read(url);
    const char *want = pinned ? pinned : json_string_value(json_object_get(idx, "sha256"));
    out->pinned = pinned != NULL;
    int have = 0;
    if (want) {
        snprintf(out->sha256, sizeof out->sha256, "%s", want);
        have = blob_check(url, want, &out->path, &out->size, err);
    }
    json_decref(idx);
    if (have < 0)
        return -1;
    if (have > 0)
        return 0;
    char sha[65];
    uint64_t size = 0;
    if (fetch(url, live, deadline, sha, &size, err) < 0) {
        if (pinned)
            em_prefix(err, "%s pins this asset, but: ", lock->path);
        return -1;
    }
    if (pinned && strcmp(sha, pinned)) {
        json_int_t psize = json_integer_value(json_object_get(pin, "size"));
        const char *when = json_string_value(json_object_get(pin, "fetched_at"));
        return em_fail(err,
                       "asset `%.300s`: the upstream file changed: it now has sha256 %.12s... (%llu bytes), %s pins "
                       "%.12s... (%lld bytes, fetched %s)",
                       url, sha, (unsigned long long)size, lock->path, pinned, (long long)psize, when ? when : "?");
    }
    snprintf(out->sha256, sizeof out->sha256, "%s", sha);
    out->size = size;
    out->path = blob_path(sha);
    out->fetched = true;
    return 0;
}

int asset_get(const char *url, const asset_lock *lock, double deadline_ms, asset_info *out, em_err *err)
{
    if (!url_is_remote(url))
        return em_fail_input(err, "asset `%.300s`: not an http(s) URL", url);
    double t0 = now_ms();
    if (get_one(url, lock, NULL, deadline_ms, out, err) < 0)
        return -1;
    if (out->fetched && assets_settings()->progress != 0) {
        double s = (now_ms() - t0) / 1000;
        em_info("asset: %.200s: %.1f MiB in %.1f s (%.1f MiB/s)", url, out->size / 1048576.0, s,
                s > 0 ? out->size / 1048576.0 / s : 0);
    }
    return 0;
}

void asset_info_free(asset_info *a)
{
    if (a) {
        free(a->path);
        a->path = NULL;
    }
}

/* ---- lock files ---- */

int asset_lock_load(const char *path, asset_lock **out, em_err *err)
{
    *out = NULL;
    asset_lock *l = xcalloc(1, sizeof *l);
    l->path = xstrdup(path);
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (access(path, F_OK) < 0 && errno == ENOENT) {
        l->assets = json_object();
        *out = l;
        return 0;
    }
    if (read_file_capped(path, 64u << 20, &text, &len, err) < 0) {
        asset_lock_free(l);
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    json_t *assets = json_object_get(root, "assets");
    int rc = 0;
    if (!root)
        rc = em_fail_input(err, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
    else if (!json_is_object(assets))
        rc = em_fail_input(err, "%s: assets: expected an object {URL: {sha256, size, fetched_at}}", path);
    const char *url;
    json_t *e;
    if (rc == 0)
        json_object_foreach(assets, url, e)
        {
            const char *sha = json_string_value(json_object_get(e, "sha256"));
            if (!sha || !is_sha256_hex(sha) || !json_is_integer(json_object_get(e, "size"))) {
                rc = em_fail_input(err, "%s: assets[\"%.200s\"]: expected {sha256: 64 hex digits, size: bytes}", path,
                                   url);
                break;
            }
        }
    if (rc == 0)
        l->assets = json_incref(assets);
    json_decref(root);
    if (rc < 0) {
        asset_lock_free(l);
        return -1;
    }
    *out = l;
    return 0;
}

int asset_lock_for_suite(const char *suite_path, asset_lock **out, em_err *err)
{
    *out = NULL;
    struct stat st;
    if (stat(suite_path, &st) < 0)
        return 0;
    _cleanup_free_ char *copy = xstrdup(suite_path);
    char *slash = strrchr(copy, '/');
    if (!S_ISDIR(st.st_mode)) {
        if (slash)
            *slash = '\0';
        else
            strcpy(copy, ".");
    }
    _cleanup_free_ char *p = xasprintf("%s/" ASSET_LOCK_FILE, copy);
    if (access(p, F_OK) < 0)
        return 0;
    return asset_lock_load(p, out, err);
}

int asset_lock_for_task(const char *task_dir, asset_lock **out, em_err *err)
{
    *out = NULL;
    _cleanup_free_ char *d = xstrdup(task_dir ? task_dir : ".");
    for (int up = 0; up <= 3; up++) {
        _cleanup_free_ char *p = xasprintf("%s/" ASSET_LOCK_FILE, d);
        if (access(p, F_OK) == 0)
            return asset_lock_load(p, out, err);
        char *slash = strrchr(d, '/');
        if (!slash || slash == d)
            break;
        *slash = '\0';
    }
    return 0;
}

int asset_lock_save(asset_lock *l, em_err *err)
{
    if (!l->dirty)
        return 0;
    json_t *doc = json_pack("{s:i, s:O}", "format", 1, "assets", l->assets);
    int rc = json_save(l->path, doc, JSON_INDENT(2) | JSON_SORT_KEYS, 0644, err);
    json_decref(doc);
    if (rc == 0)
        l->dirty = false;
    return rc;
}

void asset_lock_free(asset_lock *l)
{
    if (!l)
        return;
    json_decref(l->assets);
    free(l->path);
    free(l);
}

/* ---- fetching many at once ---- */

typedef struct fetch_all {
    const char *const *urls;
    size_t n, next, done;
    const asset_lock *lock;
    asset_info *info;
    char **errs;
    volatile uint64_t live;
    pthread_mutex_t mu;
} fetch_all;

static void *fetch_worker(void *arg)
{
    fetch_all *f = arg;
    for (;;) {
        pthread_mutex_lock(&f->mu);
        size_t i = f->next < f->n ? f->next++ : f->n;
        pthread_mutex_unlock(&f->mu);
        if (i >= f->n || interrupted())
            return NULL;
        em_err e = {0};
        if (get_one(f->urls[i], f->lock, &f->live, 0, &f->info[i], &e) < 0)
            f->errs[i] = xstrdup(e.msg);
        pthread_mutex_lock(&f->mu);
        f->done++;
        pthread_mutex_unlock(&f->mu);
    }
}

static void progress_line(fetch_all *f, double t0, bool tty, bool final)
{
    pthread_mutex_lock(&f->mu);
    size_t done = f->done;
    pthread_mutex_unlock(&f->mu);
    double s = (now_ms() - t0) / 1000, mib = __atomic_load_n(&f->live, __ATOMIC_RELAXED) / 1048576.0;
    em_log(tty && !final ? EM_LOG_PROGRESS : EM_LOG_INFO, "%sassets: %zu/%zu, %.1f MiB fetched, %.1f MiB/s%s",
           tty ? "\r" : "", done, f->n, mib, s > 0 ? mib / s : 0, tty && !final ? "\033[K" : "");
}

int assets_fetch_all(const char *const *urls, size_t n, int parallel, asset_lock *lock, asset_fetch_report *rep,
                     em_err *err)
{
    memset(rep, 0, sizeof *rep);
    const asset_settings *s = assets_settings();
    if (parallel < 1)
        parallel = 1;
    if (parallel > ASSET_PARALLEL_MAX)
        parallel = ASSET_PARALLEL_MAX;
    if ((size_t)parallel > n)
        parallel = n ? (int)n : 1;
    pthread_once(&curl_once, curl_init_once);
    fetch_all f = {.urls = urls, .n = n, .lock = lock, .info = xcalloc(n + 1, sizeof *f.info),
                   .errs = xcalloc(n + 1, sizeof *f.errs)};
    pthread_mutex_init(&f.mu, NULL);
    pthread_t th[ASSET_PARALLEL_MAX];
    int started = 0;
    double t0 = now_ms();
    for (int i = 0; i < parallel; i++)
        if (pthread_create(&th[i], NULL, fetch_worker, &f) == 0)
            started++;
    if (!started)
        fetch_worker(&f);
    bool tty = s->progress < 0 ? isatty(STDERR_FILENO) : false;
    double last = 0;
    for (;;) {
        pthread_mutex_lock(&f.mu);
        bool all = f.done == f.n || (interrupted() && f.next == f.n);
        pthread_mutex_unlock(&f.mu);
        if (all || interrupted())
            break;
        if (s->progress != 0 && now_ms() - last >= (tty ? 200 : 5000)) {
            progress_line(&f, t0, tty, false);
            last = now_ms();
        }
        sleep_ms(50);
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (s->progress != 0)
        progress_line(&f, t0, tty, true);
    rep->seconds = (now_ms() - t0) / 1000;
    rep->bytes = f.live;
    char when[40];
    iso8601_now(when, sizeof when);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (f.errs[i] || !f.info[i].path) {
            rep->failed++;
            rep->errors = xrealloc(rep->errors, rep->failed * sizeof *rep->errors);
            rep->errors[rep->failed - 1] = f.errs[i] ? f.errs[i] : xasprintf("asset `%.300s`: not fetched", urls[i]);
            f.errs[i] = NULL;
            continue;
        }
        rep->ok++;
        rep->cached += !f.info[i].fetched;
        if (lock && !lock_entry(lock, urls[i])) {
            json_object_set_new(lock->assets, urls[i],
                                json_pack("{s:s, s:I, s:s}", "sha256", f.info[i].sha256, "size",
                                          (json_int_t)f.info[i].size, "fetched_at", when));
            lock->dirty = true;
        }
        asset_info_free(&f.info[i]);
    }
    for (size_t i = 0; i < n; i++)
        asset_info_free(&f.info[i]);
    free(f.info);
    free(f.errs);
    pthread_mutex_destroy(&f.mu);
    if (interrupted())
        return check_interrupt(err);
    if (rep->failed)
        rc = em_fail(err, "%zu of %zu assets failed; the first: %s", rep->failed, n, rep->errors[0]);
    return rc;
}

void asset_fetch_report_free(asset_fetch_report *r)
{
    for (size_t i = 0; r && i < r->failed; i++)
        free(r->errors[i]);
    if (r)
        free(r->errors);
}

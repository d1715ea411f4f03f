/* make bench: the HTTP API's cost. (0) The request rate of a cheap
 * authenticated request (GET /v1/health with the token), on one keep-alive
 * connection and on a new connection per request (each passes the server's
 * accept path); no guest needed. (1) Round trips of step and screenshot
 * through `envmgr serve`'s code (in process, on loopback, keep-alive) against
 * the same library calls made directly, interleaved so both see the same
 * guest; the difference is the API's overhead (goal: at most 2 ms at the
 * median). The CLI's own commands (a process per call) are timed too.
 * (2) N clients, each stepping its own env for S seconds: errors, p50/p99,
 * and that no env and no QEMU is left afterwards.
 *   api_bench [--iterations N] [--clients N] [--seconds S] [--requests N]
 * Figures, not pass/fail (exit 1 only when the soak saw errors or leaks). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/api/api.h"
#include "envmgr/env/env.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

static char token[65];

/* ---- a minimal keep-alive HTTP/1.1 client ---- */
typedef struct conn {
    int fd;
    int port;
    char *buf;
    size_t cap;
} conn;

static int conn_open(conn *c, int port)
{
    c->port = port;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return connect(c->fd, (struct sockaddr *)&sa, sizeof sa);
}

/* Returns the status; *body points into the connection's buffer (valid until the next call). */
static int http(conn *c, const char *method, const char *path, const char *body, char **out, size_t *out_len)
{
    size_t blen = body ? strlen(body) : 0;
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Length: %zu\r\n"
                      "Content-Type: application/json\r\n\r\n",
                      method, path, token, blen);
    em_err err;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (send_full(c->fd, head, (size_t)hl, &err) < 0 || (blen && send_full(c->fd, body, blen, &err) < 0)) {
            close(c->fd);
            conn_open(c, c->port); /* the server closed an idle connection: reconnect once */
            continue;
        }
        size_t have = 0, body_at = 0; /* offsets: the buffer moves when it grows */
        long clen = -1;
        for (;;) {
            if (have + 65536 > c->cap) {
                c->cap = (have + 65536) * 2;
                c->buf = xrealloc(c->buf, c->cap);
            }
            ssize_t n = recv(c->fd, c->buf + have, c->cap - have - 1, 0);
            if (n <= 0)
                break;
            have += (size_t)n;
            c->buf[have] = '\0';
            char *end;
            if (!body_at && (end = memmem(c->buf, have, "\r\n\r\n", 4))) {
                body_at = (size_t)(end - c->buf) + 4;
                *end = '\0'; /* headers as a string, for the searches below */
                char *cl = strcasestr(c->buf, "\r\nContent-Length:");
                clen = cl ? strtol(cl + 17, NULL, 10) : 0;
                *end = '\r';
            }
            if (body_at && (long)(have - body_at) >= clen)
                break;
        }
        if (!body_at) {
            close(c->fd);
            conn_open(c, c->port);
            continue;
        }
        c->buf[body_at - 4] = '\0'; /* headers end here; the body follows */
        int status = atoi(c->buf + 9);
        if (out)
            *out = c->buf + body_at;
        if (out_len)
            *out_len = (size_t)clen;
        return status;
    }
    return -1;
}

/* ---- statistics ---- */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double pct(double *v, size_t n, double p)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_d);
    size_t i = (size_t)ceil(p / 100.0 * (double)n);
    return v[i ? i - 1 : 0];
}

/* ---- (0) the request rate ---- */
static void request_rate(int port, int requests)
{
    conn c = {0};
    conn_open(&c, port);
    long errors = 0;
    double t0 = now_ms();
    for (int i = 0; i < requests; i++)
        errors += http(&c, "GET", "/v1/health", NULL, NULL, NULL) != 200;
    double keep_s = (now_ms() - t0) / 1000;
    close(c.fd);
    t0 = now_ms();
    for (int i = 0; i < requests; i++) {
        conn_open(&c, port);
        errors += http(&c, "GET", "/v1/health", NULL, NULL, NULL) != 200;
        close(c.fd);
    }
    double new_s = (now_ms() - t0) / 1000;
    free(c.buf);
    printf("api: request rate, GET /v1/health with the token: %.0f/s on one keep-alive connection, "
           "%.0f/s with a new connection each (%d requests each, %ld errors)\n",
           requests / keep_s, requests / new_s, requests, errors);
}

static char *json_field_str(const char *json, const char *key)
{
    json_t *j = json_loads(json, 0, NULL);
    const char *v = json_string_value(json_object_get(j, key));
    char *out = v ? xstrdup(v) : NULL;
    json_decref(j);
    return out;
}

/* ---- the soak: one client per env ---- */
typedef struct soak {
    int port;
    double seconds;
    int idx;
    double *lat;
    size_t n, cap;
    long errors;
    char last_error[256];
} soak;

static void *soak_main(void *arg)
{
    soak *s = arg;
    conn c = {0};
    conn_open(&c, s->port);
    char *body;
    int st = http(&c, "POST", "/v1/envs", "{}", &body, NULL);
    _cleanup_free_ char *id = st == 201 ? json_field_str(body, "id") : NULL;
    if (!id) {
        s->errors++;
        snprintf(s->last_error, sizeof s->last_error, "create: %d", st);
        close(c.fd);
        free(c.buf);
        return NULL;
    }
    char path[320];
    snprintf(path, sizeof path, "/v1/envs/%s/reset?screenshot=none", id);
    if ((st = http(&c, "POST", path, "", NULL, NULL)) != 200) {
        s->errors++;
        snprintf(s->last_error, sizeof s->last_error, "reset: %d", st);
    }
    snprintf(path, sizeof path, "/v1/envs/%s/step", id);
    double end = now_ms() + s->seconds * 1000;
    for (int i = 0; now_ms() < end; i++) {
        char act[128];
        snprintf(act, sizeof act, "{\"action\":{\"action_type\":\"MOVE_TO\",\"x\":%d,\"y\":%d}}",
                 100 + 40 * s->idx + (i % 2) * 200, 100 + (i % 7) * 60);
        double t0 = now_ms();
        st = http(&c, "POST", path, act, &body, NULL);
        double dt = now_ms() - t0;
        if (st != 200) {
            s->errors++;
            snprintf(s->last_error, sizeof s->last_error, "step: %d %.100s", st, st > 0 ? body : "");
            if (st == 409) { /* the episode's step limit: start another */
                char rp[320];
                snprintf(rp, sizeof rp, "/v1/envs/%s/reset?screenshot=none", id);
                http(&c, "POST", rp, "", NULL, NULL);
            }
            continue;
        }
        if (s->n == s->cap) {
            s->cap = s->cap ? s->cap * 2 : 256;
            s->lat = xrealloc(s->lat, s->cap * sizeof *s->lat);
        }
        s->lat[s->n++] = dt;
    }
    snprintf(path, sizeof path, "/v1/envs/%s", id);
    if ((st = http(&c, "DELETE", path, NULL, NULL, NULL)) != 200) {
        s->errors++;
        snprintf(s->last_error, sizeof s->last_error, "delete: %d", st);
    }
    close(c.fd);
    free(c.buf);
    return NULL;
}

static int port_of(const api_server *s)
{
    const char *colon = strrchr(api_server_url(s), ':');
    return colon ? atoi(colon + 1) : 0;
}

static int count_qemu_under(const char *dir)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char p[300], cmd[8192];
        snprintf(p, sizeof p, "/proc/%s/cmdline", de->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        size_t k = fread(cmd, 1, sizeof cmd - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++)
            if (!cmd[i])
                cmd[i] = ' ';
        cmd[k] = '\0';
        if (strstr(cmd, "qemu") && strstr(cmd, dir))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

static double run_cli(char *const argv[])
{
    double t0 = now_ms();
    pid_t p = fork();
    if (p == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? now_ms() - t0 : -1;
}

int main(int argc, char **argv)
{
    int iters = 40, clients = 8, requests = 3000;
    double seconds = 120;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iterations"))
            iters = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--clients"))
            clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--requests"))
            requests = atoi(argv[i + 1]);
    }
    install_interrupt_handlers();
    setvbuf(stdout, NULL, _IOLBF, 0); /* figures appear as they are measured */
    em_err err = {0};
    api_token_generate(token, &err);
    _cleanup_free_ char *out = xasprintf("%s/.api-bench-out", paths_run_root());
    paths_ensure_run_root(&err);

    /* ---- (1) round trips: what the API adds to the env work ----
     * Each response carries Server-Timing: env;dur=MS, the time the handler
     * spent in the library calls (the same calls `envmgr act`/`screenshot`
     * make); round trip minus that is the API's own cost: HTTP, auth, JSON
     * parsing and validation, JSON and base64 encoding, loopback transfer. */
    api_config cfg = {.listen = "127.0.0.1:0", .token = token, .max_envs = 2, .out_dir = out, .task_root = ".",
                      .accel = "tcg", .settle_ms = 0};
    api_server *srv;
    if (api_server_start(&cfg, &srv, &err) < 0) {
        fprintf(stderr, "api_bench: %s\n", err.msg);
        return 1;
    }
    request_rate(port_of(srv), requests);
    conn c = {0};
    conn_open(&c, port_of(srv));
    char *body;
    int st = http(&c, "POST", "/v1/envs", "{\"accel\":\"tcg\"}", &body, NULL);
    _cleanup_free_ char *id = st == 201 ? json_field_str(body, "id") : NULL;
    char path[320];
    snprintf(path, sizeof path, "/v1/envs/%s/reset?screenshot=none", id ? id : "x");
    if (!id || http(&c, "POST", path, "{}", NULL, NULL) != 200) {
        fprintf(stderr, "api_bench: could not create and reset an env (HTTP %d)\n", st);
        api_server_stop(srv);
        return 1;
    }
    struct {
        const char *name, *method, *path, *body;
        double *rtt, *env, *over;
    } kinds[] = {
        {"step WAIT 0, no PNG in obs", "POST", "/step?screenshot=none", "{\"action\":{\"action_type\":\"WAIT\",\"seconds\":0}}", 0, 0, 0},
        {"step MOVE_TO, PNG in obs", "POST", "/step", NULL, 0, 0, 0},
        {"screenshot (PNG)", "GET", "/screenshot", NULL, 0, 0, 0},
    };
    size_t nk = ARRAY_LEN(kinds);
    long errors = 0;
    for (size_t k = 0; k < nk; k++) {
        kinds[k].rtt = xcalloc((size_t)iters, sizeof(double));
        kinds[k].env = xcalloc((size_t)iters, sizeof(double));
        kinds[k].over = xcalloc((size_t)iters, sizeof(double));
    }
    for (int i = -3; i < iters; i++) { /* 3 warm-up rounds */
        for (size_t k = 0; k < nk; k++) {
            char p2[320], mv[128];
            snprintf(p2, sizeof p2, "/v1/envs/%s%s", id, kinds[k].path);
            const char *b = kinds[k].body;
            if (k == 1) {
                snprintf(mv, sizeof mv, "{\"action\":{\"action_type\":\"MOVE_TO\",\"x\":%d,\"y\":%d}}",
                         600 + (i & 1) * 40, 400);
                b = mv;
            }
            double t0 = now_ms();
            st = http(&c, kinds[k].method, p2, b, NULL, NULL);
            double rtt = now_ms() - t0;
            static const char needle[] = "\r\nServer-Timing: env;dur=";
            char *timing = strcasestr(c.buf, needle);
            double env_ms = timing ? atof(timing + sizeof needle - 1) : 0;
            if (st != 200 || !timing)
                errors++;
            if (i >= 0) {
                kinds[k].rtt[i] = rtt;
                kinds[k].env[i] = env_ms;
                kinds[k].over[i] = rtt - env_ms;
            }
        }
    }
    for (size_t k = 0; k < nk; k++) {
        double o50 = pct(kinds[k].over, (size_t)iters, 50), o99 = pct(kinds[k].over, (size_t)iters, 99);
        printf("api: %-28s HTTP p50 %6.1f ms = env %6.1f + API %5.2f ms (API p99 %5.2f; goal p50 <= 2) [TCG]\n",
               kinds[k].name, pct(kinds[k].rtt, (size_t)iters, 50), pct(kinds[k].env, (size_t)iters, 50), o50, o99);
        free(kinds[k].rtt), free(kinds[k].env), free(kinds[k].over);
    }
    if (errors)
        printf("api: %ld HTTP errors during the round trips\n", errors);
    close(c.fd);
    free(c.buf);
    api_server_stop(srv);

    /* the CLI's path for the same operations: a process per call (env_open, VNC connect, the call, exit) */
    char direct_name[64];
    snprintf(direct_name, sizeof direct_name, "bench-cli-%d", (int)getpid());
    env_up_opts uo = {.name = direct_name, .image = "desktop", .accel = "tcg"};
    env *e = NULL;
    if (env_up(&uo, &e, NULL, &err) == 0) {
        env_close(e);
        _cleanup_free_ char *bin = xasprintf("%s/bin/envmgr", ENVMGR_SOURCE_DIR), *png = xasprintf("%s/cli.png", out);
        double act_ms[10], shot_ms[10];
        int n_cli = 0;
        for (int i = 0; i < 10; i++) {
            char *act_argv[] = {bin, "act", direct_name, "{\"action_type\":\"WAIT\",\"seconds\":0}", NULL};
            char *shot_argv[] = {bin, "screenshot", direct_name, png, NULL};
            act_ms[n_cli] = run_cli(act_argv);
            shot_ms[n_cli] = run_cli(shot_argv);
            if (act_ms[n_cli] >= 0 && shot_ms[n_cli] >= 0)
                n_cli++;
        }
        if (n_cli)
            printf("api: the CLI path, a process per call: envmgr act (WAIT 0) p50 %.1f ms, envmgr screenshot p50 %.1f ms "
                   "[TCG]\n", pct(act_ms, (size_t)n_cli, 50), pct(shot_ms, (size_t)n_cli, 50));
        env_down(direct_name, &err);
    }

    /* ---- (2) N clients stepping their own envs ---- */
    api_config cfg2 = cfg;
    cfg2.max_envs = clients;
    cfg2.settle_ms = 300;
    if (api_server_start(&cfg2, &srv, &err) < 0) {
        fprintf(stderr, "api_bench: %s\n", err.msg);
        return 1;
    }
    soak *s = xcalloc((size_t)clients, sizeof *s);
    pthread_t *th = xcalloc((size_t)clients, sizeof *th);
    double t0 = now_ms();
    for (int i = 0; i < clients; i++) {
        s[i] = (soak){.port = port_of(srv), .seconds = seconds, .idx = i};
        pthread_create(&th[i], NULL, soak_main, &s[i]);
    }
    size_t total = 0;
    long soak_errors = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        total += s[i].n;
        soak_errors += s[i].errors;
    }
    double wall = (now_ms() - t0) / 1000;
    double *all = xcalloc(total ? total : 1, sizeof *all);
    size_t k = 0;
    for (int i = 0; i < clients; i++) {
        memcpy(all + k, s[i].lat, s[i].n * sizeof *all);
        k += s[i].n;
    }
    conn c2 = {0};
    conn_open(&c2, port_of(srv));
    st = http(&c2, "GET", "/v1/envs", NULL, &body, NULL);
    json_t *lj = st == 200 ? json_loads(body, 0, NULL) : NULL;
    size_t left = json_array_size(json_object_get(lj, "envs"));
    json_decref(lj);
    close(c2.fd);
    free(c2.buf);
    api_server_stop(srv);
    int qemu_left = count_qemu_under(paths_run_root());
    double p50 = pct(all, total, 50), p99 = pct(all, total, 99), mx = total ? all[total - 1] : NAN;
    printf("api: %d clients x %.0f s, own env each, MOVE_TO + settle 300 ms: %zu steps (%.1f/s), %ld errors, "
           "p50 %.0f ms, p99 %.0f ms, max %.0f ms; envs left %zu, QEMU left %d [TCG]\n",
           clients, seconds, total, (double)total / wall, soak_errors, p50, p99, mx, left, qemu_left);
    for (int i = 0; i < clients; i++) {
        if (s[i].errors)
            printf("api:   client %d: %ld errors, last: %s\n", i, s[i].errors, s[i].last_error);
        free(s[i].lat);
    }
    free(s);
    free(th);
    free(all);
    remove_tree(out, NULL);
    return soak_errors || left || qemu_left ? 1 : 0;
}

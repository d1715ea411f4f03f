/* The API's bearer token: generated from the kernel's random source into a
 * 0600 file (or read from one the user made), compared in constant time. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

bool api_truthy(const char *v)
{
    return v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"));
}

int api_token_generate(char out[65], em_err *err)
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return em_fail_errno(err, "token: getrandom");
        got += (size_t)n;
    }
    hex_encode(raw, sizeof raw, out);
    return 0;
}

static int token_ok(const char *t, em_err *err)
{
    size_t n = strlen(t);
    if (n < API_TOKEN_MIN || n > API_TOKEN_MAX)
        return em_fail_input(err, "token: %zu bytes; expected %d to %d", n, API_TOKEN_MIN, API_TOKEN_MAX);
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] >= 127 || t[i] == ';' || t[i] == ',' || t[i] == '"' || t[i] == '\\')
            return em_fail_input(err, "token: byte %zu is not a printable token character", i);
    return 0;
}

int api_token_load_or_create(const char *path, char **token, bool *created, em_err *err)
{
    *token = NULL;
    *created = false;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return em_fail_input(err, "--token-file: `%s` is not a regular file", path);
        if (st.st_mode & 077)
            return em_fail_input(err, "--token-file: `%s` is readable by others (mode %03o); chmod 600 it", path,
                                 (unsigned)(st.st_mode & 0777));
        char *text = NULL;
        size_t len;
        if (read_file_capped(path, 4096, &text, &len, err) < 0)
            return em_prefix(err, "--token-file: ");
        while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
            text[--len] = '\0';
        if (token_ok(text, err) < 0) {
            free(text);
            return em_prefix(err, "--token-file `%s`: ", path);
        }
        *token = text;
        return 0;
    }
    if (errno != ENOENT)
        return em_fail_errno(err, "--token-file: `%s`", path);
    char t[65];
    if (api_token_generate(t, err) < 0)
        return -1;
    /* O_EXCL: never follow a link planted where the file should be */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return em_fail_errno(err, "--token-file: create `%s`", path);
    char line[80];
    int n = snprintf(line, sizeof line, "%s\n", t);
    int rc = write_full(fd, line, (size_t)n, err);
    if (close(fd) < 0 && rc == 0)
        rc = em_fail_errno(err, "--token-file: close `%s`", path);
    if (rc < 0) {
        unlink(path);
        return em_prefix(err, "--token-file `%s`: ", path);
    }
    *token = xstrdup(t);
    *created = true;
    return 0;
}

bool api_token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = la != lb;
    for (size_t i = 0; i < lb; i++)
        diff |= (unsigned char)(a[i < la ? i : 0] ^ b[i]);
    return diff == 0 && la == lb;
}

bool api_auth_bearer(const char *header, const char *token)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return false;
    const char *t = header + 7;
    while (*t == ' ')
        t++;
    char buf[API_TOKEN_MAX + 2];
    size_t n = strlen(t);
    while (n && t[n - 1] == ' ')
        n--;
    if (n > API_TOKEN_MAX)
        return false;
    memcpy(buf, t, n);
    buf[n] = '\0';
    return api_token_equal(buf, token);
}


bool api_auth_credential(const char *master, const api_route *rt, const api_creds *c, long now)
{
    if (api_auth_bearer(c->authorization, master))
        return true;
    /* A browser cannot send a header with a page's scripts or its websocket: the live view's
     * pages take a live-view token (one env, view or control, expiring; never the master token)
     * from the cookie the live page sets, and the page itself from ?token= (the master token or
     * a live-view token from POST /v1/envs/{id}/live-token). */
    if (rt->id == API_R_LIVE || rt->id == API_R_LIVE_WS) {
        api_live_grant_t g;
        return api_live_grant(master, c->cookie, c->query_token, rt->id == API_R_LIVE, rt->env,
                              api_truthy(c->query_control), now, &g);
    }
    if (rt->id == API_R_NOVNC) /* static files: any live page of this server */
        return api_live_cookie_check(c->cookie, master, NULL, false, now);
    return false;
}

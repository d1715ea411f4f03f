/* Live-view tokens: what a browser holds instead of the API's master token. A token names one
 * env, a kind (view, or control: input passes) and an expiry, signed with an HMAC keyed by the
 * master token, so the server keeps no state and a leaked page link or cookie opens one env's
 * live view for a while, never the API. Format: HMAC.KIND.EXPIRES.ENV */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"

static int sign(const char *master, char kind, long expires, const char *env_id, char mac[65])
{
    char msg[API_ID_MAX + 64];
    int n = snprintf(msg, sizeof msg, "envmgr-live:%c:%ld:%s", kind, expires, env_id);
    em_err ignored;
    return hmac_sha256_hex(master, strlen(master), msg, (size_t)n, mac, &ignored);
}

int api_live_token_make(const char *master, const char *env_id, bool control, long expires, char out[API_LIVE_TOKEN_MAX])
{
    char mac[65];
    char kind = control ? 'c' : 'v';
    if (!api_env_id_ok(env_id) || sign(master, kind, expires, env_id, mac) < 0)
        return -1;
    snprintf(out, API_LIVE_TOKEN_MAX, "%s.%c.%ld.%s", mac, kind, expires, env_id);
    return 0;
}

/* The token's kind and expiry when it is a valid, unexpired live-view token for env (any env when
 * NULL) that grants at least what is needed. */
static bool token_parse(const char *master, const char *token, const char *env_id, bool need_control, long now,
                        long *expires_out, bool *control_out)
{
    if (!token || strlen(token) >= API_LIVE_TOKEN_MAX)
        return false;
    char copy[API_LIVE_TOKEN_MAX];
    snprintf(copy, sizeof copy, "%s", token);
    char *kind = strchr(copy, '.');
    if (!kind || kind - copy != 64 || kind[1] == '\0' || kind[2] != '.')
        return false;
    *kind++ = '\0';
    char *end;
    long expires = strtol(kind + 2, &end, 10);
    if (end == kind + 2 || *end != '.' || expires < now)
        return false;
    const char *tenv = end + 1;
    if ((*kind != 'v' && *kind != 'c') || (need_control && *kind != 'c') || !api_env_id_ok(tenv) ||
        (env_id && strcmp(env_id, tenv)))
        return false;
    char mac[65];
    if (sign(master, *kind, expires, tenv, mac) < 0 || !const_time_equal(mac, copy))
        return false;
    *expires_out = expires;
    *control_out = *kind == 'c';
    return true;
}

bool api_live_token_check(const char *master, const char *token, const char *env_id, bool need_control, long now)
{
    long expires;
    bool control;
    return token_parse(master, token, env_id, need_control, now, &expires, &control);
}

/* The first envmgr_live_<ENV> cookie of the header that is a valid token (into tok), else false. */
static bool cookie_token(const char *header, const char *master, const char *env_id, bool need_control, long now,
                         char tok[API_LIVE_TOKEN_MAX], long *expires, bool *control)
{
    if (!header)
        return false;
    size_t kl = strlen(API_COOKIE);
    for (const char *p = header; *p;) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *end = strchr(p, ';');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        /* envmgr_live_<ENV>=TOKEN: one cookie per env, so two live pages in one browser coexist */
        if (eq && (size_t)(eq - p) > kl && !strncmp(p, API_COOKIE, kl) && p[kl] == '_') {
            size_t vl = n - (size_t)(eq + 1 - p);
            if (vl < API_LIVE_TOKEN_MAX) {
                memcpy(tok, eq + 1, vl);
                tok[vl] = '\0';
                if (token_parse(master, tok, env_id, need_control, now, expires, control))
                    return true;
            }
        }
        p += n;
    }
    return false;
}

bool api_live_cookie_check(const char *header, const char *master, const char *env_id, bool need_control, long now)
{
    char tok[API_LIVE_TOKEN_MAX];
    long expires;
    bool control;
    return cookie_token(header, master, env_id, need_control, now, tok, &expires, &control);
}

bool api_live_grant(const char *master, const char *cookies, const char *query_token, bool page, const char *env_id,
                    bool need_control, long now, api_live_grant_t *g)
{
    *g = (api_live_grant_t){0};
    /* A link's token first: a newer link the user opens replaces the cookie an older one left. */
    if (page && query_token) {
        if (api_token_equal(query_token, master)) {
            *g = (api_live_grant_t){.ok = true, .master = true, .control = need_control,
                                    .expires = now + API_LIVE_TTL_S};
            return true;
        }
        if (token_parse(master, query_token, env_id, need_control, now, &g->expires, &g->control)) {
            snprintf(g->token, sizeof g->token, "%s", query_token);
            return g->ok = true;
        }
    }
    return g->ok = cookie_token(cookies, master, env_id, need_control, now, g->token, &g->expires, &g->control);
}

#include "envmgr/net/proxy_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "envmgr/base/util.h"

/* Headers the proxy drops: hop-by-hop ones, and Host, which it writes
 * itself from the URL so the upstream serves the host the policy allowed
 * (a guest-chosen Host would let it reach other sites on a shared server). */
static const char *const dropped_headers[] = {"host",        "connection", "proxy-connection",   "keep-alive",
                                              "proxy-authorization", "proxy-authenticate", "upgrade", "te",
                                              "trailer"};

const char *proxy_status_text(int status)
{
    switch (status) {
    case 200: return "Connection Established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
    }
}

void proxy_request_free(proxy_request *req)
{
    free(req->url);
    free(req->forward);
    req->url = req->forward = NULL;
}

static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int refuse(int *status, const char **why, int st, const char *reason)
{
    *status = st;
    *why = reason;
    return -1;
}

int proxy_parse_authority(const char *s, size_t n, int default_port, nethost *host, int *port, const char **why)
{
    const char *colon = NULL;
    if (memchr(s, '@', n))
        return *why = "credentials in the authority", -1;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close)
            return *why = "unterminated IPv6 literal", -1;
        if ((size_t)(close - s) + 1 < n) {
            if (close[1] != ':')
                return *why = "junk after an IPv6 literal", -1;
            colon = close + 1;
        }
    } else {
        colon = memchr(s, ':', n);
        if (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
            return *why = "IPv6 literals go in brackets ([::1]:443)", -1;
    }
    size_t hn = colon ? (size_t)(colon - s) : n;
    if (colon) {
        size_t pn = n - hn - 1;
        if (pn == 0)
            return *why = "empty port", -1;
        if (pn > 5)
            return *why = "port out of range (1..65535)", -1;
        long v = 0;
        for (size_t i = 0; i < pn; i++) {
            char c = colon[1 + i];
            if (c < '0' || c > '9')
                return *why = "port is not a decimal number", -1;
            v = v * 10 + (c - '0');
        }
        if (v < 1 || v > 65535)
            return *why = "port out of range (1..65535)", -1;
        *port = (int)v;
    } else {
        if (!default_port)
            return *why = "no port", -1;
        *port = default_port;
    }
    return nethost_parse(s, hn, false, host, why);
}

static void sanitize(char *dst, size_t cap, const char *src, size_t n)
{
    size_t k = n < cap ? n : cap;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = c >= 0x21 && c < 0x7f ? (char)c : '?';
    }
    dst[k] = '\0';
}

/* Find "\r\n" in [p, end); a bare CR or LF is an error. NULL when not there yet. */
static const char *line_end(const char *p, const char *end, bool *bad)
{
    for (const char *c = p; c < end; c++) {
        if (*c == '\n') {
            *bad = true;
            return c;
        }
        if (*c == '\r') {
            if (c + 1 == end)
                return NULL;
            if (c[1] != '\n')
                *bad = true;
            return c;
        }
    }
    return NULL;
}

static bool header_dropped(const char *name, size_t n)
{
    for (size_t i = 0; i < ARRAY_LEN(dropped_headers); i++)
        if (strlen(dropped_headers[i]) == n && !strncasecmp(dropped_headers[i], name, n))
            return true;
    return false;
}

static bool name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && !strncasecmp(name, want, n);
}

int proxy_http_parse(const char *buf, size_t len, proxy_request *req, int *status, const char **why)
{
    memset(req, 0, sizeof *req);
    *status = 0;
    *why = NULL;
    const char *end = buf + (len < PROXY_HEAD_MAX ? len : PROXY_HEAD_MAX);
    bool bad = false;
    const char *eol = line_end(buf, end, &bad);
    if (bad)
        return refuse(status, why, 400, "line ends other than CRLF");
    if (!eol) {
        if (end - buf >= PROXY_LINE_MAX)
            return refuse(status, why, 414, "request line longer than 8192 bytes");
        if (len >= PROXY_HEAD_MAX)
            return refuse(status, why, 431, "request head larger than 16384 bytes");
        /* Refuse early what can never become a request line. */
        for (const char *c = buf; c < end; c++)
            if ((unsigned char)*c < 0x20 && *c != '\r')
                return refuse(status, why, 400, "control character in the request line");
        return 1;
    }
    if (eol - buf >= PROXY_LINE_MAX)
        return refuse(status, why, 414, "request line longer than 8192 bytes");

    /* Request line: METHOD SP TARGET SP HTTP/1.x */
    const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
    if (sp2)
        sanitize(req->target, PROXY_TARGET_LOG_MAX, sp1 + 1, (size_t)(sp2 - sp1 - 1));
    if (!sp1 || !sp2 || memchr(sp2 + 1, ' ', (size_t)(eol - sp2 - 1)))
        return refuse(status, why, 400, "malformed request line");
    size_t mlen = (size_t)(sp1 - buf);
    if (mlen == 0 || mlen > PROXY_METHOD_MAX)
        return refuse(status, why, mlen ? 405 : 400, mlen ? "method name too long" : "empty method");
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)buf[i]))
            return refuse(status, why, 400, "invalid character in the method");
    memcpy(req->method, buf, mlen);
    req->method[mlen] = '\0';
    const char *target = sp1 + 1;
    size_t tlen = (size_t)(sp2 - target);
    if (tlen == 0)
        return refuse(status, why, 400, "empty request target");
    for (size_t i = 0; i < tlen; i++)
        if ((unsigned char)target[i] < 0x21 || (unsigned char)target[i] > 0x7e)
            return refuse(status, why, 400, "invalid character in the request target");
    size_t vlen = (size_t)(eol - sp2 - 1);
    if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) || (sp2[8] != '0' && sp2[8] != '1'))
        return refuse(status, why, vlen >= 5 && !memcmp(sp2 + 1, "HTTP/", 5) ? 505 : 400,
                      "only HTTP/1.0 and HTTP/1.1 are spoken");

    req->is_connect = !strcmp(req->method, "CONNECT");
    const char *path = NULL;
    size_t path_len = 0;
    if (req->is_connect) {
        if (proxy_parse_authority(target, tlen, 0, &req->host, &req->port, why) < 0)
            return refuse(status, why, 400, *why);
    } else {
        static const char scheme[] = "http://";
        if (tlen >= 8 && !strncasecmp(target, "https://", 8))
            return refuse(status, why, 400, "https:// URLs go through CONNECT");
        if (tlen < sizeof scheme || strncasecmp(target, scheme, sizeof scheme - 1))
            return refuse(status, why, 400, "not a proxy request (expected an absolute http:// URL or CONNECT)");
        const char *auth = target + sizeof scheme - 1;
        size_t alen = 0;
        while (auth + alen < sp2 && !strchr("/?#", auth[alen]))
            alen++;
        if (alen == 0)
            return refuse(status, why, 400, "URL without a host");
        if (memchr(target, '#', tlen))
            return refuse(status, why, 400, "fragment in the request target");
        if (proxy_parse_authority(auth, alen, 80, &req->host, &req->port, why) < 0)
            return refuse(status, why, 400, *why);
        path = auth + alen;
        path_len = (size_t)(sp2 - path);
    }

    /* Headers. */
    const char *line = eol + 2;
    size_t nheaders = 0;
    bool has_cl = false, has_te = false;
    const char *cl_val = NULL;
    size_t cl_len = 0;
    for (;;) {
        bad = false;
        const char *e = line_end(line, end, &bad);
        if (bad)
            return refuse(status, why, 400, "line ends other than CRLF");
        if (!e) {
            if (end - line >= PROXY_LINE_MAX)
                return refuse(status, why, 431, "header line longer than 8192 bytes");
            if (len >= PROXY_HEAD_MAX)
                return refuse(status, why, 431, "request head larger than 16384 bytes");
            return 1;
        }
        if (e == line)
            break; /* the blank line */
        if (e - line >= PROXY_LINE_MAX)
            return refuse(status, why, 431, "header line longer than 8192 bytes");
        if (++nheaders > PROXY_HEADERS_MAX)
            return refuse(status, why, 431, "more than 100 header lines");
        if (*line == ' ' || *line == '\t')
            return refuse(status, why, 400, "folded header line");
        const char *colon = memchr(line, ':', (size_t)(e - line));
        if (!colon || colon == line)
            return refuse(status, why, 400, "header line without a name");
        for (const char *c = line; c < colon; c++)
            if (!is_tchar((unsigned char)*c))
                return refuse(status, why, 400, "invalid character in a header name");
        for (const char *c = colon + 1; c < e; c++)
            if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f)
                return refuse(status, why, 400, "control character in a header value");
        size_t nlen = (size_t)(colon - line);
        const char *v = colon + 1;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        size_t vl = (size_t)(e - v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (name_is(line, nlen, "transfer-encoding"))
            has_te = true;
        if (name_is(line, nlen, "content-length")) {
            if (has_cl && (vl != cl_len || memcmp(v, cl_val, vl)))
                return refuse(status, why, 400, "conflicting Content-Length headers");
            bool digits = vl > 0 && vl <= 18;
            for (size_t i = 0; i < vl && digits; i++)
                digits = v[i] >= '0' && v[i] <= '9';
            if (!digits)
                return refuse(status, why, 400, "Content-Length is not a number");
            has_cl = true;
            cl_val = v;
            cl_len = vl;
        }
        line = e + 2;
    }
    if (has_cl && has_te)
        return refuse(status, why, 400, "both Content-Length and Transfer-Encoding");
    req->head_len = (size_t)(line + 2 - buf);

    if (!req->is_connect) {
        char auth[NETPOLICY_HOST_MAX + 16];
        if (req->port == 80)
            snprintf(auth, sizeof auth, req->host.kind == NETHOST_IPV6 ? "[%s]" : "%s", req->host.name);
        else
            netrule_format(&req->host, req->port, auth, sizeof auth);
        _cleanup_free_ char *fpath = path_len == 0      ? xstrdup("/")
                                     : path[0] == '?' ? xasprintf("/%.*s", (int)path_len, path) /* http://h?q */
                                                      : xasprintf("%.*s", (int)path_len, path);
        size_t fplen = strlen(fpath);
        /* Rebuild the head: request line in origin form, the guest's headers
         * minus the dropped ones, then our Host and Connection: close. */
        size_t cap = req->head_len + fplen + strlen(auth) + 64;
        char *out = xmalloc(cap), *o = out;
        o += snprintf(o, cap, "%s %.*s HTTP/1.%c\r\n", req->method, (int)fplen, fpath, sp2[8]);
        for (const char *l = eol + 2; l < line;) {
            const char *e = memchr(l, '\r', (size_t)(line - l));
            const char *colon = memchr(l, ':', (size_t)(e - l));
            if (!header_dropped(l, (size_t)(colon - l))) {
                memcpy(o, l, (size_t)(e - l) + 2);
                o += (e - l) + 2;
            }
            l = e + 2;
        }
        o += snprintf(o, cap - (size_t)(o - out), "Host: %s\r\nConnection: close\r\n\r\n", auth);
        req->forward = out;
        req->forward_len = (size_t)(o - out);
        req->url = xasprintf("http://%s%.*s", auth, (int)(fplen > PROXY_URL_LOG_MAX ? PROXY_URL_LOG_MAX : fplen),
                             fpath);
    }
    return 0;
}

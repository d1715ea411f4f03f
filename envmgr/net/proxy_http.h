/* The egress proxy's request parser: the head of an HTTP/1.x request that a
 * guest sends to its proxy, untrusted bytes in and either a request the
 * policy can judge or an HTTP status to refuse it with. Pure functions, no
 * I/O, so the fuzzer (tests/fuzz/fuzz_proxy_request.c) can drive them.
 *
 * Accepted: `CONNECT host:port HTTP/1.x` and `METHOD http://host[:port]/path
 * HTTP/1.x`, CRLF line ends, at most PROXY_HEAD_MAX bytes and
 * PROXY_HEADERS_MAX header lines. Hosts go through nethost_parse, so IPv6
 * literals need brackets and odd IPv4 spellings, percent-encoding and
 * non-ASCII names are refused. */
#ifndef ENVMGR_PROXY_HTTP_H
#define ENVMGR_PROXY_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/net/netpolicy.h"

#define PROXY_HEAD_MAX 16384        /* request line + headers + blank line */
#define PROXY_LINE_MAX 8192         /* one line of it */
#define PROXY_HEADERS_MAX 100
#define PROXY_METHOD_MAX 16
#define PROXY_URL_LOG_MAX 512       /* of a URL in the egress log */
#define PROXY_TARGET_LOG_MAX 128    /* of a refused request target in the log */

typedef struct proxy_request {
    char method[PROXY_METHOD_MAX + 1];
    bool is_connect;
    nethost host;
    int port;
    char *url;          /* plain HTTP: scheme://host[:port]/path, cut for the log (malloc'd); else NULL */
    char *forward;      /* plain HTTP: the head to send upstream (malloc'd); else NULL */
    size_t forward_len;
    size_t head_len;    /* bytes of the guest's head, blank line included */
    /* The request target as sent: printable ASCII, '?' for the rest, cut,
     * for logging refused requests (filled as soon as the request line is read). */
    char target[PROXY_TARGET_LOG_MAX + 1];
} proxy_request;

/* Parse buf[0..len). Returns 1 when more bytes are needed (the head is not
 * complete yet and nothing seen so far is wrong), 0 when req holds a
 * request, -1 when it is refused: *status is the HTTP status to answer with
 * (400, 405, 414, 431, 505) and *why says why. Free req with
 * proxy_request_free whatever the result. */
int proxy_http_parse(const char *buf, size_t len, proxy_request *req, int *status, const char **why);
void proxy_request_free(proxy_request *req);

/* host:port of an authority (CONNECT target, URL authority, relay tag):
 * default_port 0 means the port is required. */
int proxy_parse_authority(const char *s, size_t n, int default_port, nethost *host, int *port, const char **why);

/* The reason phrase of the statuses the proxy sends. */
const char *proxy_status_text(int status);

#endif

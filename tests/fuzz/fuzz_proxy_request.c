/* libFuzzer target: the egress proxy's request parser on arbitrary bytes, as
 * a guest would send them, whole and in two pieces (the proxy parses again
 * as bytes arrive); plus the authority, host and rule parsers the relay tags
 * and allowlists go through. None may crash, leak, read out of bounds, or
 * accept a request whose host is not in canonical form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/net/netpolicy.h"
#include "envmgr/net/proxy_http.h"

static void check_request(const char *buf, size_t len)
{
    proxy_request req;
    int status = 0;
    const char *why = NULL;
    int rc = proxy_http_parse(buf, len, &req, &status, &why);
    if (rc == 0) {
        /* What the proxy will act on is canonical and in range. */
        nethost again;
        const char *w2;
        if (req.port < 1 || req.port > 65535 || req.head_len > len || req.head_len > PROXY_HEAD_MAX)
            abort();
        if (req.host.kind == NETHOST_WILDCARD || !req.host.name[0])
            abort();
        if (req.host.kind == NETHOST_IPV6) {
            char br[NETPOLICY_HOST_MAX + 3];
            size_t n = strlen(req.host.name);
            br[0] = '[';
            memcpy(br + 1, req.host.name, n);
            br[n + 1] = ']';
            if (nethost_parse(br, n + 2, false, &again, &w2) < 0 || strcmp(again.name, req.host.name))
                abort();
        } else if (nethost_parse(req.host.name, strlen(req.host.name), false, &again, &w2) < 0 ||
                   strcmp(again.name, req.host.name) || again.kind != req.host.kind) {
            abort();
        }
        if (!req.is_connect && (!req.forward || !req.url || req.forward_len < 20 ||
                                memcmp(req.forward + req.forward_len - 4, "\r\n\r\n", 4)))
            abort();
    } else if (rc < 0 && (status < 400 || status > 599 || !why)) {
        abort();
    }
    proxy_request_free(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    check_request(buf, size);
    if (size > 1)
        check_request(buf, size / 2); /* a prefix: must be "need more" or a refusal, never a crash */

    nethost h;
    int port;
    const char *why;
    size_t n = size < 600 ? size : 600;
    proxy_parse_authority(buf, n, 0, &h, &port, &why);
    proxy_parse_authority(buf, n, 80, &h, &port, &why);
    nethost_parse(buf, n, true, &h, &why);

    char *s = malloc(n + 1);
    if (!s)
        return 0;
    memcpy(s, buf, n);
    s[n] = '\0';
    netrule r;
    em_err err;
    if (netrule_parse(s, &r, &err) == 0 && (r.port < 1 || r.port > 65535))
        abort();
    free(s);
    return 0;
}

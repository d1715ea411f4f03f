#include "envmgr/net/netpolicy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/json_save.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/linebuf.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/overlay.h"
#include "envmgr/vm/runas.h"
#include "envmgr/vm/vm.h"

#define BLOCK_BEGIN "# envmgr egress begin (rewritten by envmgr after every restore)"
#define BLOCK_END "# envmgr egress end"
#define GUEST_ETC_CAP (1u << 20)
#define CONTROL_MAX 512

void netpolicy_init(netpolicy *p)
{
    memset(p, 0, sizeof *p);
    p->mode = NETPOLICY_NONE;
    netpolicy_set_maxima(p, NETPOLICY_DEFAULT_BYTES_OUT, NETPOLICY_DEFAULT_CONN_PER_MIN);
}

void netpolicy_set_maxima(netpolicy *p, uint64_t bytes_out, unsigned conn_per_min)
{
    p->op_max_bytes_out = p->max_bytes_out = bytes_out;
    p->op_max_conn_per_min = p->max_conn_per_min = conn_per_min;
}

const char *netpolicy_mode_name(netpolicy_mode m)
{
    switch (m) {
    case NETPOLICY_ALLOWLIST: return "allowlist";
    case NETPOLICY_OPEN: return "open";
    default: return "none";
    }
}

int netpolicy_mode_parse(const char *s, netpolicy_mode *m, em_err *err)
{
    if (!strcmp(s, "none"))
        *m = NETPOLICY_NONE;
    else if (!strcmp(s, "allowlist"))
        *m = NETPOLICY_ALLOWLIST;
    else
        return em_fail_input(err, "network mode: expected none or allowlist, got `%.32s` (an open network needs "
                                  "--unsafe-open-network)",
                             s);
    return 0;
}

/* ---- hosts ---------------------------------------------------------------- */

int nethost_parse(const char *s, size_t n, bool allow_wildcard, nethost *out, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    memset(out, 0, sizeof *out);
    if (n == 0)
        return *why = "empty host", -1;
    if (n > NETPOLICY_HOST_MAX + 1) /* a trailing dot may follow a maximal name */
        return *why = "host name longer than 253 bytes", -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%')
            return *why = "percent-encoded host name", -1;
        if (c >= 0x80)
            return *why = "non-ASCII host name (use its xn-- form)", -1;
        if (c < 0x21 || c == 0x7f)
            return *why = "control character or space in host name", -1;
    }
    if (s[0] == '[') {
        if (n < 3 || s[n - 1] != ']')
            return *why = "unterminated IPv6 literal", -1;
        char buf[64];
        size_t len = n - 2;
        if (len >= sizeof buf)
            return *why = "not a valid IPv6 address", -1;
        memcpy(buf, s + 1, len);
        buf[len] = '\0';
        if (strspn(buf, "0123456789abcdefABCDEF:.") != len)
            return *why = "not a valid IPv6 address", -1;
        struct in6_addr a6;
        if (inet_pton(AF_INET6, buf, &a6) != 1)
            return *why = "not a valid IPv6 address", -1;
        out->kind = NETHOST_IPV6;
        inet_ntop(AF_INET6, &a6, out->name, sizeof out->name);
        return 0;
    }
    if (memchr(s, ':', n))
        return *why = "IPv6 addresses go in brackets ([::1]:443)", -1;
    if (memchr(s, ']', n) || memchr(s, '[', n))
        return *why = "brackets around something that is not an IPv6 address", -1;
    char h[NETPOLICY_HOST_MAX + 2];
    memcpy(h, s, n);
    h[n] = '\0';
    if (n > 1 && h[n - 1] == '.') /* the absolute form of a name means the same name */
        h[--n] = '\0';
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c >= 'A' && c <= 'Z')
            h[i] = (char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '*'))
            return *why = "invalid character in host name", -1;
    }
    if (n > NETPOLICY_HOST_MAX)
        return *why = "host name longer than 253 bytes", -1;
    if (strspn(h, "0123456789.") == n) {
        struct in_addr a4;
        if (inet_pton(AF_INET, h, &a4) != 1)
            return *why = "not a canonical dotted-quad IPv4 address", -1;
        out->kind = NETHOST_IPV4;
        inet_ntop(AF_INET, &a4, out->name, sizeof out->name);
        return 0;
    }
    /* inet_aton (and so getaddrinfo) reads 0x7f.1 or 0x7f000001 as 127.0.0.1. */
    struct in_addr any;
    if (inet_aton(h, &any))
        return *why = "a numeric IPv4 form other than the dotted quad", -1;
    if (h[0] == '*') {
        if (!allow_wildcard)
            return *why = "wildcards are for rules, not destinations", -1;
        if (h[1] != '.' || !dns_name_valid(h + 2, true) || !strchr(h + 2, '.'))
            return *why = "a wildcard must be *.<domain> with at least two labels", -1;
        out->kind = NETHOST_WILDCARD;
        memcpy(out->name, h, n + 1); /* n <= NETPOLICY_HOST_MAX, checked above */
        return 0;
    }
    if (!dns_name_valid(h, true))
        return *why = "not a valid host name", -1;
    out->kind = NETHOST_NAME;
    memcpy(out->name, h, n + 1);
    return 0;
}

int netrule_parse(const char *s, netrule *out, em_err *err)
{
    memset(out, 0, sizeof *out); /* private_ok false: only netpolicy_add_private sets it */
    size_t n = strlen(s);
    const char *colon = NULL;
    if (n > NETPOLICY_HOST_MAX + 16)
        return em_fail_input(err, "`%.64s...`: too long for host:port", s);
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return em_fail_input(err, "`%.100s`: expected [IPv6]:port", s);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return em_fail_input(err, "`%.100s`: expected host:port", s);
    }
    const char *why = NULL;
    if (nethost_parse(s, (size_t)(colon - s), true, &out->host, &why) < 0)
        return em_fail_input(err, "`%.100s`: %s", s, why);
    long port;
    if (strspn(colon + 1, "0123456789") != strlen(colon + 1) || parse_int(colon + 1, 1, 65535, &port) < 0)
        return em_fail_input(err, "`%.100s`: port must be 1..65535", s);
    out->port = (int)port;
    return 0;
}

void netrule_format(const nethost *h, int port, char *buf, size_t len)
{
    if (h->kind == NETHOST_IPV6)
        snprintf(buf, len, "[%s]:%d", h->name, port);
    else
        snprintf(buf, len, "%s:%d", h->name, port);
}

/* What an address rule's address is (NULL: public unicast); names are judged when resolved. */
static const char *rule_addr_class(const netrule *r)
{
    struct sockaddr_storage ss = {0};
    if (r->host.kind == NETHOST_IPV4) {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        a4->sin_family = AF_INET;
        if (inet_pton(AF_INET, r->host.name, &a4->sin_addr) != 1)
            return "not an IP address";
    } else if (r->host.kind == NETHOST_IPV6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        a6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, r->host.name, &a6->sin6_addr) != 1)
            return "not an IP address";
    } else {
        return NULL;
    }
    return netpolicy_addr_class((struct sockaddr *)&ss);
}

static int add_rule(netpolicy *p, const netrule *r, em_err *err)
{
    for (size_t i = 0; i < p->nrules; i++)
        if (p->rules[i].port == r->port && p->rules[i].host.kind == r->host.kind &&
            !strcmp(p->rules[i].host.name, r->host.name)) {
            p->rules[i].private_ok |= r->private_ok;
            return 0;
        }
    if (p->nrules >= NETPOLICY_RULES_MAX)
        return em_fail_input(err, "more than %d allowlist entries", NETPOLICY_RULES_MAX);
    p->rules[p->nrules++] = *r;
    return 0;
}

int netpolicy_add(netpolicy *p, const char *entry, em_err *err)
{
    netrule r;
    if (netrule_parse(entry, &r, err) < 0)
        return -1;
    const char *cls = rule_addr_class(&r);
    if (cls)
        return em_fail_input(err, "`%.100s`: %s is a%s %s address: only the operator may allow it (--allow-private)",
                             entry, r.host.name, strchr("aeiou", cls[0]) ? "n" : "", cls);
    return add_rule(p, &r, err);
}

int netpolicy_add_private(netpolicy *p, const char *entry, em_err *err)
{
    netrule r;
    if (netrule_parse(entry, &r, err) < 0)
        return -1;
    if (r.host.kind != NETHOST_IPV4 && r.host.kind != NETHOST_IPV6)
        return em_fail_input(err, "`%.100s`: expected an IP address and a port (names go in --allow)", entry);
    r.private_ok = true;
    return add_rule(p, &r, err);
}

bool netpolicy_equal(const netpolicy *a, const netpolicy *b)
{
    if (a->mode != b->mode || a->nrules != b->nrules || a->max_bytes_out != b->max_bytes_out ||
        a->max_conn_per_min != b->max_conn_per_min || a->op_max_bytes_out != b->op_max_bytes_out ||
        a->op_max_conn_per_min != b->op_max_conn_per_min)
        return false;
    for (size_t i = 0; i < a->nrules; i++)
        if (a->rules[i].port != b->rules[i].port || a->rules[i].host.kind != b->rules[i].host.kind ||
            a->rules[i].private_ok != b->rules[i].private_ok || strcmp(a->rules[i].host.name, b->rules[i].host.name))
            return false;
    return true;
}

/* One limit of a task against its maximum (0: none). */
static int check_limit(uint64_t asked, uint64_t max, const char *field, const char *option, em_err *err)
{
    if (asked && max && asked > max)
        return em_fail_input(err, "network.limits.%s: %llu is above the operator's maximum %llu (%s)", field,
                             (unsigned long long)asked, (unsigned long long)max, option);
    return 0;
}

int netpolicy_check_task(const netpolicy *current, const netpolicy *task_net, em_err *err)
{
    if (check_limit(task_net->max_bytes_out, current->op_max_bytes_out, "max_bytes_out", "--max-egress-bytes",
                    err) < 0 ||
        check_limit(task_net->max_conn_per_min, current->op_max_conn_per_min, "max_connections_per_minute",
                    "--max-connections-per-minute", err) < 0)
        return -1;
    return 0;
}

int netpolicy_for_task(const netpolicy *current, const netpolicy *task_net, netpolicy *out, em_err *err)
{
    if (netpolicy_check_task(current, task_net, err) < 0)
        return -1;
    if (current->mode == NETPOLICY_OPEN) {
        *out = *current;
    } else {
        *out = *task_net;
        for (size_t i = 0; i < current->nrules; i++) /* the operator's stay; the task's own had no such rule */
            if (current->rules[i].private_ok && out->nrules < NETPOLICY_RULES_MAX)
                add_rule(out, &current->rules[i], NULL);
    }
    out->op_max_bytes_out = current->op_max_bytes_out;
    out->op_max_conn_per_min = current->op_max_conn_per_min;
    out->max_bytes_out = task_net->max_bytes_out ? task_net->max_bytes_out : current->op_max_bytes_out;
    out->max_conn_per_min = task_net->max_conn_per_min ? task_net->max_conn_per_min : current->op_max_conn_per_min;
    return 0;
}

/* ---- persistence ----------------------------------------------------------- */

json_t *netpolicy_to_json(const netpolicy *p)
{
    /* One list in rule order (relay addresses follow it); the operator's private rules as
     * {"private": "ADDR:PORT"} so that no other writer's string can become one. */
    json_t *allow = json_array();
    for (size_t i = 0; i < p->nrules; i++) {
        char buf[NETPOLICY_HOST_MAX + 16];
        netrule_format(&p->rules[i].host, p->rules[i].port, buf, sizeof buf);
        json_array_append_new(allow, p->rules[i].private_ok ? json_pack("{s:s}", "private", buf) : json_string(buf));
    }
    json_t *j = json_pack("{s:s, s:o, s:{s:I, s:I}, s:{s:I, s:I}}", "mode", netpolicy_mode_name(p->mode), "allow",
                          allow, "limits", "max_bytes_out", (json_int_t)p->max_bytes_out, "max_connections_per_minute",
                          (json_int_t)p->max_conn_per_min, "maxima", "max_bytes_out",
                          (json_int_t)p->op_max_bytes_out, "max_connections_per_minute",
                          (json_int_t)p->op_max_conn_per_min);
    return j;
}

/* {"max_bytes_out": N, "max_connections_per_minute": N} of a stored policy; a missing field
 * keeps what *bytes and *conn hold. */
static int limits_from_json(json_t *lim, const char *key, uint64_t *bytes, unsigned *conn, em_err *err)
{
    if (!lim)
        return 0;
    json_t *b = json_object_get(lim, "max_bytes_out"), *c = json_object_get(lim, "max_connections_per_minute");
    if (!json_is_object(lim) || (b && (!json_is_integer(b) || json_integer_value(b) < 0)) ||
        (c && (!json_is_integer(c) || json_integer_value(c) < 0 ||
               json_integer_value(c) > NETPOLICY_CONN_PER_MIN_MAX)))
        return em_fail(err, "network policy: %s must be non-negative integers", key);
    if (b)
        *bytes = (uint64_t)json_integer_value(b);
    if (c)
        *conn = (unsigned)json_integer_value(c);
    return 0;
}

int netpolicy_from_json(json_t *j, netpolicy *p, em_err *err)
{
    netpolicy_init(p);
    const char *mode = json_string_value(json_object_get(j, "mode"));
    json_t *allow = json_object_get(j, "allow");
    if (!json_is_object(j) || !mode || (allow && !json_is_array(allow)))
        return em_fail(err, "network policy: expected {mode, allow: [...], limits: {...}, maxima: {...}}");
    if (!strcmp(mode, "open"))
        p->mode = NETPOLICY_OPEN;
    else if (netpolicy_mode_parse(mode, &p->mode, err) < 0)
        return -1;
    size_t i;
    json_t *e;
    json_array_foreach(allow, i, e)
    {
        const char *priv = json_string_value(json_object_get(e, "private"));
        if (!json_is_string(e) && !(json_is_object(e) && priv && json_object_size(e) == 1))
            return em_fail(err, "network policy: allow[%zu] is not a rule", i);
        if ((priv ? netpolicy_add_private(p, priv, err) : netpolicy_add(p, json_string_value(e), err)) < 0)
            return em_prefix(err, "network policy: allow[%zu]: ", i);
    }
    /* Missing: the defaults (a policy file written without limits gets them too). */
    if (limits_from_json(json_object_get(j, "maxima"), "maxima", &p->op_max_bytes_out, &p->op_max_conn_per_min,
                         err) < 0 ||
        limits_from_json(json_object_get(j, "limits"), "limits", &p->max_bytes_out, &p->max_conn_per_min, err) < 0)
        return -1;
    for (size_t k = 0; k < p->nrules; k++)
        if (p->mode == NETPOLICY_NONE && !p->rules[k].private_ok)
            return em_fail(err, "network policy: mode none with allow entries");
    return 0;
}

/* One word for g_shell_parse_argv (libslirp splits the guestfwd command with it). */
static char *shell_quote(const char *s)
{
    size_t n = 2;
    for (const char *c = s; *c; c++)
        n += *c == '\'' ? 4 : 1;
    char *out = xmalloc(n + 1), *o = out;
    *o++ = '\'';
    for (const char *c = s; *c; c++) {
        if (*c == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *c;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

static char *relay_cmd(const char *helper, const char *sock, const char *tag)
{
    _cleanup_free_ char *h = shell_quote(helper), *s = shell_quote(sock), *t = shell_quote(tag);
    return xasprintf("%s 'net' 'relay' %s %s", h, s, t);
}

/* The relays run as QEMU's user: with envmgr as root, the env's own user, who reaches the proxy's
 * socket and a copy of the helper in the QEMU user registry, not the run directory. */
static json_t *vm_net_json(const char *dir, const netpolicy *p, const char *helper, const char *relay_helper,
                           const char *sock)
{
    json_t *fwd = json_array();
    _cleanup_free_ char *pc = relay_cmd(relay_helper, sock, "proxy");
    json_array_append_new(fwd, json_sprintf("tcp:" NETPOLICY_PROXY_ADDR ":%d-cmd:%s", NETPOLICY_PROXY_PORT, pc));
    netrelay relays[NETPOLICY_RULES_MAX];
    size_t n = netpolicy_relays(p, relays);
    for (size_t i = 0; i < n; i++) {
        char rule[NETPOLICY_HOST_MAX + 16];
        netrule_format(&relays[i].rule->host, relays[i].rule->port, rule, sizeof rule);
        _cleanup_free_ char *tag = xasprintf("tcp:%s", rule);
        _cleanup_free_ char *cmd = relay_cmd(relay_helper, sock, tag);
        json_array_append_new(fwd, json_sprintf("tcp:%s:%d-cmd:%s", relays[i].alias, relays[i].rule->port, cmd));
    }
    return json_pack("{s:o, s:[s,s,s,s]}", "guestfwd", fwd, "supervisor", helper, "net", "serve", dir);
}

int netpolicy_save(const char *dir, const netpolicy *p, const char *helper, em_err *err)
{
    char real[PATH_MAX];
    if (!realpath(dir, real))
        return em_fail_errno(err, "network policy: `%s`", dir);
    if (!helper)
        helper = paths_envmgr_bin();
    if (p->mode != NETPOLICY_NONE && helper[0] != '/')
        return em_fail(err, "network policy: the helper `%s` is not an absolute path", helper);
    if (p->mode != NETPOLICY_NONE && strlen(real) + sizeof "/" NETPOLICY_SOCK > 108) /* sun_path */
        return em_fail(err, "network policy: the run directory `%s` is too long for a unix socket path "
                            "(set ENVMGR_RUN_DIR to a shorter path)",
                       real);
    json_t *j = netpolicy_to_json(p);
    _cleanup_free_ char *path = xasprintf("%s/" NETPOLICY_FILE, real);
    int rc = json_save(path, j, JSON_INDENT(2), 0600, err);
    json_decref(j);
    if (rc < 0)
        return em_prefix(err, "network policy: ");
    _cleanup_free_ char *vmnet = xasprintf("%s/" VM_NET_FILE, real);
    if (p->mode == NETPOLICY_NONE) {
        if (unlink(vmnet) < 0 && errno != ENOENT)
            return em_fail_errno(err, "network policy: remove `%s`", vmnet);
        return 0;
    }
    vm_runas ra;
    _cleanup_free_ char *relay_helper = NULL;
    if (vm_runas_acquire(real, &ra, err) < 0 || vm_runas_helper(&ra, helper, &relay_helper, err) < 0)
        return em_prefix(err, "network policy: ");
    _cleanup_free_ char *sock = ra.drop ? vm_runas_socket(&ra) : xasprintf("%s/" NETPOLICY_SOCK, real);
    json_t *v = vm_net_json(real, p, helper, relay_helper, sock);
    rc = json_save(vmnet, v, JSON_INDENT(2), 0600, err);
    json_decref(v);
    return rc < 0 ? em_prefix(err, "network policy: ") : 0;
}

int netpolicy_load(const char *dir, netpolicy *p, em_err *err)
{
    netpolicy_init(p);
    _cleanup_free_ char *path = xasprintf("%s/" NETPOLICY_FILE, dir), *text = NULL;
    if (access(path, F_OK) != 0)
        return 0;
    if (read_file_capped(path, JSON_DOC_MAX, &text, NULL, err) < 0)
        return em_prefix(err, "network policy: ");
    json_error_t je;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return em_fail(err, "network policy `%s`: line %d: %s", path, je.line, je.text);
    int rc = netpolicy_from_json(j, p, err);
    json_decref(j);
    return rc < 0 ? em_prefix(err, "`%s`: ", path) : 0;
}

/* ---- decisions ------------------------------------------------------------- */

int netpolicy_match(const netpolicy *p, const nethost *h, int port)
{
    size_t hl = strlen(h->name);
    for (size_t i = 0; i < p->nrules; i++) {
        const netrule *r = &p->rules[i];
        if (r->port != port)
            continue;
        switch (r->host.kind) {
        case NETHOST_WILDCARD: {
            const char *suffix = r->host.name + 1; /* ".example.org" */
            size_t sl = strlen(suffix);
            if (h->kind == NETHOST_NAME && hl > sl && !strcmp(h->name + hl - sl, suffix))
                return (int)i;
            break;
        }
        default:
            if (h->kind == r->host.kind && !strcmp(h->name, r->host.name))
                return (int)i;
            break;
        }
    }
    return -1;
}

/* An IPv6 address that carries an IPv4 one (::ffff:a.b.c.d, 64:ff9b::a.b.c.d). */
static bool embedded_v4(const struct in6_addr *a, struct in_addr *v4)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(a->s6_addr, mapped, 12) && memcmp(a->s6_addr, nat64, 12))
        return false;
    memcpy(&v4->s_addr, a->s6_addr + 12, 4);
    return true;
}

bool netpolicy_addr_host(const struct sockaddr *sa, nethost *h)
{
    memset(h, 0, sizeof *h);
    if (sa->sa_family == AF_INET) {
        h->kind = NETHOST_IPV4;
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, h->name, sizeof h->name);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        struct in_addr v4;
        if (embedded_v4(a6, &v4)) {
            h->kind = NETHOST_IPV4;
            inet_ntop(AF_INET, &v4, h->name, sizeof h->name);
        } else {
            h->kind = NETHOST_IPV6;
            inet_ntop(AF_INET6, a6, h->name, sizeof h->name);
        }
    } else {
        return false;
    }
    return true;
}

bool netpolicy_addr_listed(const netpolicy *p, const struct sockaddr *sa, int port)
{
    nethost h;
    return netpolicy_addr_host(sa, &h) && netpolicy_match(p, &h, port) >= 0;
}

static const char *v4_class(uint32_t a) /* host byte order */
{
    static const struct {
        uint32_t net, mask;
        const char *what;
    } ranges[] = {
        {0x00000000, 0xff000000, "unspecified"},          /* 0.0.0.0/8 */
        {0x0a000000, 0xff000000, "private"},              /* 10/8 */
        {0x64400000, 0xffc00000, "shared address space"}, /* 100.64/10 */
        {0x7f000000, 0xff000000, "loopback"},             /* 127/8 */
        {0xa9fe0000, 0xffff0000, "link-local"},           /* 169.254/16 */
        {0xac100000, 0xfff00000, "private"},              /* 172.16/12 */
        {0xc0000000, 0xffffff00, "reserved"},             /* 192.0.0/24 */
        {0xc0000200, 0xffffff00, "documentation"},        /* 192.0.2/24 */
        {0xc0586300, 0xffffff00, "reserved"},             /* 192.88.99/24 (6to4 relay) */
        {0xc0a80000, 0xffff0000, "private"},              /* 192.168/16 */
        {0xc6120000, 0xfffe0000, "benchmarking"},         /* 198.18/15 */
        {0xc6336400, 0xffffff00, "documentation"},        /* 198.51.100/24 */
        {0xcb007100, 0xffffff00, "documentation"},        /* 203.0.113/24 */
        {0xe0000000, 0xf0000000, "multicast"},            /* 224/4 */
        {0xf0000000, 0xf0000000, "reserved"},             /* 240/4 and broadcast */
    };
    for (size_t i = 0; i < ARRAY_LEN(ranges); i++)
        if ((a & ranges[i].mask) == ranges[i].net)
            return ranges[i].what;
    return NULL;
}

const char *netpolicy_addr_class(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return v4_class(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
    if (sa->sa_family != AF_INET6)
        return "not an IP address";
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    const unsigned char *b = a->s6_addr;
    struct in_addr v4;
    if (embedded_v4(a, &v4))
        return v4_class(ntohl(v4.s_addr));
    if (IN6_IS_ADDR_UNSPECIFIED(a))
        return "unspecified";
    if (IN6_IS_ADDR_LOOPBACK(a))
        return "loopback";
    if (IN6_IS_ADDR_V4COMPAT(a))
        return "reserved";
    if ((b[0] & 0xfe) == 0xfc)
        return "private"; /* fc00::/7 unique local */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
        return "link-local"; /* fe80::/10 */
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0)
        return "private"; /* fec0::/10 site-local (deprecated) */
    if (b[0] == 0xff)
        return "multicast";
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
        return "documentation"; /* 2001:db8::/32 */
    if (b[0] == 0x01 && b[1] == 0x00 && !memcmp(b + 2, "\0\0\0\0\0\0", 6))
        return "reserved"; /* 100::/64 discard */
    if (b[0] == 0x20 && b[1] == 0x02)
        return "reserved"; /* 2002::/16 6to4: carries an IPv4 address of its own */
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00)
        return "reserved"; /* 2001::/32 Teredo */
    if ((b[0] & 0xe0) != 0x20)
        return "reserved"; /* outside 2000::/3, the global unicast space */
    return NULL;
}

size_t netpolicy_relays(const netpolicy *p, netrelay *out)
{
    const char *hosts[NETPOLICY_RULES_MAX];
    size_t nhosts = 0, n = 0;
    for (size_t i = 0; i < p->nrules; i++) {
        const netrule *r = &p->rules[i];
        if (r->host.kind == NETHOST_WILDCARD)
            continue;
        size_t k;
        for (k = 0; k < nhosts && strcmp(hosts[k], r->host.name); k++)
            ;
        if (k == nhosts)
            hosts[nhosts++] = r->host.name;
        out[n].rule = r;
        snprintf(out[n].alias, sizeof out[n].alias, "10.0.2.%d", NETPOLICY_ALIAS_FIRST + (int)k);
        n++;
    }
    return n;
}

/* ---- guest configuration ----------------------------------------------------- */

char *netpolicy_hosts_block(const netpolicy *p)
{
    netrelay relays[NETPOLICY_RULES_MAX];
    size_t n = netpolicy_relays(p, relays);
    size_t cap = 256 + n * (NETPOLICY_HOST_MAX + 96), len = 0;
    char *out = xmalloc(cap);
    len += (size_t)snprintf(out + len, cap - len, "%s\n", BLOCK_BEGIN);
    len += (size_t)snprintf(out + len, cap - len, "# the HTTP(S) proxy: http://%s:%d/\n", NETPOLICY_PROXY_ADDR,
                            NETPOLICY_PROXY_PORT);
    for (size_t i = 0; i < n; i++) {
        const netrule *r = relays[i].rule;
        bool first = true; /* one hosts line per host, the first time it appears */
        for (size_t k = 0; k < i; k++)
            if (relays[k].rule->host.kind == r->host.kind && !strcmp(relays[k].rule->host.name, r->host.name))
                first = false;
        char rule[NETPOLICY_HOST_MAX + 16];
        netrule_format(&r->host, r->port, rule, sizeof rule);
        if (first && r->host.kind == NETHOST_NAME)
            len += (size_t)snprintf(out + len, cap - len, "%s\t%s\n", relays[i].alias, r->host.name);
        len += (size_t)snprintf(out + len, cap - len, "# relay %s:%d -> %s\n", relays[i].alias, r->port, rule);
    }
    snprintf(out + len, cap - len, "%s\n", BLOCK_END);
    return out;
}

char *netpolicy_environment_block(void)
{
    const char *url = "http://" NETPOLICY_PROXY_ADDR ":3128/";
    return xasprintf("%s\nhttp_proxy=%s\nhttps_proxy=%s\nHTTP_PROXY=%s\nHTTPS_PROXY=%s\n"
                     "no_proxy=localhost,127.0.0.1,::1\nNO_PROXY=localhost,127.0.0.1,::1\n%s\n",
                     BLOCK_BEGIN, url, url, url, url, BLOCK_END);
}

char *netpolicy_splice_block(const char *orig, size_t len, const char *block)
{
    size_t cap = len + strlen(block) + 2, n = 0;
    char *out = xmalloc(cap + 1);
    bool inside = false;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(orig + i, '\n', len - i);
        size_t ll = nl ? (size_t)(nl - (orig + i)) : len - i;
        bool begin = ll >= strlen("# envmgr egress begin") && !memcmp(orig + i, "# envmgr egress begin", 21);
        bool end = ll == strlen(BLOCK_END) && !memcmp(orig + i, BLOCK_END, ll);
        if (begin)
            inside = true;
        if (!inside) {
            memcpy(out + n, orig + i, ll);
            n += ll;
            out[n++] = '\n';
        }
        if (end)
            inside = false;
        i += ll + (nl ? 1 : 0);
    }
    size_t bl = strlen(block);
    memcpy(out + n, block, bl);
    n += bl;
    out[n] = '\0';
    return out;
}

static int splice_guest_file(guest *g, const char *path, const char *block, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    em_err rerr;
    if (guest_file_read(g, path, GUEST_ETC_CAP, &data, &len, &rerr) < 0) {
        free(data);
        data = NULL; /* a missing file starts empty */
        len = 0;
    }
    _cleanup_free_ char *text = netpolicy_splice_block(data ? data : "", len, block);
    if (guest_file_write_system(g, path, text, strlen(text), err) < 0)
        return em_prefix(err, "network setup: ");
    return 0;
}

int netpolicy_guest_setup(guest *g, const netpolicy *p, em_err *err)
{
    if (p->mode == NETPOLICY_NONE)
        return 0;
    _cleanup_free_ char *hosts = netpolicy_hosts_block(p), *envb = netpolicy_environment_block();
    if (splice_guest_file(g, "/etc/hosts", hosts, err) < 0 || splice_guest_file(g, "/etc/environment", envb, err) < 0)
        return -1;
    return 0;
}

/* ---- the helper process -------------------------------------------------------- */

static char *log_path(const char *dir, bool *spilled)
{
    char *p = vm_spill_path(dir, ".jsonl");
    *spilled = p != NULL;
    return p ? p : xasprintf("%s/" NETPOLICY_LOG_FILE, dir);
}

char *netpolicy_log_path(const char *dir)
{
    bool spilled;
    return log_path(dir, &spilled);
}

int netpolicy_log_claim(const char *dir, char **path, em_err *err)
{
    bool spilled;
    *path = log_path(dir, &spilled);
    return spilled ? vm_spill_claim(dir, *path, err) : 0;
}

void netpolicy_log_forget(const char *dir)
{
    _cleanup_free_ char *spilled = vm_spill_path(dir, ".jsonl");
    if (spilled)
        vm_spill_remove(spilled);
}

int netpolicy_control(const char *dir, const char *cmd, double timeout_ms, em_err *err)
{
    _cleanup_free_ char *sock = xasprintf("%s/" NETPOLICY_SOCK, dir);
    _cleanup_close_ int fd = unix_connect(sock, 0, err);
    if (fd < 0)
        return em_prefix(err, "egress proxy: ");
    char msg[CONTROL_MAX];
    int n = snprintf(msg, sizeof msg, "envmgr/1 %s\n", cmd);
    if (n < 0 || (size_t)n >= sizeof msg)
        return em_fail(err, "egress proxy: command too long");
    if (send_full(fd, msg, (size_t)n, err) < 0)
        return em_prefix(err, "egress proxy `%s`: ", sock);
    linebuf in;
    linebuf_init(&in, CONTROL_MAX);
    const char *reply;
    size_t rn;
    int rc = linebuf_read_line(&in, fd, now_ms() + timeout_ms, &reply, &rn, err);
    if (rc < 0)
        em_prefix(err, "egress proxy `%s`: %s: ", sock, cmd);
    else if (rn != 2 || memcmp(reply, "ok", 2))
        rc = em_fail(err, "egress proxy: %s: %.*s", cmd, (int)(rn > 200 ? 200 : rn), reply);
    linebuf_release(&in);
    return rc;
}

int netpolicy_wait_ready(const char *dir, double timeout_ms, em_err *err)
{
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        em_err cerr = {0};
        if (netpolicy_control(dir, "ping", 2000, &cerr) == 0)
            return 0;
        if (check_interrupt(err) < 0)
            return -1;
        if (now_ms() > deadline) {
            _cleanup_free_ char *log = xasprintf("%s/" NETPOLICY_PROXY_LOG, dir);
            return em_fail(err, "egress proxy did not start (%s; see %s)", cerr.msg, log);
        }
        sleep_ms(10);
    }
}

pid_t netpolicy_helper_pid(const char *dir)
{
    _cleanup_free_ char *path = xasprintf("%s/" NETPOLICY_PID_FILE, dir), *text = NULL;
    long v;
    if (read_file_capped(path, 64, &text, NULL, NULL) < 0)
        return 0;
    text[strcspn(text, "\r\n")] = '\0';
    if (parse_int(text, 2, INT_MAX, &v) < 0 || !pid_running((pid_t)v))
        return 0;
    /* Guard against pid reuse: the process must be `envmgr net serve <dir>`. */
    char cpath[64];
    snprintf(cpath, sizeof cpath, "/proc/%ld/cmdline", v);
    _cleanup_free_ char *cmd = NULL;
    size_t len = 0;
    if (read_file_capped(cpath, 1 << 16, &cmd, &len, NULL) < 0)
        return 0;
    char real[PATH_MAX];
    const char *want = realpath(dir, real) ? real : dir;
    bool serve = false;
    for (size_t i = 0; i < len; i += strlen(cmd + i) + 1) {
        if (!strcmp(cmd + i, "serve"))
            serve = true;
        else if (serve && !strcmp(cmd + i, want))
            return (pid_t)v;
    }
    return 0;
}

int netpolicy_stop_helper(const char *dir, em_err *err)
{
    pid_t pid = netpolicy_helper_pid(dir);
    if (!pid)
        return 0;
    static const struct {
        int sig;
        double wait_ms;
    } steps[] = {{0, 3000}, {SIGTERM, 3000}, {SIGKILL, 5000}};
    for (size_t i = 0; i < ARRAY_LEN(steps); i++) {
        if (steps[i].sig)
            kill(pid, steps[i].sig);
        double deadline = now_ms() + steps[i].wait_ms;
        while (pid_running(pid) && now_ms() < deadline)
            sleep_ms(5);
        if (!pid_running(pid))
            return 0;
    }
    return em_fail(err, "egress proxy pid %d did not exit after SIGKILL", (int)pid);
}

/* Network policy: host and rule parsing (every odd spelling of an address
 * is refused), matching, address classes, persistence, the QEMU network
 * extras it writes for vm_spawn, and the guest files. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/net/netpolicy.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/runas.h"
#include "envmgr/vm/vm.h"
#include "envmgr/task/task.h"
#include "helpers/cunit_main.h"

static int host_ok(const char *s, bool wildcard, nethost_kind kind, const char *want)
{
    nethost h;
    const char *why = NULL;
    int rc = nethost_parse(s, strlen(s), wildcard, &h, &why);
    if (rc < 0) {
        fprintf(stderr, "\n  `%s` refused: %s\n", s, why);
        return 0;
    }
    if (h.kind != kind || strcmp(h.name, want)) {
        fprintf(stderr, "\n  `%s` gave kind %d `%s`, want %d `%s`\n", s, h.kind, h.name, kind, want);
        return 0;
    }
    return 1;
}

static int host_refused(const char *s, size_t n, const char *want_why)
{
    nethost h;
    const char *why = NULL;
    if (nethost_parse(s, n, true, &h, &why) == 0) {
        fprintf(stderr, "\n  `%.*s` accepted as `%s`\n", (int)n, s, h.name);
        return 0;
    }
    if (!why || !strstr(why, want_why)) {
        fprintf(stderr, "\n  `%.*s`: why `%s`, want `%s`\n", (int)n, s, why ? why : "(null)", want_why);
        return 0;
    }
    return 1;
}

static void test_hosts(void)
{
    CU_ASSERT(host_ok("Example.ORG", false, NETHOST_NAME, "example.org"));
    CU_ASSERT(host_ok("example.org.", false, NETHOST_NAME, "example.org"));
    CU_ASSERT(host_ok("xn--bcher-kva.example", false, NETHOST_NAME, "xn--bcher-kva.example"));
    CU_ASSERT(host_ok("a-b.c1", false, NETHOST_NAME, "a-b.c1"));
    CU_ASSERT(host_ok("localhost", false, NETHOST_NAME, "localhost"));
    CU_ASSERT(host_ok("127.0.0.1", false, NETHOST_IPV4, "127.0.0.1"));
    CU_ASSERT(host_ok("8.8.8.8", false, NETHOST_IPV4, "8.8.8.8"));
    CU_ASSERT(host_ok("[::1]", false, NETHOST_IPV6, "::1"));
    CU_ASSERT(host_ok("[2001:DB8:0:0::1]", false, NETHOST_IPV6, "2001:db8::1"));
    CU_ASSERT(host_ok("[::ffff:127.0.0.1]", false, NETHOST_IPV6, "::ffff:127.0.0.1"));
    CU_ASSERT(host_ok("*.Example.org", true, NETHOST_WILDCARD, "*.example.org"));

    /* every other spelling of an IPv4 address */
    CU_ASSERT(host_refused("127.1", 5, "dotted-quad"));
    CU_ASSERT(host_refused("2130706433", 10, "dotted-quad"));
    CU_ASSERT(host_refused("0177.0.0.1", 10, "dotted-quad"));
    CU_ASSERT(host_refused("0x7f.0.0.1", 10, "numeric IPv4"));
    CU_ASSERT(host_refused("0x7f000001", 10, "numeric IPv4"));
    CU_ASSERT(host_refused("256.1.1.1", 9, "dotted-quad"));
    CU_ASSERT(host_refused("1.2.3.4.5", 9, "dotted-quad"));
    /* encodings and junk */
    CU_ASSERT(host_refused("%31%32%37.0.0.1", 15, "percent-encoded"));
    CU_ASSERT(host_refused("ex%61mple.org", 13, "percent-encoded"));
    CU_ASSERT(host_refused("b\xc3\xbc" "cher.example", 14, "non-ASCII"));
    CU_ASSERT(host_refused("a_b.example", 11, "invalid character"));
    CU_ASSERT(host_refused("a b", 3, "control character or space"));
    CU_ASSERT(host_refused("a\0b", 3, "control character"));
    CU_ASSERT(host_refused("", 0, "empty"));
    CU_ASSERT(host_refused("-a.example", 10, "not a valid host name"));
    CU_ASSERT(host_refused("a..example", 10, "not a valid host name"));
    CU_ASSERT(host_refused("q0.0t7..", 8, "not a valid host name")); /* found by fuzz_proxy_request */
    CU_ASSERT(host_refused(".example", 8, "not a valid host name"));
    CU_ASSERT(host_refused(".", 1, "dotted-quad")); /* all dots and digits: an IPv4 attempt */
    CU_ASSERT(host_refused("user@example.org", 16, "invalid character"));
    /* IPv6 */
    CU_ASSERT(host_refused("::1", 3, "brackets"));
    CU_ASSERT(host_refused("[::1", 4, "unterminated"));
    CU_ASSERT(host_refused("[fe80::1%eth0]", 14, "percent-encoded"));
    CU_ASSERT(host_refused("[fe80::1%25eth0]", 16, "percent-encoded"));
    CU_ASSERT(host_refused("[example.org]", 13, "IPv6"));
    CU_ASSERT(host_refused("[127.0.0.1]", 11, "IPv6"));
    /* wildcards */
    CU_ASSERT(host_refused("*.org", 5, "at least two labels"));
    CU_ASSERT(host_refused("a.*.org", 7, "not a valid host name"));
    nethost h;
    const char *why;
    CU_ASSERT_EQUAL(nethost_parse("*.example.org", 13, false, &h, &why), -1);
    /* length */
    char longname[300];
    memset(longname, 'a', sizeof longname);
    for (int i = 60; i < 300; i += 61)
        longname[i] = '.';
    CU_ASSERT(host_refused(longname, 254, "longer than 253"));
    CU_ASSERT(host_refused(longname, 300, "longer than 253"));
    longname[253] = '.'; /* 253 bytes plus the trailing dot is still the same name */
    CU_ASSERT_EQUAL(nethost_parse(longname, 254, false, &h, &why), longname[252] == '.' ? -1 : 0);
}

static void test_rules(void)
{
    netrule r;
    em_err err = {0};
    CU_ASSERT_EQUAL(netrule_parse("Example.org:443", &r, &err), 0);
    CU_ASSERT_STRING_EQUAL(r.host.name, "example.org");
    CU_ASSERT_EQUAL(r.port, 443);
    CU_ASSERT_EQUAL(netrule_parse("[::1]:53", &r, &err), 0);
    CU_ASSERT_EQUAL(r.host.kind, NETHOST_IPV6);
    char buf[300];
    netrule_format(&r.host, r.port, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "[::1]:53");
    CU_ASSERT_EQUAL(netrule_parse("*.debian.org:80", &r, &err), 0);
    CU_ASSERT_EQUAL(r.host.kind, NETHOST_WILDCARD);
    const char *bad[][2] = {{"example.org", "expected host:port"},     {"example.org:0", "port must be 1..65535"},
                            {"example.org:65536", "1..65535"},         {"example.org:+80", "1..65535"},
                            {"example.org:80x", "1..65535"},           {"example.org:", "1..65535"},
                            {":80", "empty host"},                     {"::1:53", "brackets"},
                            {"[::1]53", "expected [IPv6]:port"},       {"127.1:80", "dotted-quad"},
                            {"ex%61mple.org:80", "percent-encoded"},   {"example.org:-1", "1..65535"}};
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        em_err_clear(&err);
        CU_ASSERT_EQUAL(netrule_parse(bad[i][0], &r, &err), -1);
        CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
        if (!strstr(err.msg, bad[i][1]))
            fprintf(stderr, "\n  %s: got `%s`, want `%s`\n", bad[i][0], err.msg, bad[i][1]);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i][1]));
    }
}

static void test_match(void)
{
    netpolicy p;
    em_err err = {0};
    netpolicy_init(&p);
    p.mode = NETPOLICY_ALLOWLIST;
    CU_ASSERT_EQUAL(netpolicy_add(&p, "example.org:443", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "*.debian.org:80", &err), 0);
    /* not public: a task may not name them (the operator may, --allow-private) */
    CU_ASSERT_EQUAL(netpolicy_add(&p, "127.0.0.1:8080", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "127.0.0.1 is a loopback address: only the operator may allow it"));
    CU_ASSERT_EQUAL(netpolicy_add(&p, "[::ffff:127.0.0.1]:8080", &err), -1);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "169.254.169.254:80", &err), -1);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "[fe80::1]:80", &err), -1);
    CU_ASSERT_EQUAL(netpolicy_add_private(&p, "localhost:80", &err), -1); /* the operator names addresses */
    CU_ASSERT_EQUAL(netpolicy_add_private(&p, "127.0.0.1:8080", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add_private(&p, "[2001:db8::1]:443", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "EXAMPLE.org:443", &err), 0); /* a duplicate: dropped */
    CU_ASSERT_EQUAL(p.nrules, 4);
    struct {
        const char *host;
        int port, want;
    } cases[] = {
        {"example.org", 443, 0},        {"example.org", 80, -1},         {"www.example.org", 443, -1},
        {"deb.debian.org", 80, 1},      {"a.b.debian.org", 80, 1},       {"debian.org", 80, -1},
        {"baddebian.org", 80, -1},      {"deb.debian.org", 443, -1},     {"127.0.0.1", 8080, 2},
        {"127.0.0.2", 8080, -1},        {"[2001:db8:0::1]", 443, 3},     {"[2001:db8::2]", 443, -1},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        nethost h;
        const char *why;
        CU_ASSERT_EQUAL_FATAL(nethost_parse(cases[i].host, strlen(cases[i].host), false, &h, &why), 0);
        int got = netpolicy_match(&p, &h, cases[i].port);
        if (got != cases[i].want)
            fprintf(stderr, "\n  %s:%d matched %d, want %d\n", cases[i].host, cases[i].port, got, cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
    }
    /* an address rule lists that address (IPv4-mapped IPv6 counts as the IPv4 address) */
    struct sockaddr_in in = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    CU_ASSERT_TRUE(netpolicy_addr_listed(&p, (struct sockaddr *)&in, 8080));
    CU_ASSERT_FALSE(netpolicy_addr_listed(&p, (struct sockaddr *)&in, 8081));
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
    CU_ASSERT_TRUE(netpolicy_addr_listed(&p, (struct sockaddr *)&in6, 8080));
    /* the limit on rules */
    netpolicy q;
    netpolicy_init(&q);
    char entry[64];
    for (int i = 0; i < NETPOLICY_RULES_MAX; i++) {
        snprintf(entry, sizeof entry, "h%d.example:80", i);
        CU_ASSERT_EQUAL(netpolicy_add(&q, entry, &err), 0);
    }
    CU_ASSERT_EQUAL(netpolicy_add(&q, "one-more.example:80", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than"));
}

static const char *class_of(const char *addr)
{
    struct sockaddr_storage ss = {0};
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        in6->sin6_family = AF_INET6;
        inet_pton(AF_INET6, addr, &in6->sin6_addr);
    } else {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        in->sin_family = AF_INET;
        inet_pton(AF_INET, addr, &in->sin_addr);
    }
    return netpolicy_addr_class((struct sockaddr *)&ss);
}

static void test_addr_class(void)
{
    const char *cases[][2] = {
        {"127.0.0.1", "loopback"},        {"127.255.1.2", "loopback"},     {"10.0.2.2", "private"},
        {"172.16.0.1", "private"},        {"172.31.255.255", "private"},   {"172.32.0.1", NULL},
        {"192.168.1.1", "private"},       {"169.254.169.254", "link-local"}, {"100.64.0.1", "shared address space"},
        {"0.0.0.0", "unspecified"},       {"224.0.0.1", "multicast"},      {"255.255.255.255", "reserved"},
        {"192.0.2.1", "documentation"},   {"198.18.0.1", "benchmarking"},  {"8.8.8.8", NULL},
        {"93.184.216.34", NULL},          {"::1", "loopback"},             {"::", "unspecified"},
        {"::ffff:127.0.0.1", "loopback"}, {"::ffff:10.1.1.1", "private"},  {"::ffff:8.8.8.8", NULL},
        {"64:ff9b::7f00:1", "loopback"},  {"fe80::1", "link-local"},       {"fd00::1", "private"},
        {"ff02::1", "multicast"},         {"2001:db8::1", "documentation"}, {"2606:4700::1111", NULL},
        {"2002:7f00:1::1", "reserved"},   {"::127.0.0.1", "reserved"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const char *got = class_of(cases[i][0]);
        bool ok = (!got && !cases[i][1]) || (got && cases[i][1] && !strcmp(got, cases[i][1]));
        if (!ok)
            fprintf(stderr, "\n  %s: got %s, want %s\n", cases[i][0], got ? got : "public",
                    cases[i][1] ? cases[i][1] : "public");
        CU_ASSERT_TRUE(ok);
    }
}

static void test_json_and_files(void)
{
    netpolicy p, q;
    em_err err = {0};
    netpolicy_init(&p);
    p.mode = NETPOLICY_ALLOWLIST;
    p.max_bytes_out = 1000;
    p.max_conn_per_min = 30;
    CU_ASSERT_EQUAL(netpolicy_add(&p, "db.example:5432", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "*.example.org:443", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add_private(&p, "127.0.0.1:7777", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "db.example:6379", &err), 0);
    json_t *j = netpolicy_to_json(&p);
    CU_ASSERT_EQUAL(netpolicy_from_json(j, &q, &err), 0);
    json_decref(j);
    CU_ASSERT_TRUE(netpolicy_equal(&p, &q));
    q.max_bytes_out = 1;
    CU_ASSERT_FALSE(netpolicy_equal(&p, &q));

    /* relays: one per non-wildcard rule, one guest address per host */
    netrelay rel[NETPOLICY_RULES_MAX];
    size_t n = netpolicy_relays(&p, rel);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_STRING_EQUAL(rel[0].alias, "10.0.2.101");
    CU_ASSERT_EQUAL(rel[0].rule->port, 5432);
    CU_ASSERT_STRING_EQUAL(rel[1].alias, "10.0.2.102");
    CU_ASSERT_STRING_EQUAL(rel[1].rule->host.name, "127.0.0.1");
    CU_ASSERT_STRING_EQUAL(rel[2].alias, "10.0.2.101");
    CU_ASSERT_EQUAL(rel[2].rule->port, 6379);

    /* files: the policy and the QEMU extras, with quoting for libslirp's shell-like split (QEMU
     * as envmgr's own user here; the drop to an env user is checked below) */
    setenv("ENVMGR_QEMU_RUNAS", "off", 1);
    _cleanup_free_ char *dir = xasprintf("%s/run,with 'odd' chars", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(mkdir_p(dir, 0700, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_save(dir, &p, "/opt/env mgr/envmgr", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_load(dir, &q, &err), 0);
    CU_ASSERT_TRUE(netpolicy_equal(&p, &q));
    _cleanup_free_ char *vmnet = xasprintf("%s/" VM_NET_FILE, dir), *text = NULL;
    CU_ASSERT_EQUAL_FATAL(read_file_capped(vmnet, 1 << 20, &text, NULL, &err), 0);
    json_t *v = json_loads(text, 0, NULL);
    json_t *fwd = json_object_get(v, "guestfwd");
    CU_ASSERT_EQUAL(json_array_size(fwd), 4);
    const char *f0 = json_string_value(json_array_get(fwd, 0));
    CU_ASSERT_EQUAL(strncmp(f0, "tcp:10.0.2.100:3128-cmd:'/opt/env mgr/envmgr' 'net' 'relay' '", 61), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(f0, "run,with '\\''odd'\\'' chars/egress.sock' 'proxy'"));
    const char *f2 = json_string_value(json_array_get(fwd, 2));
    CU_ASSERT_EQUAL(strncmp(f2, "tcp:10.0.2.102:7777-cmd:", 24), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(f2, "'tcp:127.0.0.1:7777'"));
    json_t *sup = json_object_get(v, "supervisor");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(sup, 1)), "net");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(sup, 2)), "serve");
    json_decref(v);
    /* back to none: no QEMU extras at all */
    netpolicy none;
    netpolicy_init(&none);
    CU_ASSERT_EQUAL(netpolicy_save(dir, &none, "/x/envmgr", &err), 0);
    CU_ASSERT_NOT_EQUAL(access(vmnet, F_OK), 0);
    /* a missing file is mode none */
    _cleanup_free_ char *empty = xasprintf("%s/empty", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(mkdir_p(empty, 0700, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_load(empty, &q, &err), 0);
    CU_ASSERT_EQUAL(q.mode, NETPOLICY_NONE);
    /* a damaged file is an error with the path */
    _cleanup_free_ char *pf = xasprintf("%s/" NETPOLICY_FILE, empty);
    CU_ASSERT_EQUAL(write_file_atomic(pf, "{\"mode\":\"allowlist\",\"allow\":[\"x:0\"]}", 36, 0600, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_load(empty, &q, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, NETPOLICY_FILE));
    CU_ASSERT_EQUAL(write_file_atomic(pf, "{\"mode\":\"none\",\"allow\":[\"x.org:1\"]}", 35, 0600, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_load(empty, &q, &err), -1);
    CU_ASSERT_EQUAL(write_file_atomic(pf, "{\"mode\":\"wide-open\"}", 20, 0600, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_load(empty, &q, &err), -1);
    CU_ASSERT_EQUAL(write_file_atomic(pf, "[1,2", 4, 0600, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_load(empty, &q, &err), -1);
    /* the helper binary must be an absolute path */
    CU_ASSERT_EQUAL(netpolicy_save(dir, &p, "bin/envmgr", &err), -1);
    /* the egress socket must fit a unix socket path */
    _cleanup_free_ char *deep = xasprintf("%s/%0100d", test_tmpdir(), 7);
    CU_ASSERT_EQUAL_FATAL(mkdir_p(deep, 0700, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_save(deep, &p, "/x/envmgr", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "too long for a unix socket path"));
    unsetenv("ENVMGR_QEMU_RUNAS");
    if (geteuid() != 0)
        return;
    /* as root, the relays run as the env's user: a copy of the helper it can run and a socket it
     * can reach, both in the root-owned registry, never below the run directory */
    _cleanup_free_ char *own = xasprintf("%s/dropped", test_tmpdir()), *vmnet2 = xasprintf("%s/" VM_NET_FILE, own);
    _cleanup_free_ char *text2 = NULL;
    CU_ASSERT_EQUAL_FATAL(mkdir_p(own, 0700, &err), 0);
    CU_ASSERT_EQUAL_FATAL(netpolicy_save(own, &p, paths_envmgr_bin(), &err), 0);
    vm_runas ra;
    CU_ASSERT_EQUAL(vm_runas_read(own, &ra, &err), 0);
    CU_ASSERT_TRUE(ra.drop);
    CU_ASSERT_TRUE(ra.uid >= VM_RUNAS_UID_BASE && ra.uid != 0);
    CU_ASSERT_EQUAL_FATAL(read_file_capped(vmnet2, 1 << 20, &text2, NULL, &err), 0);
    _cleanup_free_ char *want = xasprintf("tcp:10.0.2.100:3128-cmd:'/run/envmgr-qemu-users/bin/envmgr' 'net' 'relay' "
                                          "'/run/envmgr-qemu-users/%u.sock' 'proxy'",
                                          (unsigned)ra.uid);
    v = json_loads(text2, 0, NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(v, "guestfwd"), 0)), want);
    json_decref(v);
    struct stat st;
    CU_ASSERT_EQUAL(stat("/run/envmgr-qemu-users/bin/envmgr", &st), 0);
    CU_ASSERT_EQUAL(st.st_uid, 0);
    CU_ASSERT_EQUAL(st.st_mode & 07777, 0755);
    /* a second env gets another user; giving one back frees it */
    _cleanup_free_ char *other = xasprintf("%s/dropped2", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(mkdir_p(other, 0700, &err), 0);
    vm_runas rb;
    CU_ASSERT_EQUAL(vm_runas_acquire(other, &rb, &err), 0);
    CU_ASSERT_NOT_EQUAL(rb.uid, ra.uid);
    vm_runas again;
    CU_ASSERT_EQUAL(vm_runas_acquire(own, &again, &err), 0);
    CU_ASSERT_EQUAL(again.uid, ra.uid);
    vm_runas_release(own);
    vm_runas_release(other);
}

static void test_guest_blocks(void)
{
    netpolicy p;
    em_err err = {0};
    netpolicy_init(&p);
    p.mode = NETPOLICY_ALLOWLIST;
    CU_ASSERT_EQUAL(netpolicy_add(&p, "db.example:5432", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "db.example:6379", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add_private(&p, "127.0.0.1:7777", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_add(&p, "*.example.org:443", &err), 0);
    _cleanup_free_ char *hosts = netpolicy_hosts_block(&p), *envb = netpolicy_environment_block();
    CU_ASSERT_PTR_NOT_NULL(strstr(hosts, "\n10.0.2.101\tdb.example\n"));
    CU_ASSERT_PTR_NULL(strstr(strstr(hosts, "db.example\n") + 1, "\tdb.example\n")); /* one line per host */
    CU_ASSERT_PTR_NOT_NULL(strstr(hosts, "# relay 10.0.2.102:7777 -> 127.0.0.1:7777"));
    CU_ASSERT_PTR_NULL(strstr(hosts, "example.org")); /* wildcards: proxy only */
    CU_ASSERT_PTR_NOT_NULL(strstr(envb, "\nhttp_proxy=http://10.0.2.100:3128/\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(envb, "\nhttps_proxy=http://10.0.2.100:3128/\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(envb, "\nno_proxy=localhost,127.0.0.1,::1\n"));

    /* splicing replaces an earlier block and keeps everything else */
    const char *orig = "127.0.0.1\tlocalhost\n127.0.1.1\tenvmgr-desktop";
    _cleanup_free_ char *once = netpolicy_splice_block(orig, strlen(orig), hosts);
    CU_ASSERT_EQUAL(strncmp(once, "127.0.0.1\tlocalhost\n127.0.1.1\tenvmgr-desktop\n# envmgr egress begin", 66), 0);
    _cleanup_free_ char *twice = netpolicy_splice_block(once, strlen(once), hosts);
    CU_ASSERT_STRING_EQUAL(once, twice);
    _cleanup_free_ char *empty = netpolicy_splice_block("", 0, envb);
    CU_ASSERT_STRING_EQUAL(empty, envb);
    const char *trailer = "a\n# envmgr egress begin old\nx=1\n# envmgr egress end\nb\n";
    _cleanup_free_ char *moved = netpolicy_splice_block(trailer, strlen(trailer), "B\n");
    CU_ASSERT_STRING_EQUAL(moved, "a\nb\nB\n");
}

static void test_for_task(void)
{
    em_err err = {0};
    task *t = NULL;
    const char *json = "{\"id\": \"net\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"},"
                       " \"network\": {\"mode\": \"allowlist\", \"allow\": [\"Example.com:443\", \"[2606:4700::1111]:53\"]}}";
    CU_ASSERT_EQUAL_FATAL(task_parse(json, strlen(json), NULL, &t, &err), 0);
    netpolicy cur, out;
    netpolicy_init(&cur);
    netpolicy_set_maxima(&cur, 5, 7);
    CU_ASSERT_EQUAL(netpolicy_for_task(&cur, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.mode, NETPOLICY_ALLOWLIST);
    CU_ASSERT_EQUAL(out.nrules, 2);
    CU_ASSERT_STRING_EQUAL(out.rules[0].host.name, "example.com");
    CU_ASSERT_EQUAL(out.rules[1].host.kind, NETHOST_IPV6);
    CU_ASSERT_EQUAL(out.max_bytes_out, 5); /* no limits in the task: the operator's maxima */
    CU_ASSERT_EQUAL(out.max_conn_per_min, 7);
    /* an env opened with --unsafe-open-network stays open */
    cur.mode = NETPOLICY_OPEN;
    CU_ASSERT_EQUAL(netpolicy_for_task(&cur, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.mode, NETPOLICY_OPEN);
    task_free(t);
    const char *none = "{\"id\": \"n\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"}}";
    CU_ASSERT_EQUAL_FATAL(task_parse(none, strlen(none), NULL, &t, &err), 0);
    cur.mode = NETPOLICY_ALLOWLIST;
    CU_ASSERT_EQUAL(netpolicy_for_task(&cur, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.mode, NETPOLICY_NONE);
    CU_ASSERT_EQUAL(out.nrules, 0);
    /* the operator's private rules outlive every task's section, and survive a save and load */
    netpolicy_init(&cur);
    CU_ASSERT_EQUAL(netpolicy_add_private(&cur, "127.0.0.1:8080", &err), 0);
    CU_ASSERT_EQUAL(netpolicy_for_task(&cur, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL_FATAL(out.nrules, 1);
    CU_ASSERT_TRUE(out.rules[0].private_ok);
    json_t *j = netpolicy_to_json(&out);
    netpolicy back;
    CU_ASSERT_EQUAL(netpolicy_from_json(j, &back, &err), 0); /* mode none with only the operator's rules */
    CU_ASSERT_TRUE(netpolicy_equal(&out, &back));
    json_decref(j);
    /* a file cannot smuggle a private rule in as a plain entry */
    j = json_pack("{s:s, s:[s]}", "mode", "allowlist", "allow", "127.0.0.1:8080");
    CU_ASSERT_EQUAL(netpolicy_from_json(j, &back, &err), -1);
    json_decref(j);
    task_free(t);
    netpolicy_mode m;
    CU_ASSERT_EQUAL(netpolicy_mode_parse("open", &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--unsafe-open-network"));
}

static task *limits_task(const char *limits)
{
    _cleanup_free_ char *json =
        xasprintf("{\"id\": \"lim\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"},"
                  " \"network\": {\"mode\": \"allowlist\", \"allow\": [\"example.com:443\"]%s%s}}",
                  limits ? ", \"limits\": " : "", limits ? limits : "");
    task *t = NULL;
    em_err err = {0};
    if (task_parse(json, strlen(json), NULL, &t, &err) < 0)
        fprintf(stderr, "\n  %s\n", err.msg);
    return t;
}

static void limits_task_err(const char *net, const char *want)
{
    _cleanup_free_ char *json = xasprintf(
        "{\"id\": \"lim\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"}, \"network\": %s}", net);
    task *t = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(task_parse(json, strlen(json), NULL, &t, &err), -1);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    if (!strstr(err.msg, want))
        fprintf(stderr, "\n  got `%s`, want `%s`\n", err.msg, want);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    task_free(t);
}

/* Limits are on by default, a task may lower them or raise them up to the operator's maxima, a
 * task asking for more is refused naming the field and the maximum, and every episode's policy
 * starts again from the maxima (one task's limits do not stay for the next). */
static void test_limits(void)
{
    em_err err = {0};
    netpolicy env, out;
    netpolicy_init(&env); /* what an env without --max-* options has */
    CU_ASSERT_EQUAL(env.max_bytes_out, NETPOLICY_DEFAULT_BYTES_OUT);
    CU_ASSERT_EQUAL(env.max_conn_per_min, NETPOLICY_DEFAULT_CONN_PER_MIN);
    CU_ASSERT_EQUAL(env.op_max_bytes_out, 256u << 20);
    CU_ASSERT_EQUAL(env.op_max_conn_per_min, 600);

    /* no limits in the task: the defaults are in force */
    task *t = limits_task(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->net.max_bytes_out, 0);
    CU_ASSERT_EQUAL(netpolicy_for_task(&env, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.max_bytes_out, NETPOLICY_DEFAULT_BYTES_OUT);
    CU_ASSERT_EQUAL(out.max_conn_per_min, NETPOLICY_DEFAULT_CONN_PER_MIN);
    task_free(t);

    /* lower limits: taken; then the next episode (a task without limits) is back at the maxima */
    t = limits_task("{\"max_bytes_out\": 1000, \"max_connections_per_minute\": 5}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(netpolicy_for_task(&env, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.max_bytes_out, 1000);
    CU_ASSERT_EQUAL(out.max_conn_per_min, 5);
    CU_ASSERT_EQUAL(out.op_max_bytes_out, NETPOLICY_DEFAULT_BYTES_OUT);
    task_free(t);
    netpolicy prev = out; /* the env's policy file now holds the first task's limits */
    t = limits_task(NULL);
    CU_ASSERT_EQUAL(netpolicy_for_task(&prev, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.max_bytes_out, NETPOLICY_DEFAULT_BYTES_OUT);
    CU_ASSERT_EQUAL(out.max_conn_per_min, NETPOLICY_DEFAULT_CONN_PER_MIN);
    task_free(t);

    /* above the maximum: refused, naming the field, the maximum and the operator's option */
    t = limits_task("{\"max_bytes_out\": 268435457}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(netpolicy_check_task(&env, &t->net, &err), -1);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    CU_ASSERT_STRING_EQUAL(err.msg, "network.limits.max_bytes_out: 268435457 is above the operator's maximum "
                                    "268435456 (--max-egress-bytes)");
    CU_ASSERT_EQUAL(netpolicy_for_task(&env, &t->net, &out, &err), -1);
    /* the operator raised the maximum: fits; no maximum at all (0): anything */
    netpolicy_set_maxima(&env, 1ull << 30, 600);
    CU_ASSERT_EQUAL(netpolicy_for_task(&env, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.max_bytes_out, 268435457);
    CU_ASSERT_EQUAL(out.max_conn_per_min, 600);
    task_free(t);
    t = limits_task("{\"max_connections_per_minute\": 601}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(netpolicy_check_task(&env, &t->net, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "network.limits.max_connections_per_minute: 601 is above the operator's maximum "
                                    "600 (--max-connections-per-minute)");
    netpolicy_set_maxima(&env, 0, 0);
    CU_ASSERT_EQUAL(netpolicy_check_task(&env, &t->net, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_for_task(&env, &t->net, &out, &err), 0);
    CU_ASSERT_EQUAL(out.max_bytes_out, 0); /* the operator's "no limit" */
    CU_ASSERT_EQUAL(out.max_conn_per_min, 601);
    task_free(t);

    /* the maxima survive a save and load; a file without them gets the defaults */
    netpolicy_set_maxima(&env, 12345, 67);
    env.max_bytes_out = 100;
    json_t *j = netpolicy_to_json(&env);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "maxima"), "max_bytes_out")), 12345);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "limits"), "max_bytes_out")), 100);
    CU_ASSERT_EQUAL(netpolicy_from_json(j, &out, &err), 0);
    CU_ASSERT_TRUE(netpolicy_equal(&env, &out));
    json_decref(j);
    j = json_pack("{s:s, s:[]}", "mode", "allowlist", "allow");
    CU_ASSERT_EQUAL(netpolicy_from_json(j, &out, &err), 0);
    CU_ASSERT_EQUAL(out.max_bytes_out, NETPOLICY_DEFAULT_BYTES_OUT);
    CU_ASSERT_EQUAL(out.op_max_conn_per_min, NETPOLICY_DEFAULT_CONN_PER_MIN);
    json_decref(j);
    j = json_pack("{s:s, s:{s:i}}", "mode", "none", "maxima", "max_bytes_out", -1);
    CU_ASSERT_EQUAL(netpolicy_from_json(j, &out, &err), -1);
    json_decref(j);

    /* what a task may write */
    limits_task_err("{\"mode\": \"allowlist\", \"allow\": [\"a.com:80\"], \"limits\": {\"max_bytes_out\": 0}}",
                    "network.limits.max_bytes_out: 0 is out of range (1..");
    limits_task_err("{\"mode\": \"allowlist\", \"limits\": {\"max_connections_per_minute\": 1.5}}",
                    "network.limits.max_connections_per_minute: expected an integer, got a fraction");
    limits_task_err("{\"mode\": \"allowlist\", \"limits\": {\"max_bytes\": 5}}", "network.limits.max_bytes: unknown field");
    limits_task_err("{\"mode\": \"allowlist\", \"limits\": []}", "network.limits: expected an object, got array");
    limits_task_err("{\"mode\": \"none\", \"limits\": {\"max_bytes_out\": 5}}",
                    "network.limits: only with network.mode \"allowlist\"");
}

static void test_helper_control_without_helper(void)
{
    em_err err = {0};
    _cleanup_free_ char *dir = xasprintf("%s/nohelper", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(mkdir_p(dir, 0700, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_helper_pid(dir), 0);
    CU_ASSERT_EQUAL(netpolicy_stop_helper(dir, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_control(dir, "ping", 100, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "egress proxy"));
    /* a pid file naming some other process is not our helper */
    _cleanup_free_ char *pf = xasprintf("%s/" NETPOLICY_PID_FILE, dir);
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    CU_ASSERT_EQUAL(write_file_atomic(pf, pid, (size_t)n, 0600, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_helper_pid(dir), 0);
    CU_ASSERT_EQUAL(netpolicy_stop_helper(dir, &err), 0);
    CU_ASSERT_EQUAL(netpolicy_wait_ready(dir, 50, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "did not start"));
}

static CU_TestInfo tests[] = {
    {"hosts: canonical forms only, odd spellings refused", test_hosts},
    {"rules: host:port syntax and ports", test_rules},
    {"matching names, wildcards and addresses", test_match},
    {"address classes: loopback, private, mapped, ...", test_addr_class},
    {"policy JSON, files and QEMU extras", test_json_and_files},
    {"guest /etc/hosts and /etc/environment blocks", test_guest_blocks},
    {"a task's network section; open stays open", test_for_task},
    {"egress limits: on by default, per task within the operator's maxima, refused above them", test_limits},
    {"helper control when no helper runs", test_helper_control_without_helper},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("netpolicy", tests);
}

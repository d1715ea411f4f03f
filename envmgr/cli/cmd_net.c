#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "envmgr/net/egress_log.h"
#include "envmgr/net/netpolicy.h"
#include "envmgr/base/paths.h"
#include "envmgr/net/proxy.h"
#include "envmgr/base/util.h"

static const char usage[] =
    "usage: envmgr net log ENV [--table] [--flush]\n"
    "       envmgr net show ENV [--json]\n"
    "  log   print the env's egress log: one JSON object per egress attempt (allowed or denied), with\n"
    "        time, destination, port, method (CONNECT, GET, ..., TCP for raw relays), bytes each way,\n"
    "        verdict and the rule that matched. --table prints one short line per attempt instead;\n"
    "        --flush first has the proxy log the connections still open (with \"open\": true).\n"
    "  show  the env's network policy and where the guest reaches it (proxy, relay addresses).\n"
    "  (envmgr up --network/--allow/--task sets the policy; docs/security.md explains it.)\n"
    "internal, started by envmgr itself:\n"
    "       envmgr net serve RUN_DIR [--qemu-pid PID]   the env's egress proxy\n"
    "       envmgr net relay SOCKET TAG                 QEMU's per-connection guestfwd relay\n";

int cli_net_limit_option(const char *use, int opt, const char *arg, netpolicy *p)
{
    bool bytes = opt == CLI_OPT_MAX_EGRESS_BYTES;
    const char *name = bytes ? "max-egress-bytes" : "max-connections-per-minute";
    long v;
    if (parse_int(arg, 0, bytes ? NETPOLICY_BYTES_OUT_MAX : NETPOLICY_CONN_PER_MIN_MAX, &v) < 0)
        return cli_usage_error(use, "--%s: expected 0..%lld, got `%s`", name,
                               bytes ? NETPOLICY_BYTES_OUT_MAX : (long long)NETPOLICY_CONN_PER_MIN_MAX, arg);
    if (bytes)
        netpolicy_set_maxima(p, (uint64_t)v, p->op_max_conn_per_min);
    else
        netpolicy_set_maxima(p, p->op_max_bytes_out, (unsigned)v);
    return 0;
}

static int env_run_dir(const char *name, char **dir, em_err *err)
{
    if (check_name("env", name, err) < 0)
        return -1;
    *dir = paths_env_dir(name);
    struct stat st;
    if (stat(*dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        free(*dir);
        *dir = NULL;
        return em_fail_input(err, "env `%s` does not exist (envmgr ls lists the envs)", name);
    }
    return 0;
}

static void limit_text(uint64_t v, char *buf, size_t len)
{
    if (v)
        snprintf(buf, len, "%llu", (unsigned long long)v);
    else
        snprintf(buf, len, "no limit");
}

/* The limits in force this episode and the operator's maxima (what a task may ask for). */
static void print_limits(const netpolicy *p)
{
    char b[32], c[32], mb[32], mc[32];
    limit_text(p->max_bytes_out, b, sizeof b);
    limit_text(p->max_conn_per_min, c, sizeof c);
    limit_text(p->op_max_bytes_out, mb, sizeof mb);
    limit_text(p->op_max_conn_per_min, mc, sizeof mc);
    if (p->mode != NETPOLICY_NONE)
        printf("limits: bytes out per episode %s, new connections per minute %s\n", b, c);
    printf("maxima: bytes out %s, connections per minute %s (the operator's; a task may ask for less)\n", mb, mc);
}

static void print_row(json_t *ev)
{
    const char *s;
    json_t *port = json_object_get(ev, "port");
    char dest[300];
    s = json_string_value(json_object_get(ev, "dest"));
    if (json_is_integer(port))
        snprintf(dest, sizeof dest, "%s:%lld", s ? s : "-", json_integer_value(port));
    else
        snprintf(dest, sizeof dest, "%s", s ? s : "-");
    const char *why = json_string_value(json_object_get(ev, "reason"));
    const char *rule = json_string_value(json_object_get(ev, "rule"));
    s = json_string_value(json_object_get(ev, "time"));
    printf("%-24s %-8s %-8s %-40s %10lld %10lld  %s%s\n", s ? s : "-",
           json_string_value(json_object_get(ev, "verdict")) ? json_string_value(json_object_get(ev, "verdict"))
                                                             : "-",
           json_string_value(json_object_get(ev, "method")) ? json_string_value(json_object_get(ev, "method")) : "-",
           dest, json_integer_value(json_object_get(ev, "bytes_out")), json_integer_value(json_object_get(ev, "bytes_in")),
           rule ? rule : (why ? why : ""), json_is_true(json_object_get(ev, "open")) ? " (open)" : "");
}

static int net_log(int argc, char **argv)
{
    const char *name = NULL;
    bool table = false, flush = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--table"))
            table = true;
        else if (!strcmp(argv[i], "--flush"))
            flush = true;
        else if (argv[i][0] == '-')
            return cli_usage_error(usage, "net log: unknown option `%s`", argv[i]);
        else if (!name)
            name = argv[i];
        else
            return cli_usage_error(usage, "net log: unexpected argument `%s`", argv[i]);
    }
    if (!name)
        return cli_usage_error(usage, "net log: ENV missing");
    em_err err = {0};
    _cleanup_free_ char *dir = NULL;
    if (env_run_dir(name, &dir, &err) < 0)
        return cli_report(&err);
    if (flush && netpolicy_helper_pid(dir) && netpolicy_control(dir, "flush", 5000, &err) < 0)
        return cli_report(&err);
    _cleanup_free_ char *path = netpolicy_log_path(dir);
    uint64_t off = 0;
    if (table)
        printf("%-24s %-8s %-8s %-40s %10s %10s  %s\n", "TIME", "VERDICT", "METHOD", "DESTINATION", "OUT", "IN",
               "RULE / REASON");
    for (;;) {
        json_t *events = NULL;
        if (egress_log_read(path, &off, 10000, &events, &err) < 0) {
            json_decref(events);
            return cli_report(&err);
        }
        size_t i, n = json_array_size(events);
        json_t *ev;
        json_array_foreach(events, i, ev)
        {
            if (table) {
                print_row(ev);
            } else {
                char *text = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
                if (text)
                    puts(text);
                free(text);
            }
        }
        json_decref(events);
        if (n < 10000)
            break;
    }
    return 0;
}

static int net_show(int argc, char **argv)
{
    const char *name = NULL;
    bool as_json = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            as_json = true;
        else if (argv[i][0] == '-')
            return cli_usage_error(usage, "net show: unknown option `%s`", argv[i]);
        else if (!name)
            name = argv[i];
        else
            return cli_usage_error(usage, "net show: unexpected argument `%s`", argv[i]);
    }
    if (!name)
        return cli_usage_error(usage, "net show: ENV missing");
    em_err err = {0};
    _cleanup_free_ char *dir = NULL;
    netpolicy p;
    if (env_run_dir(name, &dir, &err) < 0 || netpolicy_load(dir, &p, &err) < 0)
        return cli_report(&err);
    netrelay relays[NETPOLICY_RULES_MAX];
    size_t nrel = netpolicy_relays(&p, relays);
    pid_t helper = netpolicy_helper_pid(dir);
    if (as_json) {
        json_t *j = netpolicy_to_json(&p), *rel = json_array();
        for (size_t i = 0; i < nrel; i++) {
            char rule[NETPOLICY_HOST_MAX + 16];
            netrule_format(&relays[i].rule->host, relays[i].rule->port, rule, sizeof rule);
            json_array_append_new(rel, json_pack("{s:s, s:s, s:i}", "rule", rule, "guest_address", relays[i].alias,
                                                 "guest_port", relays[i].rule->port));
        }
        if (p.mode != NETPOLICY_NONE)
            json_object_set_new(j, "proxy", json_sprintf("http://%s:%d/", NETPOLICY_PROXY_ADDR, NETPOLICY_PROXY_PORT));
        json_object_set_new(j, "relays", rel);
        json_object_set_new(j, "helper_pid", helper ? json_integer(helper) : json_null());
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
        json_decref(j);
        puts(text);
        free(text);
        return 0;
    }
    printf("mode:   %s%s\n", netpolicy_mode_name(p.mode),
           p.mode == NETPOLICY_OPEN ? " (--unsafe-open-network: every public destination, still logged)" : "");
    if (p.mode == NETPOLICY_NONE) {
        printf("        the guest reaches nothing outside itself (QEMU restrict=on, no forwarding)\n");
        print_limits(&p);
        return 0;
    }
    printf("proxy:  http://%s:%d/ (the guest's /etc/environment http_proxy, https_proxy)\n", NETPOLICY_PROXY_ADDR,
           NETPOLICY_PROXY_PORT);
    print_limits(&p);
    printf("helper: %s\n", helper ? "running" : "not running (the env is stopped)");
    printf("allow:\n");
    for (size_t i = 0; i < p.nrules; i++) {
        char rule[NETPOLICY_HOST_MAX + 16];
        netrule_format(&p.rules[i].host, p.rules[i].port, rule, sizeof rule);
        const char *alias = NULL;
        for (size_t k = 0; k < nrel; k++)
            if (relays[k].rule == &p.rules[i])
                alias = relays[k].alias;
        if (alias)
            printf("  %-40s proxy, and raw TCP at %s:%d\n", rule, alias, p.rules[i].port);
        else
            printf("  %-40s proxy only\n", rule);
    }
    return 0;
}

static int net_serve(int argc, char **argv)
{
    if (argc != 1 && argc != 3)
        return cli_usage_error(usage, "net serve: expected RUN_DIR [--qemu-pid PID]");
    long pid = 0;
    if (argc == 3 && (strcmp(argv[1], "--qemu-pid") || parse_int(argv[2], 2, 1 << 30, &pid) < 0))
        return cli_usage_error(usage, "net serve: --qemu-pid: expected a pid");
    em_err err = {0};
    if (proxy_serve_main(argv[0], (pid_t)pid, &err) < 0)
        return cli_report(&err); /* stderr is the helper's log by now */
    return 0;
}

int cmd_net(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "relay")) /* first: nothing may be printed to a guest connection */
        return argc == 4 ? proxy_relay_main(argv[2], argv[3]) : 2;
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc < 2)
        return cli_usage_error(usage, "net: expected log, show, serve or relay");
    if (!strcmp(argv[1], "log"))
        return net_log(argc - 2, argv + 2);
    if (!strcmp(argv[1], "show"))
        return net_show(argc - 2, argv + 2);
    if (!strcmp(argv[1], "serve"))
        return net_serve(argc - 2, argv + 2);
    return cli_usage_error(usage, "net: unknown subcommand `%s`", argv[1]);
}

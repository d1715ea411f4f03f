/* Network policy of an env: what the guest may reach, and the pieces that
 * enforce it. docs/security.md describes the boundaries; in short:
 *
 *   mode none       QEMU user networking with restrict=on and nothing else:
 *                   the guest reaches no host and no outside address. Every
 *                   sandbox flag stays on. This is the default.
 *   mode allowlist  the same, plus guestfwd rules whose far end is envmgr's
 *                   egress proxy (a helper process per env, see proxy.h):
 *                     10.0.2.100:3128      HTTP proxy (CONNECT and plain HTTP)
 *                     10.0.2.101.. : port  one raw TCP relay per listed
 *                                          host:port (names get a guest
 *                                          /etc/hosts entry)
 *                   Each destination is checked against the rules on the
 *                   host, after resolving it there; every attempt is logged.
 *   mode open       only with --unsafe-open-network: the proxy allows every
 *                   public destination (still logged, still refusing
 *                   loopback and private addresses unless listed by
 *                   address). Traces record it in the header.
 *
 * The policy lives in the run directory (NETPOLICY_FILE), so a stateless
 * command, a reset and the helper process all see the same one. */
#ifndef ENVMGR_NETPOLICY_H
#define ENVMGR_NETPOLICY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "envmgr/base/err.h"
#include "envmgr/vm/guest.h"

/* Files in a run directory. */
#define NETPOLICY_FILE "netpolicy.json"      /* the policy (this module) */
#define NETPOLICY_LOG_FILE "egress.jsonl"    /* one JSON line per egress attempt (proxy) */
#define NETPOLICY_SOCK "egress.sock"         /* the helper's control and hand-off socket */
#define NETPOLICY_PID_FILE "egress-proxy.pid"
#define NETPOLICY_PROXY_LOG "egress-proxy.log" /* the helper's own messages */

/* Guest-side addresses (inside slirp's 10.0.2.0/24, never .2 or .3). */
#define NETPOLICY_PROXY_ADDR "10.0.2.100"
#define NETPOLICY_PROXY_PORT 3128
#define NETPOLICY_ALIAS_FIRST 101 /* 10.0.2.101 and up: raw TCP relays, one address per host */
#define NETPOLICY_ALIAS_LAST 254

#define NETPOLICY_RULES_MAX 64
#define NETPOLICY_HOST_MAX 253 /* a DNS name; IPv6 literals are shorter */

typedef enum { NETPOLICY_NONE, NETPOLICY_ALLOWLIST, NETPOLICY_OPEN } netpolicy_mode;
typedef enum { NETHOST_NAME, NETHOST_WILDCARD, NETHOST_IPV4, NETHOST_IPV6 } nethost_kind;

/* A host as the policy compares it: names lower-case without a trailing
 * dot, IPv4 as a canonical dotted quad, IPv6 canonical without brackets. */
typedef struct nethost {
    nethost_kind kind;
    char name[NETPOLICY_HOST_MAX + 1];
} nethost;

typedef struct netrule {
    nethost host;
    int port;       /* 1..65535 */
    bool private_ok; /* the operator's (--allow-private): may name a loopback, private, link-local or
                      * metadata address; no task, trace or API request can make one */
} netrule;

/* Egress limits, on unless the operator turns them off. The defaults fit a GUI task that loads
 * a few dozen web pages with their assets and maybe one sizeable download (docs/security.md):
 * a busy page is 2-5 MB and 50-150 connections, so 256 MiB out and 600 new connections a
 * minute never bind such a task, yet stop a guest that uploads a disk image or opens
 * connections in a loop. Bytes count guest to outside (uploads and request heads), per episode:
 * the proxy's counters start at zero with every restore. */
#define NETPOLICY_DEFAULT_BYTES_OUT (256ull << 20)
#define NETPOLICY_DEFAULT_CONN_PER_MIN 600u
#define NETPOLICY_BYTES_OUT_MAX (1ll << 62)  /* largest value any field takes */
#define NETPOLICY_CONN_PER_MIN_MAX 1000000

typedef struct netpolicy {
    netpolicy_mode mode;
    netrule rules[NETPOLICY_RULES_MAX];
    size_t nrules;
    /* The limits in force for the episode; 0: no limit (only the operator can say so). In a
     * task's network section: what the task asks for, 0 when it does not. */
    uint64_t max_bytes_out;    /* guest-to-outside bytes per episode (the proxy helper's life) */
    unsigned max_conn_per_min; /* new upstream connections per minute */
    /* The operator's maxima (`envmgr up|run|serve|suite --max-egress-bytes N
     * --max-connections-per-minute N`): the limits when the task sets none, and the most a task
     * may ask for; 0: no limit and no ceiling. Unused in a task's section. */
    uint64_t op_max_bytes_out;
    unsigned op_max_conn_per_min;
} netpolicy;

/* Mode none, no rules, the default limits as both the limits in force and the maxima. */
void netpolicy_init(netpolicy *p);
/* The operator's maxima (0: none), applied as the limits in force too. */
void netpolicy_set_maxima(netpolicy *p, uint64_t bytes_out, unsigned conn_per_min);
const char *netpolicy_mode_name(netpolicy_mode m);
int netpolicy_mode_parse(const char *s, netpolicy_mode *m, em_err *err);

/* Parse a host (no port) from untrusted bytes. Refuses, with a reason
 * ("percent-encoded host name", "IPv6 literals go in brackets", ...):
 * empty or over-long hosts, anything outside [A-Za-z0-9.-], IPv4 in any
 * form but the canonical dotted quad (127.1, 0x7f.0.0.1, 2130706433,
 * 0177.0.0.1), brackets around anything but an IPv6 address, zone ids.
 * "*.domain" is accepted only with allow_wildcard. Returns 0 or -1. */
int nethost_parse(const char *s, size_t n, bool allow_wildcard, nethost *out, const char **why);
/* "host:port" / "[v6]:port" / "*.domain:port" (the task's network.allow syntax). */
int netrule_parse(const char *s, netrule *out, em_err *err);
/* The rule (or a destination) as text; buf of at least NETPOLICY_HOST_MAX + 16 bytes. */
void netrule_format(const nethost *h, int port, char *buf, size_t len);

/* Add a rule from a task, a request or --allow (duplicates are dropped); fails beyond
 * NETPOLICY_RULES_MAX, and on an address that is not public unicast ("127.0.0.1:7480 is a
 * loopback address: only the operator may allow it"). */
int netpolicy_add(netpolicy *p, const char *entry, em_err *err);
/* The operator's --allow-private ADDR:PORT: an IPv4 or IPv6 address of any class. Kept when a
 * task's network section replaces the rest of the policy (netpolicy_for_task). */
int netpolicy_add_private(netpolicy *p, const char *entry, em_err *err);
bool netpolicy_equal(const netpolicy *a, const netpolicy *b);
/* Do the limits a task's network section asks for fit under the env's maxima? Refuses (an input
 * error naming the field and the maximum) a task asking for more than the operator allows. */
int netpolicy_check_task(const netpolicy *current, const netpolicy *task_net, em_err *err);
/* The task's network section (its mode and rules) with the operator's private rules and maxima;
 * the limits in force are the task's where it sets them, else the maxima, so that every episode
 * starts from the operator's limits whatever the one before asked for. An env opened with
 * --unsafe-open-network stays open (the operator's choice wins; the trace says so). Fails as
 * netpolicy_check_task does. */
int netpolicy_for_task(const netpolicy *current, const netpolicy *task_net, netpolicy *out, em_err *err);

json_t *netpolicy_to_json(const netpolicy *p);
int netpolicy_from_json(json_t *j, netpolicy *p, em_err *err);
/* dir/NETPOLICY_FILE and, for allowlist and open, dir/VM_NET_FILE (the QEMU
 * network extras vm_spawn applies: guestfwd relays and the helper process).
 * Mode none removes VM_NET_FILE. helper: the envmgr binary (NULL: paths_envmgr_bin()). */
int netpolicy_save(const char *dir, const netpolicy *p, const char *helper, em_err *err);
/* A missing file is mode none. */
int netpolicy_load(const char *dir, netpolicy *p, em_err *err);

/* Index of the first rule that admits host:port, or -1. */
int netpolicy_match(const netpolicy *p, const nethost *h, int port);
/* An IPv4/IPv6 address as a rule names it (IPv4-mapped and NAT64 addresses as their IPv4 part);
 * false for any other family. */
bool netpolicy_addr_host(const struct sockaddr *sa, nethost *h);
/* Does an IPv4/IPv6 rule list exactly this address with this port? */
bool netpolicy_addr_listed(const netpolicy *p, const struct sockaddr *sa, int port);
/* NULL for a public unicast address, else what it is ("loopback",
 * "private", "link-local", "shared address space", "multicast",
 * "reserved", "documentation", "unspecified", ...). IPv4-mapped and NAT64
 * IPv6 addresses are judged by their IPv4 part. */
const char *netpolicy_addr_class(const struct sockaddr *sa);

/* Raw TCP relays: one per non-wildcard rule, each on a guest address of its
 * host (hosts in rule order get 10.0.2.101, .102, ...). */
typedef struct netrelay {
    const netrule *rule;
    char alias[16]; /* guest-side address */
} netrelay;
/* At most NETPOLICY_RULES_MAX relays into out (caller's array). */
size_t netpolicy_relays(const netpolicy *p, netrelay *out);

/* Guest files: a marked block appended to /etc/hosts (allowlisted names
 * → their relay address) and /etc/environment (http_proxy, https_proxy
 * and no_proxy, upper and lower case). Caller frees. */
char *netpolicy_hosts_block(const netpolicy *p);
char *netpolicy_environment_block(void);
/* orig without any earlier envmgr block, with block appended (caller frees). */
char *netpolicy_splice_block(const char *orig, size_t len, const char *block);
/* Write both files in the guest (nothing for mode none). */
int netpolicy_guest_setup(guest *g, const netpolicy *p, em_err *err);


/* Talk to an env's helper over dir/NETPOLICY_SOCK: "ping" (is it serving?)
 * and "flush" (log every open connection now, with its bytes so far). */
int netpolicy_control(const char *dir, const char *cmd, double timeout_ms, em_err *err);
/* Wait until the helper answers a ping. */
int netpolicy_wait_ready(const char *dir, double timeout_ms, em_err *err);
/* The helper's pid when it runs (checked against its command line), else 0. */
pid_t netpolicy_helper_pid(const char *dir);
/* The env's egress log (caller frees): dir/NETPOLICY_LOG_FILE, or, when dir is a tmpfs, a file
 * on the cache's disk (vm/overlay.h: a flood of connections must not fill the host's RAM).
 * The proxy claims it (*path, caller frees) before writing; env down forgets it (the file, its
 * .prev, its note). */
char *netpolicy_log_path(const char *dir);
int netpolicy_log_claim(const char *dir, char **path, em_err *err);
void netpolicy_log_forget(const char *dir);
/* Make sure no helper of dir is left: it exits on its own once its QEMU is
 * gone; this waits for that, then SIGTERM, then SIGKILL. */
int netpolicy_stop_helper(const char *dir, em_err *err);

#endif

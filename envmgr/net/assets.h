/* Task assets fetched on the host, never by the guest: OSWorld's `download` setup steps and
 * `cloud_file` getters name http(s) URLs; envmgr fetches them (libcurl) into a content-addressed
 * cache and the episode uploads the cached copy into the guest through the guest agent.
 *
 * (ENVMGR_ASSET_CACHE moves the assets folder alone)
 *   <ENVMGR_CACHE_DIR>/assets/blobs/<sha256>        the bytes, read-only, named by their hash
 *   <ENVMGR_CACHE_DIR>/assets/urls/<sha256(url)>.json  {url, sha256, size, fetched_at}: the last fetch
 *   <ENVMGR_CACHE_DIR>/assets/partial/<sha256(url)>  an interrupted download (resumed with Range)
 *
 * A suite's lock file (assets.lock.json next to it: {"format": 1, "assets": {URL: {sha256, size,
 * fetched_at}}}) pins what every URL must hold; `envmgr task fetch` writes it and every use checks
 * it: a cached blob whose bytes no longer hash to the pinned value (tampered) is refused, and a
 * fetch that brings other bytes (the upstream file changed) or none (it vanished) is an error
 * naming the URL. Transfers have a size cap, connect/stall/total timeouts and retries with
 * backoff, follow at most ten redirects and speak only http and https. docs/osworld.md.
 *
 * Where a transfer connects is checked as the egress proxy checks the guest's (netpolicy.h): every
 * connection libcurl opens, the first and each redirect's, goes to the address it resolved only
 * when that address is public unicast, or the operator allowed it (assets_allow_private, or the
 * host of a URL mirror the operator configured, for the connections of a fetch through it). So a
 * task's URL cannot make the host read its own loopback services, its LAN or a cloud metadata
 * address, in whatever spelling (0177.0.0.1, 2130706433, [::ffff:127.0.0.1], a redirect).
 * Proxies from the environment (http_proxy, https_proxy, ALL_PROXY) are not used: through one, the
 * address checked would be the proxy's, not the asset server's. docs/security.md. */
#ifndef ENVMGR_NET_ASSETS_H
#define ENVMGR_NET_ASSETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define ASSET_LOCK_FILE "assets.lock.json"
#define ASSET_MAX_BYTES_DEFAULT ((uint64_t)2 << 30) /* per asset; ENVMGR_ASSET_MAX_BYTES */
#define ASSET_TIMEOUT_S_DEFAULT 900.0                /* whole transfer; ENVMGR_ASSET_TIMEOUT_S */
#define ASSET_CONNECT_TIMEOUT_S 20
#define ASSET_STALL_S 30                             /* below 1 KiB/s this long: abort and retry */
#define ASSET_RETRIES_DEFAULT 3
#define ASSET_MIRRORS_MAX 32
#define ASSET_PARALLEL_MAX 16

/* Process-wide settings: the CLI sets them once (forked suite workers inherit them). */
typedef struct asset_settings {
    bool offline;          /* only the cache (and mirror folders); a missing URL is an error */
    uint64_t max_bytes;
    double timeout_s;
    int retries;
    int progress;          /* -1: a progress line when stderr is a terminal; 0: none; 1: lines */
} asset_settings;

/* The current settings (defaults, then ENVMGR_ASSET_MAX_BYTES, ENVMGR_ASSET_TIMEOUT_S,
 * ENVMGR_ASSETS_OFFLINE=1, ENVMGR_ASSET_MIRRORS="P=T;P=T", ENVMGR_ASSET_ALLOW_PRIVATE="A:P;A:P"
 * (as --allow-private, for commands without the option, e.g. `run --env`) and
 * ENVMGR_ASSET_CA_FILE, a PEM bundle that replaces the system's CAs, read on first use). */
asset_settings *assets_settings(void);
/* The operator's --allow-private ADDR:PORT (netpolicy_add_private's syntax): transfers may connect
 * to this loopback, private, link-local or metadata address. Only the CLI calls it: no task file
 * and no API request can add one. */
int assets_allow_private(const char *spec, em_err *err);
/* --asset-mirror PREFIX=DIR|URL: a URL starting with PREFIX is fetched from DIR/<rest> (a local
 * folder, also when offline) or URL<rest>. The first matching mirror wins. */
int assets_add_mirror(const char *spec, em_err *err);
/* Drop mirrors and private allowances and reload the environment settings (tests). */
void assets_reset(void);

/* ---- lock files ---- */
typedef struct asset_lock {
    char *path;
    json_t *assets; /* URL -> {sha256, size, fetched_at} */
    bool dirty;
} asset_lock;

/* Load path; a missing file is an empty lock (saved only when something is added). */
int asset_lock_load(const char *path, asset_lock **out, em_err *err);
/* The lock next to a suite (a folder: inside it; an index file: beside it). NULL when there is
 * none, which is not an error. */
int asset_lock_for_suite(const char *suite_path, asset_lock **out, em_err *err);
/* The lock of a single task: assets.lock.json in its folder or up to three folders above. */
int asset_lock_for_task(const char *task_dir, asset_lock **out, em_err *err);
int asset_lock_save(asset_lock *l, em_err *err);
void asset_lock_free(asset_lock *l);

/* ---- getting one asset ---- */
typedef struct asset_info {
    char sha256[65];
    uint64_t size;
    char *path;      /* the blob in the cache (read-only); caller frees */
    bool fetched;    /* it came over the network (or from a mirror) now, not from the cache */
    bool pinned;     /* a lock entry pinned it */
} asset_info;

/* The cached blob of url, fetched first when it is not cached (unless offline). With a lock
 * that pins url, the blob must hash to the pinned value; without, to what the cache index
 * recorded. deadline_ms: 0, or a now_ms() time (an episode's end) the fetch may not outlive,
 * retries and waits included. Errors are one line naming the URL. */
int asset_get(const char *url, const asset_lock *lock, double deadline_ms, asset_info *out, em_err *err);
void asset_info_free(asset_info *a);

/* ---- prefetching many ---- */
typedef struct asset_fetch_report {
    size_t ok, cached, failed;
    uint64_t bytes;          /* fetched now */
    double seconds;
    char **errors;           /* one line each; nfailed of them */
} asset_fetch_report;

/* Every URL (duplicates allowed), `parallel` at a time, resuming partial downloads; each result
 * is checked against lock (when pinned) and recorded in it (when not). Returns 0 when all are
 * cached now; -1 with err naming the first failure and the count otherwise. */
int assets_fetch_all(const char *const *urls, size_t n, int parallel, asset_lock *lock, asset_fetch_report *rep,
                     em_err *err);
void asset_fetch_report_free(asset_fetch_report *r);

#endif

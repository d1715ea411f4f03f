/* Internals of the HTTP API shared by its files (api_*.c). The pure parts
 * (routing, body parsing, auth checks, metrics text, websocket framing, the
 * view-only RFB filter, tar headers) take no server and no connection, so
 * unit tests and fuzzers call them directly. */
#ifndef ENVMGR_API_INT_H
#define ENVMGR_API_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/api/api.h"
#include "envmgr/env/env.h"
#include "envmgr/episode/episode.h"
#include "envmgr/base/err.h"
#include "envmgr/task/task.h"

#define API_BODY_MAX ((size_t)2 << 20)       /* bytes of a request body (a task is at most 1 MiB) */
#define API_ID_MAX 64                        /* bytes of an env id */
#define API_UPLOAD_DEADLINE_MS 60000.0       /* a body must arrive within this */
#define API_CONN_TIMEOUT_S 30                /* an idle connection is closed after this */
#define API_CONN_LIMIT 64                    /* connections at once */
#define API_TOKEN_MIN 16
#define API_TOKEN_MAX 256
#define API_COOKIE "envmgr_live" /* envmgr_live_<ENV>: a live-view token, never the master token */
#define API_LIVE_TOKEN_MAX (64 + 4 + 24 + API_ID_MAX + 2)
#define API_LIVE_TTL_S 3600      /* how long a live page's cookie lasts */

/* ---- errors: an HTTP status, the request field at fault, a message ---- */
typedef struct api_error {
    int status;
    char field[96];
    char msg[EM_ERR_MAX];
} api_error;

int api_fail(api_error *ae, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* An em_err from the library: bad input (EM_EXIT_USAGE) is 400, anything else 500.
 * The field is the message's leading "a.b[2].c:" path when it has one, else `field`. */
int api_fail_em(api_error *ae, const em_err *err, const char *field);
/* {"error": msg, "field": field|null} (new reference). */
json_t *api_error_json(const api_error *ae);

/* ---- routing ---- */
typedef enum {
    API_R_HEALTH,
    API_R_METRICS,
    API_R_ENVS,       /* GET list, POST create */
    API_R_ENV,        /* GET one, DELETE */
    API_R_RESET,
    API_R_SCREENSHOT,
    API_R_STEP,
    API_R_EVALUATE,
    API_R_TRACE,
    API_R_VIDEO,      /* GET: the episode's trace as an mp4 */
    API_R_LIVE,       /* the HTML page */
    API_R_LIVE_WS,    /* the websocket the page's noVNC connects to */
    API_R_NOVNC,      /* noVNC's static files */
    API_R_LIVE_TOKEN, /* POST: a live-view token to share */
    API_R_STATE,      /* POST: save the env as a named state */
    API_R_RESTORE,    /* POST: restore a named state into the env */
    API_R_STATES,     /* GET: the saved states */
    API_R_MCP,        /* POST: one MCP message (streamable HTTP); DELETE: end an MCP session */
} api_route_id;

typedef struct api_route {
    api_route_id id;
    char env[API_ID_MAX + 1]; /* for /v1/envs/{id}/... */
    char file[256];           /* for /v1/novnc/{file} */
} api_route;

/* Match method and path (no query string). 404 for an unknown path, 405
 * (ae->field holds the Allow header value) for a known path and wrong method,
 * 400 for a malformed env id. */
int api_route_match(const char *method, const char *path, api_route *out, api_error *ae);
bool api_env_id_ok(const char *id);

/* ---- request bodies: parsed with the CLI's parsers ---- */
/* A JSON object (an empty body is {}). Duplicate keys are refused. */
int api_parse_body(const char *data, size_t len, json_t **out, api_error *ae);
/* Fields of obj must be in the space-separated list `allowed` (" a b c "). */
int api_check_fields(json_t *obj, const char *allowed, api_error *ae);
/* POST /step: {"action": computer_13 object | pyautogui code | "DONE"|"FAIL"|"WAIT" | {"pyautogui": code}}.
 * Validated in full against a w x h screen; *reply is the episode's reply
 * form (an action object or {"pyautogui": code}), a new reference. */
int api_parse_step(json_t *body, int w, int h, json_t **reply, api_error *ae);
/* A task given in a request: a path (resolved inside task_root) or an inline
 * object (its folder is empty_dir, so it can name no host file), read once and
 * settled by the episode plan (plan_settle) for screen w x h: its network limits
 * against net's maxima (the server's --max-*; NULL: the defaults), the
 * placeholders substituted. *path is malloc'd (NULL inline), sha the sha256 of
 * the task text. */
int api_parse_task(json_t *spec, const char *field, const char *task_root, const char *empty_dir,
                   const struct netpolicy *net, int w, int h,
                   const char *client_password,
                   task **out, char **path, char sha[65], api_error *ae);

/* ---- auth ---- */
/* A query flag's value meaning yes: 1, true or yes. */
bool api_truthy(const char *v);
bool api_token_equal(const char *a, const char *b); /* constant time in the length of b */
/* The Authorization header value ("Bearer T") or the Cookie header (envmgr_token=T) carries the token. */
bool api_auth_bearer(const char *header, const char *token);
/* Live-view tokens (api_live_token.c): HMAC-signed by the master token, one env, view or
 * control, an expiry in Unix seconds. A check with env NULL accepts any env. */
int api_live_token_make(const char *master, const char *env, bool control, long expires, char out[API_LIVE_TOKEN_MAX]);
bool api_live_token_check(const char *master, const char *token, const char *env, bool need_control, long now);
/* Any envmgr_live_* cookie of the Cookie header that passes api_live_token_check. */
bool api_live_cookie_check(const char *header, const char *master, const char *env, bool need_control, long now);
/* What opens a live page (page) or its websocket without the Authorization header: the page's
 * ?token= (the master token, or a live-view token) or an envmgr_live_* cookie. The grant says what
 * the live page's cookie may hold: a token the master token earned lasts API_LIVE_TTL_S; a
 * live-view token is passed on as it is (its kind, its expiry), so a cookie never outlives the
 * link that earned it, and a page reloaded with the cookie alone gets the same cookie back. */
typedef struct api_live_grant_t {
    bool ok, master, control;
    long expires;
    char token[API_LIVE_TOKEN_MAX]; /* the live-view token that granted it ("" for the master token) */
} api_live_grant_t;
bool api_live_grant(const char *master, const char *cookies, const char *query_token, bool page, const char *env,
                    bool need_control, long now, api_live_grant_t *g);

/* What a request carries that can prove it may pass: values as received, NULL when absent. */
typedef struct api_creds {
    const char *authorization; /* the Authorization header */
    const char *cookie;        /* the Cookie header */
    const char *query_token;   /* ?token= */
    const char *query_control; /* ?control= */
} api_creds;
/* A credential good for the route: the bearer token; on the live page and its websocket a
 * live-view cookie for its env (a control one with ?control=1), on the page also ?token= (the
 * master or a live-view token); on noVNC's files a live cookie of any env. /v1/health needs
 * none, but this says whether one was sent. */
bool api_auth_credential(const char *master, const api_route *rt, const api_creds *c, long now);

/* ---- metrics ---- */
#define API_RESET_BUCKETS 9
typedef struct api_metrics {
    pthread_mutex_t mu;
    long envs_created, envs_deleted, resets, reset_failures, screenshots, steps, actions, evaluations,
        egress_denied, live_views, warnings;
    long reset_bucket[API_RESET_BUCKETS]; /* cumulative counts are built when rendered */
    double reset_sum_s;
    long http[6]; /* by status class: 1xx..5xx (index 1..5) */
} api_metrics;
extern const double api_reset_bounds[API_RESET_BUCKETS]; /* seconds; +Inf is implicit */

void api_metrics_init(api_metrics *m);
void api_metrics_destroy(api_metrics *m);
void api_metrics_add(api_metrics *m, long *counter, long n);
void api_metrics_reset_done(api_metrics *m, double seconds, bool ok);
void api_metrics_http(api_metrics *m, int status);
/* Prometheus text exposition format 0.0.4 (malloc'd). */
char *api_metrics_render(api_metrics *m, int envs_now, int max_envs);

/* ---- tar (ustar) ---- */
/* A 512-byte ustar header for a regular file (name at most 99 bytes, or split at a '/' into prefix + name). */
int api_tar_header(uint8_t out[512], const char *name, uint64_t size, long mtime);

/* ---- the server ---- */
typedef struct api_env {
    char id[API_ID_MAX + 1];
    pthread_mutex_t mu;   /* one request at a time on this env (its VNC, QMP and agent connections) */
    int refs;             /* requests holding it (under the table lock) */
    bool gone;            /* removed from the table; freed at refs == 0 */
    env *e;               /* open for the env's lifetime: the VNC session stays connected */
    char *image;
    task *t;              /* the task reset runs (NULL before a freeform reset) */
    bool freeform;        /* t is the built-in empty task: nothing to evaluate */
    char *task_path;
    char task_sha[65];
    episode *ep;          /* the running episode (NULL before the first reset or after evaluate) */
    obs_kind observation; /* what its observations hold (the reset's "observation") */
    int episodes;         /* episodes started */
    char *trace_dir;      /* the last episode's trace */
    json_t *last_result;  /* the last evaluation */
    double last_obs_ms;   /* when the last observation was returned (agent think time) */
    char created[40];
    uint64_t egress_off;  /* how far envmgr_egress_denied_total has read the env's egress log (table lock) */
    struct api_env *next;
} api_env;

struct api_server {
    api_config cfg;       /* strings owned */
    char url[300];
    char *empty_dir;      /* the folder of inline tasks: holds nothing */
    int listen_fd;
    bool unix_sock;
    struct MHD_Daemon *mhd;
    struct api_gate *gate; /* accepts connections and hands complete requests to mhd */
    pthread_mutex_t lock; /* the table, the counters below */
    pthread_cond_t cond;
    api_env *envs;
    int nenvs;            /* envs in the table plus envs being created */
    long next_id;
    int live;             /* live-view relays running */
    atomic_int stopping; /* read by connection and live-view threads */
    api_metrics metrics;
    struct api_mcp_session *mcp; /* the MCP sessions of POST /v1/mcp (under lock) */
};

/* Handlers: each fills a response. */
typedef struct api_reply {
    int status;
    json_t *json;          /* or */
    unsigned char *body;   /* malloc'd */
    size_t len;
    const char *ctype;
    char *headers[4];      /* "Name: value", malloc'd */
    struct MHD_Response *mhd; /* a prepared response (streams, upgrades) */
    double env_ms;         /* time spent in env work (> 0: sent as Server-Timing: env;dur=MS) */
} api_reply;

void api_reply_json(api_reply *r, int status, json_t *j);
void api_reply_error(api_reply *r, const api_error *ae);
void api_reply_header(api_reply *r, const char *name, const char *value);
void api_reply_free(api_reply *r);

typedef struct api_request {
    api_server *s;
    struct MHD_Connection *conn; /* NULL for a call from inside the server (api_call) */
    const char *method;
    api_route rt;
    json_t *body;
    const char *const *query; /* api_call's query parameters: name, value, ..., NULL */
} api_request;

/* A request handled as if it had come over HTTP, by the same handlers (the MCP tools are calls of
 * the API's own endpoints): path "/v1/envs/api1-1/step", body may be NULL ({}), query NULL or name,
 * value pairs ending in NULL. r is filled as for HTTP; the caller frees it (api_reply_free). */
void api_call(api_server *s, const char *method, const char *path, json_t *body, const char *const *query,
              api_reply *r);

const char *api_query(const api_request *q, const char *name);
/* A query parameter given twice (?control=0&control=1) is a 400 naming it: every reader of a
 * parameter (the auth check, the handler) must see the one value there is. */
#define API_QUERY_MAX 16
int api_query_unique(struct MHD_Connection *c, api_error *ae);
const char *api_header(const api_request *q, const char *name);

void api_h_list(api_request *q, api_reply *r);
void api_h_create(api_request *q, api_reply *r);
void api_h_get(api_request *q, api_reply *r);
void api_h_delete(api_request *q, api_reply *r);
void api_h_reset(api_request *q, api_reply *r);
void api_h_step(api_request *q, api_reply *r);
void api_h_screenshot(api_request *q, api_reply *r);
void api_h_evaluate(api_request *q, api_reply *r);
void api_h_trace(api_request *q, api_reply *r);
void api_h_video(api_request *q, api_reply *r);
void api_h_live_page(api_request *q, api_reply *r);
void api_h_live_ws(api_request *q, api_reply *r);
void api_h_live_token(api_request *q, api_reply *r);
void api_h_novnc(api_request *q, api_reply *r);
void api_h_state_save(api_request *q, api_reply *r);
void api_h_state_restore(api_request *q, api_reply *r);
void api_h_states(api_request *q, api_reply *r);

/* The env table. */
api_env *api_env_acquire(api_server *s, const char *id); /* NULL: unknown; lock with env->mu yourself */
void api_env_release(api_server *s, api_env *ae);
void api_envs_teardown_all(api_server *s);
int api_envs_count(api_server *s);
/* Count the denied egress attempts logged since the last call into the metrics. */
void api_envs_count_egress(api_server *s);

/* A streamed tar of a trace directory (snapshot of its files now). */
struct MHD_Response *api_tar_response(const char *trace_dir, em_err *err);

#endif

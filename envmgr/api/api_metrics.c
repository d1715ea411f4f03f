/* Counters of the API for GET /v1/metrics, in Prometheus' text format. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_int.h"
#include "envmgr/base/util.h"

const double api_reset_bounds[API_RESET_BUCKETS] = {0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};

void api_metrics_init(api_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void api_metrics_destroy(api_metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

void api_metrics_add(api_metrics *m, long *counter, long n)
{
    pthread_mutex_lock(&m->mu);
    *counter += n;
    pthread_mutex_unlock(&m->mu);
}

void api_metrics_reset_done(api_metrics *m, double seconds, bool ok)
{
    pthread_mutex_lock(&m->mu);
    if (!ok) {
        m->reset_failures++;
    } else {
        m->resets++;
        m->reset_sum_s += seconds;
        for (int i = 0; i < API_RESET_BUCKETS; i++)
            if (seconds <= api_reset_bounds[i]) {
                m->reset_bucket[i]++;
                break;
            }
    }
    pthread_mutex_unlock(&m->mu);
}

void api_metrics_http(api_metrics *m, int status)
{
    int cls = status / 100;
    if (cls < 1 || cls > 5)
        return;
    pthread_mutex_lock(&m->mu);
    m->http[cls]++;
    pthread_mutex_unlock(&m->mu);
}

typedef struct sbuf_ {
    char *p;
    size_t len, cap;
} sbuf_;

static void put(sbuf_ *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf_ *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        b->cap = b->cap * 2 + (size_t)(n > 0 ? n : 64);
        b->p = xrealloc(b->p, b->cap);
    }
}

static void counter(sbuf_ *b, const char *name, const char *help, long v)
{
    put(b, "# HELP %s %s\n# TYPE %s counter\n%s %ld\n", name, help, name, name, v);
}

char *api_metrics_render(api_metrics *m, int envs_now, int max_envs)
{
    sbuf_ b = {.cap = 4096};
    b.p = xmalloc(b.cap);
    b.p[0] = '\0';
    pthread_mutex_lock(&m->mu);
    api_metrics c = *m; /* a consistent copy; the mutex member is not used from it */
    pthread_mutex_unlock(&m->mu);
    put(&b, "# HELP envmgr_envs Envs this server owns now.\n# TYPE envmgr_envs gauge\nenvmgr_envs %d\n", envs_now);
    put(&b, "# HELP envmgr_envs_max The --max-envs limit.\n# TYPE envmgr_envs_max gauge\nenvmgr_envs_max %d\n",
        max_envs);
    counter(&b, "envmgr_envs_created_total", "Envs created.", c.envs_created);
    counter(&b, "envmgr_envs_deleted_total", "Envs torn down.", c.envs_deleted);
    counter(&b, "envmgr_resets_total", "Successful resets to the golden state.", c.resets);
    counter(&b, "envmgr_reset_failures_total", "Resets that failed.", c.reset_failures);
    put(&b, "# HELP envmgr_reset_seconds Time to restore an env from its golden state.\n"
            "# TYPE envmgr_reset_seconds histogram\n");
    long cum = 0;
    for (int i = 0; i < API_RESET_BUCKETS; i++) {
        cum += c.reset_bucket[i];
        put(&b, "envmgr_reset_seconds_bucket{le=\"%g\"} %ld\n", api_reset_bounds[i], cum);
    }
    put(&b, "envmgr_reset_seconds_bucket{le=\"+Inf\"} %ld\n", c.resets);
    put(&b, "envmgr_reset_seconds_sum %.6f\nenvmgr_reset_seconds_count %ld\n", c.reset_sum_s, c.resets);
    counter(&b, "envmgr_screenshots_total", "Screenshots served (GET screenshot and observations).", c.screenshots);
    counter(&b, "envmgr_steps_total", "Step requests that reached an episode.", c.steps);
    counter(&b, "envmgr_actions_total", "computer_13 actions executed.", c.actions);
    counter(&b, "envmgr_evaluations_total", "Episodes evaluated.", c.evaluations);
    counter(&b, "envmgr_egress_denied_total", "Guest connections the egress policy refused.", c.egress_denied);
    counter(&b, "envmgr_live_views_total", "Live-view connections opened.", c.live_views);
    counter(&b, "envmgr_warnings_total", "Warnings and errors the server logged.", c.warnings);
    put(&b, "# HELP envmgr_http_responses_total HTTP responses by status class.\n"
            "# TYPE envmgr_http_responses_total counter\n");
    for (int i = 1; i <= 5; i++)
        put(&b, "envmgr_http_responses_total{class=\"%dxx\"} %ld\n", i, c.http[i]);
    return b.p;
}

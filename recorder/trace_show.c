/* `trace show`: a human summary of a trace. Every string from the trace goes
 * through sbuf_add_visible, so a hostile trace cannot drive the terminal. */
#include <string.h>

#include "envmgr/base/util.h"
#include "envmgr/base/sbuf.h"
#include "trace.h"

#define SUMMARY_TEXT 60

static void add_field(sbuf *b, json_t *obj, const char *field, size_t max)
{
    const char *s = json_string_value(json_object_get(obj, field));
    sbuf_add_visible(b, s ? s : "?", max);
}

static double num(json_t *obj, const char *field)
{
    return json_number_value(json_object_get(obj, field));
}

static void show_header(sbuf *b, const trace *t)
{
    json_t *h = trace_header(t);
    json_t *screen = json_object_get(h, "screen");
    sbuf_puts(b, "trace:    ");
    sbuf_add_visible(b, trace_dir(t), 4096);
    sbuf_printf(b, "\nstatus:   %s\n",
                trace_complete(t) ? "complete (hashes not checked here: use verify)"
                                  : "INCOMPLETE: no trailer (the episode did not finish writing)");
    sbuf_puts(b, "task:     ");
    add_field(b, h, "task_id", 256);
    sbuf_puts(b, " (sha256 ");
    add_field(b, h, "task_sha256", 64);
    sbuf_puts(b, ")\nimage:    manifest sha256 ");
    add_field(b, h, "image_manifest_sha256", 64);
    sbuf_puts(b, "\naccel:    ");
    add_field(b, h, "accel", 16);
    sbuf_printf(b, "\nscreen:   %lldx%lld\nstarted:  ", (long long)json_integer_value(json_object_get(screen, "width")),
                (long long)json_integer_value(json_object_get(screen, "height")));
    add_field(b, h, "started", 64);
    sbuf_puts(b, "\nenvmgr:   ");
    add_field(b, h, "envmgr_version", 64);
    sbuf_printf(b, "\nnetwork:  %s\n",
                json_is_true(json_object_get(h, "unsafe_open_network")) ? "OPEN (unsafe_open_network)"
                                                                         : "restricted to the task's allowlist");
}

/* The task's own steps: setup (before the agent) and postconfig (after it, before the evaluator). */
static void show_task_steps(sbuf *b, const char *label, const trace *t, size_t n,
                            json_t *(*line)(const trace *, size_t))
{
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += !json_is_true(json_object_get(line(t, i), "ok"));
    sbuf_printf(b, "%s%zu step%s, %zu failed\n", label, n, n == 1 ? "" : "s", failed);
    for (size_t i = 0; i < n; i++) {
        json_t *s = line(t, i);
        bool ok = json_is_true(json_object_get(s, "ok"));
        sbuf_printf(b, "  #%-4zu %-5s %8.0f ms  ", i, ok ? "ok" : "FAIL", num(s, "duration_ms"));
        const char *kind = json_string_value(json_object_get(json_object_get(s, "step"), "type"));
        sbuf_add_visible(b, kind ? kind : "(step)", 64);
        if (json_object_get(s, "tolerated")) { /* failed in the guest; OSWorld goes on, and so did envmgr */
            sbuf_puts(b, "  tolerated: ");
            add_field(b, s, "tolerated", 200);
        }
        if (json_object_get(s, "error")) {
            sbuf_puts(b, "  error: ");
            add_field(b, s, "error", 200);
        }
        sbuf_puts(b, "\n");
    }
}

static void show_steps(sbuf *b, const trace *t)
{
    size_t n = trace_n_steps(t);
    sbuf_printf(b, "steps:    %zu\n", n);
    for (size_t i = 0; i < n; i++) {
        json_t *s = trace_step(t, i);
        _cleanup_free_ char *what = trace_action_summary(json_object_get(s, "action"), SUMMARY_TEXT);
        sbuf_printf(b, "  #%-4zu %-40s agent %7.0f ms  action %6.0f ms  t %8.3f s", i, what, num(s, "agent_ms"),
                    num(s, "action_ms"), num(s, "t"));
        if (json_object_get(s, "error")) {
            sbuf_puts(b, "  error: ");
            add_field(b, s, "error", 200);
        }
        sbuf_puts(b, "\n");
    }
}

static void show_evaluation(sbuf *b, const trace *t)
{
    sbuf_printf(b, "egress:   %zu event%s\n", trace_n_egress(t), trace_n_egress(t) == 1 ? "" : "s");
    json_t *e = trace_evaluation(t);
    if (!e) {
        sbuf_puts(b, "score:    none (not evaluated)\n");
        return;
    }
    sbuf_printf(b, "score:    %g (", num(e, "score"));
    add_field(b, e, "exit_cause", 32);
    sbuf_puts(b, ")\nreason:   ");
    add_field(b, e, "reason", 500);
    sbuf_puts(b, "\n");
}

int trace_show(const char *dir, FILE *out, em_err *err)
{
    trace *t;
    if (trace_read(dir, &t, err) < 0)
        return -1;
    sbuf b = {0};
    show_header(&b, t);
    show_task_steps(&b, "setup:    ", t, trace_n_setups(t), trace_setup);
    show_steps(&b, t);
    if (trace_n_postconfig(t))
        show_task_steps(&b, "postconfig: ", t, trace_n_postconfig(t), trace_postconfig);
    show_evaluation(&b, t);
    trace_free(t);
    int rc = 0;
    if (fwrite(b.s, 1, b.len, out) != b.len || fflush(out) != 0)
        rc = em_fail_errno(err, "trace show: write");
    sbuf_release(&b);
    return rc;
}

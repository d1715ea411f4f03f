/* Export a trace as one self-contained HTML page: out_dir/index.html, the
 * frames it shows in out_dir/frames/ (PNG, checked by blob_load) and each
 * accessibility tree as a page of its own in out_dir/a11y/. No scripts at all,
 * no network: every page carries a CSP meta tag that forbids everything but
 * inline styles and same-origin images, so even a mistake in escaping could not
 * run code. Every string from the trace is HTML-escaped; numbers are printed
 * from parsed JSON numbers. No file the guest wrote is copied as it is but the
 * frames: a tree is XML the guest chose, and an XHTML one with a <script> runs
 * when a browser opens it as a document. */
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "frames.h"
#include "envmgr/base/sbuf.h"
#include "trace.h"

#define TITLE_TEXT 200   /* bytes of typed text in a step's title */
#define CAPTION_TEXT 2000 /* in the caption drawn on the frame */

static const char style[] =
    "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}"
    "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left;"
    "vertical-align:top}code,pre{font-family:ui-monospace,monospace;font-size:90%}"
    "pre{white-space:pre-wrap;word-break:break-all;background:#f0f0f0;padding:.4em;margin:.2em 0}"
    ".status-ok{color:#060}.status-bad{color:#b00;font-weight:bold}"
    ".step{border-top:2px solid #ddd;padding:.6em 0}.step h2{font-size:110%;margin:.2em 0}"
    ".timing{color:#555;margin:.2em 0}.error{color:#b00}"
    ".frames{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0;max-width:49%}"
    ".shot{position:relative;display:inline-block;max-width:100%}"
    ".shot img{display:block;max-width:100%;height:auto;border:1px solid #999}"
    ".shot svg{position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none}"
    ".cap{position:absolute;left:0;right:0;bottom:0;background:rgba(0,0,0,.75);color:#fff;padding:.3em .5em;"
    "font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all;max-height:40%;overflow:auto}"
    ".missing{padding:2em;border:1px dashed #999;color:#777}";

typedef struct page {
    sbuf b;
    const trace *t;
    const char *out_dir;
    json_t *copied; /* frames already copied to out_dir/frames */
    int width, height;
    bool ptr_known; /* the pointer position, carried from step to step */
    double ptr_x, ptr_y;
} page;

static void html(page *p, const char *s)
{
    sbuf_add_html(&p->b, s ? s : "");
}

static void html_field(page *p, json_t *obj, const char *field)
{
    html(p, json_string_value(json_object_get(obj, field)));
}

/* JSON (from the trace) shown as text: serialised again, then escaped. */
static void html_json(page *p, json_t *v)
{
    _cleanup_free_ char *s = json_dumps(v, JSON_INDENT(1) | JSON_REAL_PRECISION(15));
    html(p, s);
}

/* Every page starts the same: the policy first, before anything that could load. */
static void page_start(sbuf *b, const char *title_prefix, const char *title)
{
    sbuf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                   "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src 'self'; "
                   "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">\n"
                   "<meta name=\"referrer\" content=\"no-referrer\">\n<title>%s",
                title_prefix);
    sbuf_add_html(b, title ? title : "");
    sbuf_printf(b, "</title>\n<style>%s</style></head><body>\n", style);
}

/* Whether out_dir/<subdir>/<sha> was written already (frames and trees repeat); marks it written. */
static bool written(page *p, const blob_kind *k, const char *sha)
{
    _cleanup_free_ char *key = xasprintf("%s/%s", k->subdir, sha);
    if (json_object_get(p->copied, key))
        return true;
    json_object_set_new(p->copied, key, json_true());
    return false;
}

static int copy_blob(page *p, const blob_kind *k, const char *sha, em_err *err)
{
    _cleanup_free_ char *dest = blob_path(p->out_dir, k, sha), *sub = xasprintf("%s/%s", p->out_dir, k->subdir);
    if (!dest)
        return em_fail_input(err, "bad %s name", k->what);
    if (written(p, k, sha))
        return 0;
    return mkdir_p(sub, 0755, err) < 0 || blob_copy_to(trace_dir(p->t), k, sha, dest, err) < 0 ? -1 : 0;
}

/* The whole tree, escaped, in out_dir/a11y/<sha>.html under the same policy as index.html. */
static int a11y_page(page *p, const char *sha, const char *data, size_t len, em_err *err)
{
    if (written(p, &BLOB_A11Y, sha))
        return 0;
    _cleanup_free_ char *sub = xasprintf("%s/" TRACE_A11Y_DIR, p->out_dir);
    _cleanup_free_ char *dest = xasprintf("%s/%s.html", sub, sha);
    sbuf b = {0};
    page_start(&b, "accessibility tree ", sha);
    sbuf_printf(&b, "<h1>Accessibility tree</h1>\n<p><code>%s</code>: %zu bytes, as the guest gave them, shown "
                    "as text (<a href=\"../index.html\">the trace</a>)</p><pre>",
                sha, len);
    sbuf_add_html(&b, data);
    sbuf_puts(&b, "</pre></body></html>\n");
    int rc = mkdir_p(sub, 0755, err) < 0 ? -1 : write_file_atomic(dest, b.s, b.len, 0644, err);
    sbuf_release(&b);
    return rc;
}

#define A11Y_SHOWN (64u << 10) /* bytes of a tree shown inline; the whole tree is a page of its own */

/* The step's accessibility tree (a11y_tree observations): its page linked, and its start shown. */
static int a11y_details(page *p, const char *sha, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (blob_load(trace_dir(p->t), &BLOB_A11Y, sha, &data, &len, err) < 0 || a11y_page(p, sha, data, len, err) < 0)
        return -1;
    sbuf_printf(&p->b, "<details><summary>accessibility tree observed (%zu bytes, <a href=\"" TRACE_A11Y_DIR
                       "/%s.html\">all of it</a>)</summary><pre>", len, sha);
    if (len > A11Y_SHOWN) {
        size_t cut = A11Y_SHOWN;
        while (cut > 0 && ((unsigned char)data[cut] & 0xC0) == 0x80)
            cut--; /* at a character's start */
        data[cut] = '\0';
    }
    html(p, data);
    sbuf_printf(&p->b, "%s</pre></details>", len > A11Y_SHOWN ? "\n..." : "");
    return 0;
}

static bool get_xy(json_t *a, double *x, double *y)
{
    json_t *jx = json_object_get(a, "x"), *jy = json_object_get(a, "y");
    if (!json_is_number(jx) || !json_is_number(jy))
        return false;
    *x = json_number_value(jx);
    *y = json_number_value(jy);
    return true;
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static bool is_type(const char *type, const char *const *names)
{
    for (; *names; names++)
        if (!strcmp(type, *names))
            return true;
    return false;
}

/* The action drawn over the frame before it, in screen coordinates. */
static void overlay(page *p, json_t *action)
{
    static const char *const pointer_types[] = {"CLICK", "RIGHT_CLICK", "DOUBLE_CLICK", "MOUSE_DOWN",
                                                "MOUSE_UP", "SCROLL", "MOVE_TO", "DRAG_TO", NULL};
    static const char *const key_types[] = {"TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY", "WAIT", "DONE",
                                            "FAIL", NULL};
    const char *type = json_string_value(json_object_get(action, "action_type"));
    double w = p->width, h = p->height, r = fmax(6, fmax(w, h) / 80), sw = r / 4;
    double x = 0, y = 0;
    bool has_xy = get_xy(action, &x, &y);
    x = clamp(x, 0, w);
    y = clamp(y, 0, h);
    double fx = clamp(p->ptr_x, 0, w), fy = clamp(p->ptr_y, 0, h);
    bool from_known = p->ptr_known;
    if (has_xy) {
        p->ptr_known = true;
        p->ptr_x = x;
        p->ptr_y = y;
    } else if (from_known) {
        x = fx; /* an action without coordinates happens where the pointer is */
        y = fy;
    }
    sbuf *b = &p->b;
    sbuf_printf(b, "<svg viewBox=\"0 0 %d %d\" preserveAspectRatio=\"none\" aria-hidden=\"true\">", p->width,
                p->height);
    if (type && is_type(type, pointer_types) && (has_xy || from_known)) {
        if (!strcmp(type, "DRAG_TO") && from_known)
            sbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e00\" stroke-width=\"%.1f\"/>"
                           "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"none\" stroke=\"#e00\" stroke-width=\"%.1f\"/>",
                        fx, fy, x, y, sw, fx, fy, r / 2, sw);
        if (!strcmp(type, "SCROLL")) {
            json_t *dx = json_object_get(action, "dx"), *dy = json_object_get(action, "dy");
            double ex = clamp(x + clamp(json_number_value(dx), -10, 10) * r, 0, w);
            double ey = clamp(y - clamp(json_number_value(dy), -10, 10) * r, 0, h); /* dy > 0 scrolls up */
            sbuf_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#06c\" stroke-width=\"%.1f\"/>",
                        x, y, ex, ey, sw);
        }
        const char *color = !strcmp(type, "MOVE_TO") ? "#06c" : "#e00";
        sbuf_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>"
                       "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>",
                    x, y, r, color, sw, has_xy ? "" : " stroke-dasharray=\"4 3\"", x, y, sw, color);
        json_t *clicks = json_object_get(action, "num_clicks");
        long long n = json_is_integer(clicks) ? json_integer_value(clicks) : !strcmp(type, "DOUBLE_CLICK") ? 2 : 1;
        if (n > 1 && n < 10)
            sbuf_printf(b, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.1f\" fill=\"#e00\" stroke=\"#fff\" "
                           "stroke-width=\"%.1f\">x%lld</text>",
                        x + r * 1.2, y - r * 0.6, r * 1.6, sw / 2, n);
    }
    sbuf_puts(b, "</svg>");
    if (type && is_type(type, key_types)) {
        _cleanup_free_ char *what = trace_action_summary(action, CAPTION_TEXT);
        sbuf_puts(b, "<div class=\"cap\">");
        html(p, what);
        sbuf_puts(b, "</div>");
    }
}

static int frame_figure(page *p, const char *sha, const char *label, json_t *action, em_err *err)
{
    sbuf *b = &p->b;
    sbuf_puts(b, "<figure>");
    if (!sha) {
        sbuf_printf(b, "<div class=\"missing\">no frame %s</div>", label);
    } else {
        if (copy_blob(p, &BLOB_FRAME, sha, err) < 0)
            return -1;
        sbuf_printf(b, "<div class=\"shot\"><img src=\"frames/%s.png\" width=\"%d\" height=\"%d\" loading=\"lazy\" "
                       "alt=\"screen %s\">",
                    sha, p->width, p->height, label);
        if (action)
            overlay(p, action);
        sbuf_puts(b, "</div>");
    }
    sbuf_printf(b, "<figcaption>%s</figcaption></figure>", label);
    return 0;
}

static void header_section(page *p)
{
    json_t *h = trace_header(p->t);
    sbuf *b = &p->b;
    sbuf_puts(b, "<h1>Trace of task <code>");
    html_field(p, h, "task_id");
    sbuf_puts(b, "</code></h1>\n<table>");
    sbuf_printf(b, "<tr><th>status</th><td class=\"%s\">%s</td></tr>",
                trace_complete(p->t) ? "status-ok" : "status-bad",
                trace_complete(p->t) ? "complete (hashes were not checked by the export: run verify)"
                                     : "INCOMPLETE: no trailer, the episode did not finish writing");
    static const char *const fields[] = {"task_sha256", "image_manifest_sha256", "accel", "started",
                                         "envmgr_version"};
    for (size_t i = 0; i < ARRAY_LEN(fields); i++) {
        sbuf_printf(b, "<tr><th>%s</th><td><code>", fields[i]);
        html_field(p, h, fields[i]);
        sbuf_puts(b, "</code></td></tr>");
    }
    sbuf_printf(b, "<tr><th>screen</th><td>%dx%d</td></tr><tr><th>network</th><td>%s</td></tr></table>\n", p->width,
                p->height,
                json_is_true(json_object_get(h, "unsafe_open_network"))
                    ? "<span class=\"status-bad\">OPEN (unsafe_open_network)</span>"
                    : "restricted to the task's allowlist");
}

static void evaluation_section(page *p)
{
    json_t *e = trace_evaluation(p->t);
    sbuf *b = &p->b;
    sbuf_puts(b, "<section id=\"evaluation\"><h2>Evaluation</h2>");
    if (!e) {
        sbuf_puts(b, "<p>Not evaluated.</p></section>\n");
        return;
    }
    sbuf_printf(b, "<table><tr><th>score</th><td>%g</td></tr><tr><th>exit cause</th><td>",
                json_number_value(json_object_get(e, "score")));
    html_field(p, e, "exit_cause");
    sbuf_puts(b, "</td></tr><tr><th>reason</th><td><pre>");
    html_field(p, e, "reason");
    sbuf_puts(b, "</pre></td></tr>");
    const char *name;
    json_t *sha;
    json_object_foreach(json_object_get(e, "artifacts"), name, sha) {
        sbuf_puts(b, "<tr><th>artifact <code>");
        html(p, name);
        sbuf_puts(b, "</code></th><td><code>");
        html(p, json_string_value(sha));
        sbuf_puts(b, "</code></td></tr>");
    }
    sbuf_puts(b, "</table></section>\n");
}

/* The task's own steps: setup (before the agent) and postconfig (after it, before the evaluator). */
static void task_steps_section(page *p, const char *id, const char *title, size_t n,
                               json_t *(*line)(const trace *, size_t))
{
    sbuf *b = &p->b;
    sbuf_printf(b, "<section id=\"%s\"><h2>%s (%zu step%s)</h2>", id, title, n, n == 1 ? "" : "s");
    if (n)
        sbuf_puts(b, "<table><tr><th>#</th><th>ok</th><th>ms</th><th>step</th><th>error</th></tr>");
    for (size_t i = 0; i < n; i++) {
        json_t *s = line(p->t, i);
        bool ok = json_is_true(json_object_get(s, "ok"));
        bool tolerated = json_object_get(s, "tolerated") != NULL;
        sbuf_printf(b, "<tr><td>%zu</td><td class=\"%s\">%s</td><td>%.0f</td><td><pre>", i,
                    ok && !tolerated ? "status-ok" : "status-bad", !ok ? "FAILED" : tolerated ? "tolerated" : "ok",
                    json_number_value(json_object_get(s, "duration_ms")));
        html_json(p, json_object_get(s, "step"));
        sbuf_puts(b, "</pre></td><td class=\"error\">");
        html_field(p, s, "error");
        html_field(p, s, "tolerated");
        sbuf_puts(b, "</td></tr>");
    }
    sbuf_puts(b, n ? "</table></section>\n" : "</section>\n");
}

static int step_article(page *p, size_t i, em_err *err)
{
    json_t *s = trace_step(p->t, i);
    json_t *action = json_object_get(s, "action");
    sbuf *b = &p->b;
    _cleanup_free_ char *what = trace_action_summary(action, TITLE_TEXT);
    sbuf_printf(b, "<article class=\"step\" id=\"step-%zu\"><h2>Step %zu: <code>", i, i);
    html(p, what);
    sbuf_printf(b, "</code></h2><p class=\"timing\">agent %.0f ms &middot; action %.0f ms &middot; t = %.3f s "
                   "&middot; source ",
                json_number_value(json_object_get(s, "agent_ms")), json_number_value(json_object_get(s, "action_ms")),
                json_number_value(json_object_get(s, "t")));
    html_field(p, s, "source");
    sbuf_puts(b, "</p>");
    if (json_object_get(s, "error")) {
        sbuf_puts(b, "<pre class=\"error\">");
        html_field(p, s, "error");
        sbuf_puts(b, "</pre>");
    }
    sbuf_puts(b, "<div class=\"frames\">");
    if (frame_figure(p, json_string_value(json_object_get(s, "frame_before")), "before, with the action", action,
                     err) < 0 ||
        frame_figure(p, json_string_value(json_object_get(s, "frame_after")), "after", NULL, err) < 0)
        return em_prefix(err, "step %zu: ", i);
    sbuf_puts(b, "</div>");
    const char *tree = json_string_value(json_object_get(s, "a11y_tree"));
    if (tree && a11y_details(p, tree, err) < 0)
        return em_prefix(err, "step %zu: ", i);
    sbuf_puts(b, "<details><summary>action as executed</summary><pre>");
    html_json(p, action);
    sbuf_puts(b, "</pre></details></article>\n");
    return 0;
}

static void egress_section(page *p)
{
    sbuf *b = &p->b;
    size_t n = trace_n_egress(p->t);
    sbuf_printf(b, "<section id=\"egress\"><h2>Network egress (%zu event%s)</h2>", n, n == 1 ? "" : "s");
    for (size_t i = 0; i < n; i++) {
        sbuf_puts(b, "<pre>");
        html_json(p, trace_egress(p->t, i));
        sbuf_puts(b, "</pre>");
    }
    sbuf_puts(b, "</section>\n");
}

static int build_page(page *p, em_err *err)
{
    json_t *screen = json_object_get(trace_header(p->t), "screen");
    p->width = (int)json_integer_value(json_object_get(screen, "width"));
    p->height = (int)json_integer_value(json_object_get(screen, "height"));
    sbuf *b = &p->b;
    page_start(b, "trace: ", json_string_value(json_object_get(trace_header(p->t), "task_id")));
    header_section(p);
    evaluation_section(p);
    task_steps_section(p, "setup", "Setup", trace_n_setups(p->t), trace_setup);
    size_t n = trace_n_steps(p->t);
    sbuf_printf(b, "<section id=\"steps\"><h2>Agent steps (%zu)</h2>\n", n);
    for (size_t i = 0; i < n; i++)
        if (step_article(p, i, err) < 0)
            return -1;
    sbuf_puts(b, "</section>\n");
    if (trace_n_postconfig(p->t))
        task_steps_section(p, "postconfig", "Postconfig", trace_n_postconfig(p->t), trace_postconfig);
    egress_section(p);
    sbuf_puts(b, "</body></html>\n");
    return 0;
}

int trace_export_html(const char *dir, const char *out_dir, em_err *err)
{
    trace *t;
    if (trace_read(dir, &t, err) < 0)
        return -1;
    page p = {.t = t, .out_dir = out_dir, .copied = json_object()};
    _cleanup_free_ char *frames = xasprintf("%s/" TRACE_FRAMES_DIR, out_dir);
    _cleanup_free_ char *index = xasprintf("%s/index.html", out_dir);
    int rc = mkdir_p(frames, 0755, err);
    if (rc == 0)
        rc = build_page(&p, err);
    if (rc == 0)
        rc = write_file_atomic(index, p.b.s, p.b.len, 0644, err);
    sbuf_release(&p.b);
    json_decref(p.copied);
    trace_free(t);
    return rc < 0 ? em_prefix(err, "export html of `%s`: ", dir) : 0;
}

/* What each line of trace.jsonl must hold and the order lines come in.
 * The writer checks every line it writes with this, the reader every line it
 * reads, so what one accepts the other accepts too. docs/trace-format.md
 * describes the same rules in prose. Unknown extra fields are allowed (they
 * are covered by the hash chain); the known ones must have the right types. */
#include <stdint.h>
#include <string.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/base/json_field.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "trace.h"
#include "trace_format.h"

/* One object of a line: its JSON path ("step.action") and where failures go. Every message is
 * "path: problem"; trace_schema_check puts the file and line in front. */
typedef struct ctx {
    const char *path;
    json_t *obj;
    em_err *err;
} ctx;

static int bad(ctx *c, const char *field, const char *what)
{
    char p[JFIELD_PATH_MAX];
    jfield_path(p, c->path, field);
    return em_fail_input(c->err, "%s: %s", p, what);
}

enum { TEXT_ID, TEXT_FREE };

/* Strings are valid UTF-8 without NUL (jansson saw to that); here: length, and
 * no control characters (C0, DEL, C1) in identifiers. Free text (an error
 * message from the guest, a reason) may hold anything: whoever shows it
 * escapes it (sbuf_add_visible, sbuf_add_html). */
static int check_text(ctx *c, const char *field, const char *s, size_t n, size_t min, size_t max, int kind)
{
    if (n < min)
        return bad(c, field, "empty");
    if (n > max) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, c->path, field);
        return em_fail_input(c->err, "%s: longer than %zu bytes", p, max);
    }
    for (size_t i = 0; kind == TEXT_ID && i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7f || (ch == 0xc2 && i + 1 < n && (unsigned char)s[i + 1] < 0xa0))
            return bad(c, field, "holds a control character");
    }
    return 0;
}

static int get_string(ctx *c, const char *field, bool required, size_t min, size_t max, int kind,
                      const char **out)
{
    const char *s;
    if (out)
        *out = NULL;
    if (jfield_str(c->obj, c->path, field, required, &s, c->err) < 0)
        return -1;
    if (!s)
        return 0;
    /* the length jansson keeps: a string built in memory may hold a NUL, which counts as a control character */
    if (check_text(c, field, s, json_string_length(json_object_get(c->obj, field)), min, max, kind) < 0)
        return -1;
    if (out)
        *out = s;
    return 0;
}

static int get_enum(ctx *c, const char *field, const char *const *names, const char *what)
{
    const char *s;
    if (jfield_str(c->obj, c->path, field, true, &s, c->err) < 0)
        return -1;
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(s, names[i]))
            return 0;
    return bad(c, field, what);
}

static int get_sha(ctx *c, const char *field, bool required, const char **out)
{
    const char *s;
    if (out)
        *out = NULL;
    if (jfield_str(c->obj, c->path, field, required, &s, c->err) < 0)
        return -1;
    if (s && !is_sha256_hex(s))
        return bad(c, field, "expected 64 lowercase hex digits (a sha256)");
    if (out)
        *out = s;
    return 0;
}

static int get_int(ctx *c, const char *field, long min, long max, long *out)
{
    long i;
    if (jfield_int_in(c->obj, c->path, field, true, true, min, max, &i, c->err) < 0)
        return -1;
    if (out)
        *out = i;
    return 0;
}

static int get_number(ctx *c, const char *field, double min, double max)
{
    double d;
    return jfield_num_in(c->obj, c->path, field, true, min, false, max, &d, c->err);
}

static int get_bool(ctx *c, const char *field)
{
    bool b;
    if (!json_object_get(c->obj, field))
        return bad(c, field, "missing");
    return jfield_bool(c->obj, c->path, field, false, &b, c->err);
}

static int get_object(ctx *c, const char *field, bool required, json_t **out)
{
    json_t *v;
    if (out)
        *out = NULL;
    if (jfield_obj(c->obj, c->path, field, &v, c->err) < 0)
        return -1;
    if (!v && required)
        return bad(c, field, "missing");
    if (out)
        *out = v;
    return 0;
}

/* "2024-05-01T12:00:00.123Z": digits and the punctuation of ISO 8601, no more. */
static int get_timestamp(ctx *c, const char *field)
{
    const char *s;
    if (get_string(c, field, true, 1, 64, TEXT_ID, &s) < 0)
        return -1;
    if (s[0] < '0' || s[0] > '9' || strspn(s, "0123456789-:.TZ+") != strlen(s))
        return bad(c, field, "must be an ISO 8601 timestamp");
    return 0;
}

#define MAX_MS 1e10 /* a duration in milliseconds: about 115 days */

static int check_header(ctx *c)
{
    static const char *const accels[] = {"tcg", "kvm", NULL};
    long format;
    const char *prev;
    if (get_int(c, "format", 0, INT32_MAX, &format) < 0)
        return -1;
    if (format < TRACE_FORMAT_OLDEST || format > TRACE_FORMAT)
        return em_fail_input(c->err, "trace format %ld; this envmgr reads formats %d to %d", format,
                             TRACE_FORMAT_OLDEST, TRACE_FORMAT);
    json_t *screen;
    if (get_string(c, "envmgr_version", true, 1, 64, TEXT_ID, NULL) < 0 ||
        get_string(c, "task_id", true, 1, TRACE_MAX_ID, TEXT_ID, NULL) < 0 ||
        get_sha(c, "task_sha256", true, NULL) < 0 || get_sha(c, "image_manifest_sha256", true, NULL) < 0 ||
        get_object(c, "screen", true, &screen) < 0 ||
        get_enum(c, "accel", accels, "must be \"tcg\" or \"kvm\"") < 0 || get_timestamp(c, "started") < 0 ||
        get_bool(c, "unsafe_open_network") < 0 || get_sha(c, "prev", true, &prev) < 0 ||
        get_string(c, "task_text", false, 2, TRACE_TASK_TEXT_MAX, TEXT_FREE, NULL) < 0)
        return -1;
    ctx sc = {"header.screen", screen, c->err};
    if (get_int(&sc, "width", 1, 16384, NULL) < 0 || get_int(&sc, "height", 1, 16384, NULL) < 0)
        return -1;
    if (strcmp(prev, TRACE_ZERO_HASH))
        return bad(c, "prev", "must be 64 zeros on the first line");
    return 0;
}

static int check_index(ctx *c, size_t expected)
{
    long index;
    if (get_int(c, "index", 0, TRACE_MAX_LINES, &index) < 0)
        return -1;
    if ((size_t)index != expected)
        return em_fail_input(c->err, "%s.index: %ld, expected %zu (%s lines count up from 0)", c->path, index,
                             expected, c->path);
    return 0;
}

/* A setup line, and a postconfig line (the same fields: a step of the task's own, not the agent's). */
static int check_setup(ctx *c, size_t expected)
{
    return check_index(c, expected) < 0 || get_object(c, "step", true, NULL) < 0 ||
                   get_number(c, "duration_ms", 0, MAX_MS) < 0 || get_bool(c, "ok") < 0 ||
                   get_string(c, "error", false, 0, TRACE_MAX_TEXT, TEXT_FREE, NULL) < 0
               ? -1
               : 0;
}

static int check_step(ctx *c, size_t expected)
{
    static const char *const sources[] = {"computer_13", "pyautogui", "anthropic", "openai", "uitars", NULL};
    json_t *action, *timing;
    const char *error;
    if (check_index(c, expected) < 0 || get_object(c, "action", true, &action) < 0)
        return -1;
    ctx ac = {"step.action", action, c->err};
    if (get_string(&ac, "action_type", true, 1, 32, TEXT_ID, NULL) < 0 ||
        get_enum(c, "source", sources, "must be an action space: computer_13, pyautogui, anthropic, openai or uitars") < 0 ||
        get_number(c, "agent_ms", 0, MAX_MS) < 0 || get_number(c, "action_ms", 0, MAX_MS) < 0 ||
        get_number(c, "t", 0, MAX_MS / 1000) < 0 ||
        get_string(c, "error", false, 0, TRACE_MAX_TEXT, TEXT_FREE, &error) < 0 ||
        get_sha(c, "frame_before", true, NULL) < 0 || get_sha(c, "frame_after", !error, NULL) < 0 ||
        get_sha(c, "a11y_tree", false, NULL) < 0 || get_object(c, "timing", false, &timing) < 0)
        return -1;
    if (timing) { /* where the step's time went: milliseconds from its beginning */
        ctx tc = {"step.timing", timing, c->err};
        static const char *const points[] = {"sent_ms", "settled_ms", "frame_ms", "recorded_ms"};
        for (size_t i = 0; i < sizeof points / sizeof *points; i++)
            if (get_number(&tc, points[i], 0, MAX_MS) < 0)
                return -1;
    }
    return 0;
}

static int check_evaluation(ctx *c)
{
    /* the causes an episode can end with (a task_error never opens a trace) */
    static const char *causes[EXIT_CAUSE_COUNT];
    for (int i = EXIT_DONE, n = 0; i < EXIT_CAUSE_COUNT; i++)
        if (i != EXIT_TASK_ERROR && i != EXIT_UNSUPPORTED)
            causes[n++] = exit_cause_name((exit_cause)i);
    /* status and evaluator_error came with the evaluator sandbox: older traces have neither */
    static const char *const statuses[] = {"scored", "evaluator_error", "not_evaluated", NULL};
    json_t *artifacts;
    const char *status = NULL;
    if (json_object_get(c->obj, "status") &&
        get_enum(c, "status", statuses, "must be one of scored, evaluator_error, not_evaluated") < 0)
        return -1;
    status = json_string_value(json_object_get(c->obj, "status"));
    if (get_string(c, "evaluator_error", status && !strcmp(status, "evaluator_error"), 1, TRACE_MAX_TEXT, TEXT_FREE,
                   NULL) < 0)
        return -1;
    if (get_number(c, "score", 0, 1) < 0 ||
        get_string(c, "reason", true, 0, TRACE_MAX_TEXT, TEXT_FREE, NULL) < 0 ||
        get_object(c, "artifacts", false, &artifacts) < 0 ||
        get_enum(c, "exit_cause", causes,
                 "must be one of done, fail, max_steps, timeout, agent_error, env_error, evaluated, guest_shutdown, "
                 "setup_error") < 0)
        return -1;
    if (!artifacts)
        return 0;
    ctx ac = {"evaluation.artifacts", artifacts, c->err};
    const char *name;
    json_t *v;
    json_object_foreach(artifacts, name, v) {
        if (check_text(&ac, "<name>", name, strlen(name), 1, TRACE_MAX_ID, TEXT_ID) < 0 || get_sha(&ac, name, true, NULL) < 0)
            return -1;
    }
    return 0;
}

static int check_trailer(ctx *c, int lines_before)
{
    long lines;
    if (get_int(c, "lines", 1, TRACE_MAX_LINES, &lines) < 0 || get_sha(c, "sha256", true, NULL) < 0 ||
        get_sha(c, "hmac_sha256", false, NULL) < 0)
        return -1;
    if (lines != lines_before)
        return em_fail_input(c->err, "trailer.lines: %ld but %d lines come before it (lines were removed or added)",
                             lines, lines_before);
    json_t *complete = json_object_get(c->obj, "complete");
    if (!json_is_true(complete))
        return bad(c, "complete", "must be true");
    return 0;
}

static const struct {
    const char *name;
    trace_line_type type;
} types[] = {
    {"header", TL_HEADER}, {"setup", TL_SETUP},           {"step", TL_STEP},         {"postconfig", TL_POSTCONFIG},
    {"egress", TL_EGRESS}, {"evaluation", TL_EVALUATION}, {"trailer", TL_TRAILER},
};

int trace_schema_check(trace_schema *st, json_t *line, trace_line_type *type, em_err *err)
{
    int lineno = st->lines + 1;
    json_t *tv = json_object_get(line, "type");
    if (!json_is_string(tv))
        return em_fail_input(err, TRACE_FILE " line %d: no \"type\" string", lineno);
    size_t i;
    for (i = 0; i < ARRAY_LEN(types); i++)
        if (!strcmp(json_string_value(tv), types[i].name))
            break;
    if (i == ARRAY_LEN(types))
        return em_fail_input(err, TRACE_FILE " line %d: unknown line type (expected header, setup, step, "
                                  "postconfig, egress, evaluation or trailer)", lineno);
    trace_line_type t = types[i].type;
    ctx c = {types[i].name, line, err};

    /* Order: header first, then setups, steps and postconfig steps in that order (each may be
     * absent), nothing but egress after the evaluation, nothing at all after the trailer. */
    if (st->have_trailer)
        return em_fail_input(err, TRACE_FILE " line %d: a line after the trailer", lineno);
    if ((lineno == 1) != (t == TL_HEADER))
        return em_fail_input(err, TRACE_FILE " line %d: %s", lineno,
                             lineno == 1 ? "the first line must be the header" : "a second header");
    if (t == TL_POSTCONFIG && st->format < 2)
        return em_fail_input(err, TRACE_FILE " line %d: a postconfig line in a format %d trace (they came with "
                                  "format 2)", lineno, st->format);
    if (t == TL_SETUP && st->steps > 0)
        return em_fail_input(err, TRACE_FILE " line %d: a setup line after step lines", lineno);
    if ((t == TL_SETUP || t == TL_STEP) && st->postconfig > 0)
        return em_fail_input(err, TRACE_FILE " line %d: a %s line after postconfig lines", lineno, types[i].name);
    if (t == TL_EVALUATION && st->have_eval)
        return em_fail_input(err, TRACE_FILE " line %d: a second evaluation line", lineno);
    if ((t == TL_SETUP || t == TL_STEP || t == TL_POSTCONFIG) && st->have_eval)
        return em_fail_input(err, TRACE_FILE " line %d: a %s line after the evaluation", lineno, types[i].name);
    if (t != TL_HEADER && get_sha(&c, "prev", true, NULL) < 0)
        return em_prefix(err, TRACE_FILE " line %d: ", lineno);

    int rc = 0;
    switch (t) {
    case TL_HEADER: rc = check_header(&c); break;
    case TL_SETUP: rc = check_setup(&c, st->setups); break;
    case TL_STEP: rc = check_step(&c, st->steps); break;
    case TL_POSTCONFIG: rc = check_setup(&c, st->postconfig); break;
    case TL_EGRESS: break; /* free-form: the proxy decides what an event holds */
    case TL_EVALUATION: rc = check_evaluation(&c); break;
    case TL_TRAILER: rc = check_trailer(&c, st->lines); break;
    }
    if (rc < 0)
        return em_prefix(err, TRACE_FILE " line %d: ", lineno);
    st->lines++;
    if (t == TL_HEADER)
        st->format = (int)json_integer_value(json_object_get(line, "format"));
    st->setups += t == TL_SETUP;
    st->steps += t == TL_STEP;
    st->postconfig += t == TL_POSTCONFIG;
    st->egress += t == TL_EGRESS;
    st->have_eval |= t == TL_EVALUATION;
    st->have_trailer |= t == TL_TRAILER;
    if (type)
        *type = t;
    return 0;
}

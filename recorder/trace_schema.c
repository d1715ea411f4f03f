/* What each line of trace.jsonl must hold and the order lines come in.
 * The writer checks every line it writes with this, the reader every line it
 * reads, so what one accepts the other accepts too. docs/trace-format.md
 * describes the same rules in prose. Unknown extra fields are allowed (they
 * are covered by the hash chain); the known ones must have the right types. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "envmgr/base/exit_cause.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "trace.h"
#include "trace_format.h"

typedef struct ctx {
    int lineno;
    const char *type;
    json_t *obj;
    em_err *err;
} ctx;

static int bad(ctx *c, const char *field, const char *what)
{
    return em_fail_input(c->err, TRACE_FILE " line %d: %s.%s %s", c->lineno, c->type, field, what);
}

static json_t *get(ctx *c, const char *field, bool required, int *rc)
{
    json_t *v = json_object_get(c->obj, field);
    *rc = 0;
    if (!v && required)
        *rc = bad(c, field, "is missing");
    return v;
}

enum { TEXT_ID, TEXT_FREE };

/* Strings are valid UTF-8 without NUL (jansson saw to that); here: length, and
 * no control characters (C0, DEL, C1) in identifiers. Free text (an error
 * message from the guest, a reason) may hold anything: whoever shows it
 * escapes it (sbuf_add_visible, sbuf_add_html). */
static int check_string(ctx *c, const char *field, json_t *v, size_t min, size_t max, int kind)
{
    if (!json_is_string(v))
        return bad(c, field, "must be a string");
    const unsigned char *s = (const unsigned char *)json_string_value(v);
    size_t n = json_string_length(v);
    if (n < min)
        return bad(c, field, "must not be empty");
    if (n > max)
        return em_fail_input(c->err, TRACE_FILE " line %d: %s.%s is longer than %zu bytes", c->lineno, c->type,
                             field, max);
    for (size_t i = 0; kind == TEXT_ID && i < n; i++) {
        unsigned char ch = s[i];
        if (ch < 0x20 || ch == 0x7f || (ch == 0xc2 && i + 1 < n && s[i + 1] < 0xa0))
            return bad(c, field, "holds a control character");
    }
    return 0;
}

static int get_string(ctx *c, const char *field, bool required, size_t min, size_t max, int kind,
                      const char **out)
{
    int rc;
    json_t *v = get(c, field, required, &rc);
    if (out)
        *out = NULL;
    if (!v)
        return rc;
    if (check_string(c, field, v, min, max, kind) < 0)
        return -1;
    if (out)
        *out = json_string_value(v);
    return 0;
}

static int get_enum(ctx *c, const char *field, const char *const *names, const char *what)
{
    int rc;
    json_t *v = get(c, field, true, &rc);
    if (!v)
        return rc;
    if (json_is_string(v))
        for (size_t i = 0; names[i]; i++)
            if (!strcmp(json_string_value(v), names[i]))
                return 0;
    return bad(c, field, what);
}

static int get_sha(ctx *c, const char *field, bool required, const char **out)
{
    int rc;
    json_t *v = get(c, field, required, &rc);
    if (out)
        *out = NULL;
    if (!v)
        return rc;
    if (!json_is_string(v) || !is_sha256_hex(json_string_value(v)))
        return bad(c, field, "must be 64 lowercase hex digits (a sha256)");
    if (out)
        *out = json_string_value(v);
    return 0;
}

static int get_int(ctx *c, const char *field, bool required, json_int_t min, json_int_t max, json_int_t *out)
{
    int rc;
    json_t *v = get(c, field, required, &rc);
    if (!v)
        return rc;
    if (!json_is_integer(v))
        return bad(c, field, "must be an integer");
    json_int_t i = json_integer_value(v);
    if (i < min || i > max)
        return em_fail_input(c->err, TRACE_FILE " line %d: %s.%s must be in %lld..%lld", c->lineno, c->type,
                             field, (long long)min, (long long)max);
    if (out)
        *out = i;
    return 0;
}

static int get_number(ctx *c, const char *field, bool required, double min, double max)
{
    int rc;
    json_t *v = get(c, field, required, &rc);
    if (!v)
        return rc;
    if (!json_is_number(v))
        return bad(c, field, "must be a number");
    double d = json_number_value(v);
    if (!isfinite(d) || d < min || d > max)
        return em_fail_input(c->err, TRACE_FILE " line %d: %s.%s must be in %g..%g", c->lineno, c->type, field,
                             min, max);
    return 0;
}

static int get_bool(ctx *c, const char *field, bool required)
{
    int rc;
    json_t *v = get(c, field, required, &rc);
    if (!v)
        return rc;
    return json_is_boolean(v) ? 0 : bad(c, field, "must be true or false");
}

static int get_object(ctx *c, const char *field, bool required, json_t **out)
{
    int rc;
    json_t *v = get(c, field, required, &rc);
    if (out)
        *out = v;
    if (!v)
        return rc;
    return json_is_object(v) ? 0 : bad(c, field, "must be an object");
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
    json_int_t format;
    const char *prev;
    if (get_int(c, "format", true, 0, INT32_MAX, &format) < 0)
        return -1;
    if (format < TRACE_FORMAT_OLDEST || format > TRACE_FORMAT)
        return em_fail_input(c->err, TRACE_FILE " line %d: trace format %lld; this envmgr reads formats %d to %d",
                             c->lineno, (long long)format, TRACE_FORMAT_OLDEST, TRACE_FORMAT);
    json_t *screen;
    if (get_string(c, "envmgr_version", true, 1, 64, TEXT_ID, NULL) < 0 ||
        get_string(c, "task_id", true, 1, TRACE_MAX_ID, TEXT_ID, NULL) < 0 ||
        get_sha(c, "task_sha256", true, NULL) < 0 || get_sha(c, "image_manifest_sha256", true, NULL) < 0 ||
        get_object(c, "screen", true, &screen) < 0 ||
        get_enum(c, "accel", accels, "must be \"tcg\" or \"kvm\"") < 0 || get_timestamp(c, "started") < 0 ||
        get_bool(c, "unsafe_open_network", true) < 0 || get_sha(c, "prev", true, &prev) < 0 ||
        get_string(c, "task_text", false, 2, TRACE_TASK_TEXT_MAX, TEXT_FREE, NULL) < 0)
        return -1;
    ctx sc = {c->lineno, "header.screen", screen, c->err};
    if (get_int(&sc, "width", true, 1, 16384, NULL) < 0 || get_int(&sc, "height", true, 1, 16384, NULL) < 0)
        return -1;
    if (strcmp(prev, TRACE_ZERO_HASH))
        return bad(c, "prev", "must be 64 zeros on the first line");
    return 0;
}

static int check_index(ctx *c, size_t expected)
{
    json_int_t index;
    if (get_int(c, "index", true, 0, TRACE_MAX_LINES, &index) < 0)
        return -1;
    if ((size_t)index != expected)
        return em_fail_input(c->err, TRACE_FILE " line %d: %s.index is %lld, expected %zu (%s lines count up from 0)",
                             c->lineno, c->type, (long long)index, expected, c->type);
    return 0;
}

/* A setup line, and a postconfig line (the same fields: a step of the task's own, not the agent's). */
static int check_setup(ctx *c, size_t expected)
{
    return check_index(c, expected) < 0 || get_object(c, "step", true, NULL) < 0 ||
                   get_number(c, "duration_ms", true, 0, MAX_MS) < 0 || get_bool(c, "ok", true) < 0 ||
                   get_string(c, "error", false, 0, TRACE_MAX_TEXT, TEXT_FREE, NULL) < 0
               ? -1
               : 0;
}

static int check_step(ctx *c, size_t expected)
{
    static const char *const sources[] = {"computer_13", "pyautogui", NULL};
    json_t *action;
    const char *error;
    if (check_index(c, expected) < 0 || get_object(c, "action", true, &action) < 0)
        return -1;
    ctx ac = {c->lineno, "step.action", action, c->err};
    if (get_string(&ac, "action_type", true, 1, 32, TEXT_ID, NULL) < 0 ||
        get_enum(c, "source", sources, "must be \"computer_13\" or \"pyautogui\"") < 0 ||
        get_number(c, "agent_ms", true, 0, MAX_MS) < 0 || get_number(c, "action_ms", true, 0, MAX_MS) < 0 ||
        get_number(c, "t", true, 0, MAX_MS / 1000) < 0 ||
        get_string(c, "error", false, 0, TRACE_MAX_TEXT, TEXT_FREE, &error) < 0 ||
        get_sha(c, "frame_before", true, NULL) < 0 || get_sha(c, "frame_after", !error, NULL) < 0 ||
        get_sha(c, "a11y_tree", false, NULL) < 0)
        return -1;
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
    if (get_number(c, "score", true, 0, 1) < 0 ||
        get_string(c, "reason", true, 0, TRACE_MAX_TEXT, TEXT_FREE, NULL) < 0 ||
        get_object(c, "artifacts", false, &artifacts) < 0 ||
        get_enum(c, "exit_cause", causes,
                 "must be one of done, fail, max_steps, timeout, agent_error, env_error, evaluated, guest_shutdown, "
                 "setup_error") < 0)
        return -1;
    if (!artifacts)
        return 0;
    ctx ac = {c->lineno, "evaluation.artifacts", artifacts, c->err};
    const char *name;
    json_t *v;
    json_object_foreach(artifacts, name, v) {
        json_t *key = json_string(name);
        int rc = check_string(&ac, "<name>", key, 1, TRACE_MAX_ID, TEXT_ID);
        json_decref(key);
        if (rc < 0 || get_sha(&ac, name, true, NULL) < 0)
            return -1;
    }
    return 0;
}

static int check_trailer(ctx *c, int lines_before)
{
    json_int_t lines;
    if (get_int(c, "lines", true, 1, TRACE_MAX_LINES, &lines) < 0 || get_sha(c, "sha256", true, NULL) < 0 ||
        get_sha(c, "hmac_sha256", false, NULL) < 0)
        return -1;
    if (lines != lines_before)
        return em_fail_input(c->err, TRACE_FILE " line %d: trailer.lines is %lld but %d lines come before it "
                                    "(lines were removed or added)",
                             c->lineno, (long long)lines, lines_before);
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

const char *trace_line_type_name(trace_line_type t)
{
    return types[t].name;
}

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
    ctx c = {lineno, types[i].name, line, err};

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
        return -1;

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
        return -1;
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

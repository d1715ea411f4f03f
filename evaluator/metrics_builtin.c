/* Built-in metrics and the external `script` metric. A metric never fails
 * the run: bad or missing inputs score 0 and the reason says why. */
#include "envmgr/base/exit_cause.h"
#include "envmgr/base/json_type.h"
#include "metrics_builtin.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/png.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"
#include "evaluator/registry.h"
#include "evaluator/sandbox.h"

#define SHOW_MAX 80 /* characters of a value quoted in a reason */

typedef double (*metric_fn)(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options, char **reason);

/* Set the reason and return the score: `return verdict(reason, 0, "...")`. */
static double verdict(char **reason, double score, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static double verdict(char **reason, double score, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(*reason);
    if (vasprintf(reason, fmt, ap) < 0)
        *reason = NULL;
    va_end(ap);
    /* one line: guest text quoted in a reason must not break it */
    for (char *s = *reason; s && *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
    return score;
}

/* What a metric function returns for an evaluator_error (its reason says what happened). */
#define EVALUATOR_ERROR (-1.0)

/* The expected artifact cannot be read or decoded: the task's fault, not the agent's, so no score
 * (as for an expected getter that fails, score.c). A result that cannot be read scores 0. */
static double expected_unreadable(char **reason, const char *func, const char *why)
{
    return verdict(reason, EVALUATOR_ERROR, "%s: expected: %s", func, why);
}

/* A value for a reason: compact JSON, cut at SHOW_MAX characters. */
static char *show(json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (!s)
        return xstrdup("null");
    if (strlen(s) > SHOW_MAX)
        strcpy(s + SHOW_MAX - 3, "...");
    return s;
}

static char *show_bytes(const char *b, size_t n)
{
    json_auto_t *j = getter_text_json(b, n);
    return show(j);
}

/* ---- artifacts as inputs (see getters.h) ---- */

static const char *art_type(json_t *a)
{
    return json_string_value(json_object_get(a, "type"));
}

/* Contents as bytes: text, a json string, a file's contents; other json is
 * its compact serialization. Owned, NUL-terminated. */
static int art_bytes(json_t *a, char **s, size_t *n, em_err *e)
{
    const char *type = art_type(a);
    *s = NULL;
    *n = 0;
    if (!a)
        return em_fail(e, "no artifact");
    if (!type)
        return em_fail(e, "not an artifact (no `type`)");
    json_t *v = json_object_get(a, "value");
    if (!strcmp(type, "text") || (!strcmp(type, "json") && json_is_string(v))) {
        if (!json_is_string(v))
            return em_fail(e, "text artifact without a string value");
        *n = json_string_length(v);
        *s = xmalloc(*n + 1);
        memcpy(*s, json_string_value(v), *n + 1);
        return 0;
    }
    if (!strcmp(type, "json")) {
        if (!v)
            return em_fail(e, "json artifact without a value");
        *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!*s)
            return em_fail(e, "cannot serialize the json value");
        *n = strlen(*s);
        return 0;
    }
    if (!strcmp(type, "file")) {
        const char *path = json_string_value(json_object_get(a, "path"));
        if (!path)
            return em_fail(e, "file artifact without a path");
        return read_file_capped(path, METRIC_TEXT_MAX, s, n, e);
    }
    return em_fail(e, "unknown artifact type `%.32s`", type);
}

/* The artifact as a JSON value: text → string, json → its value, file → its contents as a string. */
static json_t *art_value(json_t *a, em_err *e)
{
    const char *type = art_type(a);
    if (a && type && !strcmp(type, "json")) {
        json_t *v = json_object_get(a, "value");
        if (!v)
            em_fail(e, "json artifact without a value");
        return json_incref(v);
    }
    char *s;
    size_t n;
    if (art_bytes(a, &s, &n, e) < 0)
        return NULL;
    json_t *j = getter_text_json(s, n);
    free(s);
    return j;
}

/* What to compare against: rules.expected when the expected artifact is a
 * rules object (OSWorld's `rule` getter), else the artifact's own value. */
static json_t *expected_value(json_t *a, em_err *e)
{
    json_t *v = art_value(a, e);
    if (json_is_object(v) && json_object_get(v, "expected")) {
        json_t *x = json_incref(json_object_get(v, "expected"));
        json_decref(v);
        return x;
    }
    return v;
}

/* The expected value as bytes (strings as they are, other JSON serialized). */
static int expected_bytes(json_t *a, char **s, size_t *n, em_err *e)
{
    const char *type = art_type(a);
    if (!type || strcmp(type, "json"))
        return art_bytes(a, s, n, e);
    json_auto_t *v = expected_value(a, e);
    if (!v)
        return -1;
    if (json_is_string(v)) {
        *n = json_string_length(v);
        *s = xmalloc(*n + 1);
        memcpy(*s, json_string_value(v), *n + 1);
        return 0;
    }
    *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    *n = *s ? strlen(*s) : 0;
    return *s ? 0 : em_fail(e, "cannot serialize the expected value");
}

/* ---- comparisons with Python's semantics ---- */

/* ==, as Python compares parsed JSON: 1 == 1.0, key order does not matter. */
static bool py_equal(json_t *a, json_t *b)
{
    if (!a || !b)
        return a == b;
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
    case JSON_ARRAY: {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!py_equal(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v)
        {
            if (!py_equal(v, json_object_get(b, k)))
                return false;
        }
        return true;
    }
    default:
        return true; /* true, false, null: same type is equal */
    }
}

static bool array_contains(json_t *arr, json_t *v)
{
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (py_equal(json_array_get(arr, i), v))
            return true;
    return false;
}

/* sorted(a) == sorted(b): equal as multisets. */
static bool multiset_equal(json_t *a, json_t *b)
{
    size_t n = json_array_size(a);
    if (n != json_array_size(b))
        return false;
    bool *used = xcalloc(n + 1, sizeof *used);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = false;
        for (size_t j = 0; j < n && !ok; j++)
            if (!used[j] && py_equal(json_array_get(a, i), json_array_get(b, j)))
                used[j] = ok = true;
    }
    free(used);
    return ok;
}

/* str(x) for literal_match: strings as they are, anything else as compact JSON. */
static char *to_str(json_t *v, size_t *n)
{
    char *s;
    if (json_is_string(v)) {
        *n = json_string_length(v);
        s = xmalloc(*n + 1);
        memcpy(s, json_string_value(v), *n + 1);
        return s;
    }
    s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        s = xstrdup("null");
    *n = strlen(s);
    return s;
}

static void ascii_lower(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i] = (char)tolower((unsigned char)s[i]);
}

static bool opt_bool(json_t *options, const char *key)
{
    return json_is_true(json_object_get(options, key));
}

static double opt_num(json_t *options, const char *key, double dflt)
{
    json_t *v = json_object_get(options, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

/* ---- the metrics ---- */

static double m_exact_match(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options, char **reason)
{
    em_err e = {0};
    json_auto_t *r = art_value(result, &e);
    if (!r)
        return verdict(reason, 0, "exact_match: result: %s", e.msg);
    json_auto_t *x = expected_value(expected, &e);
    if (!x)
        return expected_unreadable(reason, "exact_match", e.msg);
    _cleanup_free_ char *rs = show(r), *xs = show(x);
    if (py_equal(r, x))
        return verdict(reason, 1, "exact_match: result equals %s", xs);
    return verdict(reason, 0, "exact_match: got %s, expected %s", rs, xs);
}

static double m_include_exclude(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options,
                                char **reason)
{
    em_err e = {0};
    _cleanup_free_ char *r = NULL;
    size_t rn;
    if (art_bytes(result, &r, &rn, &e) < 0)
        return verdict(reason, 0, "check_include_exclude: result: %s", e.msg);
    json_auto_t *rules = art_value(expected, &e);
    if (!rules)
        return expected_unreadable(reason, "check_include_exclude", e.msg);
    if (!json_is_object(rules))
        return verdict(reason, 0, "check_include_exclude: expected rules {include: [...], exclude: [...]}, got %s",
                       json_type_name(rules));
    json_t *inc = json_object_get(rules, "include"), *exc = json_object_get(rules, "exclude");
    if ((inc && !json_is_array(inc)) || (exc && !json_is_array(exc)))
        return verdict(reason, 0, "check_include_exclude: rules.include and rules.exclude must be arrays of strings");
    for (size_t i = 0; i < json_array_size(inc); i++) {
        json_t *s = json_array_get(inc, i);
        if (!json_is_string(s))
            return verdict(reason, 0, "check_include_exclude: rules.include[%zu] is not a string", i);
        if (json_string_length(s) && !memmem(r, rn, json_string_value(s), json_string_length(s))) {
            _cleanup_free_ char *ss = show(s);
            return verdict(reason, 0, "check_include_exclude: %s is not in the result", ss);
        }
    }
    for (size_t i = 0; i < json_array_size(exc); i++) {
        json_t *s = json_array_get(exc, i);
        if (!json_is_string(s))
            return verdict(reason, 0, "check_include_exclude: rules.exclude[%zu] is not a string", i);
        if (!json_string_length(s) || memmem(r, rn, json_string_value(s), json_string_length(s))) {
            _cleanup_free_ char *ss = show(s);
            return verdict(reason, 0, "check_include_exclude: %s is in the result", ss);
        }
    }
    return verdict(reason, 1, "check_include_exclude: all %zu included strings found, none of %zu excluded",
                   json_array_size(inc), json_array_size(exc));
}

static double m_match_in_list(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options,
                              char **reason)
{
    em_err e = {0};
    json_auto_t *r = art_value(result, &e);
    if (!r)
        return verdict(reason, 0, "match_in_list: result: %s", e.msg);
    json_auto_t *x = expected_value(expected, &e);
    if (!x)
        return expected_unreadable(reason, "match_in_list", e.msg);
    if (!json_is_array(x))
        return verdict(reason, 0, "match_in_list: the expected value must be a list, got %s", json_type_name(x));
    _cleanup_free_ char *rs = show(r);
    if (array_contains(x, r))
        return verdict(reason, 1, "match_in_list: %s is in the list", rs);
    return verdict(reason, 0, "match_in_list: %s is not one of the %zu expected values", rs, json_array_size(x));
}

static double m_is_in_list(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options, char **reason)
{
    em_err e = {0};
    json_auto_t *r = art_value(result, &e);
    if (!r)
        return verdict(reason, 0, "is_in_list: result: %s", e.msg);
    json_auto_t *x = expected_value(expected, &e);
    if (!x)
        return expected_unreadable(reason, "is_in_list", e.msg);
    _cleanup_free_ char *xs = show(x);
    bool in;
    if (json_is_array(r))
        in = array_contains(r, x);
    else if (json_is_string(r) && json_is_string(x))
        in = memmem(json_string_value(r), json_string_length(r), json_string_value(x), json_string_length(x)) != NULL;
    else
        return verdict(reason, 0, "is_in_list: the result must be a list or text, got %s", json_type_name(r));
    return verdict(reason, in ? 1 : 0, "is_in_list: %s is %sin the result", xs, in ? "" : "not ");
}

static bool str_equal(json_t *a, json_t *b, bool ignore_case)
{
    size_t an, bn;
    _cleanup_free_ char *as = to_str(a, &an), *bs = to_str(b, &bn);
    if (ignore_case) {
        ascii_lower(as, an);
        ascii_lower(bs, bn);
    }
    return an == bn && !memcmp(as, bs, an);
}

static double m_literal_match(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options,
                              char **reason)
{
    em_err e = {0};
    json_auto_t *r = art_value(result, &e);
    if (!r)
        return verdict(reason, 0, "literal_match: result: %s", e.msg);
    json_auto_t *x = expected_value(expected, &e);
    if (!x)
        return expected_unreadable(reason, "literal_match", e.msg);
    const char *type = json_string_value(json_object_get(options, "type"));
    bool icase = opt_bool(options, "ignore_case");
    _cleanup_free_ char *rs = show(r), *xs = show(x);
    if (type && !strcmp(type, "list")) {
        if (!json_is_array(r) || !json_is_array(x) || json_array_size(r) != json_array_size(x))
            return verdict(reason, 0, "literal_match: got %s, expected the list %s", rs, xs);
        for (size_t i = 0; i < json_array_size(r); i++)
            if (!str_equal(json_array_get(r, i), json_array_get(x, i), icase))
                return verdict(reason, 0, "literal_match: item %zu differs: got %s, expected %s", i, rs, xs);
        return verdict(reason, 1, "literal_match: lists are equal");
    }
    if (str_equal(r, x, icase))
        return verdict(reason, 1, "literal_match: result equals %s", xs);
    return verdict(reason, 0, "literal_match: got %s, expected %s", rs, xs);
}

/* Code points of a UTF-8 string; an invalid byte is one code point of its own. */
static size_t code_points(const char *s, size_t n, uint32_t *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_decode(u + i, n - i, &cp);
        if (!len) {
            cp = 0x110000u + u[i]; /* outside Unicode: never equal to a real character */
            len = 1;
        }
        if (out)
            out[k] = cp;
        k++;
        i += len;
    }
    return k;
}

double metric_fuzzy_ratio(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t la = code_points(a, alen, NULL), lb = code_points(b, blen, NULL);
    if (la > METRIC_FUZZY_MAX || lb > METRIC_FUZZY_MAX)
        return -1;
    if (la + lb == 0)
        return 1.0;
    uint32_t *ca = xmalloc((la + 1) * sizeof *ca), *cb = xmalloc((lb + 1) * sizeof *cb);
    code_points(a, alen, ca);
    code_points(b, blen, cb);
    /* LCS by dynamic programming over one row: O(la * lb) time, O(lb) space. */
    uint32_t *row = xcalloc(lb + 1, sizeof *row);
    for (size_t i = 1; i <= la; i++) {
        uint32_t diag = 0; /* row[j - 1] of the previous row */
        for (size_t j = 1; j <= lb; j++) {
            uint32_t up = row[j];
            row[j] = ca[i - 1] == cb[j - 1] ? diag + 1 : (up > row[j - 1] ? up : row[j - 1]);
            diag = up;
        }
    }
    double ratio = 2.0 * row[lb] / (double)(la + lb);
    free(row);
    free(ca);
    free(cb);
    return ratio;
}

static double m_fuzzy_match(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options, char **reason)
{
    em_err e = {0};
    _cleanup_free_ char *r = NULL, *x = NULL;
    size_t rn, xn;
    if (art_bytes(result, &r, &rn, &e) < 0)
        return verdict(reason, 0, "fuzzy_match: result: %s", e.msg);
    if (expected_bytes(expected, &x, &xn, &e) < 0)
        return expected_unreadable(reason, "fuzzy_match", e.msg);
    double ratio = metric_fuzzy_ratio(r, rn, x, xn);
    if (ratio < 0)
        return verdict(reason, 0, "fuzzy_match: texts longer than %d characters are not compared", METRIC_FUZZY_MAX);
    json_t *th = json_object_get(options, "threshold");
    if (th) {
        double t = json_number_value(th);
        return verdict(reason, ratio >= t ? 1 : 0, "fuzzy_match: ratio %.4f %s threshold %g", ratio,
                       ratio >= t ? ">=" : "<", t);
    }
    return verdict(reason, ratio, "fuzzy_match: ratio %.4f", ratio);
}

/* Python's re.sub(r'\s+', ' ', text).strip() for ASCII whitespace. */
static size_t collapse_blanks(char *s, size_t n)
{
    size_t o = 0;
    bool space = false;
    for (size_t i = 0; i < n; i++) {
        if (isspace((unsigned char)s[i])) {
            space = o > 0;
            continue;
        }
        if (space)
            s[o++] = ' ';
        space = false;
        s[o++] = s[i];
    }
    s[o] = '\0';
    return o;
}

static double m_compare_text_file(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options,
                                  char **reason)
{
    em_err e = {0};
    _cleanup_free_ char *r = NULL, *x = NULL;
    size_t rn, xn;
    if (art_bytes(result, &r, &rn, &e) < 0)
        return verdict(reason, 0, "compare_text_file: result: %s", e.msg);
    if (expected_bytes(expected, &x, &xn, &e) < 0)
        return expected_unreadable(reason, "compare_text_file", e.msg);
    if (opt_bool(options, "ignore_blanks")) {
        rn = collapse_blanks(r, rn);
        xn = collapse_blanks(x, xn);
    }
    if (opt_bool(options, "ignore_case")) {
        ascii_lower(r, rn);
        ascii_lower(x, xn);
    }
    if (rn == xn && !memcmp(r, x, rn))
        return verdict(reason, 1, "compare_text_file: the texts are equal (%zu bytes)", rn);
    size_t i = 0;
    while (i < rn && i < xn && r[i] == x[i])
        i++;
    size_t from = i > 20 ? i - 20 : 0;
    _cleanup_free_ char *rs = show_bytes(r + from, (rn - from) < 40 ? rn - from : 40);
    _cleanup_free_ char *xs = show_bytes(x + from, (xn - from) < 40 ? xn - from : 40);
    return verdict(reason, 0, "compare_text_file: the texts differ at byte %zu: got %s, expected %s", i, rs, xs);
}

static double m_direct_json_object(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options,
                                   char **reason)
{
    em_err e = {0};
    json_auto_t *r = art_value(result, &e);
    if (!r)
        return verdict(reason, 0, "check_direct_json_object: result: %s", e.msg);
    if (json_is_string(r)) {
        /* OSWorld: strip, replace ' with ", json.loads */
        size_t n = json_string_length(r);
        _cleanup_free_ char *s = xmalloc(n + 1);
        memcpy(s, json_string_value(r), n + 1);
        for (size_t i = 0; i < n; i++)
            if (s[i] == '\'')
                s[i] = '"';
        json_error_t je;
        json_t *parsed = json_loadb(s, n, JSON_DECODE_ANY, &je);
        if (!parsed)
            return verdict(reason, 0, "check_direct_json_object: the result is not JSON: %s", je.text);
        json_decref(r);
        r = parsed;
    }
    if (!json_is_object(r))
        return verdict(reason, 0, "check_direct_json_object: the result is not a JSON object (%s)", json_type_name(r));
    json_auto_t *rules = art_value(expected, &e);
    if (!rules)
        return expected_unreadable(reason, "check_direct_json_object", e.msg);
    json_t *x = json_object_get(rules, "expected");
    if (!json_is_object(x))
        return verdict(reason, 0, "check_direct_json_object: expected rules {\"expected\": {...}}");
    bool in_result = json_is_true(json_object_get(rules, "expect_in_result"));
    bool any_order = json_is_true(json_object_get(rules, "ignore_list_order"));
    const char *k;
    json_t *xv;
    json_object_foreach(x, k, xv)
    {
        json_t *rv = json_object_get(r, k);
        _cleanup_free_ char *xs = show(xv), *rs = show(rv);
        bool ok;
        if (!in_result) {
            if (any_order && json_is_array(xv) && json_is_array(rv))
                ok = multiset_equal(xv, rv);
            else
                ok = rv ? py_equal(xv, rv) : json_is_null(xv);
        } else if (json_is_array(xv)) {
            ok = false;
            for (size_t i = 0; i < json_array_size(xv) && !ok; i++) {
                json_t *one = json_array_get(xv, i);
                ok = (json_is_array(rv) && array_contains(rv, one)) || (json_is_string(rv) && py_equal(one, rv));
            }
        } else if (json_is_string(xv)) {
            ok = json_is_string(rv) &&
                 memmem(json_string_value(rv), json_string_length(rv), json_string_value(xv), json_string_length(xv));
        } else {
            return verdict(reason, 0, "check_direct_json_object: key `%.64s`: expect_in_result takes lists and strings",
                           k);
        }
        if (!ok)
            return verdict(reason, 0, "check_direct_json_object: key `%.64s`: got %s, expected %s%s", k, rs,
                           in_result ? "it to contain " : "", xs);
    }
    return verdict(reason, 1, "check_direct_json_object: all %zu keys match", json_object_size(x));
}

/* A file artifact's pixels, cropped to its "region" when it has one. */
static int art_pixels(json_t *a, uint8_t **px, int *w, int *h, em_err *e)
{
    const char *type = art_type(a), *path = json_string_value(json_object_get(a, "path"));
    *px = NULL;
    if (!type || strcmp(type, "file") || !path)
        return em_fail(e, "not a file artifact");
    if (png_decode_file(path, px, w, h, e) < 0)
        return -1;
    json_t *r = json_object_get(a, "region");
    if (!r)
        return 0;
    json_int_t v[4];
    for (size_t i = 0; i < 4; i++)
        v[i] = json_is_integer(json_array_get(r, i)) ? json_integer_value(json_array_get(r, i)) : -1;
    if (json_array_size(r) != 4 || v[0] < 0 || v[1] < 0 || v[2] < 1 || v[3] < 1 || v[0] + v[2] > *w ||
        v[1] + v[3] > *h) {
        free(*px);
        *px = NULL;
        return em_fail(e, "region is outside the %dx%d image", *w, *h);
    }
    uint8_t *crop = xmalloc((size_t)v[2] * (size_t)v[3] * 4);
    for (json_int_t y = 0; y < v[3]; y++)
        memcpy(crop + (size_t)y * (size_t)v[2] * 4, *px + ((size_t)(v[1] + y) * (size_t)*w + (size_t)v[0]) * 4,
               (size_t)v[2] * 4);
    free(*px);
    *px = crop;
    *w = (int)v[2];
    *h = (int)v[3];
    return 0;
}

static double m_compare_images_exact(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options,
                               char **reason)
{
    em_err e = {0};
    uint8_t *a = NULL, *b = NULL;
    int aw, ah, bw, bh;
    if (art_pixels(result, &a, &aw, &ah, &e) < 0)
        return verdict(reason, 0, "compare_images_exact: result: %s", e.msg);
    if (art_pixels(expected, &b, &bw, &bh, &e) < 0) {
        free(a);
        return expected_unreadable(reason, "compare_images_exact", e.msg);
    }
    if (aw != bw || ah != bh) {
        free(a);
        free(b);
        return verdict(reason, 0, "compare_images_exact: sizes differ: %dx%d vs %dx%d", aw, ah, bw, bh);
    }
    int tol = (int)opt_num(options, "tolerance", 0);
    double allowed = opt_num(options, "max_diff_fraction", 0);
    size_t total = (size_t)aw * (size_t)ah, diff = 0;
    for (size_t i = 0; i < total; i++) {
        const uint8_t *p = a + i * 4, *q = b + i * 4; /* RGB; the 4th byte (alpha or filler) is ignored */
        if (abs(p[0] - q[0]) > tol || abs(p[1] - q[1]) > tol || abs(p[2] - q[2]) > tol)
            diff++;
    }
    free(a);
    free(b);
    double frac = total ? (double)diff / (double)total : 0;
    return verdict(reason, frac <= allowed ? 1 : 0, "compare_images_exact: %zu of %zu pixels differ (%.4f%%, allowed %.4f%%)",
                   diff, total, frac * 100, allowed * 100);
}

static double m_infeasible(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options, char **reason)
{
    const char *exit = ctx->agent_exit;
    if (exit_cause_from_name(exit) == EXIT_FAIL)
        return verdict(reason, 1, "infeasible: the agent answered FAIL");
    return verdict(reason, 0, "infeasible: the task is infeasible but the agent ended with `%s`, not FAIL",
                   exit ? exit : "(unknown)");
}

/* ---- scripts, in the evaluator sandbox ---- */

/* A bare name is looked up in the built-in scripts folder first, then in
 * the task folder; a name with a '/' only in the task folder. */
static int resolve_script(const metric_ctx *ctx, const char *name, char **exe, em_err *e)
{
    *exe = NULL;
    _cleanup_free_ char *scripts = xasprintf("%s/evaluator/scripts", paths_data_dir());
    if (!strchr(name, '/')) {
        _cleanup_free_ char *cand = xasprintf("%s/%s", scripts, name);
        if (access(cand, F_OK) == 0)
            return path_inside(scripts, name, true, exe, e);
    }
    if (!ctx->task_dir)
        return em_fail(e, "not found in %s (and no task folder)", scripts);
    if (path_inside(ctx->task_dir, name, true, exe, e) < 0)
        return strchr(name, '/') ? -1 : em_fail(e, "not found in %s or the task folder", scripts);
    return 0;
}

/* Run argv in the sandbox with the request on stdin and read its answer: {"score": 0..1} (and, with
 * want_reason, a "reason") after exit 0 scores; {"error": "..."}, a failed run or garbage is an
 * evaluator_error. label names the metric in every reason. */
static double sandboxed(const sandbox *sb, const char *const *argv, json_t *request, double timeout_s,
                        const char *label, bool want_reason, char **reason)
{
    em_err e = {0};
    json_auto_t *res = NULL;
    if (sandbox_run_json(sb, argv, request, timeout_s, label, &res, &e) < 0)
        return verdict(reason, EVALUATOR_ERROR, "%s", e.msg);
    json_t *sj = json_object_get(res, "score"), *rj = json_object_get(res, "reason");
    if (!json_is_object(res))
        return verdict(reason, EVALUATOR_ERROR, "%s: expected {\"score\": 0..1%s} on stdout", label,
                       want_reason ? ", \"reason\": \"...\"" : "");
    double s = json_is_number(sj) ? json_number_value(sj) : NAN;
    if (!(s >= 0 && s <= 1))
        return verdict(reason, EVALUATOR_ERROR, "%s: score must be a number in 0..1", label);
    if (!want_reason)
        return verdict(reason, s, "%s: scored %g in the evaluator sandbox", label, s);
    _cleanup_free_ char *rs = json_is_string(rj) ? show(rj) : xstrdup("no reason given");
    return verdict(reason, s, "%s: %s", label, rs);
}

static double m_script(const metric_ctx *ctx, json_t *result, json_t *expected, json_t *options, char **reason)
{
    const char *name = json_string_value(json_object_get(options, "path"));
    double timeout = opt_num(options, "timeout_s", METRIC_SCRIPT_TIMEOUT_S);
    em_err e = {0};
    _cleanup_free_ char *exe = NULL;
    if (!name)
        return verdict(reason, EVALUATOR_ERROR, "script: options.path: missing");
    _cleanup_free_ char *label = xasprintf("script `%s`", name);
    if (resolve_script(ctx, name, &exe, &e) < 0)
        return verdict(reason, EVALUATOR_ERROR, "%s: %s", label, e.msg);
    struct stat st;
    if (stat(exe, &st) < 0 || !S_ISREG(st.st_mode) || access(exe, X_OK) < 0)
        return verdict(reason, EVALUATOR_ERROR, "%s: not an executable file", label);

    sandbox sb;
    sandbox_init(&sb);
    const char *base = strrchr(exe, '/') + 1; /* path_inside gives an absolute path */
    _cleanup_free_ char *inside = xasprintf("/script/%s", base);
    sandbox_add(&sb, exe, inside);
    json_auto_t *in = json_pack("{s:o?,s:o?,s:O?}", "result", sandbox_script_artifact(&sb, result, "result"),
                                "expected", sandbox_script_artifact(&sb, expected, "expected"), "options", options);
    const char *const argv[] = {inside, NULL};
    double s = sandboxed(&sb, argv, in, timeout, label, true, reason);
    sandbox_free(&sb);
    return s;
}

/* A registry metric: run.py in the sandbox, the artifacts as OSWorld's values. */
static double run_registry(const metric_ctx *ctx, const char *name, json_t *entry, json_t *result, json_t *expected,
                           json_t *options, char **reason)
{
    sandbox sb;
    sandbox_init(&sb);
    sandbox_add(&sb, registry_metrics_dir(), "/metrics");
    json_auto_t *req = json_pack("{s:s,s:o,s:o}", "metric", name, "result", sandbox_osworld_value(&sb, result, "result"),
                                 "options", options ? json_incref(options) : json_object());
    if (registry_expects(entry) != REG_EXPECTED_NO)
        json_object_set_new(req, "expected", sandbox_osworld_value(&sb, expected, "expected"));
    static const char *const argv[] = {SANDBOX_PYTHON, "-I", "/metrics/run.py", NULL};
    double s = sandboxed(&sb, argv, req, ctx->timeout_s, name, false, reason);
    sandbox_free(&sb);
    return s;
}

/* ---- the table ---- */

typedef enum { OPT_BOOL, OPT_NUM, OPT_INT, OPT_STR, OPT_ENUM } opt_kind;

typedef struct opt_spec {
    const char *name;
    opt_kind kind;
    double lo, hi;
    bool lo_open;
    const char *choices; /* OPT_ENUM: " a b " */
    bool required;
    const char *doc; /* "type, default: what it does", as the registry documents options */
} opt_spec;

static const opt_spec O_NONE[] = {{.name = NULL}};
static const opt_spec O_TEXT[] = {
    {.name = "ignore_blanks", .kind = OPT_BOOL, .doc = "bool, default false: collapse whitespace runs to one space and trim both ends"},
    {.name = "ignore_case", .kind = OPT_BOOL, .doc = "bool, default false"},
    {.name = NULL}};
static const opt_spec O_LITERAL[] = {
    {.name = "type", .kind = OPT_ENUM, .choices = " str list ", .doc = "str, default \"str\": \"str\" or \"list\""},
    {.name = "ignore_case", .kind = OPT_BOOL, .doc = "bool, default false"},
    {.name = NULL}};
static const opt_spec O_FUZZY[] = {
    {.name = "threshold", .kind = OPT_NUM, .lo = 0, .hi = 1,
     .doc = "number 0..1, optional: score 1 at or above it, else 0 (without it the ratio is the score)"},
    {.name = NULL}};
static const opt_spec O_IMAGES[] = {
    {.name = "tolerance", .kind = OPT_INT, .lo = 0, .hi = 255,
     .doc = "int 0..255, default 0: per-channel difference a pixel may have and still match"},
    {.name = "max_diff_fraction", .kind = OPT_NUM, .lo = 0, .hi = 1,
     .doc = "number 0..1, default 0: fraction of pixels that may differ"},
    {.name = NULL}};
static const opt_spec O_SCRIPT[] = {
    {.name = "path", .kind = OPT_STR, .required = true,
     .doc = "str, required: the program, in evaluator/scripts/ or the task folder"},
    {.name = "timeout_s", .kind = OPT_NUM, .lo = 0, .lo_open = true, .hi = METRIC_SCRIPT_TIMEOUT_MAX_S,
     .doc = "number, default 30: wall-clock limit in seconds (at most 600)"},
    {.name = "...", .doc = "any other option is passed to the script"},
    {.name = NULL}};

static const struct metric_def {
    const char *name;
    metric_fn fn;
    bool needs_result;
    registry_expected expected;
    const opt_spec *opts;
    bool open_opts; /* other options are allowed (passed to a script) */
    const char *summary;
} metric_defs[] = {
    {"exact_match", m_exact_match, true, REG_EXPECTED_YES, O_NONE, false, "1 when the result equals rules.expected"},
    {"check_include_exclude", m_include_exclude, true, REG_EXPECTED_YES, O_NONE, false,
     "1 when every rules.include string is in the result and no rules.exclude string is"},
    {"match_in_list", m_match_in_list, true, REG_EXPECTED_YES, O_NONE, false,
     "1 when the result is one of rules.expected (a list)"},
    {"is_in_list", m_is_in_list, true, REG_EXPECTED_YES, O_NONE, false,
     "1 when rules.expected is an element of a list result, or a substring of a text result"},
    {"literal_match", m_literal_match, true, REG_EXPECTED_YES, O_LITERAL, false,
     "1 when str(result) == str(expected)"},
    {"fuzzy_match", m_fuzzy_match, true, REG_EXPECTED_YES, O_FUZZY, false,
     "rapidfuzz fuzz.ratio / 100 of result and expected"},
    {"compare_text_file", m_compare_text_file, true, REG_EXPECTED_YES, O_TEXT, false, "1 when two text files are equal"},
    {"check_direct_json_object", m_direct_json_object, true, REG_EXPECTED_YES, O_NONE, false,
     "1 when the result (a JSON object, or text of one) has rules.expected's values "
     "(rules.expect_in_result, rules.ignore_list_order)"},
    {"compare_images_exact", m_compare_images_exact, true, REG_EXPECTED_YES, O_IMAGES, false,
     "1 when two PNGs match pixel by pixel within a tolerance (envmgr's; OSWorld's compare_images is the "
     "similarity script)"},
    {"infeasible", m_infeasible, false, REG_EXPECTED_NO, O_NONE, false,
     "1 only when the agent ended with FAIL (the task is infeasible)"},
    {"script", m_script, true, REG_EXPECTED_OPTIONAL, O_SCRIPT, true,
     "a program shipped with envmgr or the task, run in the evaluator sandbox: stdin {result, expected, "
     "options}, stdout {score, reason}"},
};

static const struct metric_def *find_metric(const char *func)
{
    for (size_t i = 0; func && i < ARRAY_LEN(metric_defs); i++)
        if (!strcmp(metric_defs[i].name, func))
            return &metric_defs[i];
    return NULL;
}

bool metric_known(const char *func)
{
    return find_metric(func) != NULL || registry_find(func) != NULL;
}

const char *metric_unknown_hint(void)
{
    static __thread char hint[EM_ERR_MAX];
    const char *why = registry_error();
    if (!why)
        return "";
    snprintf(hint, sizeof hint, " (the evaluator-script registry did not load: %.900s)", why);
    return hint;
}

bool metric_needs_result(const char *func)
{
    const struct metric_def *d = find_metric(func);
    return d ? d->needs_result : registry_find(func) != NULL;
}

bool metric_needs_expected(const char *func)
{
    const struct metric_def *d = find_metric(func);
    json_t *r = d ? NULL : registry_find(func);
    return d ? d->expected == REG_EXPECTED_YES : r && registry_expects(r) == REG_EXPECTED_YES;
}

static int check_option(const opt_spec *o, json_t *v, em_err *err)
{
    switch (o->kind) {
    case OPT_BOOL:
        return json_is_boolean(v) ? 0 : em_fail_input(err, "%s: expected true or false, got %s", o->name, json_type_name(v));
    case OPT_STR:
        if (!json_is_string(v))
            return em_fail_input(err, "%s: expected a string, got %s", o->name, json_type_name(v));
        return json_string_length(v) ? 0 : em_fail_input(err, "%s: empty", o->name);
    case OPT_ENUM: {
        char probe[72];
        if (!json_is_string(v))
            return em_fail_input(err, "%s: expected a string, got %s", o->name, json_type_name(v));
        snprintf(probe, sizeof probe, " %.64s ", json_string_value(v));
        if (!strstr(o->choices, probe))
            return em_fail_input(err, "%s: expected one of%s, got `%.32s`", o->name, o->choices, json_string_value(v));
        return 0;
    }
    case OPT_INT:
    case OPT_NUM: {
        if (!json_is_number(v) || (o->kind == OPT_INT && !json_is_integer(v)))
            return em_fail_input(err, "%s: expected %s, got %s", o->name, o->kind == OPT_INT ? "an integer" : "a number",
                                 json_type_name(v));
        double d = json_number_value(v);
        if (!isfinite(d) || (o->lo_open ? d <= o->lo : d < o->lo) || d > o->hi)
            return em_fail_input(err, "%s: %g is out of range (%s %g and <= %g)", o->name, d, o->lo_open ? ">" : ">=",
                                 o->lo, o->hi);
        return 0;
    }
    }
    return 0;
}

int metric_check_options(const char *func, json_t *options, em_err *err)
{
    const struct metric_def *d = find_metric(func);
    json_t *entry = d ? NULL : registry_find(func);
    if (!d && !entry)
        return em_fail_input(err, "unknown metric `%.64s`%s", func ? func : "(null)", metric_unknown_hint());
    if (options && json_is_null(options))
        options = NULL;
    if (options && !json_is_object(options))
        return em_fail_input(err, "options: expected an object, got %s", json_type_name(options));
    if (entry)
        return registry_check_options(entry, options, err);
    const char *k;
    json_t *v;
    json_object_foreach(options, k, v)
    {
        const opt_spec *o;
        for (o = d->opts; o->name && strcmp(o->name, k); o++)
            ;
        if (!o->name || !strcmp(o->name, "...")) {
            if (d->open_opts)
                continue;
            return em_fail_input(err, "%.64s: unknown option for %s", k, d->name);
        }
        if (check_option(o, v, err) < 0)
            return -1;
    }
    for (const opt_spec *o = d->opts; o->name; o++)
        if (o->required && !json_object_get(options, o->name))
            return em_fail_input(err, "%s: missing", o->name);
    return 0;
}

static json_t *expected_json(registry_expected x)
{
    return x == REG_EXPECTED_OPTIONAL ? json_string("optional") : json_boolean(x == REG_EXPECTED_YES);
}

static int by_name(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));
    return strcmp(x, y);
}

json_t *metric_catalog(void)
{
    json_t *reg = registry_get();
    size_t cap = ARRAY_LEN(metric_defs) + json_object_size(reg), n = 0;
    json_t **items = xcalloc(cap, sizeof *items);
    for (size_t i = 0; i < ARRAY_LEN(metric_defs); i++) {
        const struct metric_def *d = &metric_defs[i];
        json_t *opts = json_object();
        for (const opt_spec *o = d->opts; o->name; o++)
            json_object_set_new(opts, o->name, json_string(o->doc ? o->doc : ""));
        items[n++] = json_pack("{s:s,s:s,s:o,s:o,s:s}", "name", d->name, "source", "builtin", "expected",
                               expected_json(d->expected), "options", opts, "summary", d->summary);
    }
    const char *name;
    json_t *e;
    json_object_foreach(reg, name, e)
    {
        if (find_metric(name))
            continue; /* the C metric wins */
        items[n++] = json_pack("{s:s,s:s,s:O,s:o,s:O,s:O}", "name", name, "source", "script", "family",
                               json_object_get(e, "family"), "expected", expected_json(registry_expects(e)), "options",
                               json_object_get(e, "options"), "summary", json_object_get(e, "summary"));
    }
    qsort(items, n, sizeof *items, by_name);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, items[i]);
    free(items);
    return list;
}

int metric_run(const metric_ctx *ctx, const char *func, json_t *result, json_t *expected, json_t *options,
               double *score, char **reason, em_err *err)
{
    static const metric_ctx none = {0};
    if (!func || !score || !reason)
        return em_fail(err, "metric_run: missing argument");
    *score = 0;
    *reason = NULL;
    const struct metric_def *d = find_metric(func);
    json_t *entry = d ? NULL : registry_find(func);
    if (!d && !entry)
        return em_fail_input(err, "metric: unknown metric `%.64s`%s", func, metric_unknown_hint());
    em_err oe = {0};
    if (metric_check_options(func, options, &oe) < 0) {
        *reason = xasprintf("%s: options.%s", func, oe.msg);
        return 0;
    }
    if (json_is_null(options))
        options = NULL;
    if (!ctx)
        ctx = &none;
    double s = d ? d->fn(ctx, result, expected, options, reason)
                 : run_registry(ctx, func, entry, result, expected, options, reason);
    if (!*reason)
        *reason = xstrdup(func);
    if (s == EVALUATOR_ERROR)
        return METRIC_EVALUATOR_ERROR;
    *score = (s >= 0 && s <= 1) ? s : 0;
    return METRIC_SCORED;
}

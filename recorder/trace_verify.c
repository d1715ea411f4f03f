/* Checking that a trace is the one the writer wrote: the chain of prev
 * hashes (which names the first changed line), the trailer's sha256 and HMAC,
 * and every frame a step refers to. */
#include <string.h>

#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "frames.h"
#include "trace.h"
#include "trace_format.h"

/* Line j's prev does not match line j-1. If line j+1 still links to line j,
 * line j is as written and line j-1 is the changed one; if that link breaks
 * too, line j itself changed (or several did). */
static int chain_error(const trace_scan *at, int j, const char *line_j, size_t n_j, em_err *err)
{
    trace_scan peek = *at;
    const char *next;
    size_t n;
    json_t *obj = NULL;
    if (trace_scan_next(&peek, &next, &n, NULL) <= 0 || trace_line_parse(next, n, j + 1, &obj, NULL) < 0)
        return em_fail_input(err, TRACE_FILE " line %d: prev hash does not match line %d (the trace was changed)",
                             j, j - 1);
    char h[SHA256_HEX_LEN + 1];
    sha256_hex(line_j, n_j, h);
    const char *prev = json_string_value(json_object_get(obj, "prev"));
    bool next_ok = prev && !strcmp(prev, h);
    json_decref(obj);
    if (next_ok)
        return em_fail_input(err, TRACE_FILE " line %d: prev hash does not match line %d (line %d was changed, "
                                  "or lines were removed or inserted there)", j, j - 1, j - 1);
    return em_fail_input(err, TRACE_FILE " line %d: prev hash does not match line %d (line %d was changed, "
                              "or lines were removed, inserted or reordered)", j, j - 1, j);
}

/* Remember the first line naming each frame, in order of appearance. */
static void note_frame(json_t *frames, json_t *step, const char *field, int lineno)
{
    const char *sha = json_string_value(json_object_get(step, field));
    if (sha && !json_object_get(frames, sha))
        json_object_set_new(frames, sha, json_integer(lineno));
}

typedef struct scan_result {
    json_t *trailer; /* the trailer line, or NULL */
    int trailer_line;
    size_t trailer_off; /* bytes before the trailer */
    json_t *frames;     /* sha → first line */
    json_t *trees;      /* accessibility trees: sha → first line */
    trace_schema schema;
} scan_result;

/* Every line: parse, check its link to the previous line, check its fields. */
static int scan_lines(const char *data, size_t len, scan_result *res, em_err *err)
{
    trace_scan scan;
    trace_scan_init(&scan, data, len);
    char expected[SHA256_HEX_LEN + 1] = TRACE_ZERO_HASH;
    const char *line;
    size_t n;
    int r;
    while ((r = trace_scan_next(&scan, &line, &n, err)) > 0) {
        json_t *obj;
        trace_line_type type;
        if (trace_line_parse(line, n, scan.lineno, &obj, err) < 0)
            return -1;
        /* A missing or malformed prev is the schema's to report. */
        const char *prev = json_string_value(json_object_get(obj, "prev"));
        if (scan.lineno > 1 && prev && strcmp(prev, expected)) {
            json_decref(obj);
            return chain_error(&scan, scan.lineno, line, n, err);
        }
        if (trace_schema_check(&res->schema, obj, &type, err) < 0) {
            json_decref(obj);
            return -1;
        }
        if (type == TL_STEP) {
            note_frame(res->frames, obj, "frame_before", scan.lineno);
            note_frame(res->frames, obj, "frame_after", scan.lineno);
            note_frame(res->trees, obj, "a11y_tree", scan.lineno);
        }
        if (type == TL_TRAILER) {
            res->trailer = obj;
            res->trailer_line = scan.lineno;
            res->trailer_off = (size_t)(line - data);
        } else {
            json_decref(obj);
        }
        sha256_hex(line, n, expected);
    }
    if (r == 0 && res->schema.lines == 0)
        return em_fail_input(err, TRACE_FILE " is empty");
    return r;
}

/* The trailer's HMAC against ENVMGR_TRACE_KEY; *status says what was checked. */
static int check_hmac(const char *data, const scan_result *res, const char **status, em_err *err)
{
    const char *mac = json_string_value(json_object_get(res->trailer, "hmac_sha256"));
    int line = res->trailer_line;
    char *key;
    size_t key_len;
    int has_key = trace_key_from_env(&key, &key_len, err);
    if (has_key < 0)
        return -1;
    if (!has_key && !mac) {
        *status = "not checked (" TRACE_KEY_ENV " unset)";
        return 0;
    }
    if (!has_key)
        return em_fail_input(err, TRACE_FILE " line %d: the trailer has an hmac_sha256 but " TRACE_KEY_ENV
                                  " is unset, so the trace cannot be verified: set the key it was written with",
                             line);
    int rc = 0;
    char got[SHA256_HEX_LEN + 1];
    if (!mac)
        rc = em_fail_input(err, TRACE_FILE " line %d: " TRACE_KEY_ENV " is set but the trailer has no "
                                "hmac_sha256: the trace was written without a key, or its HMAC was removed", line);
    else if (hmac_sha256_hex(key, key_len, data, res->trailer_off, got, err) < 0)
        rc = -1;
    else if (!const_time_equal(got, mac))
        rc = em_fail_input(err, TRACE_FILE " line %d: hmac_sha256 does not match: the trace was written with a "
                                "different " TRACE_KEY_ENV ", or it was changed", line);
    trace_key_free(key, key_len);
    *status = "ok";
    return rc;
}

static int check_blobs(const char *dir, const blob_kind *k, json_t *blobs, em_err *err)
{
    const char *sha;
    json_t *line;
    json_object_foreach(blobs, sha, line) {
        _cleanup_free_ char *data = NULL;
        size_t len;
        if (blob_load(dir, k, sha, &data, &len, err) < 0)
            return em_prefix(err, TRACE_FILE " line %d: %s %s: ", (int)json_integer_value(line), k->what, sha);
    }
    return 0;
}

int trace_verify(const char *dir, json_t **report, em_err *err)
{
    *report = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (trace_load(dir, &data, &len, err) < 0)
        return em_prefix(err, "verify `%s`: ", dir);
    scan_result res = {.frames = json_object(), .trees = json_object()};
    const char *hmac_status = NULL;
    int rc = scan_lines(data, len, &res, err);
    if (rc == 0 && !res.trailer)
        rc = em_fail_input(err, TRACE_FILE ": incomplete: no trailer after line %d (the writer stopped before "
                                "trace_close)", res.schema.lines);
    if (rc == 0) {
        char sum[SHA256_HEX_LEN + 1];
        sha256_hex(data, res.trailer_off, sum);
        if (strcmp(sum, json_string_value(json_object_get(res.trailer, "sha256"))))
            rc = em_fail_input(err, TRACE_FILE " line %d: the trailer's sha256 does not match the lines before it "
                                    "(the trace was changed)", res.trailer_line);
    }
    if (rc == 0)
        rc = check_hmac(data, &res, &hmac_status, err);
    if (rc == 0)
        rc = check_blobs(dir, &BLOB_FRAME, res.frames, err);
    if (rc == 0)
        rc = check_blobs(dir, &BLOB_A11Y, res.trees, err);
    if (rc == 0) {
        *report = json_pack("{s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:s, s:b}", "ok", 1, "lines",
                            res.schema.lines, "setups", (int)res.schema.setups, "steps", (int)res.schema.steps,
                            "postconfig", (int)res.schema.postconfig, "egress", (int)res.schema.egress, "frames",
                            (int)json_object_size(res.frames), "chain", "ok", "sha256", "ok", "hmac", hmac_status,
                            "complete", 1);
        if (json_object_size(res.trees))
            json_object_set_new(*report, "a11y_trees", json_integer((json_int_t)json_object_size(res.trees)));
    }
    json_decref(res.trailer);
    json_decref(res.frames);
    json_decref(res.trees);
    return rc < 0 ? em_prefix(err, "verify `%s`: ", dir) : 0;
}

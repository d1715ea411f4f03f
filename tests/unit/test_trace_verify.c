/* trace_verify: a changed, removed, reordered or truncated line is found and
 * named; frames are checked; the HMAC needs the right key. */
#define TRACE_FIXTURE_ONLY
#include "test_trace_fixture.c"

#include <unistd.h>

/* Plain write, no fsync: these tests rewrite the file thousands of times. */
static void put(const char *dir, const char *data, size_t len)
{
    _cleanup_free_ char *path = xasprintf("%s/trace.jsonl", dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static int verify(const char *dir, em_err *err)
{
    json_t *report = NULL;
    em_err_clear(err);
    int rc = trace_verify(dir, &report, err);
    CU_ASSERT((rc == 0) == (report != NULL));
    json_decref(report);
    if (rc < 0)
        CU_ASSERT(strchr(err->msg, '\n') == NULL); /* one-line messages */
    return rc;
}

/* Whether msg names line k: "line k" not followed by another digit. */
static bool names_line(const char *msg, int k)
{
    char want[32];
    snprintf(want, sizeof want, "line %d", k);
    for (const char *p = strstr(msg, want); p; p = strstr(p + 1, want)) {
        char next = p[strlen(want)];
        if (next < '0' || next > '9')
            return true;
    }
    return false;
}

/* Every single byte of every line, flipped in turn: verify fails and names that line. */
static void test_flip_every_byte(void)
{
    _cleanup_free_ char *dir = fx_path("flip");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    size_t len;
    _cleanup_free_ char *orig = fx_read(dir, "trace.jsonl", &len);
    _cleanup_free_ char *copy = xmalloc(len + 1);
    em_err err;
    CU_ASSERT_FATAL(verify(dir, &err) == 0);
    int lines = fx_count_lines(orig), misses = 0;
    for (int k = 1; k <= lines; k++) {
        size_t start = (size_t)fx_line_offset(orig, k);
        size_t end = (size_t)(strchr(orig + start, '\n') - orig); /* the newline belongs to line k */
        for (size_t pos = start; pos <= end; pos++) {
            memcpy(copy, orig, len);
            copy[pos] ^= 0x01;
            put(dir, copy, len);
            if (verify(dir, &err) == 0 || !names_line(err.msg, k)) {
                if (misses++ < 5)
                    fprintf(stderr, "\n    line %d byte %zu: %s", k, pos - start, err.msg);
            }
        }
    }
    CU_ASSERT_EQUAL(misses, 0);
    put(dir, orig, len);
    CU_ASSERT(verify(dir, &err) == 0);
}

/* The message for a changed value in the middle of a line says which line changed. */
static void test_changed_value_message(void)
{
    _cleanup_free_ char *dir = fx_path("changed");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    size_t len;
    _cleanup_free_ char *data = fx_read(dir, "trace.jsonl", &len);
    char *p = strstr(data, "\"agent_ms\":101.0"); /* step 1, line 5 */
    CU_ASSERT_FATAL(p != NULL);
    p[12] = '9';
    put(dir, data, len);
    em_err err;
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 6: prev hash does not match line 5 (line 5 was changed, or lines "
                                   "were removed or inserted there)"));
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
}

static char *without_line(const char *data, int k, size_t *len)
{
    size_t start = (size_t)fx_line_offset(data, k);
    size_t end = (size_t)(strchr(data + start, '\n') - data) + 1;
    *len = strlen(data) - (end - start);
    char *out = xmalloc(*len + 1);
    memcpy(out, data, start);
    memcpy(out + start, data + end, strlen(data) - end + 1);
    return out;
}

static void test_deleted_line(void)
{
    _cleanup_free_ char *dir = fx_path("deleted");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    size_t len, n;
    _cleanup_free_ char *data = fx_read(dir, "trace.jsonl", &len);
    int lines = fx_count_lines(data);
    em_err err;
    for (int k = 1; k <= lines; k++) {
        _cleanup_free_ char *cut = without_line(data, k, &n);
        put(dir, cut, n);
        CU_ASSERT(verify(dir, &err) < 0);
        char want[128];
        if (k == 1)
            snprintf(want, sizeof want, "trace.jsonl line 1: the first line must be the header");
        else if (k == lines)
            snprintf(want, sizeof want, "incomplete: no trailer after line 8");
        else
            snprintf(want, sizeof want, "trace.jsonl line %d: prev hash does not match line %d", k, k - 1);
        CU_ASSERT(fx_contains(err.msg, want));
    }
}

static void test_reordered_lines(void)
{
    _cleanup_free_ char *dir = fx_path("reorder");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    size_t len;
    _cleanup_free_ char *data = fx_read(dir, "trace.jsonl", &len);
    /* Swap lines 4 and 5 (steps 0 and 1). */
    size_t s4 = (size_t)fx_line_offset(data, 4), s5 = (size_t)fx_line_offset(data, 5),
           s6 = (size_t)fx_line_offset(data, 6);
    _cleanup_free_ char *out = xmalloc(len + 1);
    memcpy(out, data, s4);
    memcpy(out + s4, data + s5, s6 - s5);
    memcpy(out + s4 + (s6 - s5), data + s4, s5 - s4);
    memcpy(out + s6, data + s6, len - s6);
    put(dir, out, len);
    em_err err;
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 4: prev hash does not match line 3 (line 4 was changed, or lines "
                                   "were removed, inserted or reordered)"));
    /* The reader, which does not hash, still sees the step indices out of order. */
    trace *t;
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 4: step.index: 1, expected 0"));
}

static void test_truncated(void)
{
    _cleanup_free_ char *dir = fx_path("truncated");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    size_t len;
    _cleanup_free_ char *data = fx_read(dir, "trace.jsonl", &len);
    em_err err;
    trace *t;
    /* Mid-line: both reader and verifier refuse, naming the cut line. */
    size_t mid = (size_t)fx_line_offset(data, 5) + 40;
    put(dir, data, mid);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 5: cut off (no newline at the end of the file)"));
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 5: cut off"));
    /* On a line boundary: readable, incomplete; never verified. */
    put(dir, data, (size_t)fx_line_offset(data, 5));
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    CU_ASSERT(!trace_complete(t));
    CU_ASSERT_EQUAL(trace_n_steps(t), 1);
    trace_free(t);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "incomplete: no trailer after line 4"));
    /* Nothing at all. */
    put(dir, data, 0);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl is empty"));
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl is empty"));
    /* A line after the trailer. */
    _cleanup_free_ char *more = xasprintf("%s{\"type\":\"egress\"}\n", data);
    put(dir, more, strlen(more));
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(names_line(err.msg, 10));
}

/* The trailer: its own fields are checked against the lines before it. */
static void test_trailer_fields(void)
{
    _cleanup_free_ char *dir = fx_path("trailer");
    const char *lines[] = {FX_HEADER, "{\"type\":\"egress\"}"};
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 2, true) == 0);
    size_t len;
    _cleanup_free_ char *data = fx_read(dir, "trace.jsonl", &len);
    em_err err;
    CU_ASSERT_FATAL(verify(dir, &err) == 0);
    /* A trailer whose sha256 is some other (valid) hash. */
    char *sum = strstr(data, "\"sha256\":\"") + 10;
    char saved = sum[0];
    sum[0] = sum[0] == 'a' ? 'b' : 'a';
    put(dir, data, len);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 3: the trailer's sha256 does not match the lines before it"));
    sum[0] = saved;
    /* A wrong line count. */
    char *lines_field = strstr(data, "\"lines\":2");
    lines_field[8] = '5';
    put(dir, data, len);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 3: trailer.lines: 5 but 2 lines come before it"));
}

static void test_frames_checked(void)
{
    _cleanup_free_ char *dir = fx_path("frames");
    CU_ASSERT_FATAL(fx_write_trace(dir, 2) == 0);
    trace *t;
    em_err err;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    _cleanup_free_ char *sha = xstrdup(json_string_value(json_object_get(trace_step(t, 1), "frame_after")));
    trace_free(t);
    _cleanup_free_ char *path = xasprintf("%s/frames/%s.png", dir, sha);
    _cleanup_free_ char *moved = xasprintf("%s.moved", path);
    size_t len;
    _cleanup_free_ char *name = xasprintf("frames/%s.png", sha);
    _cleanup_free_ char *png = fx_read(dir, name, &len);

    /* Changed content. */
    png[len / 2] ^= 0x40;
    CU_ASSERT(fx_write(dir, name, png, len) == 0);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 5: frame "));
    CU_ASSERT(fx_contains(err.msg, "content does not match its name (the frame was changed)"));
    png[len / 2] ^= 0x40;
    CU_ASSERT(fx_write(dir, name, png, len) == 0);
    /* Missing. */
    CU_ASSERT(rename(path, moved) == 0);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, ".png` is missing"));
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    /* A symlink to the right bytes is still refused: frames are plain files. */
    CU_ASSERT(symlink(moved, path) == 0);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is a symbolic link (refused)"));
    CU_ASSERT(unlink(path) == 0);
    /* A FIFO does not hang the verifier. */
    CU_ASSERT(mkfifo(path, 0644) == 0);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is not a regular file"));
    CU_ASSERT(unlink(path) == 0);
    CU_ASSERT(rename(moved, path) == 0);
    CU_ASSERT(verify(dir, &err) == 0);
}

static void test_hmac(void)
{
    _cleanup_free_ char *dir = fx_path("hmac");
    setenv("ENVMGR_TRACE_KEY", "correct horse battery staple", 1);
    CU_ASSERT_FATAL(fx_write_trace(dir, 2) == 0);
    em_err err;
    json_t *report = NULL;
    CU_ASSERT_FATAL(trace_verify(dir, &report, &err) == 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(report, "hmac")), "ok");
    json_decref(report);
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    const char *mac = json_string_value(json_object_get(trace_trailer(t), "hmac_sha256"));
    CU_ASSERT(mac && strlen(mac) == 64);
    trace_free(t);

    setenv("ENVMGR_TRACE_KEY", "correct horse battery stapler", 1);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 8: hmac_sha256 does not match: the trace was written with a "
                                   "different ENVMGR_TRACE_KEY, or it was changed"));
    unsetenv("ENVMGR_TRACE_KEY");
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "the trailer has an hmac_sha256 but ENVMGR_TRACE_KEY is unset"));
    setenv("ENVMGR_TRACE_KEY", "", 1);
    CU_ASSERT(verify(dir, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "ENVMGR_TRACE_KEY is set but empty"));

    /* Any bytes, up to 4 KiB. */
    _cleanup_free_ char *dir2 = fx_path("hmac-bigkey");
    _cleanup_free_ char *big = xmalloc(4097);
    for (int i = 0; i < 4096; i++)
        big[i] = (char)(1 + i % 255);
    big[4096] = '\0';
    setenv("ENVMGR_TRACE_KEY", big, 1);
    CU_ASSERT_FATAL(fx_write_trace(dir2, 1) == 0);
    CU_ASSERT(verify(dir2, &err) == 0);
    big[4095] ^= 1;
    setenv("ENVMGR_TRACE_KEY", big, 1);
    CU_ASSERT(verify(dir2, &err) < 0);

    /* Someone rewrites a step and re-chains every line and the sha256 (easy
     * without the key) and keeps or drops the HMAC: the key catches both. */
    setenv("ENVMGR_TRACE_KEY", "k", 1);
    _cleanup_free_ char *dir3 = fx_path("hmac-forged");
    CU_ASSERT_FATAL(fx_write_trace(dir3, 1) == 0);
    size_t len;
    _cleanup_free_ char *data = fx_read(dir3, "trace.jsonl", &len);
    int n = fx_count_lines(data);
    const char **lines = xcalloc((size_t)n, sizeof *lines);
    long *offsets = xcalloc((size_t)n + 1, sizeof *offsets);
    for (int k = 1; k <= n; k++)
        offsets[k] = fx_line_offset(data, k);
    for (int k = 1; k < n; k++) { /* every line but the trailer, without prev */
        char *line = data + offsets[k];
        *strchr(line, '\n') = '\0';
        char *prev = strstr(line, ",\"prev\":\"");
        strcpy(prev, "}");
        lines[k - 1] = line;
    }
    char *score = strstr(lines[n - 2], "\"score\":1.0");
    CU_ASSERT_FATAL(score != NULL);
    score[8] = '0'; /* the evaluation now says 0.0 */
    CU_ASSERT_FATAL(fx_write_chained(dir3, lines, n - 1, true) == 0);
    CU_ASSERT(verify(dir3, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "ENVMGR_TRACE_KEY is set but the trailer has no hmac_sha256"));
    unsetenv("ENVMGR_TRACE_KEY");
    CU_ASSERT(verify(dir3, &err) == 0); /* without the key, nothing tells it apart: that is what the key is for */
    free(lines);
    free(offsets);
}

static CU_TestInfo tests[] = {
    {"flip every byte: verify names the line", test_flip_every_byte},
    {"changed value: message", test_changed_value_message},
    {"deleted line", test_deleted_line},
    {"reordered lines", test_reordered_lines},
    {"truncated trace", test_truncated},
    {"trailer fields", test_trailer_fields},
    {"frames checked", test_frames_checked},
    {"hmac", test_hmac},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("ENVMGR_TRACE_KEY");
    return run_suite("trace_verify", tests);
}

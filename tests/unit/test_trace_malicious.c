/* Hostile trace directories: the reader and the verifier refuse each with a
 * one-line message naming the line, never touch a path outside the trace,
 * never hang and never read more than the limits allow. */
#define TRACE_FIXTURE_ONLY
#include "test_trace_fixture.c"

#include <fcntl.h>
#include <unistd.h>

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define STEP_HEAD "{\"type\":\"step\",\"index\":0,\"action\":{\"action_type\":\"CLICK\",\"x\":1,\"y\":2},"
#define STEP_TAIL "\"source\":\"computer_13\",\"agent_ms\":1,\"action_ms\":2,\"t\":0.5"
#define GOOD_STEP STEP_HEAD STEP_TAIL ",\"frame_before\":\"" SHA_A "\",\"frame_after\":\"" SHA_A "\"}"

/* Both trace_read and trace_verify refuse the chained lines with a one-line message containing msg. */
static void expect_refused(const char *const *lines, int n, const char *msg)
{
    _cleanup_free_ char *dir = fx_path("evil");
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, n, true) == 0);
    em_err err = {0};
    trace *t = NULL;
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT(fx_contains(err.msg, msg));
    CU_ASSERT(strchr(err.msg, '\n') == NULL);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    em_err_clear(&err);
    json_t *report = NULL;
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT_PTR_NULL(report);
    CU_ASSERT(fx_contains(err.msg, msg));
    CU_ASSERT(strchr(err.msg, '\n') == NULL);
}

static void refused_step(const char *step, const char *msg)
{
    const char *lines[] = {FX_HEADER, step};
    expect_refused(lines, 2, msg);
}

static void test_frame_names(void)
{
    refused_step(STEP_HEAD STEP_TAIL ",\"frame_before\":\"../../../etc/passwd\",\"frame_after\":\"" SHA_A "\"}",
                 "trace.jsonl line 2: step.frame_before: expected 64 lowercase hex digits (a sha256)");
    refused_step(STEP_HEAD STEP_TAIL ",\"frame_before\":\"" SHA_A "\",\"frame_after\":\"../" SHA_A "\"}",
                 "step.frame_after: expected 64 lowercase hex digits");
    refused_step(STEP_HEAD STEP_TAIL ",\"frame_before\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\","
                                     "\"frame_after\":\"" SHA_A "\"}",
                 "step.frame_before: expected 64 lowercase hex digits");
    refused_step(STEP_HEAD STEP_TAIL ",\"frame_before\":\"" SHA_A "/\",\"frame_after\":\"" SHA_A "\"}",
                 "step.frame_before: expected 64 lowercase hex digits");
    refused_step(STEP_HEAD STEP_TAIL ",\"frame_before\":\"/etc/passwd\",\"frame_after\":\"" SHA_A "\"}",
                 "step.frame_before: expected 64 lowercase hex digits");
    refused_step(STEP_HEAD STEP_TAIL ",\"frame_before\":7,\"frame_after\":\"" SHA_A "\"}",
                 "step.frame_before: expected a string, got integer");
    /* A well-formed name whose file is not there: read is fine (no frames are
     * opened), verify names the line. */
    _cleanup_free_ char *dir = fx_path("noframe");
    const char *lines[] = {FX_HEADER, GOOD_STEP};
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 2, true) == 0);
    em_err err = {0};
    trace *t;
    CU_ASSERT(trace_read(dir, &t, &err) == 0);
    trace_free(t);
    json_t *report = NULL;
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl line 2: frame " SHA_A ": `"));
    CU_ASSERT(fx_contains(err.msg, "/frames/" SHA_A ".png` is missing"));
}

static void test_wrong_types(void)
{
    static const struct {
        const char *line, *msg;
    } steps[] = {
        {"{\"type\":\"step\",\"index\":\"0\"}", "trace.jsonl line 2: step.index: expected an integer"},
        {"{\"type\":\"step\",\"index\":0.0}", "trace.jsonl line 2: step.index: expected an integer, got a real"},
        {"{\"type\":\"step\",\"index\":-1}", "step.index: -1 is out of range (0..100000)"},
        {"{\"type\":\"step\",\"index\":99999999999999999999}", "not valid JSON"},
        {"{\"type\":\"step\",\"index\":0,\"action\":\"CLICK\"}", "step.action: expected an object"},
        {"{\"type\":\"step\",\"index\":0,\"action\":{\"action_type\":5}}", "step.action.action_type: expected a string"},
        {"{\"type\":\"step\",\"index\":0,\"action\":{\"action_type\":\"\\u001b]0;pwned\\u0007\"}}",
         "step.action.action_type: holds a control character"},
        {"{\"type\":\"step\",\"index\":0,\"action\":{\"action_type\":\"\\u0085\"}}",
         "step.action.action_type: holds a control character"},
        {STEP_HEAD "\"source\":\"computer_13\",\"agent_ms\":\"1\"}", "step.agent_ms: expected a number"},
        {STEP_HEAD "\"source\":\"computer_13\",\"agent_ms\":1e300}", "step.agent_ms: 1e+300 is out of range (>= 0 and <= 1e+10)"},
        {STEP_HEAD "\"source\":\"computer_13\",\"agent_ms\":1,\"action_ms\":null}", "step.action_ms: expected a number"},
        {STEP_HEAD STEP_TAIL ",\"error\":7}", "step.error: expected a string"},
        {"{\"type\":7}", "trace.jsonl line 2: no \"type\" string"},
        {"{\"type\":\"Step\"}", "trace.jsonl line 2: unknown line type"},
        {"{\"type\":\"setup\",\"index\":0,\"step\":[],\"duration_ms\":1,\"ok\":true}", "setup.step: expected an object"},
        {"{\"type\":\"setup\",\"index\":0,\"step\":{},\"duration_ms\":1,\"ok\":\"yes\"}", "setup.ok: expected true or false"},
        {"{\"type\":\"setup\",\"index\":1,\"step\":{},\"duration_ms\":1,\"ok\":true}",
         "setup.index: 1, expected 0 (setup lines count up from 0)"},
        {"{\"type\":\"evaluation\",\"score\":\"1\",\"reason\":\"\",\"exit_cause\":\"done\"}",
         "evaluation.score: expected a number"},
        {"{\"type\":\"evaluation\",\"score\":-0.5,\"reason\":\"\",\"exit_cause\":\"done\"}", "evaluation.score: -0.5 is out of range (>= 0 and <= 1)"},
        {"{\"type\":\"evaluation\",\"score\":1,\"exit_cause\":\"done\"}", "evaluation.reason: missing"},
        {"{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"done\",\"artifacts\":[]}",
         "evaluation.artifacts: expected an object"},
        {"{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"done\",\"artifacts\":{\"a\\u0001\":\"" SHA_A
         "\"}}",
         "evaluation.artifacts.<name>: holds a control character"},
        {"{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"DONE\"}", "evaluation.exit_cause: must be one of"},
    };
    for (size_t i = 0; i < ARRAY_LEN(steps); i++)
        refused_step(steps[i].line, steps[i].msg);

    static const struct {
        const char *field, *msg;
    } header[] = {
        {"\"format\":3", "trace.jsonl line 1: trace format 3; this envmgr reads formats 1 to 2"},
        {"\"format\":0", "trace.jsonl line 1: trace format 0; this envmgr reads formats 1 to 2"},
        {"\"format\":\"1\"", "header.format: expected an integer"},
        {"\"screen\":{\"width\":64}", "header.screen.height: missing"},
        {"\"screen\":{\"width\":100000,\"height\":1}", "header.screen.width: 100000 is out of range (1..16384)"},
        {"\"started\":\"yesterday\"", "header.started: must be an ISO 8601 timestamp"},
        {"\"accel\":\"KVM\"", "header.accel: must be \"tcg\" or \"kvm\""},
        {"\"prev\":\"" SHA_A "\"", "header.prev: must be 64 zeros on the first line"},
    };
    for (size_t i = 0; i < ARRAY_LEN(header); i++) {
        /* The header with one field replaced: JSON objects keep the last key
         * only when duplicates are allowed, so rebuild it. */
        json_t *h = json_loads(FX_HEADER, 0, NULL);
        _cleanup_free_ char *obj = xasprintf("{%s}", header[i].field);
        json_t *patch = json_loads(obj, 0, NULL);
        CU_ASSERT_FATAL(h && patch);
        if (!strcmp(header[i].field, "\"screen\":{\"width\":64}"))
            json_object_del(h, "screen");
        json_object_update(h, patch);
        _cleanup_free_ char *text = json_dumps(h, JSON_COMPACT);
        json_decref(h);
        json_decref(patch);
        const char *lines[] = {text};
        if (strstr(header[i].field, "prev")) {
            /* fx_write_chained sets prev itself: write this one by hand. */
            _cleanup_free_ char *dir = fx_path("evil-prev");
            _cleanup_free_ char *line = xasprintf("%s\n", text);
            CU_ASSERT(fx_write(dir, "trace.jsonl", line, strlen(line)) == 0);
            em_err err = {0};
            trace *t = NULL;
            CU_ASSERT(trace_read(dir, &t, &err) < 0);
            CU_ASSERT(fx_contains(err.msg, header[i].msg));
            continue;
        }
        expect_refused(lines, 1, header[i].msg);
    }
}

static void test_not_json(void)
{
    static const struct {
        const char *line, *msg;
    } cases[] = {
        {"not json", "trace.jsonl line 2: not valid JSON: "},
        {"[1,2,3]", "trace.jsonl line 2: not a JSON object"},
        {"\"string\"", "trace.jsonl line 2: not valid JSON: "},
        {"", "trace.jsonl line 2: empty line"},
        {"{\"type\":\"egress\",\"type\":\"egress\"}", "trace.jsonl line 2: not valid JSON: duplicate object key"},
        {"{\"type\":\"egress\",\"x\":\"a\\u0000b\"}", "trace.jsonl line 2: not valid JSON: "},
        {"{\"type\":\"egress\",\"x\":\"\xff\xfe\"}", "trace.jsonl line 2: not valid JSON: "},
        {"{\"type\":\"egress\"} {}", "trace.jsonl line 2: not valid JSON: "},
        {"{\"type\":\"egress\",\"x\":1}\x1b[2J", "trace.jsonl line 2: not valid JSON: "},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const char *lines[] = {FX_HEADER, cases[i].line};
        expect_refused(lines, 2, cases[i].msg);
    }
    /* jansson quotes the text near an error; a terminal escape there comes out as '?'. */
    _cleanup_free_ char *dir = fx_path("escape");
    const char *lines[] = {FX_HEADER, "\x1b[31mred"};
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 2, false) == 0);
    em_err err = {0};
    trace *t;
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(strchr(err.msg, '\x1b') == NULL);

    /* Nesting far deeper than any trace needs: an error, not a stack overflow. */
    size_t depth = 100000;
    char *deep = xmalloc(2 * depth + 64);
    strcpy(deep, "{\"type\":\"egress\",\"x\":");
    size_t n = strlen(deep);
    memset(deep + n, '[', depth);
    memset(deep + n + depth, ']', depth);
    strcpy(deep + n + 2 * depth, "}");
    const char *dl[] = {FX_HEADER, deep};
    expect_refused(dl, 2, "trace.jsonl line 2: not valid JSON: maximum parsing depth reached");
    free(deep);
}

static void test_order(void)
{
    const char *setup = "{\"type\":\"setup\",\"index\":0,\"step\":{},\"duration_ms\":1,\"ok\":true}";
    const char *eval = "{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"done\"}";
    const char *a[] = {GOOD_STEP};
    expect_refused(a, 1, "trace.jsonl line 1: the first line must be the header");
    const char *b[] = {FX_HEADER, FX_HEADER};
    expect_refused(b, 2, "trace.jsonl line 2: a second header");
    const char *c[] = {FX_HEADER, GOOD_STEP, setup};
    expect_refused(c, 3, "trace.jsonl line 3: a setup line after step lines");
    const char *d[] = {FX_HEADER, eval, GOOD_STEP};
    expect_refused(d, 3, "trace.jsonl line 3: a step line after the evaluation");
    const char *e[] = {FX_HEADER, eval, eval};
    expect_refused(e, 3, "trace.jsonl line 3: a second evaluation line");
    const char *f[] = {FX_HEADER, GOOD_STEP, GOOD_STEP};
    expect_refused(f, 3, "trace.jsonl line 3: step.index: 0, expected 1");
    const char *g[] = {FX_HEADER, "{\"type\":\"trailer\",\"lines\":1,\"sha256\":\"" SHA_A "\",\"complete\":true}",
                       "{\"type\":\"egress\"}"};
    expect_refused(g, 3, "trace.jsonl line 3: a line after the trailer");
    const char *h[] = {FX_HEADER, "{\"type\":\"trailer\",\"lines\":1,\"sha256\":\"" SHA_A "\",\"complete\":false}"};
    expect_refused(h, 2, "trace.jsonl line 2: trailer.complete: must be true");
}

/* Postconfig lines (format 2): after the setups and steps (either may be absent), before the
 * evaluation, counted from 0; nowhere else, and not in a format 1 trace. */
static void test_postconfig_order(void)
{
    const char *setup = "{\"type\":\"setup\",\"index\":0,\"step\":{},\"duration_ms\":1,\"ok\":true}";
    const char *post0 = "{\"type\":\"postconfig\",\"index\":0,\"step\":{},\"duration_ms\":1,\"ok\":true}";
    const char *post1 = "{\"type\":\"postconfig\",\"index\":1,\"step\":{},\"duration_ms\":1,\"ok\":false,"
                        "\"error\":\"x\"}";
    const char *eval = "{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"done\"}";
    const char *egress = "{\"type\":\"egress\"}";
    /* accepted: after steps; with no step at all; with egress between them */
    const char *const good[][6] = {{FX_HEADER2, setup, GOOD_STEP, post0, post1, eval},
                                   {FX_HEADER2, setup, post0, egress, post1, eval},
                                   {FX_HEADER2, post0, eval, egress, NULL}};
    const int ngood[] = {6, 6, 4};
    for (size_t i = 0; i < ARRAY_LEN(good); i++) {
        _cleanup_free_ char *dir = fx_path("postconfig-ok");
        CU_ASSERT_FATAL(fx_write_chained(dir, good[i], ngood[i], true) == 0);
        em_err err = {0};
        trace *t = NULL;
        CU_ASSERT(trace_read(dir, &t, &err) == 0);
        CU_ASSERT(t && trace_n_postconfig(t) == (i == 2 ? 1u : 2u));
        trace_free(t);
        json_t *report = NULL;
        CU_ASSERT(i == 0 || trace_verify(dir, &report, &err) == 0); /* the first names frames it lacks */
        json_decref(report);
    }
    /* refused */
    const char *a[] = {FX_HEADER2, GOOD_STEP, post0, GOOD_STEP};
    expect_refused(a, 4, "trace.jsonl line 4: a step line after postconfig lines");
    const char *b[] = {FX_HEADER2, post0, setup};
    expect_refused(b, 3, "trace.jsonl line 3: a setup line after postconfig lines");
    const char *c[] = {FX_HEADER2, GOOD_STEP, eval, post0};
    expect_refused(c, 4, "trace.jsonl line 4: a postconfig line after the evaluation");
    const char *d[] = {FX_HEADER2, GOOD_STEP, post1};
    expect_refused(d, 3, "trace.jsonl line 3: postconfig.index: 1, expected 0 (postconfig lines count up from 0)");
    const char *e[] = {FX_HEADER, GOOD_STEP, post0};
    expect_refused(e, 3, "trace.jsonl line 3: a postconfig line in a format 1 trace (they came with format 2)");
    const char *f[] = {FX_HEADER2, "{\"type\":\"postconfig\",\"index\":0,\"step\":{},\"duration_ms\":1,\"ok\":\"yes\"}"};
    expect_refused(f, 2, "trace.jsonl line 2: postconfig.ok: expected true or false");
    const char *g[] = {FX_HEADER2, "{\"type\":\"postconfig\",\"index\":0,\"step\":{},\"ok\":true}"};
    expect_refused(g, 2, "trace.jsonl line 2: postconfig.duration_ms: missing");
    /* A format 1 trace as envmgr wrote them (no postconfig lines) still reads and verifies. */
    _cleanup_free_ char *dir = fx_path("format1");
    const char *old[] = {FX_HEADER, setup, GOOD_STEP, eval};
    CU_ASSERT_FATAL(fx_write_chained(dir, old, 4, true) == 0);
    em_err err = {0};
    trace *t = NULL;
    CU_ASSERT(trace_read(dir, &t, &err) == 0);
    trace_free(t);
}

/* Limits: a line of exactly 1 MiB is fine, one byte more is refused without parsing. */
static void test_long_lines(void)
{
    const size_t max = (size_t)1 << 20;
    const char *pre = "{\"type\":\"egress\",\"blob\":\"";
    char *line = xmalloc(max + 2);
    size_t fixed = strlen(pre) + strlen("\",\"prev\":\"" SHA_A "\"}");
    strcpy(line, pre);
    memset(line + strlen(pre), 'x', max - fixed);
    strcpy(line + strlen(pre) + (max - fixed), "\"}");
    const char *lines[] = {FX_HEADER, line};
    _cleanup_free_ char *dir = fx_path("long");
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 2, true) == 0);
    em_err err = {0};
    json_t *report = NULL;
    CU_ASSERT(trace_verify(dir, &report, &err) == 0);
    json_decref(report);
    /* One more byte. */
    size_t at = strlen(pre);
    memmove(line + at + 1, line + at, strlen(line + at) + 1);
    line[at] = 'x';
    expect_refused(lines, 2, "trace.jsonl line 2: longer than the limit of 1048576 bytes");
    free(line);

    /* The writer refuses to write what the reader would refuse. */
    _cleanup_free_ char *wdir = fx_path("long-writer");
    trace_writer *w = fx_write_open(wdir, 0, false);
    CU_ASSERT_FATAL(w != NULL);
    char *blob = xmalloc(max + 1);
    memset(blob, 'y', max);
    blob[max] = '\0';
    json_t *big = json_pack("{s:s, s:s}", "type", "egress", "blob", blob);
    free(blob);
    CU_ASSERT(trace_append(w, big, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "longer than the limit of 1048576"));
    json_decref(big);
    CU_ASSERT(trace_close(w, &err) == 0);
    CU_ASSERT(trace_verify(wdir, &report, &err) == 0);
    json_decref(report);
}

static void test_too_many_lines(void)
{
    int n = 100001; /* header + 100000 egress lines; with the trailer 100002 */
    const char **lines = xcalloc((size_t)n, sizeof *lines);
    lines[0] = FX_HEADER;
    for (int i = 1; i < n; i++)
        lines[i] = "{\"type\":\"egress\"}";
    _cleanup_free_ char *dir = fx_path("many");
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, n, false) == 0);
    em_err err = {0};
    trace *t;
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl: more than 100000 lines"));
    json_t *report = NULL;
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl: more than 100000 lines"));
    /* Exactly at the limit (header + 99998 + trailer) is fine. */
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 99999, true) == 0);
    CU_ASSERT(trace_read(dir, &t, &err) == 0);
    CU_ASSERT_EQUAL(trace_n_egress(t), 99998);
    trace_free(t);
    free(lines);
}

/* trace.jsonl that is not a plain, reasonably sized file. */
static void test_odd_files(void)
{
    em_err err = {0};
    trace *t = NULL;
    json_t *report = NULL;
    _cleanup_free_ char *dir = fx_path("odd");
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "No such file or directory"));
    CU_ASSERT_FATAL(mkdir(dir, 0755) == 0);
    _cleanup_free_ char *path = xasprintf("%s/trace.jsonl", dir);

    CU_ASSERT(mkfifo(path, 0644) == 0); /* would block a plain open() */
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is not a regular file"));
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT(unlink(path) == 0);

    CU_ASSERT(mkdir(path, 0755) == 0);
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is not a regular file"));
    CU_ASSERT(rmdir(path) == 0);

    CU_ASSERT(symlink("/etc/passwd", path) == 0);
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is a symbolic link (refused)"));
    CU_ASSERT(unlink(path) == 0);

    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644); /* sparse: 300 MiB without the disk space */
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(ftruncate(fd, (off_t)300 << 20) == 0);
    close(fd);
    CU_ASSERT(trace_read(dir, &t, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is 314572800 bytes, more than the limit of 268435456"));
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "more than the limit"));
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NULL(report);
}

static CU_TestInfo tests[] = {
    {"frame names: no path traversal", test_frame_names},
    {"wrong types", test_wrong_types},
    {"not JSON", test_not_json},
    {"line order", test_order},
    {"postconfig line order", test_postconfig_order},
    {"long lines", test_long_lines},
    {"too many lines", test_too_many_lines},
    {"odd files", test_odd_files},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("ENVMGR_TRACE_KEY");
    return run_suite("trace_malicious", tests);
}

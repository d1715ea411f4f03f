/* Trace writer and reader: round trip, incomplete traces, and everything the
 * writer refuses so that it never writes a trace the reader would reject. */
#define TRACE_FIXTURE_ONLY
#include "test_trace_fixture.c"

static void test_round_trip(void)
{
    _cleanup_free_ char *dir = fx_path("roundtrip");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    em_err err = {0};
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    CU_ASSERT_STRING_EQUAL(trace_dir(t), dir);
    json_t *h = trace_header(t);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "type")), "header");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(h, "format")), TRACE_FORMAT);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "task_id")), "demo-task");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "task_sha256")), TASK_SHA);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "image_manifest_sha256")), IMAGE_SHA);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "accel")), "tcg");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "envmgr_version")), ENVMGR_VERSION);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "agent")), "unit-test"); /* extra field kept */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(h, "screen"), "width")), SCREEN_W);
    CU_ASSERT(json_is_false(json_object_get(h, "unsafe_open_network")));
    const char *started = json_string_value(json_object_get(h, "started"));
    CU_ASSERT(started && strlen(started) == 24 && started[10] == 'T' && started[23] == 'Z');
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(h, "prev")),
                           "0000000000000000000000000000000000000000000000000000000000000000");

    CU_ASSERT_EQUAL(trace_n_setups(t), 2);
    CU_ASSERT(json_is_true(json_object_get(trace_setup(t, 1), "ok")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(trace_setup(t, 1), "index")), 1);
    CU_ASSERT_EQUAL(trace_n_steps(t), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *s = trace_step(t, i);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "index")), (json_int_t)i);
        CU_ASSERT(json_is_number(json_object_get(s, "t")));
        CU_ASSERT_EQUAL(json_number_value(json_object_get(s, "agent_ms")), 100.0 + (double)i);
        CU_ASSERT(i == 0 || !strcmp(json_string_value(json_object_get(s, "frame_before")),
                                    json_string_value(json_object_get(trace_step(t, i - 1), "frame_after"))));
    }
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(trace_step(t, 1), "action"), "text")),
                           "hello <script>alert(1)</script>");
    CU_ASSERT_PTR_NULL(trace_step(t, 3));
    CU_ASSERT_EQUAL(trace_n_egress(t), 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(trace_egress(t, 0), "host")), "example.org");
    json_t *e = trace_evaluation(t);
    CU_ASSERT_FATAL(e != NULL);
    CU_ASSERT_EQUAL(json_number_value(json_object_get(e, "score")), 1.0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(e, "exit_cause")), "done");
    CU_ASSERT(trace_complete(t));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(trace_trailer(t), "lines")), 8);
    CU_ASSERT_PTR_NULL(json_object_get(trace_trailer(t), "hmac_sha256"));
    CU_ASSERT_EQUAL(trace_n_lines(t), 9);
    trace_free(t);

    json_t *report;
    CU_ASSERT_FATAL(trace_verify(dir, &report, &err) == 0);
    CU_ASSERT(json_is_true(json_object_get(report, "ok")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(report, "steps")), 3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(report, "frames")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(report, "lines")), 9);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(report, "hmac")), "not checked (ENVMGR_TRACE_KEY unset)");
    json_decref(report);
}

/* Every line is on disk as soon as trace_append returns: a writer that dies
 * (abandon) leaves a trace that reads back, marked incomplete. */
static void test_incomplete_is_readable(void)
{
    _cleanup_free_ char *dir = fx_path("incomplete");
    trace_writer *w = fx_write_open(dir, 2, false);
    CU_ASSERT_FATAL(w != NULL);
    em_err err = {0};
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0); /* while the writer is still open */
    CU_ASSERT(!trace_complete(t));
    CU_ASSERT_EQUAL(trace_n_steps(t), 2);
    trace_free(t);
    trace_abandon(w);

    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    CU_ASSERT(!trace_complete(t));
    CU_ASSERT_PTR_NULL(trace_trailer(t));
    CU_ASSERT_PTR_NULL(trace_evaluation(t));
    CU_ASSERT_EQUAL(trace_n_steps(t), 2);
    CU_ASSERT_EQUAL(trace_n_lines(t), 1 + 2 + 2 + 1);
    trace_free(t);

    json_t *report = NULL;
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT_PTR_NULL(report);
    CU_ASSERT(fx_contains(err.msg, "trace.jsonl: incomplete: no trailer after line 6"));
}

static void test_refuses_overwrite(void)
{
    _cleanup_free_ char *dir = fx_path("overwrite");
    CU_ASSERT_FATAL(fx_write_trace(dir, 1) == 0);
    size_t len1, len2;
    _cleanup_free_ char *before = fx_read(dir, "trace.jsonl", &len1);
    em_err err = {0};
    trace_writer *w = NULL;
    json_t *h = fx_header_fields();
    CU_ASSERT(trace_open(dir, h, &w, &err) < 0);
    json_decref(h);
    CU_ASSERT_PTR_NULL(w);
    CU_ASSERT(fx_contains(err.msg, "already holds a trace; refusing to overwrite it"));
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    _cleanup_free_ char *after = fx_read(dir, "trace.jsonl", &len2);
    CU_ASSERT(len1 == len2 && !memcmp(before, after, len1));
}

/* A bad header is refused before anything is created. */
static void test_bad_header(void)
{
    static const struct {
        const char *field, *json, *msg;
    } cases[] = {
        {"task_id", NULL, "header.task_id: missing"},
        {"task_id", "\"\"", "header.task_id: empty"},
        {"task_id", "\"a\\u001b[31mb\"", "header.task_id: holds a control character"},
        {"task_sha256", "\"abc\"", "header.task_sha256: expected 64 lowercase hex digits"},
        {"image_manifest_sha256", NULL, "header.image_manifest_sha256: missing"},
        {"accel", "\"xen\"", "header.accel: must be \"tcg\" or \"kvm\""},
        {"screen", "{\"width\":0,\"height\":10}", "header.screen.width: 0 is out of range (1..16384)"},
        {"screen", "[1,2]", "header.screen: expected an object"},
        {"unsafe_open_network", "1", "header.unsafe_open_network: expected true or false"},
        {"prev", "\"00\"", "header field `prev` is set by the writer"},
        {"format", "2", "header field `format` is set by the writer"},
        {"started", "\"now\"", "header field `started` is set by the writer"},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        _cleanup_free_ char *dir = fx_path("badheader");
        json_t *h = fx_header_fields();
        if (cases[i].json)
            json_object_set_new(h, cases[i].field, json_loads(cases[i].json, JSON_DECODE_ANY, NULL));
        else
            json_object_del(h, cases[i].field);
        em_err err = {0};
        trace_writer *w = NULL;
        CU_ASSERT(trace_open(dir, h, &w, &err) < 0);
        CU_ASSERT(fx_contains(err.msg, cases[i].msg));
        CU_ASSERT_PTR_NULL(w);
        struct stat st;
        CU_ASSERT(stat(dir, &st) < 0); /* nothing created */
        json_decref(h);
    }
    em_err err = {0};
    trace_writer *w = NULL;
    _cleanup_free_ char *dir = fx_path("nullheader");
    CU_ASSERT(trace_open(dir, NULL, &w, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "header.task_id: missing"));
    json_t *arr = json_array();
    CU_ASSERT(trace_open(dir, arr, &w, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "must be a JSON object"));
    json_decref(arr);
}

static int append_err(trace_writer *w, const char *json, em_err *err)
{
    json_error_t jerr;
    json_t *line = json_loads(json, 0, &jerr);
    if (!line) {
        fprintf(stderr, "bad test JSON %s: %s\n", json, jerr.text);
        return 99;
    }
    em_err_clear(err);
    int rc = trace_append(w, line, err);
    json_decref(line);
    return rc;
}

/* The writer checks each line like the reader will; a refused line changes
 * nothing and the writer carries on. */
static void test_append_refusals(void)
{
    _cleanup_free_ char *dir = fx_path("refusals");
    trace_writer *w = fx_write_open(dir, 1, false);
    CU_ASSERT_FATAL(w != NULL);
    char sha[65];
    CU_ASSERT_FATAL(fx_add_frame(w, 1, sha) == 0);
    _cleanup_free_ char *missing = xstrdup("3333333333333333333333333333333333333333333333333333333333333333");
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {"[1]", "a line must be a JSON object"},
        {"{\"type\":\"header\"}", "must be setup, step, postconfig, egress or evaluation"},
        {"{\"type\":\"trailer\"}", "must be setup, step, postconfig, egress or evaluation"},
        {"{\"type\":\"bogus\"}", "must be setup, step, postconfig, egress or evaluation"},
        {"{\"nothing\":1}", "must be setup, step, postconfig, egress or evaluation"},
        {"{\"type\":\"egress\",\"prev\":\"x\"}", "must not carry \"prev\""},
        {"{\"type\":\"setup\",\"step\":{},\"duration_ms\":1,\"ok\":true}", "a setup line after step lines"},
        {"{\"type\":\"step\",\"index\":5,\"action\":{\"action_type\":\"DONE\"},\"source\":\"computer_13\","
         "\"agent_ms\":1,\"action_ms\":1}",
         "step.index: 5, expected 1 (step lines count up from 0)"},
        {"{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":\"shell\",\"agent_ms\":1,"
         "\"action_ms\":1}",
         "step.source: must be an action space: computer_13, pyautogui, anthropic, openai or uitars"},
        {"{\"type\":\"step\",\"action\":{},\"source\":\"computer_13\",\"agent_ms\":1,\"action_ms\":1}",
         "step.action.action_type: missing"},
        {"{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":\"computer_13\",\"agent_ms\":-1,"
         "\"action_ms\":1}",
         "step.agent_ms: -1 is out of range (>= 0 and <= 1e+10)"},
        {"{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":\"computer_13\",\"agent_ms\":1,"
         "\"action_ms\":1,\"frame_before\":\"../../etc/passwd\"}",
         "step.frame_before: expected 64 lowercase hex digits"},
        {"{\"type\":\"evaluation\",\"score\":1.5,\"reason\":\"\",\"exit_cause\":\"done\"}",
         "evaluation.score: 1.5 is out of range (>= 0 and <= 1)"},
        {"{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"crashed\"}",
         "evaluation.exit_cause: must be one of"},
        {"{\"type\":\"evaluation\",\"score\":1,\"reason\":\"\",\"exit_cause\":\"done\",\"artifacts\":{\"f\":\"x\"}}",
         "evaluation.artifacts.f: expected 64 lowercase hex digits"},
        {"{\"type\":\"evaluation\",\"score\":0,\"reason\":\"\",\"exit_cause\":\"done\",\"status\":\"broken\"}",
         "evaluation.status: must be one of scored, evaluator_error, not_evaluated"},
        {"{\"type\":\"evaluation\",\"score\":0,\"reason\":\"\",\"exit_cause\":\"done\",\"status\":\"evaluator_error\"}",
         "evaluation.evaluator_error"},
    };
    em_err err;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        CU_ASSERT(append_err(w, cases[i].json, &err) == -1);
        CU_ASSERT(fx_contains(err.msg, cases[i].msg));
    }
    /* A frame that was never added. */
    _cleanup_free_ char *step = xasprintf("{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":"
                                          "\"computer_13\",\"agent_ms\":1,\"action_ms\":1,\"frame_before\":\"%s\","
                                          "\"frame_after\":\"%s\"}",
                                          sha, missing);
    CU_ASSERT(append_err(w, step, &err) == -1);
    CU_ASSERT(fx_contains(err.msg, "step.frame_after 3333333333333333333333333333333333333333333333333333333333333333 "
                                   "is not in"));
    /* A step without frame_after needs an error saying why. */
    _cleanup_free_ char *noafter = xasprintf("{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":"
                                             "\"pyautogui\",\"agent_ms\":1,\"action_ms\":1,\"frame_before\":\"%s\"}",
                                             sha);
    CU_ASSERT(append_err(w, noafter, &err) == -1);
    CU_ASSERT(fx_contains(err.msg, "step.frame_after: missing"));
    _cleanup_free_ char *witherr = xasprintf("{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":"
                                             "\"pyautogui\",\"agent_ms\":1,\"action_ms\":1,\"t\":2.5,"
                                             "\"frame_before\":\"%s\",\"error\":\"vnc: connection lost\"}",
                                             sha);
    CU_ASSERT(append_err(w, witherr, &err) == 0);
    CU_ASSERT(append_err(w, "{\"type\":\"evaluation\",\"score\":0,\"reason\":\"r\",\"exit_cause\":\"env_error\"}",
                         &err) == 0);
    /* After the evaluation: no more steps, no second evaluation; egress still fine. */
    CU_ASSERT(append_err(w, step, &err) == -1);
    CU_ASSERT(fx_contains(err.msg, "a step line after the evaluation"));
    CU_ASSERT(append_err(w, "{\"type\":\"evaluation\",\"score\":0,\"reason\":\"r\",\"exit_cause\":\"fail\"}", &err) ==
              -1);
    CU_ASSERT(fx_contains(err.msg, "a second evaluation line"));
    CU_ASSERT(append_err(w, "{\"type\":\"egress\",\"late\":true}", &err) == 0);
    CU_ASSERT_FATAL(trace_close(w, &err) == 0);

    json_t *report;
    CU_ASSERT(trace_verify(dir, &report, &err) == 0);
    json_decref(report);
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    CU_ASSERT_EQUAL(trace_n_steps(t), 2);
    json_t *s = trace_step(t, 1);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(s, "index")), 1); /* filled in */
    CU_ASSERT_EQUAL(json_number_value(json_object_get(s, "t")), 2.5);   /* kept */
    CU_ASSERT_PTR_NULL(json_object_get(s, "frame_after"));
    CU_ASSERT_EQUAL(trace_n_egress(t), 2);
    trace_free(t);
}

/* Postconfig lines: after the steps, indexed from 0 on their own, read back, counted by verify and
 * covered by the trailer's HMAC; the writer refuses a setup or step after them and a postconfig
 * after the evaluation. */
static void test_postconfig_lines(void)
{
    setenv("ENVMGR_TRACE_KEY", "postconfig-key", 1);
    _cleanup_free_ char *dir = fx_path("postconfig");
    CU_ASSERT_FATAL(fx_write_postconfig_trace(dir) == 0);
    em_err err = {0};
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    CU_ASSERT_EQUAL(trace_n_setups(t), 2);
    CU_ASSERT_EQUAL(trace_n_steps(t), 2);
    CU_ASSERT_EQUAL_FATAL(trace_n_postconfig(t), 2);
    for (size_t i = 0; i < 2; i++)
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(trace_postconfig(t, i), "index")), (json_int_t)i);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(trace_postconfig(t, 0), "tolerated")),
                           "exit status 1 <b>\x1b[2J");
    CU_ASSERT_PTR_NULL(trace_postconfig(t, 2));
    trace_free(t);
    json_t *report = NULL;
    CU_ASSERT_FATAL(trace_verify(dir, &report, &err) == 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(report, "postconfig")), 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(report, "hmac")), "ok");
    json_decref(report);
    /* The HMAC covers them: a postconfig line that said ok where the recording said otherwise is caught
     * even with the chain and the sha256 recomputed. */
    setenv("ENVMGR_TRACE_KEY", "another-key", 1);
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    unsetenv("ENVMGR_TRACE_KEY");

    _cleanup_free_ char *dir2 = fx_path("postconfig-order");
    trace_writer *w = fx_write_open(dir2, 1, false);
    CU_ASSERT_FATAL(w != NULL);
    const char *post = "{\"type\":\"postconfig\",\"step\":{\"type\":\"sleep\"},\"duration_ms\":1,\"ok\":true}";
    CU_ASSERT(append_err(w, post, &err) == 0);
    CU_ASSERT(append_err(w, "{\"type\":\"setup\",\"step\":{},\"duration_ms\":1,\"ok\":true}", &err) == -1);
    CU_ASSERT(fx_contains(err.msg, "a setup line after step lines"));
    CU_ASSERT(append_err(w, "{\"type\":\"step\",\"action\":{\"action_type\":\"DONE\"},\"source\":\"computer_13\","
                            "\"agent_ms\":1,\"action_ms\":1}",
                         &err) == -1);
    CU_ASSERT(fx_contains(err.msg, "a step line after postconfig lines"));
    CU_ASSERT(append_err(w, "{\"type\":\"postconfig\",\"index\":0,\"step\":{},\"duration_ms\":1,\"ok\":true}", &err) ==
              -1);
    CU_ASSERT(fx_contains(err.msg, "postconfig.index: 0, expected 1 (postconfig lines count up from 0)"));
    CU_ASSERT(append_err(w, "{\"type\":\"egress\"}", &err) == 0); /* egress may come anywhere */
    CU_ASSERT(append_err(w, post, &err) == 0);
    CU_ASSERT(append_err(w, "{\"type\":\"evaluation\",\"score\":0,\"reason\":\"\",\"exit_cause\":\"done\"}", &err) ==
              0);
    CU_ASSERT(append_err(w, post, &err) == -1);
    CU_ASSERT(fx_contains(err.msg, "a postconfig line after the evaluation"));
    CU_ASSERT_FATAL(trace_close(w, &err) == 0);
    CU_ASSERT(trace_verify(dir2, &report, &err) == 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(report, "postconfig")), 2);
    json_decref(report);
}

static void test_key_checked_at_open(void)
{
    em_err err = {0};
    trace_writer *w = NULL;
    json_t *h = fx_header_fields();
    _cleanup_free_ char *dir = fx_path("key");
    setenv("ENVMGR_TRACE_KEY", "", 1);
    CU_ASSERT(trace_open(dir, h, &w, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "ENVMGR_TRACE_KEY is set but empty"));
    _cleanup_free_ char *big = xmalloc(4098);
    memset(big, 'k', 4097);
    big[4097] = '\0';
    setenv("ENVMGR_TRACE_KEY", big, 1);
    CU_ASSERT(trace_open(dir, h, &w, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "ENVMGR_TRACE_KEY is 4097 bytes, more than the limit of 4096"));
    unsetenv("ENVMGR_TRACE_KEY");
    json_decref(h);
}

/* The writer's output: one compact object a line, "type" first, "prev" last, newline-terminated. */
static void test_line_layout(void)
{
    _cleanup_free_ char *dir = fx_path("layout");
    CU_ASSERT_FATAL(fx_write_trace(dir, 2) == 0);
    size_t len;
    _cleanup_free_ char *data = fx_read(dir, "trace.jsonl", &len);
    CU_ASSERT_FATAL(data != NULL);
    CU_ASSERT(len > 0 && data[len - 1] == '\n');
    int lines = fx_count_lines(data);
    CU_ASSERT_EQUAL(lines, 8);
    char prev[65] = "0000000000000000000000000000000000000000000000000000000000000000";
    for (int k = 1; k <= lines; k++) {
        const char *line = data + fx_line_offset(data, k);
        size_t n = (size_t)(strchr(line, '\n') - line);
        CU_ASSERT(strncmp(line, "{\"type\":\"", 9) == 0);
        _cleanup_free_ char *tail = xasprintf(",\"prev\":\"%s\"}", prev);
        CU_ASSERT(n > strlen(tail) && !strncmp(line + n - strlen(tail), tail, strlen(tail)));
        sha256_hex(line, n, prev);
    }
}

static CU_TestInfo tests[] = {
    {"round trip", test_round_trip},
    {"incomplete trace is readable", test_incomplete_is_readable},
    {"refuses to overwrite a trace", test_refuses_overwrite},
    {"bad header refused, nothing created", test_bad_header},
    {"append refusals", test_append_refusals},
    {"postconfig lines", test_postconfig_lines},
    {"key checked at open", test_key_checked_at_open},
    {"line layout and chain", test_line_layout},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("ENVMGR_TRACE_KEY");
    return run_suite("trace", tests);
}

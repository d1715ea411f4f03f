/* envmgr suite export --osworld without a VM: a run folder with traces written by the fixture, its
 * results tree (traj lines per reply, the pngs they name, result.txt as Python prints a float, the
 * video), episodes without a trace skipped, and names from results.jsonl that would leave OUT refused. */
#define TRACE_FIXTURE_ONLY
#include "test_trace_fixture.c"

#include <regex.h>

#include "envmgr/suite/export_osworld.h"

static void put_text(const char *path, const char *text)
{
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(path, text, strlen(text), 0644, &err), 0);
}

/* a trace as an episode writes it for a pyautogui reply of two actions (the first line carries the
 * code as sent and the response), then a computer_13 DONE */
static int write_reply_trace(const char *dir)
{
    trace_writer *w = fx_open(dir);
    char f0[65], f1[65], f2[65];
    if (!w || fx_add_frame(w, 0, f0) < 0 || fx_add_frame(w, 1, f1) < 0 || fx_add_frame(w, 2, f2) < 0)
        return -1;
    int rc = fx_append(w, json_pack("{s:s, s:{s:s, s:i, s:i}, s:s, s:f, s:f, s:s, s:s, s:s, s:s}", "type", "step", "action",
                                    "action_type", "CLICK", "x", 1, "y", 2, "source", "pyautogui", "agent_ms", 10.0,
                                    "action_ms", 1.0, "frame_before", f0, "frame_after", f1, "pyautogui",
                                    "pyautogui.click(1, 2); pyautogui.press('a')", "response", "I click \xc3\xa9."));
    rc = rc < 0 ? -1
                : fx_append(w, json_pack("{s:s, s:{s:s, s:s}, s:s, s:f, s:f, s:s, s:s}", "type", "step", "action",
                                         "action_type", "PRESS", "key", "a", "source", "pyautogui", "agent_ms", 0.0,
                                         "action_ms", 1.0, "frame_before", f1, "frame_after", f2));
    rc = rc < 0 ? -1
                : fx_append(w, json_pack("{s:s, s:{s:s}, s:s, s:f, s:f, s:s, s:s, s:s}", "type", "step", "action",
                                         "action_type", "DONE", "source", "computer_13", "agent_ms", 3.0, "action_ms",
                                         0.0, "frame_before", f2, "frame_after", f2, "response", "done"));
    if (rc < 0) {
        trace_abandon(w);
        return -1;
    }
    return fx_close(w);
}

static json_t *read_lines(const char *path)
{
    json_t *out = json_array();
    FILE *f = fopen(path, "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f))
        json_array_append_new(out, json_loads(line, 0, NULL));
    if (f)
        fclose(f);
    return out;
}

static bool matches(const char *re, const char *s)
{
    regex_t r;
    if (!s || regcomp(&r, re, REG_EXTENDED | REG_NOSUB) != 0)
        return false;
    bool ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

static void test_export(void)
{
    _cleanup_free_ char *run = fx_path("run"), *out = fx_path("osworld");
    _cleanup_free_ char *ta = xasprintf("%s/traces/a/trace", run), *tb = xasprintf("%s/traces/b/trace", run);
    CU_ASSERT_FATAL(write_reply_trace(ta) == 0);
    CU_ASSERT_FATAL(fx_write_trace(tb, 3) == 0); /* three computer_13 steps, as older traces have them */
    _cleanup_free_ char *results = xasprintf("%s/results.jsonl", run);
    put_text(results,
             "{\"task_id\":\"a\",\"domain\":\"os\",\"repeat\":0,\"final\":true,\"score\":1,\"exit_cause\":\"done\","
             "\"status\":\"scored\",\"trace\":\"traces/a/trace\"}\n"
             "{\"task_id\":\"b\",\"domain\":\"gimp\",\"repeat\":0,\"final\":true,\"score\":0.1,\"exit_cause\":\"max_steps\","
             "\"status\":\"scored\",\"trace\":\"traces/b/trace\"}\n"
             "{\"task_id\":\"c\",\"domain\":\"os\",\"repeat\":0,\"final\":true,\"score\":0,\"exit_cause\":\"env_error\","
             "\"trace\":\"traces/c/trace\"}\n");
    em_err err = {0};
    export_osworld_info info;
    int rc = export_osworld(run, out, &info, &err);
    if (rc < 0)
        fprintf(stderr, "export: %s\n", err.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(info.episodes, 2);
    CU_ASSERT_EQUAL(info.skipped, 1);

    _cleanup_free_ char *da = xasprintf("%s/os/a", out), *db = xasprintf("%s/gimp/b", out);
    _cleanup_free_ char *traj_a = xasprintf("%s/traj.jsonl", da), *traj_b = xasprintf("%s/traj.jsonl", db);
    json_t *a = read_lines(traj_a), *b = read_lines(traj_b);
    CU_ASSERT_EQUAL_FATAL(json_array_size(a), 2); /* one line per reply */
    CU_ASSERT_EQUAL(json_array_size(b), 3);       /* an older trace: one per step line */
    json_t *a0 = json_array_get(a, 0), *a1 = json_array_get(a, 1);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a0, "action")), "pyautogui.click(1, 2); pyautogui.press('a')");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(a0, "response")), "I click \xc3\xa9.");
    CU_ASSERT_TRUE(json_is_false(json_object_get(a0, "done")));
    CU_ASSERT_TRUE(json_is_true(json_object_get(a1, "done")));
    CU_ASSERT_TRUE(json_is_true(json_object_get(json_object_get(a1, "info"), "done")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(a1, "action"), "action_type")), "DONE");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(a1, "step_num")), 2);
    const char *ts = json_string_value(json_object_get(a0, "action_timestamp"));
    CU_ASSERT(matches("^[0-9]{8}@[0-9]{12}$", ts));
    const char *png = json_string_value(json_object_get(a0, "screenshot_file"));
    _cleanup_free_ char *want = xasprintf("step_1_%s.png", ts ? ts : "");
    CU_ASSERT_STRING_EQUAL(png, want);
    _cleanup_free_ char *png_path = xasprintf("%s/%s", da, png);
    struct stat st;
    CU_ASSERT_EQUAL(stat(png_path, &st), 0);
    _cleanup_free_ char *raw = NULL;
    CU_ASSERT_EQUAL(read_file_capped(traj_a, 1 << 20, &raw, NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(raw, "\"step_num\": 1, \"action_timestamp\": ")); /* Python's json.dumps shape */
    CU_ASSERT_PTR_NOT_NULL(strstr(raw, "I click \\u00e9."));
    json_decref(a);
    json_decref(b);

    _cleanup_free_ char *ra = xasprintf("%s/result.txt", da), *rb = xasprintf("%s/result.txt", db);
    _cleanup_free_ char *sa = NULL, *sb = NULL;
    CU_ASSERT_EQUAL(read_file_capped(ra, 100, &sa, NULL, &err), 0);
    CU_ASSERT_EQUAL(read_file_capped(rb, 100, &sb, NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL(sa, "1.0\n"); /* Python's str(1.0) */
    CU_ASSERT_STRING_EQUAL(sb, "0.1\n");
    _cleanup_free_ char *mp4 = xasprintf("%s/recording.mp4", da);
    CU_ASSERT(stat(mp4, &st) == 0 && st.st_size > 0);

    /* again into the same OUT: refused, nothing overwritten */
    CU_ASSERT_EQUAL(export_osworld(run, out, &info, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "export into a new folder"));
    /* names that would leave OUT, a trace outside the run */
    const char *hostile[] = {
        "{\"task_id\":\"..\",\"domain\":\"os\",\"score\":1,\"exit_cause\":\"done\",\"trace\":\"traces/a/trace\"}\n",
        "{\"task_id\":\"a\",\"domain\":\"x/../..\",\"score\":1,\"exit_cause\":\"done\",\"trace\":\"traces/a/trace\"}\n",
        "{\"task_id\":\"a\",\"domain\":\"os\",\"score\":1,\"exit_cause\":\"done\",\"trace\":\"../../etc\"}\n",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof *hostile; i++) {
        put_text(results, hostile[i]);
        _cleanup_free_ char *o2 = fx_path("osworld-hostile");
        em_err e2 = {0};
        CU_ASSERT_EQUAL(export_osworld(run, o2, &info, &e2), -1);
        CU_ASSERT_EQUAL(info.episodes, 0);
    }
    /* not a run folder */
    _cleanup_free_ char *o3 = fx_path("osworld-none");
    CU_ASSERT_EQUAL(export_osworld(out, o3, &info, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "results.jsonl"));
}

static CU_TestInfo tests[] = {
    {"a run as OSWorld's results tree", test_export},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("export_osworld", tests);
}

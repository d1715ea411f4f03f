/* The setup cache's decisions without a guest: what its key covers (a changed step, file, screen or
 * golden state is another key; the task's id is not part of it) and which setups are never cached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/setup_cache.h"
#include "helpers/cunit_main.h"

static char golden[65] = "1111111111111111111111111111111111111111111111111111111111111111";

static int fake_golden_id(void *ctx, char id[65], em_err *err)
{
    memcpy(id, golden, 65);
    return 0;
}

static int fake_restore(void *ctx, const char *name, char id[33], em_err *err)
{
    snprintf(id, 33, "%s", "0123456789abcdef0123456789abcdef");
    if (*(int *)ctx < 0)
        return em_fail(err, "state `%s`: ram.delta does not match its sha256", name);
    return *(int *)ctx; /* what the test wants: 1 restored, 0 absent, -1 refused */
}

static int fake_save(void *ctx, const char *name, json_t *since, em_err *err) { return 0; }

static int restore_answer = 0;
static episode_env ev = {.ctx = &restore_answer, .width = 1280, .height = 800, .accel = "tcg",
                         .image_sha256 = "2222222222222222222222222222222222222222222222222222222222222222",
                         .golden_id = fake_golden_id, .state_restore = fake_restore, .state_save = fake_save};

/* The plan for a task whose setup is `config` (a JSON array) and whose extra top-level fields
 * are `extra` ("" or `, "k": v`). */
static void plan(const char *config, const char *extra, const netpolicy *net, setup_cache *sc)
{
    _cleanup_free_ char *text = xasprintf("{\"id\": \"t1\", \"instruction\": \"x\", \"config\": %s, \"evaluator\": "
                                          "{\"func\": \"infeasible\"}%s}",
                                          config, extra);
    task *t = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(task_parse(text, strlen(text), test_tmpdir(), &t, &err), 0);
    netpolicy none;
    netpolicy_init(&none);
    setup_cache_plan(t, &ev, net ? net : &none, false, sc);
    task_free(t);
}

#define STEP_A "[{\"type\": \"execute\", \"parameters\": {\"command\": \"mkdir -p /tmp/a\"}}]"
#define STEP_B "[{\"type\": \"execute\", \"parameters\": {\"command\": \"mkdir -p /tmp/b\"}}]"

static void test_key(void)
{
    setup_cache a, a2, b, c;
    plan(STEP_A, "", NULL, &a);
    CU_ASSERT_TRUE_FATAL(a.on);
    CU_ASSERT_EQUAL(strlen(a.key), 64);
    CU_ASSERT_EQUAL(strncmp(a.name, SETUP_CACHE_PREFIX, strlen(SETUP_CACHE_PREFIX)), 0);
    CU_ASSERT_EQUAL(strlen(a.name), strlen(SETUP_CACHE_PREFIX) + 32);
    plan(STEP_A, ", \"source\": \"another task, the same setup\"", NULL, &a2);
    CU_ASSERT_STRING_EQUAL(a.key, a2.key); /* the setup decides, not the task around it */
    plan(STEP_B, "", NULL, &b);
    CU_ASSERT_STRING_NOT_EQUAL(a.key, b.key); /* a changed step */
    ev.width = 1920;
    plan(STEP_A, "", NULL, &c);
    CU_ASSERT_STRING_NOT_EQUAL(a.key, c.key); /* another screen */
    ev.width = 1280;
    golden[0] = '3';
    plan(STEP_A, "", NULL, &c);
    CU_ASSERT_STRING_NOT_EQUAL(a.key, c.key); /* a rebuilt golden state */
    golden[0] = '1';
    plan(STEP_A, "", NULL, &c);
    CU_ASSERT_STRING_EQUAL(a.key, c.key);
}

static void test_files(void)
{
    _cleanup_free_ char *f = xasprintf("%s/data.txt", test_tmpdir());
    em_err err = {0};
    const char *cfg = "[{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"data.txt\", "
                      "\"path\": \"/home/user/data.txt\"}]}}]";
    setup_cache one, two;
    CU_ASSERT_EQUAL(write_file_atomic(f, "one", 3, 0600, &err), 0);
    plan(cfg, "", NULL, &one);
    CU_ASSERT_TRUE_FATAL(one.on);
    CU_ASSERT_EQUAL(write_file_atomic(f, "two", 3, 0600, &err), 0);
    plan(cfg, "", NULL, &two);
    CU_ASSERT_TRUE(two.on);
    CU_ASSERT_STRING_NOT_EQUAL(one.key, two.key); /* the file's content is in the key */
    const char *url = "[{\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": \"https://example.com/a.xlsx\", "
                      "\"path\": \"/home/user/a.xlsx\"}]}}]";
    plan(url, "", NULL, &two);
    CU_ASSERT_FALSE(two.on); /* no asset lock pins it */
    CU_ASSERT_PTR_NOT_NULL(strstr(two.off, "pins"));
}

static void test_never_cached(void)
{
    setup_cache sc;
    plan(STEP_A, ", \"setup_cache\": false", NULL, &sc);
    CU_ASSERT_FALSE(sc.on);
    CU_ASSERT_PTR_NOT_NULL(strstr(sc.off, "opts out"));
    plan("[{\"type\": \"update_browse_history\", \"parameters\": {\"history\": [{\"url\": \"https://a.org\", "
         "\"title\": \"a\", \"visit_time_from_now_in_seconds\": 60}]}}]",
         "", NULL, &sc);
    CU_ASSERT_FALSE(sc.on);
    CU_ASSERT_PTR_NOT_NULL(strstr(sc.off, "update_browse_history"));
    plan("[{\"type\": \"chrome_open_tabs\", \"parameters\": {\"urls_to_open\": [\"https://example.com\"]}}]", "",
         NULL, &sc);
    CU_ASSERT_FALSE(sc.on);
    CU_ASSERT_PTR_NOT_NULL(strstr(sc.off, "web page"));
    netpolicy allow;
    netpolicy_init(&allow);
    allow.mode = NETPOLICY_ALLOWLIST;
    plan(STEP_A, "", &allow, &sc);
    CU_ASSERT_FALSE(sc.on);
    CU_ASSERT_PTR_NOT_NULL(strstr(sc.off, "network"));
    plan("[]", "", NULL, &sc);
    CU_ASSERT_FALSE(sc.on); /* nothing to cache */
    setenv("ENVMGR_SETUP_CACHE", "off", 1);
    plan(STEP_A, "", NULL, &sc);
    CU_ASSERT_FALSE(sc.on);
    CU_ASSERT_PTR_NOT_NULL(strstr(sc.off, "operator"));
    unsetenv("ENVMGR_SETUP_CACHE");
    episode_env bare = ev;
    bare.state_save = NULL; /* an env without saved states (the unit tests' fakes) */
    task *t = NULL;
    em_err err = {0};
    const char *text = "{\"id\": \"t\", \"instruction\": \"x\", \"config\": " STEP_A ", \"evaluator\": "
                       "{\"func\": \"infeasible\"}}";
    CU_ASSERT_EQUAL_FATAL(task_parse(text, strlen(text), test_tmpdir(), &t, &err), 0);
    netpolicy none;
    netpolicy_init(&none);
    setup_cache_plan(t, &bare, &none, false, &sc);
    CU_ASSERT_FALSE(sc.on);
    setup_cache_plan(t, &ev, &none, true, &sc); /* an episode from a saved state: its setup is done */
    CU_ASSERT_FALSE(sc.on);
    task_free(t);
}

static void test_restore_and_record(void)
{
    setup_cache sc;
    plan(STEP_A, "", NULL, &sc);
    restore_answer = 0; /* not cached yet */
    CU_ASSERT_FALSE(setup_cache_restore(&ev, &sc));
    json_t *j = setup_cache_json(&sc);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "used")), "ran");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "key")), sc.key);
    json_decref(j);
    restore_answer = 1;
    CU_ASSERT_TRUE(setup_cache_restore(&ev, &sc));
    j = setup_cache_json(&sc);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "used")), "restored");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "id")), "0123456789abcdef0123456789abcdef");
    json_decref(j);
    plan(STEP_A, "", NULL, &sc);
    restore_answer = -1; /* there, but refused: the setup runs */
    CU_ASSERT_FALSE(setup_cache_restore(&ev, &sc));
    j = setup_cache_json(&sc);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "used")), "ran");
    CU_ASSERT_PTR_NOT_NULL(json_object_get(j, "refused"));
    json_decref(j);
    plan(STEP_A, ", \"setup_cache\": false", NULL, &sc);
    j = setup_cache_json(&sc);
    CU_ASSERT_PTR_NOT_NULL(json_string_value(json_object_get(j, "off")));
    json_decref(j);
}

static CU_TestInfo tests[] = {
    {"key: the setup, screen and golden state decide it, not the task's other fields", test_key},
    {"key: a task file's content is in it; an unpinned download is never cached", test_files},
    {"never cached: opt-outs, time-dependent steps, network access, no saved states", test_never_cached},
    {"restore: hit, miss, refused; the trace header's record", test_restore_and_record},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("ENVMGR_SETUP_CACHE");
    return run_suite("setup_cache", tests);
}

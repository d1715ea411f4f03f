/* The files an env and a golden state keep on disk, read back by later commands: damaged or
 * hostile contents are clear errors, never a crash or a half-read state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/env/env.h"
#include "envmgr/state/golden.h"
#include "helpers/cunit_main.h"

static void put(const char *dir, const char *name, const char *text)
{
    em_err err = {0};
    _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
    CU_ASSERT_EQUAL(mkdir_p(dir, 0700, &err), 0);
    CU_ASSERT_EQUAL(write_file_atomic(p, text, strlen(text), 0600, &err), 0);
}

static void test_golden_json(void)
{
    _cleanup_free_ char *dir = xasprintf("%s/golden/abc", test_tmpdir());
    golden *g = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(golden_open(dir, &g, &err), -1); /* nothing there */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "golden state gone or damaged"));
    const char *bad[] = {"not json", "[]", "{}", "{\"pointer\": [1]}", "{\"pointer\": [\"1\", 2]}",
                         "{\"pointer\": [-5, 2]}", "{\"pointer\": [1, 2], \"pointer\": [3, 4]}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put(dir, "golden.json", bad[i]);
        memset(&err, 0, sizeof err);
        CU_ASSERT_EQUAL(golden_open(dir, &g, &err), -1);
        CU_ASSERT(err.msg[0] != '\0');
    }
    put(dir, "golden.json", "{\"pointer\": [640, 400], \"format\": \"golden-v1\"}");
    CU_ASSERT_EQUAL_FATAL(golden_open(dir, &g, &err), 0);
    CU_ASSERT_EQUAL(g->pointer_x, 640);
    CU_ASSERT_EQUAL(g->pointer_y, 400);
    CU_ASSERT_PTR_NOT_NULL(strstr(g->ram, "/ram.bin"));
    CU_ASSERT_STRING_EQUAL(g->key, "abc");
    golden_free(g);
}

static void test_env_json(void)
{
    em_err err = {0};
    env *e = NULL;
    CU_ASSERT_EQUAL(env_open("nope", &e, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "does not exist"));
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(env_open("../etc", &e, &err), -1); /* names are checked before any path is built */
    _cleanup_free_ char *dir = xasprintf("%s/run/e1", test_tmpdir());
    const char *bad[] = {"{", "{\"image\": \"/x\"}", "{\"image\": \"/x\", \"golden\": \"/y\"}",
                         "{\"image\": \"/x\", \"golden\": \"/y\", \"accel\": \"fast\"}",
                         "{\"image\": 5, \"golden\": \"/y\", \"accel\": \"tcg\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put(dir, "env.json", bad[i]);
        memset(&err, 0, sizeof err);
        CU_ASSERT_EQUAL(env_open("e1", &e, &err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "env e1"));
    }
    /* well formed, but its image is gone: said so, naming the env */
    put(dir, "env.json", "{\"image\": \"/nonexistent-image\", \"golden\": \"/y\", \"accel\": \"tcg\"}");
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(env_open("e1", &e, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "env e1"));
    /* a file over the cap is refused, not read */
    char *huge = xmalloc(JSON_DOC_MAX + 2);
    memset(huge, ' ', JSON_DOC_MAX + 1);
    huge[JSON_DOC_MAX + 1] = '\0';
    put(dir, "env.json", huge);
    free(huge);
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(env_open("e1", &e, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than the limit"));
}

static CU_TestInfo tests[] = {
    {"golden.json: damaged states refused, a good one read", test_golden_json},
    {"env.json: missing, damaged, oversized, or naming a gone image", test_env_json},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    /* before any path is asked for: the roots are fixed at first use */
    _cleanup_free_ char *run = xasprintf("%s/run", test_tmpdir()), *cache = xasprintf("%s/cache", test_tmpdir());
    setenv("ENVMGR_RUN_DIR", run, 1);
    setenv("ENVMGR_CACHE_DIR", cache, 1);
    return run_suite("env_state", tests);
}

/* OSWorld's /execute reply as a command's result (guest_osworld.c): the reply is the guest's, so
 * hostile: wrong types, no status, huge or NUL-bearing streams, out-of-range codes. */
#include <CUnit/CUnit.h>
#include <string.h>

#include "envmgr/vm/guest_osworld.h"
#include "helpers/cunit_main.h"

static int parse(long status, const char *body, size_t cap, guest_exec_result *r, em_err *err)
{
    memset(err, 0, sizeof *err);
    return osworld_exec_reply_parse(status, body, strlen(body), cap, r, err);
}

static void test_success(void)
{
    guest_exec_result r;
    em_err err;
    CU_ASSERT_EQUAL_FATAL(parse(200, "{\"status\": \"success\", \"output\": \"out\\n\", \"error\": \"e\", "
                                     "\"returncode\": 3}", 1024, &r, &err), 0);
    CU_ASSERT_EQUAL(r.exit_code, 3);
    CU_ASSERT_STRING_EQUAL(r.out, "out\n");
    CU_ASSERT_EQUAL(r.out_len, 4);
    CU_ASSERT_STRING_EQUAL(r.err, "e");
    CU_ASSERT_FALSE(r.truncated);
    CU_ASSERT_FALSE(r.timed_out);
    guest_exec_result_free(&r);
    /* a signal's death is -N in Python; null streams are empty */
    CU_ASSERT_EQUAL_FATAL(parse(200, "{\"status\": \"success\", \"output\": null, \"returncode\": -9}", 1024, &r, &err), 0);
    CU_ASSERT_EQUAL(r.exit_code, -1);
    CU_ASSERT_EQUAL(r.signal, 9);
    CU_ASSERT_STRING_EQUAL(r.out, "");
    CU_ASSERT_STRING_EQUAL(r.err, "");
    guest_exec_result_free(&r);
}

static void test_cap_and_nul(void)
{
    guest_exec_result r;
    em_err err;
    CU_ASSERT_EQUAL_FATAL(parse(200, "{\"status\": \"success\", \"output\": \"abcdefgh\", \"error\": \"a\\u0000b\", "
                                     "\"returncode\": 0}", 4, &r, &err), 0);
    CU_ASSERT_EQUAL(r.out_len, 4);
    CU_ASSERT_STRING_EQUAL(r.out, "abcd");
    CU_ASSERT_EQUAL(r.err_len, 3);
    CU_ASSERT_EQUAL(memcmp(r.err, "a\0b", 3), 0);
    CU_ASSERT_TRUE(r.truncated);
    guest_exec_result_free(&r);
}

static void test_server_errors(void)
{
    guest_exec_result r;
    em_err err;
    /* the server's own 120 s limit: a timeout, as the agent's */
    CU_ASSERT_EQUAL_FATAL(parse(500, "{\"status\": \"error\", \"message\": \"Command '['sleep', '200']' timed out "
                                     "after 120 seconds\"}", 1024, &r, &err), 0);
    CU_ASSERT_TRUE(r.timed_out);
    CU_ASSERT_EQUAL(r.exit_code, 124);
    guest_exec_result_free(&r);
    /* no such program: as a shell says it */
    CU_ASSERT_EQUAL_FATAL(parse(500, "{\"status\": \"error\", \"message\": \"[Errno 2] No such file or directory: "
                                     "'nope'\"}", 1024, &r, &err), 0);
    CU_ASSERT_EQUAL(r.exit_code, 127);
    guest_exec_result_free(&r);
    CU_ASSERT_EQUAL(parse(500, "{\"status\": \"error\", \"message\": \"boom\"}", 1024, &r, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "OSWorld's server /execute: answered 500, status `error`: boom");
}

static void test_hostile(void)
{
    guest_exec_result r;
    em_err err;
    CU_ASSERT_EQUAL(parse(200, "<html>\x01\x02 not json</html>", 1024, &r, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "without a JSON object with a status: <html>   not json</html>"));
    CU_ASSERT_EQUAL(parse(200, "[1, 2]", 1024, &r, &err), -1);
    CU_ASSERT_EQUAL(parse(200, "{\"status\": \"success\", \"returncode\": \"0\"}", 1024, &r, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "returncode"));
    CU_ASSERT_EQUAL(parse(200, "{\"status\": \"success\", \"returncode\": 99999}", 1024, &r, &err), -1);
    CU_ASSERT_EQUAL(parse(200, "{\"status\": \"success\", \"returncode\": 0, \"output\": [\"x\"]}", 1024, &r, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "`output` is array, not a string"));
    CU_ASSERT_EQUAL(parse(200, "{\"status\": \"success\", \"status\": \"success\", \"returncode\": 0}", 1024, &r, &err),
                    -1); /* duplicate keys */
    char ex[8];
    osworld_excerpt("ab\ncd\xff" "efghijk", 12, ex, 7);
    CU_ASSERT_STRING_EQUAL(ex, "ab cd e");
}

static CU_TestInfo tests[] = {
    {"a successful reply", test_success},
    {"streams capped, NUL bytes kept", test_cap_and_nul},
    {"the server's own errors", test_server_errors},
    {"hostile replies", test_hostile},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("guest_osworld", tests);
}

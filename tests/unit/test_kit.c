/* The reading kit in envmgr/base: the warning hook, the line scanner. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "helpers/cunit_main.h"

typedef struct seen {
    int calls;
    em_log_level level;
    char msg[EM_WARN_LINE_MAX];
} seen;

static void catch_it(em_log_level level, const char *msg, void *arg)
{
    seen *s = arg;
    s->calls++;
    s->level = level;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
}

/* A sink gets every message with its level and no trailing newline; NULL puts stderr back. */
static void test_warn_hook(void)
{
    seen s = {0};
    em_warn_set(catch_it, &s);
    em_warn("envmgr: %s is %d", "x", 3);
    CU_ASSERT_EQUAL(s.calls, 1);
    CU_ASSERT_EQUAL(s.level, EM_LOG_WARNING);
    CU_ASSERT_STRING_EQUAL(s.msg, "envmgr: x is 3");
    em_info("up in %.1f s\n", 1.25);
    CU_ASSERT_EQUAL(s.level, EM_LOG_INFO);
    CU_ASSERT_STRING_EQUAL(s.msg, "up in 1.2 s"); /* the caller's newline is the sink's to add */
    em_log(EM_LOG_PROGRESS, "\r50%%");
    CU_ASSERT_EQUAL(s.level, EM_LOG_PROGRESS);
    CU_ASSERT_STRING_EQUAL(s.msg, "\r50%");
    em_log(EM_LOG_ERROR, "%s", "");
    CU_ASSERT_EQUAL(s.calls, 4);
    CU_ASSERT_STRING_EQUAL(s.msg, "");
    /* a message past the line cap is cut, not overflowed */
    char *big = xmalloc(3 * EM_WARN_LINE_MAX);
    memset(big, 'a', 3 * EM_WARN_LINE_MAX - 1);
    big[3 * EM_WARN_LINE_MAX - 1] = '\0';
    em_warn("%s", big);
    CU_ASSERT_EQUAL(strlen(s.msg), EM_WARN_LINE_MAX - 1);
    free(big);
    CU_ASSERT_STRING_EQUAL(em_log_level_name(EM_LOG_WARNING), "warning");

    /* the default: stderr, one line each */
    em_warn_set(NULL, NULL);
    fflush(stderr);
    int saved = dup(2);
    char *path = xasprintf("%s/warn.txt", test_tmpdir());
    CU_ASSERT_PTR_NOT_NULL_FATAL(freopen(path, "w", stderr));
    em_warn("first %d", 1);
    em_info("second");
    em_log(EM_LOG_PROGRESS, "\rthird");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CU_ASSERT_EQUAL(s.calls, 5); /* the old sink is not called any more */
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char got[64] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    CU_ASSERT_EQUAL(n, strlen("first 1\nsecond\n\rthird"));
    CU_ASSERT_STRING_EQUAL(got, "first 1\nsecond\n\rthird");
    free(path);
}

static CU_TestInfo tests[] = {
    {"the warning hook: levels, routing, the stderr default", test_warn_hook},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("kit", tests);
}

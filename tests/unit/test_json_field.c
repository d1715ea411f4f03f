/* Typed JSON field reading (base/json_field): values, defaults, and one error line naming the
 * JSON path and the problem. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/json_field.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

static json_t *doc(void)
{
    json_t *j = json_loads("{\"s\": \"x\", \"e\": \"\", \"n\": 2.5, \"i\": 7, \"b\": true, \"o\": {}, "
                           "\"a\": [\"p\", \"q\"], \"bad\": [\"p\", 3], \"nul\": null}",
                           0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    return j;
}

static void test_values(void)
{
    json_t *j = doc();
    em_err err = {0};
    const char *s;
    double d;
    long l;
    bool b, present;
    json_t *o;
    char **v;
    size_t n;
    CU_ASSERT_EQUAL(jfield_str(j, "evaluator.result", "s", true, &s, &err), 0);
    CU_ASSERT_STRING_EQUAL(s, "x");
    CU_ASSERT_EQUAL(jfield_str(j, "", "absent", false, &s, &err), 0);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(jfield_number(j, "", "i", true, &d, &present, &err), 0);
    CU_ASSERT(present && d == 7);
    CU_ASSERT_EQUAL(jfield_num(j, "", "absent", 0, true, 10, 3, &d, &err), 0);
    CU_ASSERT_EQUAL(d, 3);
    CU_ASSERT_EQUAL(jfield_num(j, "", "n", 0, true, 10, 3, &d, &err), 0);
    CU_ASSERT_EQUAL(d, 2.5);
    CU_ASSERT_EQUAL(jfield_int(j, "", "i", 1, 10, 0, &l, &err), 0);
    CU_ASSERT_EQUAL(l, 7);
    CU_ASSERT_EQUAL(jfield_bool(j, "", "b", false, &b, &err), 0);
    CU_ASSERT(b);
    CU_ASSERT_EQUAL(jfield_bool(j, "", "absent", true, &b, &err), 0);
    CU_ASSERT(b);
    CU_ASSERT_EQUAL(jfield_obj(j, "", "o", &o, &err), 0);
    CU_ASSERT(json_is_object(o));
    CU_ASSERT_EQUAL(jfield_str_array(j, "", "a", &v, &n, &err), 0);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(v[1], "q");
    CU_ASSERT_PTR_NULL(v[2]);
    for (size_t k = 0; k < n; k++)
        free(v[k]);
    free(v);
    CU_ASSERT(jfield_known(" s e n ", "e"));
    CU_ASSERT(!jfield_known(" s e n ", "x"));
    json_decref(j);
}

#define FAILS(call, want)                                                                                            \
    do {                                                                                                             \
        em_err err = {0};                                                                                            \
        CU_ASSERT_EQUAL(call, -1);                                                                                   \
        CU_ASSERT_STRING_EQUAL(err.msg, want);                                                                       \
        CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);                                                                    \
    } while (0)

static void test_errors(void)
{
    json_t *j = doc();
    const char *s;
    double d;
    long l;
    bool b, present;
    json_t *o;
    char **v;
    size_t n;
    FAILS(jfield_str(j, "evaluator.result", "i", true, &s, &err), "evaluator.result.i: expected a string, got integer");
    FAILS(jfield_str(j, "evaluator.result", "path", true, &s, &err), "evaluator.result.path: missing");
    FAILS(jfield_nonempty_str(j, "", "e", true, &s, &err), "e: empty");
    FAILS(jfield_number(j, "action", "s", false, &d, &present, &err), "action.s: expected a number, got string");
    FAILS(jfield_num(j, "", "n", 2.5, true, 10, 0, &d, &err), "n: 2.5 is out of range (> 2.5 and <= 10)");
    FAILS(jfield_int(j, "limits", "n", 0, 10, 0, &l, &err), "limits.n: expected an integer, got a fraction");
    FAILS(jfield_int(j, "limits", "i", 0, 5, 0, &l, &err), "limits.i: 7 is out of range (0..5)");
    /* strict: a trace writes integers as integers, so "7.0" there is a changed file */
    json_object_set_new(j, "r", json_real(7.0));
    em_err ok = {0};
    CU_ASSERT_EQUAL(jfield_int_in(j, "", "r", true, false, 0, 10, &l, &ok), 0);
    CU_ASSERT_EQUAL(l, 7);
    FAILS(jfield_int_in(j, "step", "r", true, true, 0, 10, &l, &err), "step.r: expected an integer, got a real");
    FAILS(jfield_int_in(j, "step", "index", true, true, 0, 10, &l, &err), "step.index: missing");
    l = 3;
    CU_ASSERT_EQUAL(jfield_int_in(j, "step", "index", false, true, 0, 10, &l, &ok), 0);
    CU_ASSERT_EQUAL(l, 3);
    FAILS(jfield_num_in(j, "step", "t", true, 0, false, 1, &d, &err), "step.t: missing");
    FAILS(jfield_bool(j, "", "nul", false, &b, &err), "nul: expected true or false, got null");
    FAILS(jfield_obj(j, "x", "a", &o, &err), "x.a: expected an object, got array");
    FAILS(jfield_str_array(j, "t", "bad", &v, &n, &err), "t.bad[1]: expected a string, got integer");
    FAILS(jfield_str_array(j, "t", "s", &v, &n, &err), "t.s: expected an array of strings, got string");
    FAILS(jfield_refuse_unknown(j, "top", " s e n i b o a bad ", &err), "top.nul: unknown field");
    json_decref(j);
}

/* A path longer than the buffer is marked, not cut silently. */
static void test_long_path(void)
{
    char base[400], p[JFIELD_PATH_MAX];
    memset(base, 'a', sizeof base - 1);
    base[sizeof base - 1] = 0;
    jfield_path(p, base, "k");
    CU_ASSERT_EQUAL(strlen(p), JFIELD_PATH_MAX - 1);
    CU_ASSERT_STRING_EQUAL(p + strlen(p) - 3, "...");
    jfield_index(p, "config", 3);
    CU_ASSERT_STRING_EQUAL(p, "config[3]");
    jfield_path(p, "", "top");
    CU_ASSERT_STRING_EQUAL(p, "top");
}

static CU_TestInfo tests[] = {
    {"typed reads: values and defaults", test_values},
    {"typed reads: one error line naming the JSON path", test_errors},
    {"a path too long for a message ends in ...", test_long_path},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("json_field", tests);
}

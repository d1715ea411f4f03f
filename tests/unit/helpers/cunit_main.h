/* One CUnit runner for every unit-test binary: each test file lists its
 * tests in a CU_TestInfo array and calls run_suite() from main(). */
#ifndef ENVMGR_TEST_CUNIT_MAIN_H
#define ENVMGR_TEST_CUNIT_MAIN_H

#include <CUnit/Basic.h>

/* Runs the suite in CUnit's basic mode (verbose) and returns 0 only when every test passed. */
int run_suite(const char *name, CU_TestInfo *tests);

/* A scratch directory for the current test binary, removed at exit. */
const char *test_tmpdir(void);

#endif

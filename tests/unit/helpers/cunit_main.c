#include "cunit_main.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

static char tmpdir[256];

static void remove_tmpdir(void)
{
    if (tmpdir[0])
        remove_tree(tmpdir, NULL);
}

const char *test_tmpdir(void)
{
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/envmgr-unit-XXXXXX");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

int run_suite(const char *name, CU_TestInfo *tests)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_SuiteInfo suites[] = {{(char *)name, NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        fprintf(stderr, "cannot register suite %s: %s\n", name, CU_get_error_msg());
        CU_cleanup_registry();
        return 2;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return (failed == 0 && run > 0) ? 0 : 1;
}

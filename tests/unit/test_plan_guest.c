/* What each guest interface runs, in one table (plan_guest_refusal, getter_guest_need): none runs
 * nothing inside the guest, qga a guest agent's commands and files, osworld those and the steps
 * OSWorld's server does itself (launch, open, activate and close a window, wallpaper), envmgr
 * everything; a refusal
 * names the first step or getter the interface cannot run (docs/images.md). */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "envmgr/episode/plan.h"
#include "evaluator/getters.h"
#include "helpers/cunit_main.h"

/* plan_guest_refusal of task json on image `img` with guest interface iface: 0, or -1 with err */
static int refusal(const char *json, const char *iface, em_err *err)
{
    task *t = NULL;
    em_err perr = {0};
    if (task_parse(json, strlen(json), "/tmp", &t, &perr) < 0) {
        fprintf(stderr, "%s\n", perr.msg);
        CU_FAIL_FATAL("task_parse");
    }
    memset(err, 0, sizeof *err);
    int rc = plan_guest_refusal(t, iface, "img", err);
    task_free(t);
    return rc;
}

#define EXEC_STEP "{\"type\": \"execute\", \"parameters\": {\"command\": [\"true\"]}}"
#define UPLOAD_STEP "{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"h.txt\", \"path\": \"/tmp/h\"}]}}"
#define SLEEP_STEP "{\"type\": \"sleep\", \"parameters\": {\"seconds\": 0.1}}"
#define FILE_GETTER "{\"type\": \"vm_file\", \"path\": \"/tmp/h\", \"dest\": \"h\"}"
#define RULE_GETTER "{\"type\": \"rule\", \"rules\": {\"expected\": \"x\"}}"

static void test_commands_and_files_run_on_qga(void)
{
    em_err err;
    const char *t = "{\"id\": \"a\", \"instruction\": \"x\", \"config\": [" SLEEP_STEP ", " EXEC_STEP "],"
                    " \"evaluator\": {\"func\": \"exact_match\", \"result\": " FILE_GETTER ", \"expected\": " RULE_GETTER
                    ", \"postconfig\": [" EXEC_STEP "]}}";
    CU_ASSERT_EQUAL(refusal(t, "qga", &err), 0);
    CU_ASSERT_EQUAL(refusal(t, "envmgr", &err), 0);
    CU_ASSERT_EQUAL(refusal(t, "none", &err), -1); /* none: the first that needs the guest */
    CU_ASSERT_STRING_EQUAL(err.msg, "config[1]: execute needs the guest, and image `img` has no guest interface "
                                    "(guest none: screenshots and input only)");
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
}

static void test_toolbelt_steps_refused_on_qga(void)
{
    em_err err;
    const char *t = "{\"id\": \"b\", \"instruction\": \"x\", \"config\": [" EXEC_STEP ", "
                    "{\"type\": \"chrome_open_tabs\", \"parameters\": {\"urls_to_open\": [\"https://example.com\"]}}],"
                    " \"evaluator\": {\"func\": \"infeasible\"}}";
    CU_ASSERT_EQUAL(refusal(t, "qga", &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "config[1]: chrome_open_tabs needs envmgr's toolbelt in the guest (its desktop "
                                    "session and helpers); image `img` has guest qga (the QEMU guest agent: commands "
                                    "and files only)");
    CU_ASSERT_EQUAL(refusal(t, "envmgr", &err), 0);
    /* a getter through the toolbelt: named with its place in the evaluator */
    const char *g = "{\"id\": \"c\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"exact_match\", \"result\": "
                    FILE_GETTER ", \"expected\": {\"type\": \"vm_window_title\"}}}";
    CU_ASSERT_EQUAL(refusal(g, "qga", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "evaluator.expected[0]: vm_window_title needs envmgr's toolbelt"));
    /* postconfig after the getters */
    const char *p = "{\"id\": \"d\", \"instruction\": \"x\", \"config\": [" UPLOAD_STEP "], \"evaluator\": "
                    "{\"func\": \"infeasible\", \"postconfig\": [" SLEEP_STEP ", {\"type\": \"activate_window\", "
                    "\"parameters\": {\"window_name\": \"w\"}}]}}";
    CU_ASSERT_EQUAL(refusal(p, "qga", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "evaluator.postconfig[1]: activate_window needs envmgr's toolbelt"));
}

/* osworld: a guest agent's commands and files, and the steps OSWorld's server does itself */
static void test_osworld_server_steps(void)
{
    em_err err;
    const char *t = "{\"id\": \"o\", \"instruction\": \"x\", \"config\": [" EXEC_STEP ", "
                    "{\"type\": \"activate_window\", \"parameters\": {\"window_name\": \"Terminal\"}}, "
                    "{\"type\": \"close_window\", \"parameters\": {\"window_name\": \"w\"}}, "
                    "{\"type\": \"launch\", \"parameters\": {\"command\": [\"gedit\"]}}, "
                    "{\"type\": \"open\", \"parameters\": {\"path\": \"/tmp/h\"}}, "
                    "{\"type\": \"execute_with_verification\", \"parameters\": {\"command\": [\"true\"], "
                    "\"verification\": {\"command_success\": \"true\"}}}, " UPLOAD_STEP "],"
                    " \"evaluator\": {\"func\": \"exact_match\", \"result\": " FILE_GETTER ", \"expected\": "
                    RULE_GETTER ", \"postconfig\": [{\"type\": \"activate_window\", \"parameters\": "
                    "{\"window_name\": \"w\"}}]}}";
    CU_ASSERT_EQUAL(refusal(t, "osworld", &err), 0);
    CU_ASSERT_EQUAL(refusal(t, "qga", &err), -1); /* qga has no server to ask */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "config[1]: activate_window needs envmgr's toolbelt"));
    /* what needs envmgr's toolbelt is refused, naming the step and the interface */
    const char *c = "{\"id\": \"p\", \"instruction\": \"x\", \"config\": [" EXEC_STEP ", "
                    "{\"type\": \"chrome_open_tabs\", \"parameters\": {\"urls_to_open\": [\"https://example.com\"]}}],"
                    " \"evaluator\": {\"func\": \"infeasible\"}}";
    CU_ASSERT_EQUAL(refusal(c, "osworld", &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "config[1]: chrome_open_tabs needs envmgr's toolbelt in the guest (its desktop "
                                    "session and helpers); image `img` has guest osworld (OSWorld's server: commands, "
                                    "files, launch, open, windows, wallpaper, accessibility tree)");
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    const char *g = "{\"id\": \"q\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"exact_match\", "
                    "\"result\": {\"type\": \"vm_window_title\"}, \"expected\": " RULE_GETTER "}}";
    CU_ASSERT_EQUAL(refusal(g, "osworld", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "evaluator.result[0]: vm_window_title needs envmgr's toolbelt"));
    /* the server's own getters run there, not on qga */
    const char *a = "{\"id\": \"r\", \"instruction\": \"x\", \"evaluator\": {\"func\": [\"exact_match\", "
                    "\"exact_match\"], \"result\": [{\"type\": \"accessibility_tree\"}, {\"type\": \"vm_wallpaper\", "
                    "\"dest\": \"w\"}], \"expected\": [" RULE_GETTER ", " RULE_GETTER "]}}";
    CU_ASSERT_EQUAL(refusal(a, "osworld", &err), 0);
    CU_ASSERT_EQUAL(refusal(a, "qga", &err), -1);
}

static void test_getter_needs(void)
{
    static const struct {
        const char *type;
        getter_need need;
    } cases[] = {
        {"screenshot", GETTER_OFF_GUEST},          {"rule", GETTER_OFF_GUEST},
        {"cache_file", GETTER_OFF_GUEST},          {"egress_log", GETTER_OFF_GUEST},
        {"vm_file", GETTER_GUEST_AGENT},           {"vm_command_line", GETTER_GUEST_AGENT},
        {"vm_command_error", GETTER_GUEST_AGENT},  {"list_directory", GETTER_GUEST_AGENT},
        {"vm_window_title", GETTER_GUEST_TOOLBELT}, {"accessibility_tree", GETTER_GUEST_TOOLBELT},
        {"active_tab_info", GETTER_GUEST_TOOLBELT}, {"vm_wallpaper", GETTER_GUEST_TOOLBELT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *spec = json_pack("{s:s}", "type", cases[i].type);
        CU_ASSERT_EQUAL(getter_guest_need(spec), cases[i].need);
        CU_ASSERT_EQUAL(getter_needs_guest(spec), cases[i].need != GETTER_OFF_GUEST);
        json_decref(spec);
    }
    CU_ASSERT_EQUAL(getter_guest_need(NULL), GETTER_OFF_GUEST); /* a metric without expected */
}

static CU_TestInfo tests[] = {
    {"commands and files run on qga, not on none", test_commands_and_files_run_on_qga},
    {"toolbelt steps and getters are refused on qga", test_toolbelt_steps_refused_on_qga},
    {"osworld: commands, files and the server's own steps", test_osworld_server_steps},
    {"getter_guest_need's table", test_getter_needs},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("plan_guest", tests);
}

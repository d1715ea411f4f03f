/* Task files: a full valid task, defaults, every kind of error with its
 * JSON path, warnings, screen substitution, task folders and suites. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/task/task.h"
#include "tests/unit/helpers/cunit_main.h"

/* The task folder used by these tests (created on first use). */
static const char *task_dir(void)
{
    static char dir[512];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/task1", test_tmpdir());
        mkdir(dir, 0755);
        char *files = xasprintf("%s/files", dir);
        mkdir(files, 0755);
        free(files);
        dir[sizeof dir - 1] = '\0';
        char *real = realpath(dir, NULL);
        snprintf(dir, sizeof dir, "%s", real);
        free(real);
    }
    return dir;
}

static void write_text(const char *path, const char *text)
{
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(path, text, strlen(text), 0644, &err), 0);
}

static const char *MINIMAL = "{\"id\": \"t1\", \"instruction\": \"do it\", \"evaluator\": {\"func\": \"infeasible\"}}";

/* A minimal valid task with one top-level field set (value as JSON text; NULL removes it). */
static char *with_field(const char *key, const char *value)
{
    json_t *t = json_loads(MINIMAL, 0, NULL);
    if (value) {
        json_error_t je;
        json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
        if (!v)
            fprintf(stderr, "\n  bad test JSON for %s: %s: %s\n", key, value, je.text);
        json_object_set_new(t, key, v);
    } else {
        json_object_del(t, key);
    }
    char *s = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    return s;
}

static task *parse_ok(const char *text)
{
    em_err err = {0};
    task *t = NULL;
    int rc = task_parse(text, strlen(text), task_dir(), &t, &err);
    if (rc < 0)
        fprintf(stderr, "\n  unexpected error: %s\n  for: %.300s\n", err.msg, text);
    CU_ASSERT_EQUAL(rc, 0);
    return t;
}

static void parse_err(const char *text, const char *want)
{
    em_err err = {0};
    task *t = (task *)0x1;
    int rc = task_parse(text, strlen(text), task_dir(), &t, &err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
    if (strcmp(err.msg, want))
        fprintf(stderr, "\n  got:  %s\n  want: %s\n", err.msg, want);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
    if (rc == 0)
        task_free(t);
}

/* The field set to value must give exactly this error. */
static void field_err(const char *key, const char *value, const char *want)
{
    char *s = with_field(key, value);
    parse_err(s, want);
    free(s);
}

static void field_err_prefix(const char *key, const char *value, const char *want_prefix)
{
    char *s = with_field(key, value);
    em_err err = {0};
    task *t = NULL;
    CU_ASSERT_EQUAL(task_parse(s, strlen(s), task_dir(), &t, &err), -1);
    if (strncmp(err.msg, want_prefix, strlen(want_prefix)))
        fprintf(stderr, "\n  got:  %s\n  want: %s...\n", err.msg, want_prefix);
    CU_ASSERT_EQUAL(strncmp(err.msg, want_prefix, strlen(want_prefix)), 0);
    task_free(t);
    free(s);
}

/* text with @DIR@ replaced by the task folder (caller frees). */
static char *replace_dir(const char *text)
{
    const char *at = strstr(text, "@DIR@");
    if (!at)
        return xstrdup(text);
    return xasprintf("%.*s%s%s", (int)(at - text), text, task_dir(), at + 5);
}

static const char *FULL =
    "{\n"
    " \"id\": \"demo-1.a_b\",\n"
    " \"instruction\": \"Write hello into /tmp/x.txt\",\n"
    " \"snapshot\": \"os\",\n"
    " \"source\": \"unit test\",\n"
    " \"trajectory\": \"trajectories/\",\n"
    " \"related_apps\": [\"os\", \"gedit\"],\n"
    " \"image\": \"desktop-2\",\n"
    " \"network\": {\"mode\": \"allowlist\", \"allow\": [\"Example.COM:443\", \"*.debian.org:80\", "
    "\"93.184.216.34:8080\", \"[2606:4700::1111]:53\"]},\n"
    " \"limits\": {\"max_steps\": 30, \"step_timeout_s\": 20.5, \"episode_timeout_s\": 300},\n"
    " \"config\": [\n"
    "  {\"type\": \"execute\", \"parameters\": {\"command\": [\"bash\", \"-c\", \"echo hi\"], \"timeout\": 30}},\n"
    "  {\"type\": \"command\", \"parameters\": {\"command\": \"mkdir -p /tmp/a\", \"shell\": true}},\n"
    "  {\"type\": \"execute\", \"parameters\": {\"command\": [\"echo\", \"a b\"], \"shell\": true}},\n"
    "  {\"type\": \"launch\", \"parameters\": {\"command\": [\"gedit\"]}},\n"
    "  {\"type\": \"open\", \"parameters\": {\"path\": \"/home/user/x.txt\"}},\n"
    "  {\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"files/a.txt\", \"path\": "
    "\"/home/user/a.txt\"}]}},\n"
    "  {\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": \"file://@DIR@/files/b%20c.txt\", \"path\": "
    "\"/home/user/b.txt\"}, {\"url\": \"files/c.txt\", \"path\": \"c.txt\"}]}},\n"
    "  {\"type\": \"sleep\", \"parameters\": {\"seconds\": 0.5}},\n"
    "  {\"type\": \"activate_window\", \"parameters\": {\"window_name\": \"Terminal\", \"strict\": true}},\n"
    "  {\"type\": \"close_window\", \"parameters\": {\"window_name\": \"gedit\", \"by_class\": true}},\n"
    "  {\"type\": \"wait_screen\", \"parameters\": {\"timeout\": 10, \"stable_ms\": 500, \"reference\": "
    "\"ref.png\", \"region\": [0, 0, 100, 50], \"tolerance\": 0.05}},\n"
    "  {\"type\": \"wait_screen\"}\n"
    " ],\n"
    " \"evaluator\": {\n"
    "  \"func\": [\"check_include_exclude\", \"exact_match\", \"script\"],\n"
    "  \"conj\": \"or\",\n"
    "  \"result\": [{\"type\": \"vm_command_line\", \"command\": \"cat /tmp/x.txt\"}, {\"type\": \"vm_file\", "
    "\"path\": \"/tmp/x.txt\", \"dest\": \"x.txt\"}, {\"type\": \"local_file\", \"path\": \"files/a.txt\"}],\n"
    "  \"expected\": [{\"type\": \"rule\", \"rules\": {\"include\": [\"hello\"], \"exclude\": []}}, {\"type\": "
    "\"rule\", \"rules\": {\"expected\": \"hello\\n\"}}, null],\n"
    "  \"options\": [{}, null, {\"path\": \"file_contains.py\", \"needles\": [\"x\"]}],\n"
    "  \"postconfig\": [{\"type\": \"sleep\", \"parameters\": {\"seconds\": 1}}]\n"
    " },\n"
    " \"solution\": [{\"action_type\": \"CLICK\", \"x\": 10, \"y\": 20}, {\"pyautogui\": "
    "\"pyautogui.typewrite('hello'); pyautogui.press('enter')\"}, {\"action_type\": \"DONE\"}]\n"
    "}\n";

static void test_full_task(void)
{
    char *text = replace_dir(FULL);
    task *t = parse_ok(text);
    free(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(t->id, "demo-1.a_b");
    CU_ASSERT_STRING_EQUAL(t->instruction, "Write hello into /tmp/x.txt");
    CU_ASSERT_STRING_EQUAL(t->source, "unit test");
    CU_ASSERT_STRING_EQUAL(t->image, "desktop-2");
    CU_ASSERT_STRING_EQUAL(t->dir, task_dir());
    CU_ASSERT_EQUAL_FATAL(t->nrelated_apps, 2);
    CU_ASSERT_STRING_EQUAL(t->related_apps[1], "gedit");
    CU_ASSERT_EQUAL(t->nwarnings, 0); /* trajectory and snapshot are known OSWorld fields */

    CU_ASSERT_EQUAL(t->net.mode, NETPOLICY_ALLOWLIST);
    CU_ASSERT_EQUAL_FATAL(t->net.nrules, 4);
    CU_ASSERT_EQUAL(t->net.rules[0].host.kind, NETHOST_NAME);
    CU_ASSERT_STRING_EQUAL(t->net.rules[0].host.name, "example.com");
    CU_ASSERT_EQUAL(t->net.rules[0].port, 443);
    CU_ASSERT_EQUAL(t->net.rules[1].host.kind, NETHOST_WILDCARD);
    CU_ASSERT_STRING_EQUAL(t->net.rules[1].host.name, "*.debian.org");
    CU_ASSERT_EQUAL(t->net.rules[2].host.kind, NETHOST_IPV4);
    CU_ASSERT_EQUAL(t->net.rules[2].port, 8080);
    CU_ASSERT_EQUAL(t->net.rules[3].host.kind, NETHOST_IPV6);
    CU_ASSERT_STRING_EQUAL(t->net.rules[3].host.name, "2606:4700::1111");

    CU_ASSERT_EQUAL(t->max_steps, 30);
    CU_ASSERT_DOUBLE_EQUAL(t->step_timeout_s, 20.5, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(t->episode_timeout_s, 300, 1e-9);

    CU_ASSERT_EQUAL_FATAL(t->nconfig, 12);
    task_step *s = t->config;
    CU_ASSERT_EQUAL(s[0].type, STEP_EXECUTE);
    CU_ASSERT_EQUAL_FATAL(s[0].argc, 3);
    CU_ASSERT_STRING_EQUAL(s[0].argv[2], "echo hi");
    CU_ASSERT_PTR_NULL(s[0].argv[3]);
    CU_ASSERT_DOUBLE_EQUAL(s[0].timeout_s, 30, 1e-9);
    CU_ASSERT_EQUAL(s[1].type, STEP_COMMAND);
    CU_ASSERT_EQUAL_FATAL(s[1].argc, 3);
    CU_ASSERT_STRING_EQUAL(s[1].argv[0], "/bin/sh");
    CU_ASSERT_STRING_EQUAL(s[1].argv[1], "-c");
    CU_ASSERT_STRING_EQUAL(s[1].argv[2], "mkdir -p /tmp/a");
    CU_ASSERT_DOUBLE_EQUAL(s[1].timeout_s, 120, 1e-9);
    CU_ASSERT_EQUAL_FATAL(s[2].argc, 4); /* array + shell: Python's subprocess semantics */
    CU_ASSERT_STRING_EQUAL(s[2].argv[2], "echo");
    CU_ASSERT_STRING_EQUAL(s[2].argv[3], "a b");
    CU_ASSERT_EQUAL(s[3].type, STEP_LAUNCH);
    CU_ASSERT_STRING_EQUAL(s[3].argv[0], "gedit");
    CU_ASSERT_EQUAL(s[4].type, STEP_OPEN);
    CU_ASSERT_STRING_EQUAL(s[4].path, "/home/user/x.txt");
    CU_ASSERT_EQUAL(s[5].type, STEP_UPLOAD_FILE);
    CU_ASSERT_EQUAL_FATAL(s[5].nfiles, 1);
    char *want = xasprintf("%s/files/a.txt", task_dir());
    CU_ASSERT_STRING_EQUAL(s[5].files[0].host_path, want);
    free(want);
    CU_ASSERT_STRING_EQUAL(s[5].files[0].guest_path, "/home/user/a.txt");
    CU_ASSERT_EQUAL(s[6].type, STEP_DOWNLOAD);
    CU_ASSERT_EQUAL_FATAL(s[6].nfiles, 2);
    want = xasprintf("%s/files/b c.txt", task_dir()); /* file:// URLs are percent-decoded */
    CU_ASSERT_STRING_EQUAL(s[6].files[0].host_path, want);
    free(want);
    want = xasprintf("%s/files/c.txt", task_dir());
    CU_ASSERT_STRING_EQUAL(s[6].files[1].host_path, want);
    free(want);
    CU_ASSERT_EQUAL(s[7].type, STEP_SLEEP);
    CU_ASSERT_DOUBLE_EQUAL(s[7].seconds, 0.5, 1e-9);
    CU_ASSERT_EQUAL(s[8].type, STEP_ACTIVATE_WINDOW);
    CU_ASSERT_STRING_EQUAL(s[8].window_name, "Terminal");
    CU_ASSERT_TRUE(s[8].strict);
    CU_ASSERT_FALSE(s[8].by_class);
    CU_ASSERT_EQUAL(s[9].type, STEP_CLOSE_WINDOW);
    CU_ASSERT_TRUE(s[9].by_class);
    CU_ASSERT_EQUAL(s[10].type, STEP_WAIT_SCREEN);
    CU_ASSERT_DOUBLE_EQUAL(s[10].timeout_s, 10, 1e-9);
    CU_ASSERT_EQUAL(s[10].stable_ms, 500);
    CU_ASSERT_DOUBLE_EQUAL(s[10].tolerance, 0.05, 1e-9);
    CU_ASSERT_TRUE(s[10].has_region);
    CU_ASSERT_EQUAL(s[10].region[2], 100);
    want = xasprintf("%s/ref.png", task_dir());
    CU_ASSERT_STRING_EQUAL(s[10].reference, want);
    free(want);
    CU_ASSERT_DOUBLE_EQUAL(s[11].timeout_s, 30, 1e-9); /* wait_screen defaults */
    CU_ASSERT_EQUAL(s[11].stable_ms, 1000);
    CU_ASSERT_DOUBLE_EQUAL(s[11].tolerance, 0.01, 1e-9);
    CU_ASSERT_PTR_NULL(s[11].reference);
    CU_ASSERT_PTR_NULL(s[11].params);

    CU_ASSERT_TRUE(t->eval.conj_or);
    CU_ASSERT_FALSE(t->eval.infeasible);
    CU_ASSERT_EQUAL_FATAL(t->eval.nmetrics, 3);
    CU_ASSERT_STRING_EQUAL(t->eval.metrics[0].func, "check_include_exclude");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t->eval.metrics[1].result, "type")), "vm_file");
    CU_ASSERT_PTR_NULL(t->eval.metrics[2].expected);
    CU_ASSERT_PTR_NULL(t->eval.metrics[1].options);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t->eval.metrics[2].options, "path")), "file_contains.py");
    CU_ASSERT_EQUAL_FATAL(t->npostconfig, 1);
    CU_ASSERT_EQUAL(t->postconfig[0].type, STEP_SLEEP);

    /* the solution: computer_13 actions kept, pyautogui expanded */
    CU_ASSERT_EQUAL_FATAL(json_array_size(t->solution), 4);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(t->solution, 1), "action_type")),
                           "TYPING");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(t->solution, 2), "key")), "enter");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_array_get(t->solution, 3), "action_type")), "DONE");
    task_free(t);
}

static void test_defaults(void)
{
    task *t = parse_ok(MINIMAL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(t->image, "desktop");
    CU_ASSERT_PTR_NULL(t->source);
    CU_ASSERT_EQUAL(t->net.mode, NETPOLICY_NONE);
    CU_ASSERT_EQUAL(t->net.nrules, 0);
    CU_ASSERT_EQUAL(t->max_steps, 15);
    CU_ASSERT_DOUBLE_EQUAL(t->step_timeout_s, 60, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(t->episode_timeout_s, 600, 1e-9);
    CU_ASSERT_FALSE(t->eval.conj_or);
    CU_ASSERT_TRUE(t->eval.infeasible);
    CU_ASSERT_EQUAL(t->nconfig, 0);
    CU_ASSERT_EQUAL(t->npostconfig, 0);
    CU_ASSERT_PTR_NULL(t->solution);
    CU_ASSERT_EQUAL_FATAL(t->eval.nmetrics, 1);
    CU_ASSERT_PTR_NULL(t->eval.metrics[0].result);
    task_free(t);

    /* allow given without a mode means allowlist; an explicit empty allowlist denies everything */
    char *s = with_field("network", "{\"allow\": [\"example.org:80\"]}");
    t = parse_ok(s);
    CU_ASSERT_EQUAL(t->net.mode, NETPOLICY_ALLOWLIST);
    task_free(t);
    free(s);
    s = with_field("network", "{\"mode\": \"allowlist\"}");
    t = parse_ok(s);
    CU_ASSERT_EQUAL(t->net.mode, NETPOLICY_ALLOWLIST);
    CU_ASSERT_EQUAL(t->net.nrules, 0);
    task_free(t);
    free(s);
}

static void test_top_level_errors(void)
{
    parse_err("[]", "task: expected a JSON object, got array");
    parse_err("{\"id\": \"a\", \"id\": \"b\"}",
              "task: invalid JSON at line 1, column 16: duplicate object key near '\"id\"'");
    em_err err = {0};
    task *t = NULL;
    CU_ASSERT_EQUAL(task_parse("{", 1, NULL, &t, &err), -1);
    CU_ASSERT_EQUAL(strncmp(err.msg, "task: invalid JSON at line 1", 28), 0);
    field_err("id", NULL, "id: missing");
    field_err("id", "7", "id: expected a string, got integer");
    field_err("id", "\"a/b\"", "id: `a/b` must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
    field_err("id", "\"..\"", "id: `..` must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
    field_err("id", "\"\"", "id: `` must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
    field_err("instruction", NULL, "instruction: missing");
    field_err("instruction", "\"\"", "instruction: empty");
    field_err("instruction", "[\"x\"]", "instruction: expected a string, got array");
    field_err("snapshot", "1", "snapshot: expected a string, got integer");
    field_err("source", "true", "source: expected a string or an array of strings, got boolean");
    field_err("source", "[\"a\", 1]", "source[1]: expected a string, got integer");
    field_err("related_apps", "\"os\"", "related_apps: expected an array of strings, got string");
    field_err("related_apps", "[\"os\", 1]", "related_apps[1]: expected a string, got integer");
    field_err("image", "\"../etc\"", "image: `../etc` must not start with '.' or '-'");
    field_err("image", "\"a/b\"", "image: `a/b` may only contain letters, digits, '.', '-' and '_'");
    field_err("evaluator", NULL, "evaluator: missing");
    field_err("evaluator", "\"infeasible\"", "evaluator: expected an object, got string");
}

static void test_size_limits(void)
{
    /* a string over 64 KiB, wherever it is */
    size_t n = TASK_STRING_MAX + 1;
    char *big = xmalloc(n + 3);
    big[0] = '"';
    memset(big + 1, 'a', n);
    strcpy(big + 1 + n, "\"");
    field_err("instruction", big, "instruction: string of 65537 bytes is longer than the limit of 65536");
    char *cfg = xasprintf("[{\"type\": \"execute\", \"parameters\": {\"command\": [\"x\", %s]}}]", big);
    field_err("config", cfg, "config[0].parameters.command[1]: string of 65537 bytes is longer than the limit of 65536");
    free(cfg);
    free(big);

    /* an array over 1000 items */
    char *arr = xmalloc(1001 * 5 + 8);
    strcpy(arr, "[");
    for (int i = 0; i < 1001; i++)
        strcat(arr, i ? ",\"a\"" : "\"a\"");
    strcat(arr, "]");
    field_err("related_apps", arr, "related_apps: 1001 items, more than the limit of 1000");
    free(arr);

    /* the file itself */
    size_t fn = TASK_FILE_MAX + 1;
    char *file = xmalloc(fn + 1);
    memset(file, ' ', fn);
    file[fn] = '\0';
    parse_err(file, "task: 1048577 bytes, more than the limit of 1048576");
    free(file);
}

static void test_config_errors(void)
{
    /* the path names the step and the parameter */
    field_err("config",
              "[{\"type\": \"sleep\", \"parameters\": {\"seconds\": 1}}, {\"type\": \"open\", \"parameters\": {\"path\": "
              "\"/x\"}}, {\"type\": \"execute\", \"parameters\": {\"shell\": true}}]",
              "config[2].parameters.command: missing");
    field_err("config", "{}", "config: expected an array of steps, got object");
    field_err("config", "[7]", "config[0]: expected an object, got integer");
    field_err("config", "[{\"parameters\": {}}]", "config[0].type: missing");
    field_err("config", "[{\"type\": \"chrome_open_tabs\", \"parameters\": {}}]",
              "config[0].parameters.urls_to_open: missing");
    field_err("config", "[{\"type\": \"frobnicate\", \"parameters\": {}}]",
              "config[0].type: unknown setup step `frobnicate`");
    field_err("config", "[{\"type\": \"googledrive\", \"parameters\": {}}]",
              "config[0].type: setup step `googledrive` needs a Google account");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": []}]",
              "config[0].parameters: expected an object, got array");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": 5}}]",
              "config[0].parameters.command: expected a string or an array of strings, got integer");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": [\"ls\", 5]}}]",
              "config[0].parameters.command[1]: expected a string, got integer");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": []}}]",
              "config[0].parameters.command: empty");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": \"ls\", \"shell\": \"yes\"}}]",
              "config[0].parameters.shell: expected true or false, got `yes`");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": \"ls\", \"timeout\": 0}}]",
              "config[0].parameters.timeout: 0 is out of range (> 0 and <= 3600)");
    field_err("config", "[{\"type\": \"launch\", \"parameters\": {}}]", "config[0].parameters.command: missing");
    field_err("config", "[{\"type\": \"open\", \"parameters\": {\"path\": \"\"}}]", "config[0].parameters.path: empty");
    field_err("config", "[{\"type\": \"sleep\", \"parameters\": {}}]", "config[0].parameters.seconds: missing");
    field_err("config", "[{\"type\": \"sleep\"}]", "config[0].parameters.seconds: missing");
    field_err("config", "[{\"type\": \"sleep\", \"parameters\": {\"seconds\": -1}}]",
              "config[0].parameters.seconds: -1 is out of range (>= 0 and <= 3600)");
    field_err("config", "[{\"type\": \"activate_window\", \"parameters\": {}}]",
              "config[0].parameters.window_name: missing");
    field_err("config", "[{\"type\": \"close_window\", \"parameters\": {\"window_name\": \"x\", \"strict\": 1}}]",
              "config[0].parameters.strict: expected true or false, got integer");

    /* files: shipped with the task, inside its folder */
    field_err("config", "[{\"type\": \"upload_file\", \"parameters\": {}}]", "config[0].parameters.files: missing");
    field_err("config", "[{\"type\": \"upload_file\", \"parameters\": {\"files\": []}}]",
              "config[0].parameters.files: empty");
    field_err("config", "[{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"a\"}]}}]",
              "config[0].parameters.files[0].path: missing");
    field_err("config",
              "[{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"../secret\", \"path\": "
              "\"/x\"}]}}]",
              "config[0].parameters.files[0].local_path: `../secret` must not contain `..`");
    field_err("config",
              "[{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"files/../../x\", "
              "\"path\": \"/x\"}]}}]",
              "config[0].parameters.files[0].local_path: `files/../../x` must not contain `..`");
    char *want = xasprintf("config[0].parameters.files[0].local_path: `/etc/passwd` is outside the task folder `%s`",
                           task_dir());
    field_err("config",
              "[{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"/etc/passwd\", \"path\": "
              "\"/x\"}]}}]",
              want);
    free(want);
    field_err("config",
              "[{\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": \"ftp://example.com/a.docx\", "
              "\"path\": \"/x\"}]}}]",
              "config[0].parameters.files[0].url: `ftp://example.com/a.docx`: only http(s) URLs, file:// URLs and files "
              "shipped with the task are supported");
    want = xasprintf("config[0].parameters.files[1].url: `/etc/passwd` is outside the task folder `%s`", task_dir());
    field_err("config",
              "[{\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": \"files/a\", \"path\": \"/a\"}, "
              "{\"url\": \"file:///etc/passwd\", \"path\": \"/x\"}]}}]",
              want);
    free(want);
    field_err("config",
              "[{\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": \"file://host/x\", \"path\": "
              "\"/x\"}]}}]",
              "config[0].parameters.files[0].url: `file://host/x`: a file:// URL must name an absolute path "
              "(file:///...)");

    /* wait_screen is envmgr's own: unknown parameters are errors, not warnings */
    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"stable\": 5}}]",
              "config[0].parameters.stable: unknown field");
    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"region\": [0, 0, 0, 10]}}]",
              "config[0].parameters.region[2]: w must be an integer in 1..16384");
    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"region\": [0, 0]}}]",
              "config[0].parameters.region: expected [x, y, w, h], got an array of another size");
    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"tolerance\": 2}}]",
              "config[0].parameters.tolerance: 2 is out of range (>= 0 and <= 1)");
    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"stable_ms\": 1.5}}]",
              "config[0].parameters.stable_ms: expected an integer, got a fraction");
    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"reference\": \"../x.png\"}}]",
              "config[0].parameters.reference: `../x.png` must not contain `..`");
}

static void test_evaluator_errors(void)
{
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": 5}, \"expected\": {\"type\": \"rule\", "
                           "\"rules\": {\"expected\": 1}}}",
              "evaluator.result.type: expected a string, got integer");
    field_err("evaluator", "{}", "evaluator.func: missing");
    field_err("evaluator", "{\"func\": 1}", "evaluator.func: expected a string or an array of strings, got integer");
    field_err("evaluator", "{\"func\": []}", "evaluator.func: empty");
    field_err("evaluator", "{\"func\": \"compare_tables\"}", "evaluator.func: unknown metric `compare_tables`");
    field_err("evaluator", "{\"func\": [\"infeasible\", \"nope\"]}", "evaluator.func[1]: unknown metric `nope`");
    field_err("evaluator", "{\"func\": [\"infeasible\", 3]}", "evaluator.func[1]: expected a string, got integer");
    field_err("evaluator", "{\"func\": \"infeasible\", \"conj\": \"xor\"}",
              "evaluator.conj: expected \"and\" or \"or\", got `xor`");
    field_err("evaluator", "{\"func\": \"exact_match\", \"expected\": {\"type\": \"rule\", \"rules\": {}}}",
              "evaluator.result: missing (metric `exact_match` needs a result)");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"rule\", \"rules\": 1}}",
              "evaluator.expected: missing (metric `exact_match` needs an expected value)");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": [], \"expected\": {}}",
              "evaluator.result: expected an object, got array");
    /* lists run parallel to func */
    field_err("evaluator",
              "{\"func\": [\"exact_match\", \"exact_match\"], \"result\": [{\"type\": \"vm_window_title\"}], "
              "\"expected\": []}",
              "evaluator.result: expected 2 items (one per func), got 1");
    field_err("evaluator", "{\"func\": [\"exact_match\"], \"result\": {\"type\": \"vm_window_title\"}}",
              "evaluator.result: expected an array of 1 items (one per func), got object");
    field_err("evaluator",
              "{\"func\": [\"infeasible\", \"exact_match\"], \"result\": [null, {\"type\": \"vm_window_title\"}], "
              "\"expected\": [null, {\"type\": \"rule\"}]}",
              "evaluator.expected[1].rules: missing");
    field_err("evaluator",
              "{\"func\": [\"infeasible\", \"exact_match\"], \"result\": [null, {\"type\": \"vm_window_title\"}], "
              "\"expected\": [null, null]}",
              "evaluator.expected[1]: missing (metric `exact_match` needs an expected value)");
    /* getter specs */
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {}, \"expected\": {}}",
              "evaluator.result.type: missing");
    field_err_prefix("evaluator",
                     "{\"func\": \"exact_match\", \"result\": {\"type\": \"number_of_search_results\"}, \"expected\": {}}",
                     "evaluator.result.type: getter `number_of_search_results` counts results of a fixed google.com query");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"frob\"}, \"expected\": {}}",
              "evaluator.result.type: unknown getter `frob`");
    field_err("evaluator",
              "{\"func\": \"compare_text_file\", \"result\": {\"type\": \"vm_file\", \"path\": \"/a\"}, \"expected\": "
              "{\"type\": \"cloud_file\", \"path\": \"ftp://x/y\"}}",
              "evaluator.expected.path: `ftp://x/y`: only http(s) URLs or files shipped with the task");
    field_err("evaluator",
              "{\"func\": \"compare_text_file\", \"result\": {\"type\": \"vm_file\"}, \"expected\": {\"type\": "
              "\"local_file\", \"path\": \"a\"}}",
              "evaluator.result.path: missing");
    field_err("evaluator",
              "{\"func\": \"compare_text_file\", \"result\": {\"type\": \"vm_file\", \"path\": \"/a\"}, \"expected\": "
              "{\"type\": \"local_file\", \"path\": \"x/../../secret\"}}",
              "evaluator.expected.path: `x/../../secret` must not contain `..`");
    field_err("evaluator",
              "{\"func\": \"exact_match\", \"result\": {\"type\": \"vm_command_line\", \"command\": [\"ls\", 1]}, "
              "\"expected\": {\"type\": \"rule\", \"rules\": 1}}",
              "evaluator.result.command[1]: expected a string, got integer");
    field_err("evaluator",
              "{\"func\": \"exact_match\", \"result\": {\"type\": \"list_directory\", \"path\": \"tmp\"}, "
              "\"expected\": {\"type\": \"rule\", \"rules\": 1}}",
              "evaluator.result.path: `tmp` must be an absolute guest path");
    field_err("evaluator",
              "{\"func\": \"compare_images_exact\", \"result\": {\"type\": \"screenshot\", \"region\": [0, 0, 10]}, "
              "\"expected\": {\"type\": \"local_file\", \"path\": \"a.png\"}}",
              "evaluator.result.region: expected [x, y, w, h], got an array of another size");
    /* options */
    field_err("evaluator",
              "{\"func\": \"fuzzy_match\", \"result\": {\"type\": \"vm_window_title\"}, \"expected\": {\"type\": "
              "\"rule\", \"rules\": {\"expected\": \"x\"}}, \"options\": {\"threshold\": \"high\"}}",
              "evaluator.options.threshold: expected a number, got string");
    field_err("evaluator",
              "{\"func\": \"fuzzy_match\", \"result\": {\"type\": \"vm_window_title\"}, \"expected\": {\"type\": "
              "\"rule\", \"rules\": {\"expected\": \"x\"}}, \"options\": {\"threshold\": 1.5}}",
              "evaluator.options.threshold: 1.5 is out of range (>= 0 and <= 1)");
    field_err("evaluator",
              "{\"func\": \"exact_match\", \"result\": {\"type\": \"vm_window_title\"}, \"expected\": {\"type\": "
              "\"rule\", \"rules\": {\"expected\": \"x\"}}, \"options\": {\"foo\": 1}}",
              "evaluator.options.foo: unknown option for exact_match");
    field_err("evaluator",
              "{\"func\": [\"infeasible\", \"literal_match\"], \"result\": [null, {\"type\": \"vm_window_title\"}], "
              "\"expected\": [null, {\"type\": \"rule\", \"rules\": \"x\"}], \"options\": [{}, {\"type\": \"dict\"}]}",
              "evaluator.options[1].type: expected one of str list , got `dict`");
    field_err("evaluator", "{\"func\": \"script\", \"result\": {\"type\": \"vm_window_title\"}}",
              "evaluator.options.path: missing");
    /* evaluator-script metrics: the registry's options, typed and required */
    field_err("evaluator",
              "{\"func\": \"compare_table\", \"result\": {\"type\": \"vm_file\", \"path\": \"/a.xlsx\"}}",
              "evaluator.options.rules: missing");
    field_err("evaluator",
              "{\"func\": \"compare_table\", \"result\": {\"type\": \"vm_file\", \"path\": \"/a.xlsx\"}, "
              "\"options\": {\"rules\": {}}}",
              "evaluator.options.rules: expected a list, got object");
    field_err("evaluator",
              "{\"func\": \"compare_docx_files\", \"result\": {\"type\": \"vm_file\", \"path\": \"/a.docx\"}, "
              "\"expected\": {\"type\": \"local_file\", \"path\": \"b.docx\"}, \"options\": {\"ignore_case\": 1}}",
              "evaluator.options.ignore_case: expected true or false, got integer");
    field_err("evaluator", "{\"func\": \"compare_pdfs\", \"result\": {\"type\": \"vm_file\", \"path\": \"/a.pdf\"}}",
              "evaluator.expected: missing (metric `compare_pdfs` needs an expected value)");
    field_err("evaluator",
              "{\"func\": \"script\", \"result\": {\"type\": \"vm_window_title\"}, \"options\": {\"path\": \"a\", "
              "\"timeout_s\": 0}}",
              "evaluator.options.timeout_s: 0 is out of range (> 0 and <= 600)");
    /* postconfig steps are checked like config steps */
    field_err("evaluator", "{\"func\": \"infeasible\", \"postconfig\": [{\"type\": \"sleep\", \"parameters\": {}}]}",
              "evaluator.postconfig[0].parameters.seconds: missing");
    field_err("evaluator", "{\"func\": \"infeasible\", \"postconfig\": {}}",
              "evaluator.postconfig: expected an array of steps, got object");
}

static void test_network_limits_solution_errors(void)
{
    field_err("network", "[]", "network: expected an object, got array");
    field_err("network", "{\"mode\": \"open\"}", "network.mode: expected \"none\" or \"allowlist\", got `open`");
    field_err("network", "{\"mode\": \"none\", \"allow\": [\"a.com:80\"]}",
              "network.allow: must be empty when network.mode is \"none\"");
    field_err("network", "{\"allowed\": []}", "network.allowed: unknown field");
    field_err("network", "{\"allow\": \"a.com:80\"}",
              "network.allow: expected an array of \"host:port\" strings, got string");
    field_err("network", "{\"allow\": [80]}", "network.allow[0]: expected a \"host:port\" string, got integer");
    field_err("network", "{\"allow\": [\"example.com\"]}", "network.allow[0]: `example.com`: expected host:port");
    field_err("network", "{\"allow\": [\"a.com:443\", \"example.com:99999\"]}",
              "network.allow[1]: `example.com:99999`: port must be 1..65535");
    field_err("network", "{\"allow\": [\"example.com:0\"]}", "network.allow[0]: `example.com:0`: port must be 1..65535");
    field_err("network", "{\"allow\": [\"example.com:\"]}", "network.allow[0]: `example.com:`: port must be 1..65535");
    field_err("network", "{\"allow\": [\"*.com:443\"]}",
              "network.allow[0]: `*.com:443`: a wildcard must be *.<domain> with at least two labels");
    field_err("network", "{\"allow\": [\"a.*.com:443\"]}", "network.allow[0]: `a.*.com:443`: not a valid host name");
    field_err("network", "{\"allow\": [\"-a.com:443\"]}", "network.allow[0]: `-a.com:443`: not a valid host name");
    field_err("network", "{\"allow\": [\"::1:53\"]}",
              "network.allow[0]: `::1:53`: IPv6 addresses go in brackets ([::1]:443)");
    field_err("network", "{\"allow\": [\"[::g]:53\"]}", "network.allow[0]: `[::g]:53`: not a valid IPv6 address");
    field_err("network", "{\"allow\": [\"[::1]\"]}", "network.allow[0]: `[::1]`: expected [IPv6]:port");
    /* a task never opens the host, a private network or a metadata service to the guest */
    field_err("network", "{\"allow\": [\"127.0.0.1:7480\"]}",
              "network.allow[0]: `127.0.0.1:7480`: 127.0.0.1 is a loopback address: only the operator may allow it "
              "(--allow-private)");
    field_err("network", "{\"allow\": [\"a.com:443\", \"10.0.2.2:8080\"]}",
              "network.allow[1]: `10.0.2.2:8080`: 10.0.2.2 is a private address: only the operator may allow it "
              "(--allow-private)");
    field_err("network", "{\"allow\": [\"169.254.169.254:80\"]}",
              "network.allow[0]: `169.254.169.254:80`: 169.254.169.254 is a link-local address: only the operator "
              "may allow it (--allow-private)");
    field_err("network", "{\"allow\": [\"[::1]:53\"]}",
              "network.allow[0]: `[::1]:53`: ::1 is a loopback address: only the operator may allow it "
              "(--allow-private)");
    field_err("network", "{\"allow\": [\"300.1.1.1:80\"]}", "network.allow[0]: `300.1.1.1:80`: not a canonical dotted-quad IPv4 address");

    field_err("limits", "5", "limits: expected an object, got integer");
    field_err("limits", "{\"max_steps\": 0}", "limits.max_steps: 0 is out of range (1..1000)");
    field_err("limits", "{\"max_steps\": 1001}", "limits.max_steps: 1001 is out of range (1..1000)");
    field_err("limits", "{\"max_steps\": \"10\"}", "limits.max_steps: expected an integer, got string");
    field_err("limits", "{\"step_timeout_s\": 0}", "limits.step_timeout_s: 0 is out of range (> 0 and <= 3600)");
    field_err("limits", "{\"episode_timeout_s\": 86401}",
              "limits.episode_timeout_s: 86401 is out of range (> 0 and <= 86400)");
    field_err("limits", "{\"max_step\": 3}", "limits.max_step: unknown field");

    field_err("solution", "{}", "solution: expected an array of actions, got object");
    field_err("solution", "[\"DONE\"]", "solution[0]: expected an action object, got string");
    field_err("solution", "[{\"action_type\": \"JUMP\"}]", "solution[0].action_type: unknown action type `JUMP`");
    field_err("solution", "[{\"x\": 1}]", "solution[0].action_type: missing");
    field_err("solution", "[{\"action_type\": \"DONE\"}, {\"pyautogui\": \"import pyautogui\\nos.system('x')\"}]",
              "solution[1].pyautogui: pyautogui: line 2: `os.system('x')` is not in the supported subset");
    field_err("solution", "[{\"pyautogui\": 5}]", "solution[0].pyautogui: expected a string, got integer");
    field_err("solution", "[{\"pyautogui\": \"\", \"x\": 1}]", "solution[0]: {\"pyautogui\": ...} takes no other fields");
    field_err("solution", "[{\"pyautogui\": \"pyautogui.press('a', presses=600)\"}, {\"pyautogui\": "
                          "\"pyautogui.press('a', presses=600)\"}]",
              "solution: more than 1000 actions (after expanding pyautogui code)");
}

static void test_warnings(void)
{
    const char *text = "{\"id\": \"w\", \"instruction\": \"x\", \"snapshot\": \"chrome\", \"trajectory\": \"t/\", "
                       "\"foo\": 1, \"proxy\": true,"
                       " \"config\": [{\"type\": \"execute\", \"parameters\": {\"command\": \"ls\", \"stdout\": "
                       "\"log\"}, \"note\": \"n\"},"
                       " {\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": \"a\", \"path\": "
                       "\"/a\", \"mode\": 1}]}}],"
                       " \"evaluator\": {\"func\": \"infeasible\", \"bar\": []}}";
    task *t = parse_ok(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL_FATAL(t->nwarnings, 4); /* stdout is OSWorld's execute parameter (cache_file reads it) */
    CU_ASSERT_STRING_EQUAL(t->warnings[0], "unknown field `foo` ignored");
    CU_ASSERT_STRING_EQUAL(t->warnings[1], "unknown field `config[0].note` ignored");
    CU_ASSERT_STRING_EQUAL(t->warnings[2], "unknown field `config[1].parameters.files[0].mode` ignored");
    CU_ASSERT_STRING_EQUAL(t->warnings[3], "unknown field `evaluator.bar` ignored");
    CU_ASSERT_STRING_EQUAL(t->config[0].stdout_name, "log");
    CU_ASSERT(t->osworld_proxy);
    /* unknown fields are kept in the document */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(t->json, "foo")), 1);
    task_free(t);

    /* task_load also prints them, prefixed with the file */
    char *path = xasprintf("%s/warn.json", task_dir());
    write_text(path, text);
    char *log = xasprintf("%s/stderr.txt", test_tmpdir());
    fflush(stderr);
    int saved = dup(2);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    em_err err = {0};
    int rc = task_load(path, &t, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_STRING_EQUAL(t->dir, task_dir());
    task_free(t);
    char *out = NULL;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(read_file_capped(log, 1 << 16, &out, &len, &err), 0);
    char *want = xasprintf("task %s: unknown field `foo` ignored\n", path);
    CU_ASSERT_EQUAL(strncmp(out, want, strlen(want)), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown field `evaluator.bar` ignored\n"));
    free(want);
    free(out);
    free(log);
    free(path);
}

static void test_load_errors(void)
{
    em_err err = {0};
    task *t = NULL;
    char *path = xasprintf("%s/missing.json", task_dir());
    CU_ASSERT_EQUAL(task_load(path, &t, &err), -1);
    char *want = xasprintf("task: open `%s`: No such file or directory", path);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
    free(want);
    free(path);

    path = xasprintf("%s/bad.json", task_dir());
    write_text(path, "{\"id\": \"x\", \"instruction\": \"y\", \"evaluator\": {\"func\": \"infeasible\", \"conj\": 1}}");
    CU_ASSERT_EQUAL(task_load(path, &t, &err), -1);
    CU_ASSERT_PTR_NULL(t);
    want = xasprintf("%s: evaluator.conj: expected a string, got integer", path);
    CU_ASSERT_STRING_EQUAL(err.msg, want);
    free(want);
    free(path);
}

static void test_screen_substitution(void)
{
    const char *text =
        "{\"id\": \"s\", \"instruction\": \"click at {SCREEN_WIDTH}\","
        " \"config\": [{\"type\": \"execute\", \"parameters\": {\"command\": [\"xdotool\", \"mousemove\", "
        "\"{SCREEN_WIDTH_HALF}\", \"{SCREEN_HEIGHT_HALF}\"]}},"
        "  {\"type\": \"command\", \"parameters\": {\"command\": \"echo {SCREEN_WIDTH}x{SCREEN_HEIGHT} {NOT_A_VAR} "
        "{SCREEN_WIDTH\"}}],"
        " \"evaluator\": {\"func\": \"exact_match\", \"result\": {\"type\": \"vm_command_line\", \"command\": "
        "\"xdpyinfo | grep {SCREEN_WIDTH}\"},"
        "  \"expected\": {\"type\": \"rule\", \"rules\": {\"expected\": [\"{SCREEN_HEIGHT}\"]}},"
        "  \"postconfig\": [{\"type\": \"execute\", \"parameters\": {\"command\": \"xdotool mousemove "
        "{SCREEN_WIDTH_HALF} 0\"}}]}}";
    task *t = parse_ok(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(task_substitute_screen(t, 1280, 801, &err), 0);
    CU_ASSERT_STRING_EQUAL(t->config[0].argv[2], "640");
    CU_ASSERT_STRING_EQUAL(t->config[0].argv[3], "400");
    CU_ASSERT_STRING_EQUAL(t->config[1].argv[2], "echo 1280x801 {NOT_A_VAR} {SCREEN_WIDTH");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(t->eval.metrics[0].result, "command")),
                           "xdpyinfo | grep 1280");
    json_t *rules = json_object_get(t->eval.metrics[0].expected, "rules");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(rules, "expected"), 0)), "801");
    CU_ASSERT_STRING_EQUAL(t->postconfig[0].argv[2], "xdotool mousemove 640 0");
    /* only config and evaluator are substituted */
    CU_ASSERT_STRING_EQUAL(t->instruction, "click at {SCREEN_WIDTH}");
    /* substituting again starts from the document as read: the task settles for another screen
     * (the episode plan checks it for the planned image, then for the env that runs) */
    CU_ASSERT_EQUAL(task_substitute_screen(t, 1920, 1080, &err), 0);
    CU_ASSERT_STRING_EQUAL(t->config[0].argv[2], "960");
    CU_ASSERT_STRING_EQUAL(t->postconfig[0].argv[2], "xdotool mousemove 960 0");
    CU_ASSERT_EQUAL(task_substitute_screen(t, 0, 1080, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "screen size 0x1080 is out of range (1..16384)");
    task_free(t);
}

static void test_path_inside(void)
{
    em_err err = {0};
    char *abs = NULL;
    const char *d = task_dir();
    char *f = xasprintf("%s/files/real.txt", d);
    write_text(f, "x");

    CU_ASSERT_EQUAL(path_inside(d, "files/real.txt", true, &abs, &err), 0);
    CU_ASSERT_STRING_EQUAL(abs, f);
    free(abs);
    CU_ASSERT_EQUAL(path_inside(d, f, true, &abs, &err), 0); /* absolute, inside */
    CU_ASSERT_STRING_EQUAL(abs, f);
    free(abs);
    CU_ASSERT_EQUAL(path_inside(d, "files/not-yet.txt", false, &abs, &err), 0);
    free(abs);
    CU_ASSERT_EQUAL(path_inside(d, "files/not-yet.txt", true, &abs, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "`files/not-yet.txt`: No such file or directory");
    CU_ASSERT_PTR_NULL(abs);
    CU_ASSERT_EQUAL(path_inside(d, "a/../b", false, &abs, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "`a/../b` must not contain `..`");
    CU_ASSERT_EQUAL(path_inside(d, "..", false, &abs, &err), -1);
    CU_ASSERT_EQUAL(path_inside(d, "", false, &abs, &err), -1);
    CU_ASSERT_EQUAL(path_inside(d, d, false, &abs, &err), -1); /* the folder itself is not a file in it */
    /* "..x" is a fine name */
    CU_ASSERT_EQUAL(path_inside(d, "..x", false, &abs, &err), 0);
    free(abs);
    /* a symlink out of the folder is caught once resolved */
    char *link = xasprintf("%s/files/escape", d);
    unlink(link);
    CU_ASSERT_EQUAL_FATAL(symlink("/etc/hostname", link), 0);
    CU_ASSERT_EQUAL(path_inside(d, "files/escape", false, &abs, &err), 0); /* lexically fine */
    free(abs);
    CU_ASSERT_EQUAL(path_inside(d, "files/escape", true, &abs, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "`files/escape` resolves outside the task folder");
    /* a sibling folder sharing the prefix is outside */
    char *sib = xasprintf("%s-evil/x", d);
    CU_ASSERT_EQUAL(path_inside(d, sib, false, &abs, &err), -1);
    free(sib);
    free(link);
    free(f);
}

/* Files a task ships (wait_screen's reference, an upload's local_path, a local download url) are
 * checked by one helper: a symlink in the task folder that reaches a host file is refused at load,
 * naming the field, and again when setup reads the file. */
static void test_shipped_files(void)
{
    const char *d = task_dir();
    char *host = xasprintf("%s/host-secret.png", test_tmpdir()); /* outside the task folder */
    write_text(host, "\x89PNG host file");
    static const char *const links[] = {"ref-link.png", "files/up-link", "files/inside-link"};
    char *paths[3];
    for (size_t i = 0; i < 3; i++) {
        paths[i] = xasprintf("%s/%s", d, links[i]);
        unlink(paths[i]);
    }
    char *inside = xasprintf("%s/files/inside.png", d);
    write_text(inside, "x");
    CU_ASSERT_EQUAL_FATAL(symlink(host, paths[0]), 0);
    CU_ASSERT_EQUAL_FATAL(symlink(host, paths[1]), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("inside.png", paths[2]), 0);

    field_err("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"reference\": \"ref-link.png\"}}]",
              "config[0].parameters.reference: `ref-link.png` resolves outside the task folder");
    field_err("config", "[{\"type\": \"upload_file\", \"parameters\": {\"files\": [{\"local_path\": "
                        "\"files/up-link\", \"path\": \"/tmp/x\"}]}}]",
              "config[0].parameters.files[0].local_path: `files/up-link` resolves outside the task folder");
    field_err("config", "[{\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": "
                        "\"files/up-link\", \"path\": \"/tmp/x\"}]}}]",
              "config[0].parameters.files[0].url: `files/up-link` resolves outside the task folder");
    /* A symlink that stays inside is fine, and so is a file not there yet (checked at setup). */
    char *ok = with_field("config", "[{\"type\": \"wait_screen\", \"parameters\": {\"reference\": "
                                    "\"files/inside-link\"}}, {\"type\": \"wait_screen\", \"parameters\": "
                                    "{\"reference\": \"later.png\"}}]");
    task *t = parse_ok(ok);
    CU_ASSERT_FATAL(t != NULL);
    char *want = xasprintf("%s/files/inside.png", d);
    CU_ASSERT_STRING_EQUAL(t->config[0].reference, want); /* resolved */
    free(want);
    /* The link placed after loading: setup's own check (must_exist) refuses it. */
    char *later = xasprintf("%s/later.png", d), *abs = NULL;
    unlink(later);
    CU_ASSERT_EQUAL_FATAL(symlink(host, later), 0);
    em_err err = {0};
    CU_ASSERT_EQUAL(task_file_path(d, t->config[1].reference, true, &abs, &err), -1);
    CU_ASSERT_PTR_NULL(abs);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "resolves outside the task folder"));
    CU_ASSERT_EQUAL(task_file_path(d, "later.png", false, &abs, &err), -1); /* and a load now */
    unlink(later);
    task_free(t);
    for (size_t i = 0; i < 3; i++) {
        unlink(paths[i]);
        free(paths[i]);
    }
    unlink(inside);
    free(inside);
    free(later);
    free(ok);
    free(host);
}

static void mkfile(const char *dir, const char *name)
{
    char *p = xasprintf("%s/%s", dir, name);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    em_err err = {0};
    mkdir_p(p, 0755, &err);
    *slash = '/';
    write_text(p, "{}");
    free(p);
}

static void test_list_dir(void)
{
    char *suite = xasprintf("%s/suite", test_tmpdir());
    mkfile(suite, "b.json");
    mkfile(suite, "a.json");
    mkfile(suite, "index.json");
    mkfile(suite, "test_all.json");
    mkfile(suite, ".hidden.json");
    mkfile(suite, "notes.txt");
    mkfile(suite, "sub/c.json");
    mkfile(suite, "sub/test_all.json");
    mkfile(suite, "sub/deeper/d.json");
    char **paths = NULL;
    size_t n = 0;
    em_err err = {0};
    char *slash = xasprintf("%s/", suite); /* a trailing slash is fine */
    CU_ASSERT_EQUAL_FATAL(task_list_dir(slash, &paths, &n, &err), 0);
    free(slash);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    char *want[3] = {xasprintf("%s/a.json", suite), xasprintf("%s/b.json", suite), xasprintf("%s/sub/c.json", suite)};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_STRING_EQUAL(paths[i], want[i]);
        free(want[i]);
    }
    task_paths_free(paths, n);

    /* an OSWorld index: {domain: [ids]} */
    char *s2 = xasprintf("%s/suite2", test_tmpdir());
    mkfile(s2, "chrome/t1.json");
    mkfile(s2, "examples/os/t2.json");
    mkfile(s2, "t3.json");
    char *index = xasprintf("%s/test_all.json", s2);
    write_text(index, "{\"chrome\": [\"t1\"], \"os\": [\"t2\", \"t3\"]}");
    CU_ASSERT_EQUAL_FATAL(task_list_dir(index, &paths, &n, &err), 0);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    char *w1 = xasprintf("%s/chrome/t1.json", s2), *w2 = xasprintf("%s/examples/os/t2.json", s2),
         *w3 = xasprintf("%s/t3.json", s2);
    CU_ASSERT_STRING_EQUAL(paths[0], w1);
    CU_ASSERT_STRING_EQUAL(paths[1], w2);
    CU_ASSERT_STRING_EQUAL(paths[2], w3);
    free(w1);
    free(w2);
    free(w3);
    task_paths_free(paths, n);

    write_text(index, "{\"os\": [\"t2\", \"nope\"]}");
    CU_ASSERT_EQUAL(task_list_dir(index, &paths, &n, &err), -1);
    char *w = xasprintf("%s: os[1]: no task file for `nope` (looked for %s/os/nope.json, %s/examples/os/nope.json and "
                        "%s/nope.json)",
                        index, s2, s2, s2);
    CU_ASSERT_STRING_EQUAL(err.msg, w);
    free(w);
    CU_ASSERT_PTR_NULL(paths);
    CU_ASSERT_EQUAL(n, 0);
    write_text(index, "{\"os\": [\"../../etc/passwd\"]}");
    CU_ASSERT_EQUAL(task_list_dir(index, &paths, &n, &err), -1);
    w = xasprintf("%s: os[0]: expected a task id (A-Z a-z 0-9 . _ -)", index);
    CU_ASSERT_STRING_EQUAL(err.msg, w);
    free(w);
    write_text(index, "{\"..\": [\"t3\"]}");
    CU_ASSERT_EQUAL(task_list_dir(index, &paths, &n, &err), -1);
    write_text(index, "[\"t3\"]");
    CU_ASSERT_EQUAL(task_list_dir(index, &paths, &n, &err), -1);
    CU_ASSERT_EQUAL(task_list_dir("/nonexistent/suite", &paths, &n, &err), -1);
    CU_ASSERT_STRING_EQUAL(err.msg, "task list: `/nonexistent/suite`: No such file or directory");
    free(index);
    free(s2);
    free(suite);
}

static void test_step_type_names(void)
{
    CU_ASSERT_STRING_EQUAL(task_step_type_name(STEP_UPLOAD_FILE), "upload_file");
    CU_ASSERT_STRING_EQUAL(task_step_type_name(STEP_WAIT_SCREEN), "wait_screen");
    CU_ASSERT_STRING_EQUAL(task_step_type_name((task_step_type)99), "?");
}

/* OSWorld's syntax beyond the first version: new step types, execute's parameters, flags spelt
 * as strings, source lists, http(s) assets, multi vm_file, placeholders. */
static void test_osworld_syntax(void)
{
    const char *text =
        "{\"id\": \"ow\", \"instruction\": \"x\", \"source\": [\"a\", \"b\"], \"proxy\": \"true\", \"fixed_ip\": false,"
        " \"possibility_of_env_change\": \"low\", \"related_apps\": [\"os\"],"
        " \"config\": ["
        "  {\"type\": \"execute\", \"parameters\": {\"command\": \"echo {CLIENT_PASSWORD} | sudo -S true\","
        "   \"shell\": \"true\", \"stdout\": \"out.txt\", \"stderr\": \"err.txt\", \"until\": {\"returncode\": 0},"
        "   \"check\": true}},"
        "  {\"type\": \"download\", \"parameters\": {\"files\": [{\"url\": \"https://example.com/a.docx\", \"path\":"
        "   \"~/a.docx\"}]}},"
        "  {\"type\": \"execute_with_verification\", \"parameters\": {\"command\": [\"true\"], \"verification\":"
        "   {\"window_exists\": \"Terminal\"}, \"max_wait_time\": 5, \"check_interval\": 0.5}},"
        "  {\"type\": \"chrome_open_tabs\", \"parameters\": {\"urls_to_open\": [\"https://example.com\"]}},"
        "  {\"type\": \"chrome_close_tabs\", \"parameters\": {\"urls_to_close\": [\"https://example.com\"]}},"
        "  {\"type\": \"change_wallpaper\", \"parameters\": {\"path\": \"~/w.png\"}},"
        "  {\"type\": \"tidy_desktop\", \"parameters\": {}},"
        "  {\"type\": \"update_browse_history\", \"parameters\": {\"history\": [{\"url\": \"https://e.org\", "
        "   \"title\": \"E\", \"visit_time_from_now_in_seconds\": 3600}]}},"
        "  {\"type\": \"proxy\", \"parameters\": {}},"
        "  {\"type\": \"act\", \"parameters\": {\"action_seq\": [{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 2},"
        "   \"pyautogui.press('enter')\"]}}"
        " ],"
        " \"evaluator\": {\"func\": [\"exact_match\", \"exact_match\"],"
        "  \"result\": [{\"type\": \"vm_file\", \"multi\": true, \"path\": [\"~/a\", \"/b\"], \"dest\": [\"a\", \"b\"],"
        "    \"gives\": [0, 1]}, {\"type\": \"vm_command_line\", \"command\": \"id -un\", \"shell\": \"false\"}],"
        "  \"expected\": [{\"type\": \"cloud_file\", \"path\": \"http://example.com/e.txt\", \"dest\": \"e.txt\"},"
        "    {\"type\": \"rule\", \"rules\": {\"expected\": \"user\\n\"}}]}}";
    task *t = parse_ok(text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->nwarnings, 0);
    CU_ASSERT_STRING_EQUAL(t->source, "a, b");
    CU_ASSERT(t->osworld_proxy);
    CU_ASSERT_EQUAL_FATAL(t->nconfig, 10);
    CU_ASSERT(t->config[0].shell);
    CU_ASSERT(t->config[0].check);
    CU_ASSERT_STRING_EQUAL(t->config[0].stdout_name, "out.txt");
    CU_ASSERT_STRING_EQUAL(t->config[0].stderr_name, "err.txt");
    CU_ASSERT_PTR_NOT_NULL(t->config[0].until);
    CU_ASSERT_PTR_NULL(t->config[1].files[0].host_path);
    CU_ASSERT_STRING_EQUAL(t->config[1].files[0].url, "https://example.com/a.docx");
    CU_ASSERT_EQUAL(t->config[2].type, STEP_EXECUTE_WITH_VERIFICATION);
    CU_ASSERT_DOUBLE_EQUAL(t->config[2].seconds, 5, 1e-9);
    CU_ASSERT_EQUAL(t->config[3].nurls, 1);
    CU_ASSERT_EQUAL(t->config[7].type, STEP_UPDATE_BROWSE_HISTORY);
    CU_ASSERT_EQUAL(t->config[8].type, STEP_PROXY);
    CU_ASSERT_EQUAL(json_array_size(t->config[9].actions), 2);
    size_t n;
    const char **urls = task_asset_urls(t, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(urls[0], "https://example.com/a.docx");
    CU_ASSERT_STRING_EQUAL(urls[1], "http://example.com/e.txt");
    free(urls);

    /* {CLIENT_PASSWORD} is the image user's password; without one it stays as written */
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(task_substitute_screen(t, 1280, 800, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(t->config[0].argv[2], "{CLIENT_PASSWORD}"));
    task_vars v = {.screen_w = 1280, .screen_h = 800, .client_password = "a much longer secret"};
    CU_ASSERT_EQUAL_FATAL(task_substitute(t, &v, &err), 0);
    CU_ASSERT_STRING_EQUAL(t->config[0].argv[2], "echo a much longer secret | sudo -S true");
    task_free(t);

    /* the new parameters are checked too */
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": \"ls\", \"stdout\": \"../x\"}}]",
              "config[0].parameters.stdout: `../x` must be a plain file name (no `/`, not starting with `.`)");
    field_err("config", "[{\"type\": \"execute\", \"parameters\": {\"command\": \"ls\", \"until\": {\"exit\": 0}}}]",
              "config[0].parameters.until.exit: unknown field");
    field_err("config", "[{\"type\": \"act\", \"parameters\": {\"action_seq\": [\"os.system('x')\"]}}]",
              "config[0].parameters.action_seq[0]: pyautogui: line 1: `os.system('x')` is not in the supported subset");
    field_err("config", "[{\"type\": \"execute_with_verification\", \"parameters\": {\"command\": \"x\", "
                        "\"verification\": {\"window\": \"a\"}}}]",
              "config[0].parameters.verification.window: unknown field");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"vm_file\", \"multi\": true, \"path\": "
                           "[\"/a\"], \"dest\": [\"a\"], \"gives\": [1]}, \"expected\": {\"type\": \"rule\", \"rules\": {}}}",
              "evaluator.result.gives[0]: expected an index in 0..0");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"rule_relativeTime\", \"rules\": "
                           "{\"relativeTime\": {\"from\": \"someday\"}, \"expected\": {\"time\": \"{Year}\"}}}, "
                           "\"expected\": {\"type\": \"rule\", \"rules\": {}}}",
              "evaluator.result.rules.relativeTime.from: expected one of OSWorld's day phrases (\"tomorrow\", \"next "
              "Monday\", \"next week Saturday\", ...)");
    /* the split forms only where OSWorld reads them, with their three keys */
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"rule_relativeTime\", \"rules\": "
                           "{\"relativeTime\": {\"from\": \"next Friday split\", \"to\": \"next Monday\"}, \"expected\": "
                           "{\"from\": \"{Year}\", \"to\": \"{Year}\"}}}, \"expected\": {\"type\": \"rule\", \"rules\": {}}}",
              "evaluator.result.rules.relativeTime.from: `next Friday split` is a to phrase (with a `to`)");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"rule_relativeTime\", \"rules\": "
                           "{\"relativeTime\": {\"from\": \"next Monday split\", \"to\": \"next Friday split\"}, "
                           "\"expected\": {\"puDay\": \"{DayD}\", \"puMonth\": \"{MonthD}\"}}}, \"expected\": {\"type\": "
                           "\"rule\", \"rules\": {}}}",
              "evaluator.result.rules.expected.puYear: expected a format string");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"rule_relativeTime\", \"rules\": "
                           "{\"relativeTime\": {\"from\": \"tomorrow\"}, \"timezone\": \"../../etc/passwd\", "
                           "\"expected\": {\"time\": [\"{Year}\"]}}}, \"expected\": {\"type\": \"rule\", \"rules\": {}}}",
              "evaluator.result.rules.timezone: expected a time-zone name such as \"America/New_York\"");
    field_err("evaluator", "{\"func\": \"exact_match\", \"result\": {\"type\": \"rule_relativeTime\", \"rules\": "
                           "{\"relativeTime\": {\"from\": \"tomorrow\"}, \"expected\": {\"time\": [\"{Year}\", 3]}}}, "
                           "\"expected\": {\"type\": \"rule\", \"rules\": {}}}",
              "evaluator.result.rules.expected.time: expected a format string or a list of them");
}

/* `envmgr task check` sees every problem of a file, one line each, not only the first. */
static void test_check_every_problem(void)
{
    char *path = xasprintf("%s/many.json", task_dir());
    write_text(path, "{\"id\": \"bad id!\", \"instruction\": \"\", \"config\": [{\"type\": \"googledrive\"},"
                     " {\"type\": \"sleep\", \"parameters\": {\"seconds\": 1}}, {\"type\": \"nope\"}],"
                     " \"evaluator\": {\"func\": [\"no_such_metric\", \"exact_match\"],"
                     " \"result\": [{\"type\": \"gotoRecreationPage_and_get_html_content\"}, {\"type\": \"vm_screen_size\"}],"
                     " \"expected\": [{\"type\": \"rule\", \"rules\": 1}, {\"type\": \"cloud_file\", \"path\": "
                     "\"https://h/x\", \"dest\": \"x\"}]}}");
    task_check_result r;
    CU_ASSERT_EQUAL(task_check_file(path, &r), -1);
    const char *want[] = {
        "id: `bad id!` must be 1 to 128 characters of A-Z a-z 0-9 . _ -",
        "instruction: empty",
        "config[0].type: setup step `googledrive` needs a Google account",
        "config[2].type: unknown setup step `nope`",
        "evaluator.func[0]: unknown metric `no_such_metric`",
        "evaluator.result[0].type: getter `gotoRecreationPage_and_get_html_content` never reads the page in "
        "OSWorld-Verified: its search-result step is unreachable code, so it always returns its "
        "__EVALUATION_FAILED__ value and the task scores 0 for every agent",
    };
    CU_ASSERT_EQUAL_FATAL(r.nproblems, ARRAY_LEN(want));
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        if (strcmp(r.problems[i], want[i]))
            fprintf(stderr, "\n  got:  %s\n  want: %s\n", r.problems[i], want[i]);
        CU_ASSERT_STRING_EQUAL(r.problems[i], want[i]);
    }
    CU_ASSERT_PTR_NULL(r.id);
    CU_ASSERT_EQUAL_FATAL(r.nurls, 1);
    CU_ASSERT_STRING_EQUAL(r.urls[0], "https://h/x");
    task_check_result_free(&r);

    write_text(path, "{\"id\": \"ok\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"}}");
    CU_ASSERT_EQUAL(task_check_file(path, &r), 0);
    CU_ASSERT_EQUAL(r.nproblems, 0);
    CU_ASSERT_STRING_EQUAL(r.id, "ok");
    task_check_result_free(&r);
    write_text(path, "{\"id\": ");
    CU_ASSERT_EQUAL(task_check_file(path, &r), -1);
    CU_ASSERT_EQUAL_FATAL(r.nproblems, 1);
    CU_ASSERT_EQUAL(strncmp(r.problems[0], "task: invalid JSON", 18), 0);
    task_check_result_free(&r);
    free(path);

    size_t n;
    const task_piece *pieces = task_setup_pieces(&n);
    CU_ASSERT(n > 15);
    CU_ASSERT_STRING_EQUAL(pieces[0].name, "execute");
}

/* A task file is read once: its hash is of the very bytes parsed, not of a second read. */
static void test_sha_of_bytes_read(void)
{
    const char *text = "{\"id\": \"h\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"infeasible\"}}";
    _cleanup_free_ char *path = xasprintf("%s/h.json", test_tmpdir());
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(write_file_atomic(path, text, strlen(text), 0644, &err), 0);
    task *t = NULL;
    CU_ASSERT_EQUAL_FATAL(task_load(path, &t, &err), 0);
    char want[65];
    sha256_hex(text, strlen(text), want);
    CU_ASSERT_STRING_EQUAL(t->sha256, want);
    CU_ASSERT_EQUAL(unlink(path), 0); /* nothing reads the file again */
    CU_ASSERT_EQUAL(task_substitute_screen(t, 1280, 800, &err), 0);
    CU_ASSERT_STRING_EQUAL(t->sha256, want); /* the hash is of what was read, not of the settled document */
    task_free(t);
}

static CU_TestInfo tests[] = {
    {"a task file's sha256 is of the bytes parsed", test_sha_of_bytes_read},
    {"a full valid task", test_full_task},
    {"defaults", test_defaults},
    {"top-level field errors", test_top_level_errors},
    {"size limits", test_size_limits},
    {"config step errors", test_config_errors},
    {"evaluator errors", test_evaluator_errors},
    {"network, limits and solution errors", test_network_limits_solution_errors},
    {"unknown fields are warnings", test_warnings},
    {"task_load errors name the file", test_load_errors},
    {"screen size substitution", test_screen_substitution},
    {"paths stay inside the task folder", test_path_inside},
    {"shipped files: a symlink out of the folder is refused at load and at setup", test_shipped_files},
    {"suites: folders and OSWorld indexes", test_list_dir},
    {"step type names", test_step_type_names},
    {"OSWorld's syntax: new steps, parameters, assets, placeholders", test_osworld_syntax},
    {"task check: every problem of a file", test_check_every_problem},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("task", tests);
}

/* The episode rules without a QEMU: a scripted env behind the episode_env seam, real traces,
 * real evaluation, real stdio agents. Step limits, timeouts, exit causes, refusals, env
 * failures, setup failures, the network policy handed to the env. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/episode.h"
#include "envmgr/episode/episode_env.h"
#include "envmgr/episode/settle.h"
#include "envmgr/episode/setup.h"
#include "helpers/cunit_main.h"
#include "recorder/trace.h"

#define W 64
#define H 48
#define SHA0 "0000000000000000000000000000000000000000000000000000000000000000"

typedef struct fake {
    uint8_t px[W * H * 4];
    uint64_t hash;
    int acts, resets, setups, set_networks;
    action_type last;
    bool fail_act, fail_setup, power_off_on_act, off;
    bool dies_in_eval; /* the guest's commands fail and its QEMU is gone (killed while evaluated) */
    int setup_rc;         /* what a setup step returns when not fail_setup: 0, SETUP_FAILED or -1 */
    bool tolerate_setup;  /* steps fail the way OSWorld goes on after */
    netpolicy net;
    double setup_deadline; /* what the last setup step was given */
} fake;

static int f_frame(void *ctx, bool fresh, const uint8_t **px, uint64_t *hash, em_err *err)
{
    (void)fresh;
    fake *f = ctx;
    *px = f->px;
    *hash = f->hash;
    return 0;
}

static int f_act(void *ctx, const action *a, em_err *err)
{
    fake *f = ctx;
    if (f->fail_act)
        return em_fail(err, "vnc: the connection to QEMU closed");
    if (a->type == ACT_PYAUTOGUI && !strcmp(a->text, "pyautogui.click(")) /* what the guest's python3 says */
        return em_fail_input(err, "pyautogui code failed in the guest: SyntaxError: '(' was never closed");
    f->acts++;
    f->last = a->type;
    f->off |= f->power_off_on_act;
    f->hash++; /* every action changes the screen */
    f->px[(f->hash % (W * H)) * 4] ^= 0xff;
    return 0;
}

static int f_settle(void *ctx, double settle_ms, double max_ms, bool freeze, settle_info *info, em_err *err)
{
    if (info)
        *info = (settle_info){.ms = 1, .settled = true, .why = "settled"};
    return 0;
}
static int f_reset(void *ctx, em_err *err)
{
    ((fake *)ctx)->resets++;
    return 0;
}
static int f_network(void *ctx, netpolicy *cur, em_err *err)
{
    *cur = ((fake *)ctx)->net;
    return 0;
}
static int f_set_network(void *ctx, const netpolicy *p, bool *changed, em_err *err)
{
    fake *f = ctx;
    f->set_networks++;
    *changed = !netpolicy_equal(&f->net, p);
    f->net = *p;
    return 0;
}
static int f_setup(void *ctx, const task *t, const task_step *s, const char *cache_dir, double deadline_ms,
                   json_t **detail, em_err *err)
{
    fake *f = ctx;
    f->setups++;
    f->setup_deadline = deadline_ms;
    if (f->tolerate_setup)
        *detail = json_pack("{s:i, s:s}", "exit_code", 1, "tolerated", "exit status 1");
    if (f->setup_rc == SETUP_FAILED)
        return em_fail(err, "the command exited with status 2 (check: true)"), SETUP_FAILED;
    return f->fail_setup || f->setup_rc ? em_fail(err, "execute: exited with status 1") : 0;
}
#define FAKE_TREE "<desktop-frame><application name=\"Fake\"><push-button name=\"OK\"/></application></desktop-frame>"
/* The guest answers every command with "hi\n", and the toolbelt's a11y-tree with a small tree. */
static int g_exec(void *ctx, const char *const *argv, unsigned flags, double timeout_s, size_t out_cap, char **out,
                  size_t *out_len, char **err_out, int *exit_code, em_err *err)
{
    if (((fake *)ctx)->dies_in_eval)
        return em_fail(err, "guest agent: the peer closed the connection");
    if (err_out)
        *err_out = xstrdup("");
    for (size_t i = 0; argv[i]; i++)
        if (!strcmp(argv[i], "a11y-tree")) {
            json_t *a = json_pack("{s:s, s:i}", "AT", FAKE_TREE, "nodes", 3);
            *out = json_dumps(a, JSON_COMPACT);
            json_decref(a);
            *out_len = strlen(*out);
            *exit_code = 0;
            return 0;
        }
    *out = xstrdup("hi\n");
    *out_len = 3;
    *exit_code = 0;
    return 0;
}
static void f_guest_ops(void *ctx, em_env_ops *ops)
{
    *ops = (em_env_ops){.ctx = ctx, .exec = g_exec, .screen_w = W, .screen_h = H};
}

static int f_guest_off(void *ctx, bool *off, em_err *err)
{
    *off = ((fake *)ctx)->off;
    return 0;
}

static int f_gone(void *ctx, double wait_ms, em_err *err)
{
    return ((fake *)ctx)->dies_in_eval ? (em_fail(err, "env unit: its QEMU died"), 1) : 0;
}

static episode_env fake_env(fake *f)
{
    memset(f, 0, sizeof *f);
    netpolicy_init(&f->net);
    return (episode_env){.ctx = f, .width = W, .height = H, .accel = "tcg", .image_sha256 = SHA0, .dir = test_tmpdir(),
                         .frame = f_frame, .act = f_act, .settle = f_settle, .reset = f_reset,
                         .network = f_network, .set_network = f_set_network, .setup_step = f_setup,
                         .guest_ops = f_guest_ops, .guest_off = f_guest_off, .gone = f_gone};
}

static task *make_task(const char *extra)
{
    char json[2048];
    snprintf(json, sizeof json,
             "{\"id\": \"unit\", \"instruction\": \"say hi\", %s%s"
             "\"evaluator\": {\"func\": \"exact_match\", \"result\": {\"type\": \"vm_command_line\", \"command\": "
             "\"echo hi\"}, \"expected\": {\"type\": \"rule\", \"rules\": {\"expected\": \"hi\\n\"}}}}",
             extra ? extra : "", extra ? ", " : "");
    task *t = NULL;
    em_err err = {0};
    if (task_parse(json, strlen(json), test_tmpdir(), &t, &err) < 0)
        fprintf(stderr, "task: %s\n", err.msg);
    return t;
}

static int out_n;
static episode_opts opts(void)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/ep%d", test_tmpdir(), ++out_n);
    return (episode_opts){.out_dir = dir, .fresh = true, .settle_ms = 0};
}

static episode_step_out step(episode *ep, const char *reply_json)
{
    json_t *reply = json_loads(reply_json, 0, NULL);
    episode_step_out out;
    em_err err = {0};
    CU_ASSERT_EQUAL(episode_step(ep, reply, 5, &out, &err), 0);
    json_decref(reply);
    return out;
}

static const char *cause_of(json_t *res) { return json_string_value(json_object_get(res, "exit_cause")); }

static json_t *finish(episode *ep)
{
    json_t *res = NULL;
    em_err err = {0};
    int rc = episode_finish(ep, EXIT_NONE, &res, &err);
    if (rc < 0)
        fprintf(stderr, "episode_finish: %s\n", err.msg);
    CU_ASSERT_EQUAL(rc, 0);
    return res;
}

static void test_done_scores(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    CU_ASSERT_EQUAL(f.resets, 0); /* fresh env, same (none) network: no reset */
    episode_step_out so = step(ep, "{\"action_type\": \"CLICK\", \"x\": 10, \"y\": 10}");
    CU_ASSERT_FALSE(so.ended);
    CU_ASSERT_EQUAL(so.actions, 1);
    CU_ASSERT_EQUAL(f.acts, 1);
    CU_ASSERT_EQUAL(f.last, ACT_CLICK);
    so = step(ep, "{\"action_type\": \"DONE\"}");
    CU_ASSERT_TRUE(so.ended);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_DONE);
    CU_ASSERT_EQUAL(f.acts, 1); /* DONE never reaches the guest */
    _cleanup_free_ char *trace_dir = xstrdup(episode_trace_dir(ep));
    json_t *res = finish(ep);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 1.0, 1e-9);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "exit_cause")), "done");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "scored");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(res, "steps")), 2);
    json_decref(res);
    json_t *report = NULL;
    CU_ASSERT_EQUAL(trace_verify(trace_dir, &report, &err), 0); /* the recording holds together */
    json_decref(report);
    task_free(t);
}

static void test_fail_and_infeasible(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    em_err err = {0};
    /* FAIL on a feasible task scores 0 even when the metric would pass (OSWorld's rule) */
    task *t = make_task(NULL);
    episode_opts o = opts();
    episode *ep;
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    CU_ASSERT_TRUE(step(ep, "{\"action_type\": \"FAIL\"}").ended);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_FAIL);
    json_t *res = finish(ep);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 0.0, 1e-9);
    json_decref(res);
    task_free(t);
    /* FAIL on an infeasible task is the right answer */
    const char *inf = "{\"id\": \"inf\", \"instruction\": \"impossible\", \"evaluator\": {\"func\": \"infeasible\"}}";
    CU_ASSERT_EQUAL_FATAL(task_parse(inf, strlen(inf), test_tmpdir(), &t, &err), 0);
    o = opts();
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    step(ep, "{\"action_type\": \"FAIL\"}");
    res = finish(ep);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 1.0, 1e-9);
    json_decref(res);
    task_free(t);
}

static void test_max_steps(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task("\"limits\": {\"max_steps\": 2}");
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    CU_ASSERT_FALSE(step(ep, "{\"action_type\": \"MOVE_TO\", \"x\": 1, \"y\": 1}").ended);
    CU_ASSERT_TRUE(step(ep, "{\"action_type\": \"MOVE_TO\", \"x\": 2, \"y\": 2}").ended);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_MAX_STEPS);
    /* a reply after the end reaches nothing */
    episode_step_out so = step(ep, "{\"action_type\": \"MOVE_TO\", \"x\": 3, \"y\": 3}");
    CU_ASSERT_TRUE(so.ended);
    CU_ASSERT_EQUAL(so.actions, 0);
    CU_ASSERT_EQUAL(f.acts, 2);
    json_t *res = finish(ep);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "exit_cause")), "max_steps");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 1.0, 1e-9); /* still evaluated */
    json_decref(res);
    task_free(t);
}

static void test_refusals_and_pyautogui(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    episode_step_out so = step(ep, "{\"action_type\": \"CLICK\", \"x\": 1000, \"y\": 5}");
    CU_ASSERT_TRUE(so.refused);
    CU_ASSERT_FALSE(so.ended);
    CU_ASSERT_PTR_NOT_NULL(strstr(so.error, "action.x"));
    CU_ASSERT_EQUAL(f.acts, 0);
    /* code outside the translated subset (set-of-marks variables) runs whole in the guest, as in OSWorld */
    so = step(ep, "{\"pyautogui\": \"tag_1 = (51, 13)\\npyautogui.click(tag_1)\"}");
    CU_ASSERT_FALSE(so.refused);
    CU_ASSERT_EQUAL(so.actions, 1);
    CU_ASSERT_EQUAL(f.last, ACT_PYAUTOGUI);
    CU_ASSERT_EQUAL(f.acts, 1);
    /* code that fails there is the agent's error: recorded, the episode goes on */
    so = step(ep, "{\"pyautogui\": \"pyautogui.click(\"}");
    CU_ASSERT_FALSE(so.refused);
    CU_ASSERT_FALSE(so.ended);
    CU_ASSERT_EQUAL(f.acts, 1);
    /* one valid reply of two actions: both run; a bad second action refuses the whole reply */
    so = step(ep, "{\"pyautogui\": \"pyautogui.click(10, 10)\\npyautogui.press('enter')\"}");
    CU_ASSERT_FALSE(so.refused);
    CU_ASSERT_EQUAL(so.actions, 2);
    CU_ASSERT_EQUAL(f.last, ACT_PRESS);
    /* a translated call off this screen is code OSWorld's guest runs (X clamps the pointer): the
     * whole reply goes to the guest as one PYAUTOGUI action, not refused */
    so = step(ep, "{\"pyautogui\": \"pyautogui.click(10, 10)\\npyautogui.click(9999, 1)\"}");
    CU_ASSERT_FALSE(so.refused);
    CU_ASSERT_EQUAL(so.actions, 1);
    CU_ASSERT_EQUAL(f.last, ACT_PYAUTOGUI);
    CU_ASSERT_EQUAL(f.acts, 4);
    CU_ASSERT_EQUAL(episode_steps(ep), 5); /* refused replies count as steps */
    json_decref(finish(ep));
    task_free(t);
}

/* A reply's "response" (the model's text, for OSWorld's traj.jsonl) never reaches the actions; it is
 * recorded with the pyautogui code as sent on the reply's first step line. */
static void test_reply_response(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    episode_step_out so = step(ep, "{\"pyautogui\": \"pyautogui.click(10, 10); pyautogui.press('a')\", "
                                   "\"response\": \"I click.\"}");
    CU_ASSERT_FALSE(so.refused);
    CU_ASSERT_EQUAL(so.actions, 2);
    so = step(ep, "{\"action_type\": \"MOVE_TO\", \"x\": 3, \"y\": 3, \"response\": \"I move.\"}");
    CU_ASSERT_FALSE(so.refused);
    CU_ASSERT_EQUAL(f.last, ACT_MOVE_TO);
    so = step(ep, "{\"action_type\": \"MOVE_TO\", \"x\": 3, \"y\": 3, \"response\": 7}");
    CU_ASSERT_TRUE(so.refused);
    CU_ASSERT_PTR_NOT_NULL(strstr(so.error, "response:"));
    CU_ASSERT_TRUE(step(ep, "{\"pyautogui\": \"pyautogui.click(1, 1)\", \"other\": 1}").refused);
    _cleanup_free_ char *dir = xstrdup(episode_trace_dir(ep));
    json_decref(finish(ep));
    trace *tr;
    CU_ASSERT_FATAL(trace_read(dir, &tr, &err) == 0);
    CU_ASSERT_EQUAL_FATAL(trace_n_steps(tr), 5);
    json_t *s0 = trace_step(tr, 0), *s1 = trace_step(tr, 1), *s2 = trace_step(tr, 2);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s0, "response")), "I click.");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s0, "pyautogui")),
                           "pyautogui.click(10, 10); pyautogui.press('a')");
    CU_ASSERT_PTR_NULL(json_object_get(s1, "response")); /* only on the reply's first line */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(s2, "response")), "I move.");
    CU_ASSERT_PTR_NULL(json_object_get(json_object_get(s2, "action"), "response"));
    trace_free(tr);
    task_free(t);
}

static void test_env_failure(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    f.fail_act = true;
    episode_step_out so = step(ep, "{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 1}");
    CU_ASSERT_TRUE(so.ended);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_ENV_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(so.error, "connection to QEMU closed"));
    json_t *res = finish(ep);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "exit_cause")), "env_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "not_evaluated");
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(res, "reason")), "not evaluated"));
    json_decref(res);
    task_free(t);
}

static void test_guest_shutdown(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    f.power_off_on_act = true; /* the agent's click powers the guest off */
    episode_step_out so = step(ep, "{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 1}");
    CU_ASSERT_TRUE(so.ended);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_GUEST_SHUTDOWN);
    json_t *res = finish(ep);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "exit_cause")), "guest_shutdown");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 0.0, 1e-9); /* scored, not an env error */
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "scored"); /* it said not_evaluated */
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(res, "reason")), "guest shut down"));
    json_decref(res);
    task_free(t);
}

static void test_evaluator_error(void)
{
    /* an evaluator script that crashes: result.json and the trace say evaluator_error, not a score */
    _cleanup_free_ char *script = xasprintf("%s/crashes.sh", test_tmpdir());
    FILE *fp = fopen(script, "w");
    fputs("#!/bin/sh\necho 'parser exploded' >&2\nexit 1\n", fp);
    fclose(fp);
    chmod(script, 0755);
    static const char json[] = "{\"id\": \"unit\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"script\", "
                               "\"result\": {\"type\": \"vm_command_line\", \"command\": \"echo hi\"}, "
                               "\"options\": {\"path\": \"crashes.sh\"}}}";
    task *t = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(task_parse(json, strlen(json), test_tmpdir(), &t, &err), 0);
    fake f;
    episode_env ev = fake_env(&f);
    episode_opts o = opts();
    episode *ep;
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    step(ep, "{\"action_type\": \"DONE\"}");
    _cleanup_free_ char *trace_dir = xstrdup(episode_trace_dir(ep));
    json_t *res = finish(ep);
    const char *want = "script `crashes.sh`: exited with status 1: parser exploded";
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "evaluator_error");
    const char *got = json_string_value(json_object_get(res, "evaluator_error"));
    if (!got || strcmp(got, want))
        fprintf(stderr, "\n  evaluator_error: %s\n", got ? got : "(none)");
    CU_ASSERT_STRING_EQUAL(got, want);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 0, 1e-9);
    json_decref(res);
    json_t *report = NULL;
    CU_ASSERT_EQUAL(trace_verify(trace_dir, &report, &err), 0); /* the schema takes the new fields */
    json_decref(report);
    _cleanup_free_ char *trace_file = xasprintf("%s/trace.jsonl", trace_dir), *text = NULL;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(read_file_capped(trace_file, 1 << 20, &text, &len, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"status\":\"evaluator_error\""));
    task_free(t);
}

static void test_setup_failure_and_network(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task("\"config\": [{\"type\": \"execute\", \"parameters\": {\"command\": [\"false\"]}}], "
                        "\"network\": {\"allow\": [\"example.com:443\"]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    f.fail_setup = true;
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    double t0 = now_ms();
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    CU_ASSERT_EQUAL(f.setups, 1);
    /* setup spends the episode's time: its steps (an asset's fetch) end by the episode's end */
    CU_ASSERT_TRUE(f.setup_deadline >= t0 + t->episode_timeout_s * 1000 &&
                   f.setup_deadline <= now_ms() + t->episode_timeout_s * 1000);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_ENV_ERROR);
    CU_ASSERT_PTR_NOT_NULL(strstr(episode_reason(ep), "config[0] (execute)"));
    /* the task's allowlist went to the env, and a changed policy restarts even a fresh env */
    CU_ASSERT_EQUAL(f.set_networks, 1);
    CU_ASSERT_EQUAL(f.net.mode, NETPOLICY_ALLOWLIST);
    CU_ASSERT_EQUAL(f.net.nrules, 1);
    CU_ASSERT_EQUAL(f.resets, 1);
    CU_ASSERT_TRUE(step(ep, "{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 1}").ended);
    CU_ASSERT_EQUAL(f.acts, 0);
    json_decref(finish(ep));
    task_free(t);
}

static void test_episode_timeout_and_evaluated(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task("\"limits\": {\"episode_timeout_s\": 0.2}");
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    sleep_ms(300);
    CU_ASSERT_TRUE(step(ep, "{\"action_type\": \"MOVE_TO\", \"x\": 1, \"y\": 1}").ended);
    CU_ASSERT_EQUAL(episode_exit_cause(ep), EXIT_TIMEOUT);
    json_decref(finish(ep));
    task_free(t);
    /* evaluated on request while still running (the HTTP API's evaluate) */
    t = make_task(NULL);
    o = opts();
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    json_t *res = NULL;
    CU_ASSERT_EQUAL(episode_finish(ep, EXIT_EVALUATED, &res, &err), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "exit_cause")), "evaluated");
    json_decref(res);
    task_free(t);
}

/* The postconfig steps after the agent's (OSWorld's shape: stop the app, wait, then read what it
 * saved): recorded as postconfig lines after the step lines; a step failed the way OSWorld goes on
 * after is tolerated, flagged and the episode scored; one that failed otherwise leaves it
 * unevaluated (setup_error or env_error), never a 0 for the agent. The trace verifies each time. */
static json_t *run_postconfig(fake *f, int setup_rc, bool tolerate, char **trace_dir)
{
    episode_env ev = fake_env(f);
    task *t = NULL;
    em_err err = {0};
    static const char post[] = "{\"id\": \"unit\", \"instruction\": \"x\", \"evaluator\": {\"func\": \"exact_match\", "
                               "\"postconfig\": [{\"type\": \"execute\", \"parameters\": {\"command\": [\"pkill\", \"app\"]}}, "
                               "{\"type\": \"sleep\", \"parameters\": {\"seconds\": 0.01}}], "
                               "\"result\": {\"type\": \"vm_command_line\", \"command\": \"echo hi\"}, "
                               "\"expected\": {\"type\": \"rule\", \"rules\": {\"expected\": \"hi\\n\"}}}}";
    CU_ASSERT_EQUAL_FATAL(task_parse(post, strlen(post), test_tmpdir(), &t, &err), 0);
    episode_opts o = opts();
    episode *ep;
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    step(ep, "{\"action_type\": \"CLICK\", \"x\": 1, \"y\": 1}");
    step(ep, "{\"action_type\": \"DONE\"}");
    f->setup_rc = setup_rc;
    f->tolerate_setup = tolerate;
    *trace_dir = xstrdup(episode_trace_dir(ep));
    json_t *res = finish(ep);
    task_free(t);
    json_t *report = NULL;
    CU_ASSERT(trace_verify(*trace_dir, &report, &err) == 0);
    json_decref(report);
    return res;
}

static void test_postconfig(void)
{
    fake f;
    _cleanup_free_ char *dir = NULL;
    json_t *res = run_postconfig(&f, 0, false, &dir);
    CU_ASSERT_EQUAL(f.setups, 2);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "done");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "scored");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 1.0, 1e-9);
    json_decref(res);
    em_err err = {0};
    trace *tr = NULL;
    CU_ASSERT_FATAL(trace_read(dir, &tr, &err) == 0);
    CU_ASSERT_EQUAL(trace_n_steps(tr), 2);
    CU_ASSERT_EQUAL_FATAL(trace_n_postconfig(tr), 2);
    json_t *p0 = trace_postconfig(tr, 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(p0, "step"), "type")), "execute");
    CU_ASSERT(json_is_true(json_object_get(p0, "ok")));
    CU_ASSERT_PTR_NULL(json_object_get(p0, "phase")); /* the line's type says it */
    trace_free(tr);

    /* tolerated: flagged in the line and in result.json, and the episode is scored */
    free(dir);
    res = run_postconfig(&f, 0, true, &dir);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "scored");
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 1.0, 1e-9);
    json_t *flag = json_array_get(json_object_get(res, "setup_flags"), 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(flag, "phase")), "postconfig");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(flag, "why")), "exit status 1");
    CU_ASSERT_EQUAL(json_array_size(json_object_get(res, "setup_flags")), 2);
    json_decref(res);
    CU_ASSERT_FATAL(trace_read(dir, &tr, &err) == 0);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(trace_postconfig(tr, 0), "tolerated")), "exit status 1");
    trace_free(tr);

    /* the env failed in postconfig: env_error, not evaluated, the rest of postconfig not run */
    free(dir);
    res = run_postconfig(&f, -1, false, &dir);
    CU_ASSERT_EQUAL(f.setups, 1);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "env_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "not_evaluated");
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(res, "reason")),
                                  "not evaluated: postconfig[0] (execute): execute: exited with status 1"));
    json_decref(res);
    CU_ASSERT_FATAL(trace_read(dir, &tr, &err) == 0);
    CU_ASSERT_EQUAL(trace_n_postconfig(tr), 1);
    CU_ASSERT(json_is_false(json_object_get(trace_postconfig(tr, 0), "ok")));
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(trace_evaluation(tr), "status")), "not_evaluated");
    trace_free(tr);

    /* its own check failed: setup_error, not evaluated */
    free(dir);
    res = run_postconfig(&f, SETUP_FAILED, false, &dir);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "setup_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "not_evaluated");
    json_decref(res);
}

/* A stdio agent written as a shell script into the scratch dir. */
static const char *agent(const char *name, const char *body)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.sh", test_tmpdir(), name);
    FILE *fp = fopen(path, "w");
    fprintf(fp, "#!/bin/sh\n%s\n", body);
    fclose(fp);
    chmod(path, 0755);
    return path;
}

static obs_kind run_observation; /* what run_agent's observations hold */

static json_t *run_agent(const char *cmd, const char *limits, int *acts)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(limits);
    _cleanup_free_ char *task_path = xasprintf("%s/task.json", test_tmpdir());
    FILE *fp = fopen(task_path, "w");
    fputs("{}", fp);
    fclose(fp);
    episode_opts o = opts();
    o.agent_cmd = cmd;
    o.observation = run_observation;
    json_t *res = NULL;
    em_err err = {0};
    int rc = episode_run_with(&ev, t, task_path, &o, &res, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (acts)
        *acts = f.acts;
    task_free(t);
    return res;
}


static void test_stdio_agents(void)
{
    int acts;
    json_t *res = run_agent(agent("done", "read obs; echo '{\"action_type\": \"CLICK\", \"x\": 3, \"y\": 4}'; "
                                           "read obs; echo '{\"action_type\": \"DONE\"}'; read obs"),
                            NULL, &acts);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "done");
    CU_ASSERT_EQUAL(acts, 1);
    CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(res, "score")), 1.0, 1e-9);
    json_decref(res);

    res = run_agent(agent("crash", "exit 3"), NULL, NULL);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "agent_error");
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(res, "reason")), "status 3"));
    json_decref(res);

    res = run_agent(agent("garbage", "read obs; echo 'this is not json'; sleep 5"), NULL, NULL);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "agent_error");
    json_decref(res);

    double t0 = now_ms();
    res = run_agent(agent("slow", "read obs; sleep 30"), "\"limits\": {\"step_timeout_s\": 0.5}", NULL);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "timeout");
    CU_ASSERT(now_ms() - t0 < 10000); /* the hung agent was stopped, not waited for */
    json_decref(res);

    res = run_agent(agent("busy", "while read obs; do echo '{\"action_type\": \"MOVE_TO\", \"x\": 1, \"y\": 1}'; done"),
                    "\"limits\": {\"max_steps\": 3}", &acts);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "max_steps");
    CU_ASSERT_EQUAL(acts, 3);
    json_decref(res);

    /* a refused reply is answered with the reason in the next observation */
    res = run_agent(agent("learns", "read obs; echo '{\"action_type\": \"JUMP\"}'; read obs; "
                                    "case \"$obs\" in *JUMP*) echo '{\"action_type\": \"DONE\"}';; "
                                    "*) echo '{\"action_type\": \"FAIL\"}';; esac; read obs"),
                    NULL, NULL);
    CU_ASSERT_STRING_EQUAL(cause_of(res), "done");
    json_decref(res);

    /* its environment: the task's id and instruction, never the task file's path nor the trace key */
    setenv("ENVMGR_TRACE_KEY", "episode-secret", 1);
    res = run_agent(agent("env", "read obs; if [ -z \"${ENVMGR_TASK+set}${ENVMGR_TRACE_KEY+set}\" ] && "
                                 "[ -n \"$ENVMGR_INSTRUCTION\" ] && [ -n \"$ENVMGR_TASK_ID\" ] && "
                                 "[ -n \"$ENVMGR_SCREEN_WIDTH\" ]; then echo '{\"action_type\": \"DONE\"}'; "
                                 "else echo '{\"action_type\": \"FAIL\"}'; fi; read obs"),
                    NULL, NULL);
    unsetenv("ENVMGR_TRACE_KEY");
    CU_ASSERT_STRING_EQUAL(cause_of(res), "done");
    _cleanup_free_ char *jsonl = xasprintf("%s/trace.jsonl", json_string_value(json_object_get(res, "trace")));
    _cleanup_free_ char *text = NULL;
    size_t len;
    em_err err = {0};
    CU_ASSERT_EQUAL(read_file_capped(jsonl, 1 << 20, &text, &len, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(text ? strstr(text, "\"agent_sandbox\":") : NULL); /* where it ran, recorded */
    json_decref(res);
}

/* Observations with the accessibility tree: read right after the frame, stored in the trace's
 * a11y/ store, named by the first step line of the reply, checked by verify; the stdio agent gets
 * its path (and no screenshot for a11y_tree alone). */
static void test_a11y_observations(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    episode_opts o = opts();
    o.observation = OBS_SCREENSHOT_A11Y_TREE;
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    char sha[65];
    CU_ASSERT_EQUAL_FATAL(episode_observe(ep, sha, &err), 0);
    const char *tree = episode_observed_tree(ep);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tree);
    char tsha[65];
    sha256_hex(FAKE_TREE, strlen(FAKE_TREE), tsha);
    CU_ASSERT_STRING_EQUAL(tree, tsha);
    step(ep, "{\"pyautogui\": \"pyautogui.click(3, 4); pyautogui.click(5, 6)\"}");
    step(ep, "{\"action_type\": \"DONE\"}");
    _cleanup_free_ char *trace_dir = xstrdup(episode_trace_dir(ep));
    json_decref(finish(ep));
    _cleanup_free_ char *jsonl = xasprintf("%s/trace.jsonl", trace_dir), *text = NULL;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(read_file_capped(jsonl, 1 << 20, &text, &len, &err), 0);
    char *first = strstr(text, "\"a11y_tree\"");
    CU_ASSERT_PTR_NOT_NULL(first);                     /* the reply's first action names the tree */
    CU_ASSERT_PTR_NULL(first ? strstr(first + 1, "\"a11y_tree\"") : NULL); /* its second does not */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"observation\":\"screenshot_a11y_tree\""));
    json_t *report = NULL;
    CU_ASSERT_EQUAL(trace_verify(trace_dir, &report, &err), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(report, "a11y_trees")), 1);
    json_decref(report);
    /* a changed tree is caught */
    _cleanup_free_ char *xml = xasprintf("%s/" TRACE_A11Y_DIR "/%s.xml", trace_dir, tsha);
    CU_ASSERT_EQUAL(write_file_atomic(xml, "<x/>", 4, 0644, &err), 0);
    CU_ASSERT_EQUAL(trace_verify(trace_dir, &report, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "accessibility tree"));
    task_free(t);

    run_observation = OBS_A11Y_TREE;
    json_t *res = run_agent(agent("tree", "read obs; case \"$obs\" in *screenshot\\\":*) echo '{\"action_type\": \"FAIL\"}';; "
                                          "*accessibility_tree*.xml*) echo '{\"action_type\": \"DONE\"}';; "
                                          "*) echo '{\"action_type\": \"FAIL\"}';; esac; read obs"),
                            NULL, NULL);
    run_observation = OBS_SCREENSHOT;
    CU_ASSERT_STRING_EQUAL(cause_of(res), "done");
    json_decref(res);

    obs_kind k;
    CU_ASSERT_EQUAL(obs_kind_parse("screenshot_a11y_tree", &k, &err), 0);
    CU_ASSERT_EQUAL(k, OBS_SCREENSHOT_A11Y_TREE);
    CU_ASSERT_EQUAL(obs_kind_parse("som", &k, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "expected screenshot, a11y_tree or screenshot_a11y_tree"));
}

/* The env dies while the evaluator reads it: its getters fail, and that is no result. The episode is
 * env_error with no score (a suite retries it), never a scored 0. */
static void test_env_dies_in_evaluation(void)
{
    fake f;
    episode_env ev = fake_env(&f);
    task *t = make_task(NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    episode_opts o = opts();
    episode *ep;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(episode_begin_with(&ev, t, NULL, SHA0, &o, &ep, &err), 0);
    step(ep, "{\"action_type\": \"DONE\"}");
    f.dies_in_eval = true;
    json_t *res = finish(ep);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "exit_cause")), "env_error");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(res, "status")), "not_evaluated");
    CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(res, "reason")), "QEMU died"));
    json_decref(res);
    task_free(t);
}

static CU_TestInfo tests[] = {
    {"an env that dies during the evaluation is env_error, no score", test_env_dies_in_evaluation},
    {"a11y_tree observations: recorded, verified, sent", test_a11y_observations},
    {"DONE ends the episode and the metric scores it", test_done_scores},
    {"FAIL scores 0, except on infeasible tasks", test_fail_and_infeasible},
    {"the step limit ends the episode; later replies reach nothing", test_max_steps},
    {"refused replies reach nothing; pyautogui replies run whole or not at all", test_refusals_and_pyautogui},
    {"a reply's response is recorded, never acted on", test_reply_response},
    {"an env failure ends the episode as env_error, not evaluated", test_env_failure},
    {"a crashing evaluator script is evaluator_error in result.json and the trace", test_evaluator_error},
    {"a failed setup step ends it before it begins; the allowlist reaches the env", test_setup_failure_and_network},
    {"a guest that powers off ends the episode as guest_shutdown, scored 0", test_guest_shutdown},
    {"the episode timeout, and evaluate while running", test_episode_timeout_and_evaluated},
    {"postconfig: recorded after the steps; tolerated, failed", test_postconfig},
    {"stdio agents: done, crash, garbage, hang, step limit, refusal feedback", test_stdio_agents},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("episode", tests);
}

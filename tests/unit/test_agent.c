/* What a stdio agent gets: its environment (an allowlist: nothing of envmgr's, never the task's
 * path), and its sandbox (envmgr's folders out of sight, stopped as a whole). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/episode/agent.h"
#include "envmgr/episode/agent_sandbox.h"
#include "helpers/cunit_main.h"

static bool has(char **v, const char *s)
{
    for (size_t i = 0; v[i]; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

static size_t count(char **v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}

static void test_env_allowlist(void)
{
    char *env[] = {"PATH=/usr/bin:/bin", "HOME=/root", "ENVMGR_TRACE_KEY=secret", "ENVMGR_TASK=/tasks/t.json",
                   "ENVMGR_TOKEN=tok", "ENVMGR_RUN_DIR=/run/envmgr", "OPENAI_API_KEY=sk-1", "ENVMGR_X_API_KEY=no",
                   "LC_ALL=C.UTF-8", "LC_=x", "SECRET=s", "MY_VAR=1", "ANTHROPIC_BASE_URL=https://a",
                   "AZURE_API_BASE=https://b", "https_proxy=http://p:3128", "NO_PROXY=localhost", "PATHX=no",
                   "_API_KEY=no", "NOEQUALS", "ENVMGR_TASK_ID=old", "ENVMGR_SCREEN_WIDTH=1", "SSH_AUTH_SOCK=/s",
                   NULL};
    const char *pass[] = {"MY_VAR", NULL};
    const char *kv[] = {"ENVMGR_TASK_ID=new", "ENVMGR_INSTRUCTION=do it", NULL};
    char **out = agent_env(env, pass, kv);
    const char *want[] = {"PATH=/usr/bin:/bin", "HOME=/root", "OPENAI_API_KEY=sk-1", "LC_ALL=C.UTF-8",
                          "MY_VAR=1", "ANTHROPIC_BASE_URL=https://a", "AZURE_API_BASE=https://b",
                          "https_proxy=http://p:3128", "NO_PROXY=localhost", "ENVMGR_TASK_ID=new",
                          "ENVMGR_INSTRUCTION=do it"};
    for (size_t i = 0; i < ARRAY_LEN(want); i++)
        CU_ASSERT(has(out, want[i]));
    CU_ASSERT_EQUAL(count(out), ARRAY_LEN(want)); /* nothing else: no key, no task path, no ENVMGR_* */
    for (size_t i = 0; out[i]; i++)
        CU_ASSERT(strncmp(out[i], "ENVMGR_", 7) || !strncmp(out[i], "ENVMGR_TASK_ID=new", 18) ||
                  !strncmp(out[i], "ENVMGR_INSTRUCTION=", 19));
    free(out);

    /* without --agent-env, an unlisted name stays home */
    out = agent_env(env, NULL, NULL);
    CU_ASSERT(!has(out, "MY_VAR=1"));
    CU_ASSERT(has(out, "PATH=/usr/bin:/bin"));
    CU_ASSERT(!has(out, "ENVMGR_TASK_ID=old"));
    free(out);

    /* not even the operator can pass envmgr's own */
    const char *bad[] = {"ENVMGR_TRACE_KEY", NULL};
    CU_ASSERT(!agent_env_passes("ENVMGR_TRACE_KEY", 16, bad));
    CU_ASSERT(agent_env_passes("LC_TIME", 7, NULL));
    CU_ASSERT(!agent_env_passes("LC_", 3, NULL));
    CU_ASSERT(!agent_env_passes("PATH", 3, NULL)); /* "PAT" */

    em_err err = {0};
    CU_ASSERT_EQUAL(agent_env_name_check("MY_VAR", &err), 0);
    CU_ASSERT_EQUAL(agent_env_name_check("ENVMGR_TRACE_KEY", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--agent-env: `ENVMGR_TRACE_KEY`"));
    CU_ASSERT_EQUAL(agent_env_name_check("1A", &err), -1);
    CU_ASSERT_EQUAL(agent_env_name_check("A=B", &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "is not a variable name"));
    CU_ASSERT_EQUAL(agent_env_name_check("", &err), -1);
}

static void test_sandbox_argv(void)
{
    const char *tmp = test_tmpdir();
    _cleanup_free_ char *run = xasprintf("%s/run", tmp), *missing = xasprintf("%s/no-cache", tmp);
    _cleanup_free_ char *frames = xasprintf("%s/run/trace/frames", tmp);
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(mkdir_p(frames, 0755, &err), 0);
    _cleanup_free_ char *real_run = realpath(run, NULL), *real_frames = realpath(frames, NULL);
    const char *hide[] = {frames, run, missing, "/", NULL}; /* given in any order */
    const char *show[] = {frames, NULL};
    agent_sandbox sb = {.hide = hide, .show = show};
    const char *argv[] = {"/bin/sh", "-c", "echo hi", NULL};
    char **v = agent_sandbox_argv(&sb, argv);
    size_t n = count(v);
    CU_ASSERT_STRING_EQUAL(v[0], AGENT_BWRAP);
    int tmpfs_run = -1, tmpfs_frames = -1, robind = -1, dashdash = -1;
    bool pid = false, die = false, caps = false, net = false, session = false, root_hidden = false, miss = false;
    for (size_t i = 1; i < n; i++) {
        if (!strcmp(v[i], "--tmpfs") && i + 1 < n) {
            if (!strcmp(v[i + 1], real_run))
                tmpfs_run = (int)i;
            if (!strcmp(v[i + 1], real_frames))
                tmpfs_frames = (int)i;
            root_hidden |= !strcmp(v[i + 1], "/");
            miss |= !strcmp(v[i + 1], missing);
        }
        if (!strcmp(v[i], "--ro-bind") && i + 2 < n && !strcmp(v[i + 1], real_frames))
            robind = (int)i;
        if (!strcmp(v[i], "--") && dashdash < 0)
            dashdash = (int)i;
        pid |= !strcmp(v[i], "--unshare-pid");
        die |= !strcmp(v[i], "--die-with-parent");
        caps |= !strcmp(v[i], "--cap-drop") && i + 1 < n && !strcmp(v[i + 1], "ALL");
        net |= !strncmp(v[i], "--unshare-net", 13) || !strcmp(v[i], "--unshare-all");
        session |= !strcmp(v[i], "--new-session");
    }
    CU_ASSERT(tmpfs_run > 0 && tmpfs_frames > tmpfs_run); /* the parent first */
    CU_ASSERT(robind > tmpfs_frames);                      /* shown after everything is hidden */
    CU_ASSERT(pid && die && caps);
    CU_ASSERT(!net);     /* the agent keeps the network (its model's API) */
    CU_ASSERT(!session); /* and envmgr's process group for it */
    CU_ASSERT(!root_hidden && !miss);
    CU_ASSERT_FATAL(dashdash > 0 && (size_t)dashdash + 4 == n);
    CU_ASSERT_STRING_EQUAL(v[dashdash + 1], "/bin/sh");
    CU_ASSERT_STRING_EQUAL(v[dashdash + 3], "echo hi");
    agent_sandbox_argv_free(v);
}

/* A real agent in the sandbox: it sees no key, an empty run folder, and its frames; stopping it
 * kills what it left running. */
static void test_sandboxed_agent(void)
{
    char why[256];
    if (!agent_sandbox_available(why, sizeof why)) {
        fprintf(stderr, "skipped: %s\n", why);
        return;
    }
    const char *tmp = test_tmpdir();
    _cleanup_free_ char *run = xasprintf("%s/box-run", tmp), *sock = xasprintf("%s/box-run/env1/qmp.sock", tmp);
    _cleanup_free_ char *frames = xasprintf("%s/box-run/frames", tmp), *frame = xasprintf("%s/f.png", frames);
    _cleanup_free_ char *outf = xasprintf("%s/box-saw", tmp), *hb = xasprintf("%s/box-hb", tmp);
    _cleanup_free_ char *log = xasprintf("%s/box.log", tmp), *script = xasprintf("%s/box-agent.sh", tmp);
    em_err err = {0};
    _cleanup_free_ char *env1 = xasprintf("%s/box-run/env1", tmp);
    CU_ASSERT_EQUAL_FATAL(mkdir_p(env1, 0700, &err), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir_p(frames, 0755, &err), 0);
    CU_ASSERT_EQUAL(write_file_atomic(sock, "x", 1, 0600, &err), 0);
    CU_ASSERT_EQUAL(write_file_atomic(frame, "png", 3, 0644, &err), 0);
    _cleanup_free_ char *body = xasprintf(
        "#!/bin/sh\nread obs\n"
        "{ echo \"key=${ENVMGR_TRACE_KEY:-none}\"; echo \"sock=$(test -e '%s' && echo seen || echo hidden)\"; "
        "echo \"frame=$(cat '%s')\"; echo \"id=$ENVMGR_TASK_ID\"; } >'%s'\n"
        "echo '{\"action_type\": \"DONE\"}'\n"
        "( while :; do echo x >>'%s'; sleep 0.05; done ) &\n"
        "exec sleep 100\n",
        sock, frame, outf, hb);
    CU_ASSERT_EQUAL(write_file_atomic(script, body, strlen(body), 0755, &err), 0);
    setenv("ENVMGR_TRACE_KEY", "unit-secret", 1);
    const char *hide[] = {run, NULL}, *show[] = {frames, NULL}, *kv[] = {"ENVMGR_TASK_ID=box", NULL};
    agent_sandbox sb = {.hide = hide, .show = show};
    agent_opts ao = {.env_kv = kv, .sandbox = &sb};
    agent *a = NULL;
    CU_ASSERT_EQUAL_FATAL(agent_start(script, &ao, log, &a, &err), 0);
    unsetenv("ENVMGR_TRACE_KEY");
    json_t *obs = json_pack("{s:i}", "step", 0), *reply = NULL;
    CU_ASSERT_EQUAL(agent_send(a, obs, &err), 0);
    json_decref(obs);
    CU_ASSERT_EQUAL(agent_receive(a, 10000, &reply, &err), AGENT_OK);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(reply, "action_type")), "DONE");
    json_decref(reply);
    sleep_ms(200);
    agent_stop(a, 100);
    _cleanup_free_ char *saw = NULL;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(read_file_capped(outf, 4096, &saw, &len, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(saw, "key=none\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(saw, "sock=hidden\n")); /* the run folder is an empty tmpfs */
    CU_ASSERT_PTR_NOT_NULL(strstr(saw, "frame=png\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(saw, "id=box\n"));
    struct stat st1, st2;
    CU_ASSERT_EQUAL_FATAL(stat(hb, &st1), 0);
    sleep_ms(300);
    CU_ASSERT_EQUAL_FATAL(stat(hb, &st2), 0);
    CU_ASSERT_EQUAL(st1.st_size, st2.st_size); /* what it left running died with it */
}

static CU_TestInfo tests[] = {
    {"the agent's environment: an allowlist, envmgr's own never, --agent-env names", test_env_allowlist},
    {"the sandbox's argv: hidden folders parent first, shown ones after, network kept", test_sandbox_argv},
    {"a sandboxed agent: no key, an empty run folder, its frames; stopped as a whole", test_sandboxed_agent},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("agent", tests);
}

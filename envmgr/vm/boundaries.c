#include "envmgr/vm/boundaries.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

#define PROC_TEXT_MAX (256u << 10)

/* The value after `flag` in a NUL-separated command line, or NULL. */
static json_t *arg_after(const char *cmd, size_t len, const char *flag)
{
    for (size_t i = 0; i < len;) {
        const char *a = cmd + i;
        size_t n = strnlen(a, len - i);
        if (!strcmp(a, flag) && i + n + 1 < len)
            return json_string(cmd + i + n + 1);
        i += n + 1;
    }
    return json_null();
}

/* A cgroup v1 controller's (or the v2 unified) limit file under the controller's mount. */
static json_t *limit_of(const char *mount, const char *path, const char *file)
{
    _cleanup_free_ char *p = xasprintf("%s%s/%s", mount, path, file), *text = NULL;
    size_t len;
    em_err ignored;
    if (read_file_capped(p, 4096, &text, &len, &ignored) < 0)
        return json_null();
    text[strcspn(text, "\n")] = '\0';
    /* v1 says "no limit" with a huge number, v2 with "max" */
    if (!strcmp(text, "max") || !strcmp(text, "-1") || strtoull(text, NULL, 10) >= (1ull << 62))
        return json_string("unlimited");
    return json_string(text);
}

static json_t *cgroups(pid_t pid)
{
    _cleanup_free_ char *p = xasprintf("/proc/%d/cgroup", (int)pid), *text = NULL;
    em_err ignored;
    if (read_file_capped(p, PROC_TEXT_MAX, &text, NULL, &ignored) < 0)
        return json_null();
    json_t *out = json_object();
    static const struct {
        const char *controller, *v1_file, *v2_file;
    } want[] = {{"memory", "memory.limit_in_bytes", "memory.max"},
                {"pids", "pids.max", "pids.max"},
                {"cpu", "cpu.cfs_quota_us", "cpu.max"}};
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        for (size_t i = 0; i < ARRAY_LEN(want); i++) {
            bool v2 = !*ctrls; /* "0::/path": the unified hierarchy */
            bool v1 = !v2 && strstr(ctrls, want[i].controller) != NULL;
            if (!(v1 || v2) || (v2 && json_object_get(out, want[i].controller)))
                continue;
            _cleanup_free_ char *mount = v1 ? xasprintf("/sys/fs/cgroup/%s", want[i].controller)
                                             : xstrdup("/sys/fs/cgroup");
            json_t *limit = limit_of(mount, path, v1 ? want[i].v1_file : want[i].v2_file);
            if (v2 && json_is_null(limit)) { /* an empty v2 hierarchy: the controller is not there */
                json_decref(limit);
                continue;
            }
            json_object_set_new(out, want[i].controller, json_pack("{s:s, s:s, s:o}", "hierarchy", v1 ? "v1" : "v2",
                                                                   "path", path, "limit", limit));
        }
    }
    return out;
}

int vm_proc_uids(pid_t pid, unsigned long ids[4])
{
    _cleanup_free_ char *path = xasprintf("/proc/%d/status", (int)pid), *st = NULL;
    em_err ignored;
    if (read_file_capped(path, PROC_TEXT_MAX, &st, NULL, &ignored) < 0)
        return -1;
    const char *u = strstr(st, "\nUid:");
    return u && sscanf(u + 5, "%lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) == 4 ? 0 : -1;
}

int vm_boundaries(pid_t pid, json_t **out, em_err *err)
{
    *out = NULL;
    _cleanup_free_ char *cmd_path = xasprintf("/proc/%d/cmdline", (int)pid), *cmd = NULL;
    size_t len = 0;
    if (read_file_capped(cmd_path, PROC_TEXT_MAX, &cmd, &len, err) < 0)
        return em_prefix(err, "boundaries of QEMU %d: ", (int)pid);
    json_t *b = json_object();
    json_object_set_new(b, "qemu_sandbox", arg_after(cmd, len, "-sandbox"));
    json_object_set_new(b, "netdev", arg_after(cmd, len, "-netdev"));
    json_t *uid = json_null(), *user = json_null();
    unsigned long ids[4];
    if (vm_proc_uids(pid, ids) == 0) {
        json_decref(uid);
        uid = json_integer((json_int_t)ids[1]); /* effective */
        struct passwd pw, *res = NULL;
        char buf[1024];
        if (getpwuid_r((uid_t)ids[1], &pw, buf, sizeof buf, &res) == 0 && res) {
            json_decref(user);
            user = json_string(res->pw_name);
        }
    }
    json_object_set_new(b, "uid", uid);
    json_object_set_new(b, "user", user);
    json_object_set_new(b, "cgroup", cgroups(pid));
    *out = b;
    return 0;
}

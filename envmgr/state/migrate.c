#include "envmgr/state/migrate.h"

#include <stdio.h>
#include <string.h>

#include "envmgr/base/util.h"

#define MIGRATE_TIMEOUT_MS 60000.0
#define QMP_TIMEOUT_MS 10000.0

static int set_ignore_shared(qmp *q, em_err *err)
{
    json_t *args = json_pack("{s:[{s:s, s:b}]}", "capabilities", "capability", "x-ignore-shared", "state", 1);
    int rc = qmp_execute(q, "migrate-set-capabilities", args, QMP_TIMEOUT_MS, NULL, err);
    json_decref(args);
    return rc;
}

/* Hand QEMU an fd for the migration stream (spawn=deny forbids exec: URIs). */
static int pass_fd(qmp *q, const char *name, int fd, em_err *err)
{
    json_t *args = json_pack("{s:s}", "fdname", name);
    int rc = qmp_execute_with_fd(q, "getfd", args, fd, QMP_TIMEOUT_MS, NULL, err);
    json_decref(args);
    return rc;
}

static int wait_migration(qmp *q, double timeout_ms, em_err *err)
{
    double deadline = now_ms() + timeout_ms, wait = 1;
    for (;;) {
        json_t *ret;
        if (qmp_execute(q, "query-migrate", NULL, QMP_TIMEOUT_MS, &ret, err) < 0)
            return -1;
        const char *st = json_string_value(json_object_get(ret, "status"));
        char status[32];
        snprintf(status, sizeof status, "%s", st ? st : "none");
        const char *emsg = json_string_value(json_object_get(ret, "error-desc"));
        char why[256];
        snprintf(why, sizeof why, "%s", emsg ? emsg : "no reason given");
        json_decref(ret);
        if (!strcmp(status, "completed"))
            return 0;
        if (!strcmp(status, "failed") || !strcmp(status, "cancelled"))
            return em_fail(err, "migration %s: %s", status, why);
        if (check_interrupt(err) < 0)
            return -1;
        if (now_ms() > deadline)
            return em_fail(err, "migration still `%s` after %.0f s", status, timeout_ms / 1000);
        sleep_ms(wait);
        wait = wait < 20 ? wait * 2 : 20;
    }
}

int vm_migrate_fd(qmp *q, const char *command, int fd, em_err *err)
{
    int rc = set_ignore_shared(q, err);
    if (rc == 0)
        rc = pass_fd(q, "state", fd, err);
    if (rc == 0) {
        json_t *args = json_pack("{s:s}", "uri", "fd:state");
        rc = qmp_execute(q, command, args, QMP_TIMEOUT_MS, NULL, err);
        json_decref(args);
    }
    if (rc == 0)
        rc = wait_migration(q, MIGRATE_TIMEOUT_MS, err);
    return rc;
}

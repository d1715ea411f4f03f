#include "envmgr/vm/qmp.h"

#include <string.h>

#include "envmgr/base/jsonline.h"
#include "envmgr/base/util.h"

#define QMP_EVENTS_KEPT 64

struct qmp {
    jsonline conn;
    char *label;
    unsigned next_id;
    json_t *events; /* events seen while waiting for replies, oldest first */
};

static void keep_event(qmp *q, json_t *msg)
{
    if (json_array_size(q->events) >= QMP_EVENTS_KEPT)
        json_array_remove(q->events, 0);
    json_array_append(q->events, msg);
}

static int execute(qmp *q, const char *cmd, json_t *args, int fd, double timeout_ms, json_t **ret, em_err *err)
{
    if (ret)
        *ret = NULL;
    char id[32];
    snprintf(id, sizeof id, "em-%u", ++q->next_id);
    json_t *msg = json_pack("{s:s, s:s}", "execute", cmd, "id", id);
    if (args)
        json_object_set(msg, "arguments", args);
    int rc = jsonline_send(&q->conn, msg, fd, err);
    json_decref(msg);
    if (rc < 0)
        return -1;

    double deadline = now_ms() + timeout_ms;
    for (;;) {
        json_t *reply;
        if (jsonline_read(&q->conn, deadline, &reply, err) < 0)
            return em_prefix(err, "%s: ", cmd);
        if (json_object_get(reply, "event")) {
            keep_event(q, reply);
            json_decref(reply);
            continue;
        }
        const char *rid = json_string_value(json_object_get(reply, "id"));
        if (!rid || strcmp(rid, id) != 0) { /* a stale reply from an abandoned command */
            json_decref(reply);
            continue;
        }
        json_t *e = json_object_get(reply, "error");
        if (e) {
            const char *cls = json_string_value(json_object_get(e, "class"));
            const char *desc = json_string_value(json_object_get(e, "desc"));
            em_fail(err, "qmp %s: %s failed: %s (%s)", q->label, cmd, desc ? desc : "no description",
                    cls ? cls : "no class");
            json_decref(reply);
            return -1;
        }
        json_t *r = json_object_get(reply, "return");
        if (!r) {
            json_decref(reply);
            return em_fail(err, "qmp %s: %s: reply has neither return nor error", q->label, cmd);
        }
        if (ret)
            *ret = json_incref(r);
        json_decref(reply);
        return 0;
    }
}

int qmp_execute(qmp *q, const char *cmd, json_t *args, double timeout_ms, json_t **ret, em_err *err)
{
    return execute(q, cmd, args, -1, timeout_ms, ret, err);
}

int qmp_execute_with_fd(qmp *q, const char *cmd, json_t *args, int fd, double timeout_ms, json_t **ret,
                        em_err *err)
{
    return execute(q, cmd, args, fd, timeout_ms, ret, err);
}

int qmp_open_fd(int fd, const char *label, double timeout_ms, qmp **out, em_err *err)
{
    qmp *q = xcalloc(1, sizeof *q);
    q->label = xstrdup(label);
    jsonline_init(&q->conn, fd, q->label, QMP_LINE_MAX);
    q->events = json_array();
    double deadline = now_ms() + timeout_ms;
    json_t *greeting;
    if (jsonline_read(&q->conn, deadline, &greeting, err) < 0) {
        qmp_close(q);
        return em_prefix(err, "greeting: ");
    }
    int ok = json_object_get(greeting, "QMP") != NULL;
    json_decref(greeting);
    if (!ok) {
        em_fail(err, "qmp %s: the peer did not greet like a QMP server", label);
        qmp_close(q);
        return -1;
    }
    if (qmp_execute(q, "qmp_capabilities", NULL, deadline - now_ms(), NULL, err) < 0) {
        qmp_close(q);
        return -1;
    }
    *out = q;
    return 0;
}

int qmp_open(const char *sock_path, double timeout_ms, qmp **out, em_err *err)
{
    double deadline = now_ms() + timeout_ms;
    int fd = unix_connect(sock_path, timeout_ms, err);
    if (fd < 0)
        return em_prefix(err, "qmp: ");
    return qmp_open_fd(fd, sock_path, deadline - now_ms(), out, err);
}

void qmp_close(qmp *q)
{
    if (!q)
        return;
    jsonline_release(&q->conn);
    free(q->label);
    json_decref(q->events);
    free(q);
}

int qmp_hmp(qmp *q, const char *cmdline, double timeout_ms, int accept_output, char **out, em_err *err)
{
    json_t *args = json_pack("{s:s}", "command-line", cmdline);
    json_t *ret = NULL;
    int rc = qmp_execute(q, "human-monitor-command", args, timeout_ms, &ret, err);
    json_decref(args);
    if (rc < 0)
        return -1;
    const char *text = json_string_value(ret);
    if (!text)
        text = "";
    if (!accept_output && text[0]) {
        em_fail(err, "qmp %s: `%s` failed: %.*s", q->label, cmdline, (int)strcspn(text, "\r\n"), text);
        json_decref(ret);
        return -1;
    }
    if (out)
        *out = xstrdup(text);
    json_decref(ret);
    return 0;
}

int qmp_status(qmp *q, double timeout_ms, char **status, em_err *err)
{
    json_t *ret;
    if (qmp_execute(q, "query-status", NULL, timeout_ms, &ret, err) < 0)
        return -1;
    const char *s = json_string_value(json_object_get(ret, "status"));
    if (!s) {
        json_decref(ret);
        return em_fail(err, "qmp: query-status returned no status");
    }
    *status = xstrdup(s);
    json_decref(ret);
    return 0;
}

/* QMP client over a unix socket. QEMU's monitor serves one client at a time,
 * so a process keeps one qmp handle per socket and never shares it between
 * concurrent commands. */
#ifndef ENVMGR_QMP_H
#define ENVMGR_QMP_H

#include <jansson.h>

#include "envmgr/base/err.h"

#define QMP_LINE_MAX (4u << 20) /* a reply larger than this is refused */

typedef struct qmp qmp;

/* Connect, read the greeting, negotiate capabilities. */
int qmp_open(const char *sock_path, double timeout_ms, qmp **out, em_err *err);
/* Wrap an already connected fd (used by tests with a scripted peer). Takes ownership. */
int qmp_open_fd(int fd, const char *label, double timeout_ms, qmp **out, em_err *err);
void qmp_close(qmp *q);

/* Run a command. args may be NULL; it is borrowed. On success *ret (if not NULL)
 * receives a new reference to the "return" value. A QMP error reply becomes
 * an em_err carrying QEMU's class and description. */
int qmp_execute(qmp *q, const char *cmd, json_t *args, double timeout_ms, json_t **ret, em_err *err);
/* Same, passing fd to QEMU with SCM_RIGHTS alongside the command (for getfd). */
int qmp_execute_with_fd(qmp *q, const char *cmd, json_t *args, int fd, double timeout_ms, json_t **ret,
                        em_err *err);
/* human-monitor-command; HMP reports errors as text, so any output that is not
 * empty is treated as failure unless accept_output is set. */
int qmp_hmp(qmp *q, const char *cmdline, double timeout_ms, int accept_output, char **out, em_err *err);

/* query-status → "running", "paused", "inmigrate", ... (caller frees). */
int qmp_status(qmp *q, double timeout_ms, char **status, em_err *err);

#endif

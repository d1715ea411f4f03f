/* Why an episode ended: one enum and one table of the names results, traces and reports use.
 * Code compares enums; only files and the wire carry the names. */
#ifndef ENVMGR_BASE_EXIT_CAUSE_H
#define ENVMGR_BASE_EXIT_CAUSE_H

typedef enum {
    EXIT_NONE = 0,    /* still running (no name) */
    EXIT_DONE,        /* the agent said DONE */
    EXIT_FAIL,        /* the agent said FAIL (right only on infeasible tasks) */
    EXIT_TIMEOUT,     /* the step or episode timeout passed */
    EXIT_MAX_STEPS,   /* the task's step limit was reached */
    EXIT_AGENT_ERROR, /* the agent crashed, hung up or wrote garbage */
    EXIT_ENV_ERROR,   /* the env failed (QEMU died, setup could not run): not the agent's score */
    EXIT_TASK_ERROR,  /* the task could not be loaded (suites) */
    EXIT_EVALUATED,   /* evaluated on request while the agent had not ended it (HTTP API) */
    EXIT_GUEST_SHUTDOWN, /* the guest powered itself off: scored (0), never an env error to retry */
    EXIT_SETUP_ERROR, /* a setup step's own check failed (execute_with_verification, `check`): not evaluated */
    EXIT_UNSUPPORTED, /* the task needs a piece envmgr lacks (suites): counted apart from scores */
    EXIT_CAUSE_COUNT
} exit_cause;

/* "done", "fail", ...; NULL for EXIT_NONE. */
const char *exit_cause_name(exit_cause c);
/* The cause a name stands for; EXIT_NONE for NULL or a name that is none of them. */
exit_cause exit_cause_from_name(const char *name);

#endif

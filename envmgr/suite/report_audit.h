/* `envmgr suite audit`: what a suite's tasks do with agents that do nothing, and with their reference
 * solutions, read from the runs' results. Finds the tasks a benchmark maintainer must look at before
 * anyone's score on them means something (docs/osworld.md, "Auditing a suite"). */
#ifndef ENVMGR_SUITE_REPORT_AUDIT_H
#define ENVMGR_SUITE_REPORT_AUDIT_H

#include <jansson.h>
#include <stdio.h>

#include "envmgr/suite/suite.h"

/* The run directories' final results (results_final of each run's results.jsonl; solutions NULL when
 * none was run; solved: the ids of the tasks that have a reference solution, the only ones the
 * solutions pass ran and is judged on) -> {"tasks": {ID: {"findings": [{"kind", "detail"}], "unsupported": why?}},
 * "audited", "with_findings", "unsupported"}. Kinds: pre_satisfied (a feasible task above 0 with
 * DONE), infeasible_passes_done, infeasible_fails_fail, crashed (env_error, setup_error),
 * evaluator_error, flagged (a setup step or getter failed for the image's or the task's reasons),
 * solution_below_1, missing (no result). */
json_t *report_audit(const suite *s, json_t *done_final, json_t *fail_final, json_t *solutions_final,
                     json_t *solved);
/* One line per finding, "TASK  KIND  DETAIL", then the counts. */
void report_audit_print(FILE *out, json_t *audit);

#endif

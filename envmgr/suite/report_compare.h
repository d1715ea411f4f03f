/* `envmgr suite compare BASE NEW`: per-task score changes between two runs
 * (the mean over repeats), regressions listed first, so CI can fail on a
 * regression. A task that BASE has and NEW lacks counts as a regression:
 * a run that lost tasks must not look green; so does a task BASE scored and
 * NEW could not (every repeat crashed, could not be set up, or its evaluator
 * failed: no score, never a 0). */
#ifndef ENVMGR_REPORT_COMPARE_H
#define ENVMGR_REPORT_COMPARE_H

#include <jansson.h>
#include <stdio.h>

#include "envmgr/base/err.h"

typedef struct report_cmp {
    size_t regressed, missing, improved, added, unchanged;
    size_t unsupported;      /* unsupported in both runs */
    size_t now_unsupported;  /* scored in BASE, unsupported in NEW (no score: not a regression) */
    size_t now_supported;    /* unsupported in BASE, scored in NEW */
    size_t unscored;         /* no repeat scored in either run (env_error, setup_error, evaluator_error) */
    size_t now_unscored;     /* scored in BASE, no repeat scored in NEW: the gate fails, as for a regression */
    size_t scored_again;     /* no repeat scored in BASE, scored in NEW (not an improvement) */
} report_cmp;

/* base_final, new_final: results_final() of each run. A change smaller than
 * tolerance is no change. Prints one line per changed task, then a total. */
void report_compare(json_t *base_final, json_t *new_final, double tolerance, FILE *out, report_cmp *c);
/* The same from two run directories (their results.jsonl). */
int report_compare_dirs(const char *base, const char *cur, double tolerance, FILE *out, report_cmp *c, em_err *err);

#endif

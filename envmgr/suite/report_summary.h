/* What a suite run adds up to, computed from DIR/suite.json (the episodes
 * expected) and DIR/results.jsonl (the episodes over): a table by domain
 * (tasks, pass rate, mean score, mean steps, p50 episode time),
 * summary.json, and junit.xml (a testcase per episode, a failure when the
 * score is below 1 with the reason, the trace path in system-out) for CI.
 * The same functions serve `suite run`, `suite merge` and the unit tests. */
#ifndef ENVMGR_REPORT_SUMMARY_H
#define ENVMGR_REPORT_SUMMARY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "envmgr/base/err.h"

/* An episode passes when its score is 1 (within float noise). */
bool report_passed(double score);
/* A results.jsonl line whose evaluator failed (status evaluator_error): its score is no score. */
bool report_evaluator_error(json_t *line);
/* A line whose episode crashed (exit cause env_error, after its retries): not evaluated, its 0 is no score. */
bool report_env_error(json_t *line);
/* A line whose task's setup (or postconfig) could not run here (exit cause setup_error): not
 * evaluated, its 0 is no score. */
bool report_setup_error(json_t *line);
/* A line whose score counts in the pass rate and the mean: neither unsupported, evaluator_error,
 * env_error nor setup_error. */
bool report_scored(json_t *line);

/* The median of v (n >= 1; sorts v). Even n: the mean of the two middle values. */
double report_p50(double *v, size_t n);

/* The summary object. meta: the suite.json object (NULL: nothing expected
 * beyond what ran); final: results_final(). */
json_t *report_summary(json_t *meta, json_t *final);

/* The table by domain, one row per domain and an "all" row. */
void report_print_table(FILE *out, json_t *summary);

/* junit.xml text (caller frees). dir_abs: the run directory, so trace paths
 * in system-out are absolute. Expected episodes that never finished are
 * <skipped/> testcases. */
char *report_junit(json_t *meta, json_t *final, const char *dir_abs);

/* XML-escaped text: & < > " ' as entities, characters XML 1.0 forbids as
 * visible escapes. Caller frees. */
char *report_xml_escape(const char *s);

/* Read dir's suite.json and results.jsonl, write summary.json (with the
 * fields of extra, if any, added) and junit.xml. *summary (optional) gets
 * the summary object. */
int report_write_all(const char *dir, json_t *extra, json_t **summary, em_err *err);

/* Read dir/suite.json (NULL and no error when missing_ok and it is absent). */
int report_read_meta(const char *dir, bool missing_ok, json_t **meta, em_err *err);

#endif

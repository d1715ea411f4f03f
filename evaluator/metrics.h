/* Built-in metrics, named and behaving as OSWorld's, plus `script` (an
 * external evaluator run without a shell). A metric compares a result
 * artifact with an expected artifact (see getters.h) and scores 0..1.
 *
 *   exact_match              result == rules.expected
 *   check_include_exclude    every rules.include is a substring of the result, no rules.exclude is
 *   match_in_list            result is one of rules.expected (a list)
 *   is_in_list               rules.expected is an element (list result) or substring (text result)
 *   literal_match            str(result) == str(expected); options type "str"|"list", ignore_case
 *   fuzzy_match              rapidfuzz fuzz.ratio / 100 (see below); options threshold → 0 or 1
 *   compare_text_file        two files equal; options ignore_blanks, ignore_case
 *   check_direct_json_object result (a JSON object, or text of one) has rules.expected's values;
 *                            rules.expect_in_result, rules.ignore_list_order
 *   compare_images           two PNGs: the fraction of pixels differing by more than options.tolerance
 *                            (per channel, 0..255, default 0) is at most options.max_diff_fraction
 *                            (default 0) → 1, else 0
 *   infeasible               1 only if the agent ended with FAIL
 *   script                   options {path, timeout_s, ...}: see metric_run
 *
 * "rules" is the expected artifact's JSON value (a `rule` getter); when it
 * is not an object with an "expected" key, the artifact's value itself is
 * the expected value. Text compares as text; a file artifact compares by
 * its contents. */
#ifndef ENVMGR_METRICS_H
#define ENVMGR_METRICS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

#define METRIC_SCRIPT_OUTPUT_MAX (64u * 1024)
#define METRIC_SCRIPT_TIMEOUT_S 30.0
#define METRIC_SCRIPT_TIMEOUT_MAX_S 600.0
#define METRIC_TEXT_MAX (16u << 20)    /* bytes of a file artifact read as text */
#define METRIC_FUZZY_MAX 16384         /* code points fuzzy_match compares per side */

/* What a metric may need besides its inputs. Every field may be NULL. */
typedef struct metric_ctx {
    const char *task_dir;     /* `script`: scripts shipped with the task */
    const char *artifact_dir; /* `script`: its working directory */
    const char *agent_exit;   /* how the episode ended: "done", "fail", "timeout", ... */
} metric_ctx;

bool metric_known(const char *func);
/* Whether the metric reads a result / an expected artifact. */
bool metric_needs_result(const char *func);
bool metric_needs_expected(const char *func);
/* Static check of options at task load. Messages start with the option
 * name ("threshold: expected a number, got string"); the caller prefixes
 * the JSON path. NULL options are fine. */
int metric_check_options(const char *func, json_t *options, em_err *err);

/* Score result against expected. Returns 0 with *score in 0..1 and a
 * one-line *reason (malloc'd) whenever the metric ran, including when its
 * inputs were missing or malformed (score 0, the reason says why). Returns
 * negative with err set only for an unknown func or a NULL argument.
 *
 * `script`: options.path names an executable in paths_data_dir()
 * "/evaluator/scripts/" (a bare name, looked up there first) or in the task
 * folder (ctx->task_dir). It runs without a shell, in its own process
 * group, with cwd = ctx->artifact_dir, a small environment (PATH, HOME,
 * LANG, ENVMGR_TASK_DIR, ENVMGR_ARTIFACT_DIR), stdin = {"result": ...,
 * "expected": ..., "options": ...}, a timeout (options.timeout_s, default
 * 30 s; the whole group is killed) and stdout capped at 64 KiB. It must exit
 * 0 and print {"score": 0..1, "reason": "..."}; anything else scores 0. */
int metric_run(const metric_ctx *ctx, const char *func, json_t *result, json_t *expected, json_t *options,
               double *score, char **reason, em_err *err);

/* rapidfuzz's fuzz.ratio / 100: the normalized InDel similarity
 * 2 * LCS(a, b) / (|a| + |b|) over Unicode code points (invalid UTF-8
 * bytes count as one code point each); 1.0 for two empty strings.
 * Inputs longer than METRIC_FUZZY_MAX code points give -1. */
double metric_fuzzy_ratio(const char *a, size_t alen, const char *b, size_t blen);

#endif

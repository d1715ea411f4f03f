/* Metrics: the built-in ones in C (named and behaving as OSWorld's), the evaluator scripts of
 * the registry (evaluator/metrics/ families, registry.h), and `script` (a program shipped with envmgr
 * or the task). A metric compares a result artifact with an expected artifact (see getters.h) and
 * scores 0..1. Every script, registry metric or `script`, runs in the evaluator sandbox
 * (sandbox.h); the C metrics run in envmgr.
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
 *   compare_images_exact     two PNGs: the fraction of pixels differing by more than options.tolerance
 *                            (per channel, 0..255, default 0) is at most options.max_diff_fraction
 *                            (default 0) → 1, else 0 (OSWorld's compare_images, a similarity, is the
 *                            registry's)
 *   infeasible               1 only if the agent ended with FAIL
 *   script                   options {path, timeout_s, ...}: see metric_run
 *   any registry metric      compare_table, compare_docx_files, ...: docs/task-format.md lists them
 *
 * A name in both the C table and the registry is the C metric's.
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

#define METRIC_SCRIPT_TIMEOUT_S 30.0
#define METRIC_SCRIPT_TIMEOUT_MAX_S 600.0
#define METRIC_TEXT_MAX (16u << 20)    /* bytes of a file artifact read as text */
#define METRIC_FUZZY_MAX 16384         /* code points fuzzy_match compares per side */

/* What a metric may need besides its inputs. Every field may be NULL. */
typedef struct metric_ctx {
    const char *task_dir;     /* `script`: scripts shipped with the task */
    const char *artifact_dir; /* `script`: its working directory */
    const char *agent_exit;   /* how the episode ended: "done", "fail", "timeout", ... */
    double timeout_s;         /* registry metrics: the sandbox's wall clock (0: SANDBOX_TIMEOUT_S) */
} metric_ctx;

/* metric_run's outcomes */
enum { METRIC_SCORED = 0, METRIC_EVALUATOR_ERROR = 1 };

bool metric_known(const char *func);
/* For "unknown metric" messages: "" or " (the evaluator-script registry did not load: ...)". */
const char *metric_unknown_hint(void);
/* Whether the metric reads a result / an expected artifact. */
bool metric_needs_result(const char *func);
bool metric_needs_expected(const char *func);
/* Static check of options at task load. Messages start with the option
 * name ("threshold: expected a number, got string"); the caller prefixes
 * the JSON path. NULL options are fine. */
int metric_check_options(const char *func, json_t *options, em_err *err);

/* Score result against expected. Returns METRIC_SCORED with *score in 0..1
 * and a one-line *reason (malloc'd) whenever the metric decided, including
 * when its result was missing or malformed (score 0, the reason says why).
 * Returns METRIC_EVALUATOR_ERROR with *score 0 and *reason the one-line
 * message naming the metric when the evaluator itself failed: a script
 * crashed, timed out, hit a limit, printed garbage or answered
 * {"error": ...}, the sandbox could not run, or a built-in metric could not
 * read or decode its expected artifact (the task's fault). That is no score. Returns
 * negative with err set only for an unknown func or a NULL argument.
 *
 * Registry metrics: evaluator/metrics/run.py in the sandbox, stdin
 * {"metric", "result", "expected", "options"} with the artifacts as
 * OSWorld's values (sandbox_osworld_value), stdout {"score": x} (exit 0)
 * or {"error": "..."} (exit 3).
 *
 * `script`: options.path names an executable in paths_data_dir()
 * "/evaluator/scripts/" (a bare name, looked up there first) or in the task
 * folder (ctx->task_dir). It runs in the sandbox as /script/NAME (its `#!`
 * interpreter must be under /usr), cwd /tmp (private), stdin =
 * {"result": ..., "expected": ..., "options": ...} with envmgr's artifacts
 * (a file's path is its read-only path in the sandbox, null when the file
 * is missing), a timeout (options.timeout_s, default 30 s) and stdout
 * capped at 64 KiB. It must exit 0 and print {"score": 0..1, "reason":
 * "..."}; {"error": "..."} or anything else is an evaluator_error. */
int metric_run(const metric_ctx *ctx, const char *func, json_t *result, json_t *expected, json_t *options,
               double *score, char **reason, em_err *err);

/* rapidfuzz's fuzz.ratio / 100: the normalized InDel similarity
 * 2 * LCS(a, b) / (|a| + |b|) over Unicode code points (invalid UTF-8
 * bytes count as one code point each); 1.0 for two empty strings.
 * Inputs longer than METRIC_FUZZY_MAX code points give -1. The evaluator scripts' one
 * Python version is metrics/_common.py fuzz_ratio; tests/metrics/test_shared.py holds both to
 * the same answers. */
double metric_fuzzy_ratio(const char *a, size_t alen, const char *b, size_t blen);

/* Every metric, sorted by name: [{"name", "source": "builtin"|"script", "family" (scripts),
 * "expected": true|false|"optional", "options": {"name": "type, default: what"}, "summary"}].
 * New reference. Registry metrics are missing when the registry did not load. */
json_t *metric_catalog(void);

#endif

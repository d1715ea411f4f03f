/* The evaluator-script registry: evaluator/metrics/registry.json (written by `make registry` from
 * the scripts' @metric declarations), read once, validated, and consulted by metrics_builtin.c for every
 * metric the C table does not have.
 *
 *   {"NAME": {"family": "tables", "expected": true | false | "optional",
 *             "options": {"OPTION": "type, default ...: what it does", ...},
 *             "summary": "...", "osworld": "..."}, ...}
 *
 * An option's type is the first word of its text: bool, int/integer, number, str/string, list;
 * ", required" marks one the metric cannot run without; an option named "..." means any other
 * option is passed on. */
#ifndef ENVMGR_EVALUATOR_REGISTRY_H
#define ENVMGR_EVALUATOR_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"

#define REGISTRY_FILE_MAX ((size_t)1 << 20)
#define REGISTRY_NAME_MAX 64
#define REGISTRY_TEXT_MAX 4096

typedef enum { REG_EXPECTED_NO, REG_EXPECTED_YES, REG_EXPECTED_OPTIONAL } registry_expected;

/* Where the metrics live: <data dir>/evaluator/metrics (run.py, the families, registry.json). */
const char *registry_metrics_dir(void);

/* Parse and validate a registry document. *out is a new reference. Messages name the metric and
 * the field ("registry.json: compare_table.expected: expected true, false or \"optional\""). */
int registry_parse(const char *text, size_t len, json_t **out, em_err *err);

/* The registry of this build, loaded on first use (thread-safe). NULL when it did not load;
 * registry_error then says why. Borrowed. */
json_t *registry_get(void);
const char *registry_error(void);

/* One metric's entry (borrowed), or NULL. */
json_t *registry_find(const char *name);
registry_expected registry_expects(json_t *entry);

/* Check task options (NULL or an object) against an entry: documented options by their type, "required" ones present.
 * Options it does not document are passed on (the script refuses what it cannot take). Messages
 * start with the option name. */
int registry_check_options(json_t *entry, json_t *options, em_err *err);

#endif

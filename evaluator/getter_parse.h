/* Parsing what the guest toolbelt (`envmgr-guest`, vm-images/toolbelt) answers, and the URL
 * pieces OSWorld's browser getters take apart. Pure functions over untrusted bytes: every input
 * is length-bounded by the caller's exec cap, every output is new memory. */
#ifndef ENVMGR_GETTER_PARSE_H
#define ENVMGR_GETTER_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

/* The toolbelt's exit status when it is not installed: the wrapper's `exit 127`. */
#define TOOLBELT_MISSING 127
/* toolbelt_answer's status when the toolbelt ran and reported {"error": ...} (the app's state,
 * not the plumbing): callers with an OSWorld default may use it. */
#define TOOLBELT_REPORTED (-2)

/* One answer of `envmgr-guest SUB` (stdout out/len, exit status code) as a JSON object in
 * *answer. Errors name type: the toolbelt missing from the image, a timeout, a reported error
 * (TOOLBELT_REPORTED), an answer that is not one JSON object. */
int toolbelt_answer(const char *type, const char *out, size_t len, int code, json_t **answer, em_err *err);

/* The text of Chrome's address bar in an OSWorld-shaped accessibility tree: the first <entry
 * name="Address and search bar"> inside <application name="Google Chrome"> (or "Chromium"),
 * entities decoded. NULL when there is none or it is empty. Caller frees. */
char *a11y_address_bar(const char *xml, size_t len);

/* OSWorld's active_tab_url_parse: {key: first value of key in url's query, or ""} for every key
 * of keys (strings), then each replace {old: new} renames a key. Values are percent- and
 * plus-decoded, as Python's parse_qs does. */
json_t *url_query_pick(const char *url, json_t *keys, json_t *replace);

/* OSWorld's split_list for active_tab_url_parse: every string value of params becomes the list
 * of its comma-separated parts (Python's str.split(",")). */
void url_split_lists(json_t *params);

/* OSWorld's url_path_parse (its Macy's product URL reader): from the percent-decoded path,
 * mens_clothing / shirts / short_sleeve (true or null), and each of keys found in the first two
 * neighbouring path segments that both hold commas (keys, then values; Price_discount_range
 * reduced to "50_PERCENT_ off & more" or "not_50_PERCENT_ off & more"). */
json_t *url_path_pick(const char *url, json_t *keys);

/* OSWorld's url_dashPart: part index (negative: from the end, as Python) of url split at '/', cut at '?' when delete_id. NULL when
 * the url has no such part. Caller frees. */
char *url_dash_part(const char *url, long index, bool delete_id);

#endif

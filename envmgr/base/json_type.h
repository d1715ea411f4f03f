/* The name of a JSON value's type, for messages like
 * "action.x: expected a number, got string". */
#ifndef ENVMGR_JSON_TYPE_H
#define ENVMGR_JSON_TYPE_H

#include <jansson.h>

const char *json_type_name(const json_t *j);

#endif

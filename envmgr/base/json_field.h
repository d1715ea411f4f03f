/* Typed reading of one member of a JSON object, for every format envmgr reads (task files,
 * actions, traces). Each reader names the member by its JSON path in the error, so a bad file
 * gives one line that says where: "evaluator.result.path: expected a string, got integer".
 * base is the path of obj ("" at the top level); key the member's name. */
#ifndef ENVMGR_JSON_FIELD_H
#define ENVMGR_JSON_FIELD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

#define JFIELD_PATH_MAX 320 /* bytes of a path in a message; a longer one ends in "..." */

/* "base.key" (or "key" when base is empty) and "base[i]" into out[JFIELD_PATH_MAX]. */
void jfield_path(char *out, const char *base, const char *key);
void jfield_index(char *out, const char *base, size_t i);

/* A string; absent: an error when required, else *out NULL and 0. */
int jfield_str(json_t *obj, const char *base, const char *key, bool required, const char **out, em_err *err);
/* The same, and present it must not be "". */
int jfield_nonempty_str(json_t *obj, const char *base, const char *key, bool required, const char **out,
                        em_err *err);
/* true or false; absent: dflt. */
int jfield_bool(json_t *obj, const char *base, const char *key, bool dflt, bool *out, em_err *err);
/* A finite number (640 or 640.0). *present says whether the member is there; absent is an error
 * only when required. */
int jfield_number(json_t *obj, const char *base, const char *key, bool required, double *out, bool *present,
                  em_err *err);
/* An optional number in (lo, hi] when lo_open, else [lo, hi]; absent: dflt. */
int jfield_num(json_t *obj, const char *base, const char *key, double lo, bool lo_open, double hi, double dflt,
               double *out, em_err *err);
/* The same, absent an error only when required, else *out untouched. */
int jfield_num_in(json_t *obj, const char *base, const char *key, bool required, double lo, bool lo_open, double hi,
                  double *out, em_err *err);
/* An optional integer (no fraction) in [lo, hi]; absent: dflt. */
int jfield_int(json_t *obj, const char *base, const char *key, long lo, long hi, long dflt, long *out, em_err *err);
/* The same, absent an error only when required, else *out untouched. strict: written as an
 * integer ("3", not "3.0": a format envmgr writes itself, such as a trace, never has the latter). */
int jfield_int_in(json_t *obj, const char *base, const char *key, bool required, bool strict, long lo, long hi,
                  long *out, em_err *err);
/* An optional object; absent: *out NULL. */
int jfield_obj(json_t *obj, const char *base, const char *key, json_t **out, em_err *err);
/* An optional array; absent: *out NULL. what names it in the error ("an array of actions"). */
int jfield_array(json_t *obj, const char *base, const char *key, const char *what, json_t **out, em_err *err);
/* Item i of arr (whose path is base) must be of type, what naming it ("an action object");
 * path[JFIELD_PATH_MAX] gets "base[i]" for the caller's own later messages. */
int jfield_item(json_t *arr, const char *base, size_t i, json_type type, const char *what, char *path, em_err *err);
/* An optional array of strings, copied: *out NULL-terminated (free each and the array), *n items. */
int jfield_str_array(json_t *obj, const char *base, const char *key, char ***out, size_t *n, em_err *err);

/* known: the allowed member names, space separated with a space at each end (" a b c "). */
bool jfield_known(const char *known, const char *key);
/* fn(path, arg) for each member not in known, in order; stops at the first fn < 0 and returns it. */
int jfield_each_unknown(json_t *obj, const char *base, const char *known, int (*fn)(const char *path, void *arg),
                        void *arg);
/* The first member not in known as "base.key: unknown field". */
int jfield_refuse_unknown(json_t *obj, const char *base, const char *known, em_err *err);

#endif

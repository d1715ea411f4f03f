#include "envmgr/base/json_field.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

/* A path too long for the buffer ends in "..." rather than being cut silently. */
static void mark_cut(char *out, int n)
{
    if (n >= JFIELD_PATH_MAX)
        memcpy(out + JFIELD_PATH_MAX - 4, "...", 4);
}

void jfield_path(char *out, const char *base, const char *key)
{
    mark_cut(out, snprintf(out, JFIELD_PATH_MAX, "%s%s%.64s", base, *base ? "." : "", key));
}

void jfield_index(char *out, const char *base, size_t i)
{
    mark_cut(out, snprintf(out, JFIELD_PATH_MAX, "%s[%zu]", base, i));
}

int jfield_str(json_t *obj, const char *base, const char *key, bool required, const char **out, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    jfield_path(p, base, key);
    if (!v)
        return required ? em_fail_input(err, "%s: missing", p) : 0;
    if (!json_is_string(v))
        return em_fail_input(err, "%s: expected a string, got %s", p, json_type_name(v));
    *out = json_string_value(v);
    return 0;
}

int jfield_nonempty_str(json_t *obj, const char *base, const char *key, bool required, const char **out,
                        em_err *err)
{
    if (jfield_str(obj, base, key, required, out, err) < 0)
        return -1;
    if (*out && !**out) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, key);
        return em_fail_input(err, "%s: empty", p);
    }
    return 0;
}

int jfield_bool(json_t *obj, const char *base, const char *key, bool dflt, bool *out, em_err *err)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v)
        return 0;
    if (!json_is_boolean(v)) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, key);
        return em_fail_input(err, "%s: expected true or false, got %s", p, json_type_name(v));
    }
    *out = json_is_true(v);
    return 0;
}

int jfield_number(json_t *obj, const char *base, const char *key, bool required, double *out, bool *present,
                  em_err *err)
{
    char p[JFIELD_PATH_MAX];
    json_t *v = json_object_get(obj, key);
    *present = v != NULL;
    jfield_path(p, base, key);
    if (!v)
        return required ? em_fail_input(err, "%s: missing", p) : 0;
    if (!json_is_number(v))
        return em_fail_input(err, "%s: expected a number, got %s", p, json_type_name(v));
    double d = json_number_value(v);
    if (!isfinite(d))
        return em_fail_input(err, "%s: not a finite number", p);
    *out = d;
    return 0;
}

int jfield_num_in(json_t *obj, const char *base, const char *key, bool required, double lo, bool lo_open, double hi,
                 double *out, em_err *err)
{
    bool present;
    double d;
    if (jfield_number(obj, base, key, required, &d, &present, err) < 0)
        return -1;
    if (!present)
        return 0;
    if ((lo_open ? d <= lo : d < lo) || d > hi) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, key);
        return em_fail_input(err, "%s: %g is out of range (%s %g and <= %g)", p, d, lo_open ? ">" : ">=", lo, hi);
    }
    *out = d;
    return 0;
}

int jfield_num(json_t *obj, const char *base, const char *key, double lo, bool lo_open, double hi, double dflt,
               double *out, em_err *err)
{
    *out = dflt;
    return jfield_num_in(obj, base, key, false, lo, lo_open, hi, out, err);
}

int jfield_int_in(json_t *obj, const char *base, const char *key, bool required, bool strict, long lo, long hi,
                  long *out, em_err *err)
{
    char p[JFIELD_PATH_MAX];
    json_t *v = json_object_get(obj, key);
    jfield_path(p, base, key);
    if (!v)
        return required ? em_fail_input(err, "%s: missing", p) : 0;
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    /* strict: jansson keeps "3.0" a real, so is_integer tells how the number was written */
    bool whole = strict ? json_is_integer(v) : json_is_number(v) && d == floor(d);
    if (!whole)
        return em_fail_input(err, "%s: expected an integer, got %s", p,
                             json_is_real(v) ? (strict ? "a real" : "a fraction") : json_type_name(v));
    if (json_is_integer(v) ? json_integer_value(v) < lo || json_integer_value(v) > hi
                           : d < (double)lo || d > (double)hi)
        return em_fail_input(err, "%s: %g is out of range (%ld..%ld)", p, d, lo, hi);
    *out = json_is_integer(v) ? (long)json_integer_value(v) : (long)d;
    return 0;
}

int jfield_int(json_t *obj, const char *base, const char *key, long lo, long hi, long dflt, long *out, em_err *err)
{
    *out = dflt;
    return jfield_int_in(obj, base, key, false, false, lo, hi, out, err);
}

int jfield_obj(json_t *obj, const char *base, const char *key, json_t **out, em_err *err)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_object(v)) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, key);
        return em_fail_input(err, "%s: expected an object, got %s", p, json_type_name(v));
    }
    *out = v;
    return 0;
}

int jfield_array(json_t *obj, const char *base, const char *key, const char *what, json_t **out, em_err *err)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v)
        return 0;
    if (!json_is_array(v)) {
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, key);
        return em_fail_input(err, "%s: expected %s, got %s", p, what, json_type_name(v));
    }
    *out = v;
    return 0;
}

int jfield_item(json_t *arr, const char *base, size_t i, json_type type, const char *what, char *path, em_err *err)
{
    json_t *v = json_array_get(arr, i);
    jfield_index(path, base, i);
    if (!v || json_typeof(v) != type)
        return em_fail_input(err, "%s: expected %s, got %s", path, what, json_type_name(v));
    return 0;
}

int jfield_str_array(json_t *obj, const char *base, const char *key, char ***out, size_t *n, em_err *err)
{
    char p[JFIELD_PATH_MAX], q[JFIELD_PATH_MAX];
    json_t *v;
    *out = NULL;
    *n = 0;
    if (jfield_array(obj, base, key, "an array of strings", &v, err) < 0)
        return -1;
    if (!v)
        return 0;
    jfield_path(p, base, key);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (jfield_item(v, p, i, JSON_STRING, "a string", q, err) < 0)
            return -1;
    size_t i;
    json_t *s;
    *out = xcalloc(json_array_size(v) + 1, sizeof **out);
    json_array_foreach(v, i, s) (*out)[(*n)++] = xstrdup(json_string_value(s));
    return 0;
}

bool jfield_known(const char *known, const char *key)
{
    char probe[72];
    snprintf(probe, sizeof probe, " %.64s ", key);
    return strlen(key) <= 64 && strstr(known, probe);
}

int jfield_each_unknown(json_t *obj, const char *base, const char *known, int (*fn)(const char *path, void *arg),
                        void *arg)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
    {
        if (jfield_known(known, k))
            continue;
        char p[JFIELD_PATH_MAX];
        jfield_path(p, base, k);
        int rc = fn(p, arg);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int refuse(const char *path, void *err)
{
    return em_fail_input(err, "%s: unknown field", path);
}

int jfield_refuse_unknown(json_t *obj, const char *base, const char *known, em_err *err)
{
    return jfield_each_unknown(obj, base, known, refuse, err);
}

/* The evaluator-script registry (see registry.h). */
#include "registry.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"

#define FILE_NAME "registry.json"

static char dir_buf[4096];

static void fill_metrics_dir(void)
{
    snprintf(dir_buf, sizeof dir_buf, "%s/evaluator/metrics", paths_data_dir());
}

const char *registry_metrics_dir(void)
{
    /* under the data dir: the checkout envmgr was built in, or <prefix>/share/envmgr when installed */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_metrics_dir);
    return dir_buf;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > REGISTRY_NAME_MAX)
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static int text_field(json_t *e, const char *name, const char *key, em_err *err)
{
    json_t *v = json_object_get(e, key);
    if (!json_is_string(v))
        return em_fail_input(err, FILE_NAME ": %s.%s: expected a string, got %s", name, key, json_type_name(v));
    if (json_string_length(v) > REGISTRY_TEXT_MAX)
        return em_fail_input(err, FILE_NAME ": %s.%s: over %d bytes", name, key, REGISTRY_TEXT_MAX);
    return 0;
}

static int check_entry(const char *name, json_t *e, em_err *err)
{
    if (!name_ok(name))
        return em_fail_input(err, FILE_NAME ": `%.64s`: a metric name is 1..%d letters, digits or _", name,
                             REGISTRY_NAME_MAX);
    if (!json_is_object(e))
        return em_fail_input(err, FILE_NAME ": %s: expected an object, got %s", name, json_type_name(e));
    if (text_field(e, name, "family", err) < 0 || text_field(e, name, "summary", err) < 0 ||
        text_field(e, name, "osworld", err) < 0)
        return -1;
    json_t *x = json_object_get(e, "expected");
    if (!json_is_boolean(x) && !(json_is_string(x) && !strcmp(json_string_value(x), "optional")))
        return em_fail_input(err, FILE_NAME ": %s.expected: expected true, false or \"optional\"", name);
    json_t *opts = json_object_get(e, "options");
    if (!json_is_object(opts))
        return em_fail_input(err, FILE_NAME ": %s.options: expected an object, got %s", name, json_type_name(opts));
    const char *k;
    json_t *v;
    json_object_foreach(opts, k, v)
    {
        if (strcmp(k, "...") && !name_ok(k))
            return em_fail_input(err, FILE_NAME ": %s.options: `%.64s` is not an option name", name, k);
        if (!json_is_string(v) || json_string_length(v) > REGISTRY_TEXT_MAX)
            return em_fail_input(err, FILE_NAME ": %s.options.%s: expected a string of at most %d bytes", name, k,
                                 REGISTRY_TEXT_MAX);
    }
    return 0;
}

int registry_parse(const char *text, size_t len, json_t **out, em_err *err)
{
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return em_fail_input(err, FILE_NAME ": line %d: %s", je.line, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return em_fail_input(err, FILE_NAME ": expected an object of metrics");
    }
    const char *name;
    json_t *e;
    json_object_foreach(root, name, e)
    {
        if (check_entry(name, e, err) < 0) {
            json_decref(root);
            return -1;
        }
    }
    *out = root;
    return 0;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static json_t *loaded;
static char load_error[EM_ERR_MAX];

static void load(void)
{
    _cleanup_free_ char *path = xasprintf("%s/" FILE_NAME, registry_metrics_dir());
    _cleanup_free_ char *text = NULL;
    size_t len;
    em_err err = {0};
    if (read_file_capped(path, REGISTRY_FILE_MAX, &text, &len, &err) < 0 || registry_parse(text, len, &loaded, &err) < 0)
        snprintf(load_error, sizeof load_error, "%.900s (run make registry)", err.msg);
}

json_t *registry_get(void)
{
    pthread_once(&once, load);
    return loaded;
}

const char *registry_error(void)
{
    pthread_once(&once, load);
    return loaded ? NULL : load_error;
}

json_t *registry_find(const char *name)
{
    json_t *r = registry_get();
    return r && name ? json_object_get(r, name) : NULL;
}

registry_expected registry_expects(json_t *entry)
{
    json_t *x = json_object_get(entry, "expected");
    if (json_is_string(x))
        return REG_EXPECTED_OPTIONAL;
    return json_is_true(x) ? REG_EXPECTED_YES : REG_EXPECTED_NO;
}

/* The type word an option's text starts with, checked against the value. */
static int check_typed(const char *opt, const char *doc, json_t *v, em_err *err)
{
    size_t n = strcspn(doc, " ,:");
    const char *want = NULL;
    bool ok = true;
    if (n == 4 && !strncmp(doc, "bool", 4)) {
        want = "true or false";
        ok = json_is_boolean(v);
    } else if ((n == 3 && !strncmp(doc, "int", 3)) || (n == 7 && !strncmp(doc, "integer", 7))) {
        want = "an integer";
        ok = json_is_integer(v);
    } else if (n == 6 && !strncmp(doc, "number", 6)) {
        want = "a number";
        ok = json_is_number(v) && isfinite(json_number_value(v));
    } else if ((n == 3 && !strncmp(doc, "str", 3)) || (n == 6 && !strncmp(doc, "string", 6))) {
        want = "a string";
        ok = json_is_string(v);
    } else if (n == 4 && !strncmp(doc, "list", 4)) {
        want = "a list";
        ok = json_is_array(v);
    }
    if (!ok)
        return em_fail_input(err, "%s: expected %s, got %s", opt, want, json_type_name(v));
    return 0;
}

int registry_check_options(json_t *entry, json_t *options, em_err *err)
{
    json_t *docs = json_object_get(entry, "options");
    const char *k;
    json_t *v;
    json_object_foreach(options, k, v)
    {
        const char *doc = json_string_value(json_object_get(docs, k));
        if (doc && check_typed(k, doc, v, err) < 0)
            return -1;
    }
    json_object_foreach(docs, k, v)
    {
        const char *doc = json_string_value(v);
        if (doc && strstr(doc, ", required") && !json_object_get(options, k))
            return em_fail_input(err, "%s: missing", k);
    }
    return 0;
}

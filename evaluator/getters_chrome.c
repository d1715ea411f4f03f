/* OSWorld's browser getters, read inside the guest by the toolbelt (`envmgr-guest chrome-*`:
 * DevTools on the guest's 127.0.0.1, the profile's Preferences, Local State, Bookmarks, History
 * and Cookies) and from the accessibility tree (the address bar). Result shapes are OSWorld's,
 * and so are its defaults where it has them (a profile that cannot be read gives the value
 * OSWorld returns then). */
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/util.h"
#include "evaluator/getter_call.h"
#include "evaluator/getter_parse.h"
#include "evaluator/getters.h"

static int run_open_tabs(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *args[] = {"chrome-tabs", NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "open_tabs_info", args, &a, err) < 0)
        return -1;
    json_t *tabs = json_array(), *t;
    size_t i;
    json_array_foreach(json_object_get(a, "tabs"), i, t)
    {
        json_t *title = json_object_get(t, "title"), *url = json_object_get(t, "url");
        json_array_append_new(tabs, json_pack("{s:O, s:O}", "title", json_is_string(title) ? title : json_string(""),
                                              "url", json_is_string(url) ? url : json_string("")));
    }
    *art = getter_json_artifact(tabs);
    return 0;
}

static int run_active_tab(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *args[] = {"chrome-active-tab", "--content", NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "active_tab_info", args, &a, err) < 0)
        return -1;
    json_t *act = json_object_get(a, "active");
    *art = getter_json_artifact(json_is_object(act)
                                    ? json_pack("{s:O?, s:O?, s:O?}", "title", json_object_get(act, "title"), "url",
                                                json_object_get(act, "url"), "content", json_object_get(act, "content"))
                                    : json_null());
    return 0;
}

/* The active tab's URL as OSWorld reads it: goto_prefix (default "https://") and the address
 * bar's text from the accessibility tree; *url NULL when the tree has no address bar. */
static int address_bar_url(const getter_call *gc, const char *type, json_t *spec, char **url, em_err *err)
{
    const char *args[] = {"a11y-tree", NULL};
    json_auto_t *a = NULL;
    *url = NULL;
    if (toolbelt_run(gc, type, args, &a, err) < 0)
        return -1;
    json_t *at = json_object_get(a, "AT");
    _cleanup_free_ char *bar = a11y_address_bar(json_string_value(at) ?: "", json_string_length(at));
    const char *prefix = json_string_value(json_object_get(spec, "goto_prefix"));
    if (bar)
        *url = xasprintf("%s%s", prefix ? prefix : "https://", bar);
    return 0;
}

static int run_url_from_tree(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *url = NULL;
    if (address_bar_url(gc, "active_url_from_accessTree", spec, &url, err) < 0)
        return -1;
    *art = url ? getter_text_artifact(url) : getter_json_artifact(NULL);
    return 0;
}

static int check_url_parse(json_t *spec, em_err *err)
{
    json_t *k = json_object_get(spec, "parse_keys"), *r = json_object_get(spec, "replace"), *v;
    size_t i;
    if (!json_is_array(k))
        return em_fail_input(err, "parse_keys: expected an array of strings");
    json_array_foreach(k, i, v) if (!json_is_string(v)) return em_fail_input(err, "parse_keys[%zu]: expected a string", i);
    if (r && !json_is_object(r))
        return em_fail_input(err, "replace: expected an object {old key: new key}");
    return getter_check_flag(spec, "split_list", err);
}

static int run_url_parse(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *url = NULL;
    if (address_bar_url(gc, "active_tab_url_parse", spec, &url, err) < 0)
        return -1;
    json_t *v = url ? url_query_pick(url, json_object_get(spec, "parse_keys"), json_object_get(spec, "replace")) : NULL;
    if (v && getter_flag_true(json_object_get(spec, "split_list")))
        url_split_lists(v);
    *art = getter_json_artifact(v);
    return 0;
}

static int check_path_parse(json_t *spec, em_err *err)
{
    json_t *k = json_object_get(spec, "parse_keys"), *v;
    size_t i;
    if (!json_is_array(k))
        return em_fail_input(err, "parse_keys: expected an array of strings");
    json_array_foreach(k, i, v) if (!json_is_string(v)) return em_fail_input(err, "parse_keys[%zu]: expected a string", i);
    return 0;
}

static int run_path_parse(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *url = NULL;
    if (address_bar_url(gc, json_string_value(json_object_get(spec, "type")), spec, &url, err) < 0)
        return -1;
    *art = getter_json_artifact(url ? url_path_pick(url, json_object_get(spec, "parse_keys")) : NULL);
    return 0;
}

static int check_dash(json_t *spec, em_err *err)
{
    const char *rt = json_string_value(json_object_get(spec, "returnType"));
    if (!json_is_integer(json_object_get(spec, "partIndex")))
        return em_fail_input(err, "partIndex: expected an integer");
    if (!rt || (strcmp(rt, "string") && strcmp(rt, "json")))
        return em_fail_input(err, "returnType: expected \"string\" or \"json\"");
    if (!strcmp(rt, "json") && getter_check_string(spec, "key", true, err) < 0)
        return -1;
    return 0;
}

static int run_dash(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *url = NULL;
    if (address_bar_url(gc, "url_dashPart", spec, &url, err) < 0)
        return -1;
    long idx = (long)json_integer_value(json_object_get(spec, "partIndex"));
    _cleanup_free_ char *part = url ? url_dash_part(url, idx, getter_flag_true(json_object_get(spec, "needDeleteId")))
                                    : NULL;
    if (url && !part)
        return em_fail(err, "url_dashPart: `%.200s` has no part %ld", url, idx);
    if (!part)
        *art = getter_json_artifact(NULL);
    else if (!strcmp(json_string_value(json_object_get(spec, "returnType")), "string"))
        *art = getter_text_artifact(part);
    else
        *art = getter_json_artifact(json_pack("{s:s}", json_string_value(json_object_get(spec, "key")), part));
    return 0;
}

/* ---- active_tab_html_parse: DOM queries in the tab (`envmgr-guest chrome-html-parse`) ---- */

enum map_shape { MAP_KEY, MAP_INDEX_KEY, MAP_NAMES };

/* Python's int() of an index string: optional blanks and sign, digits. */
static bool index_text(const char *s)
{
    s += strspn(s, " \t");
    s += (*s == '+' || *s == '-');
    size_t d = strspn(s, "0123456789");
    return d > 0 && s[d + strspn(s + d, " \t")] == '\0';
}

static int check_names(json_t *v, const char *where, em_err *err)
{
    json_t *e;
    size_t i;
    if (!json_is_array(v))
        return em_fail_input(err, "%s: expected an array of strings", where);
    json_array_foreach(v, i, e) if (!json_is_string(e)) return em_fail_input(err, "%s[%zu]: expected a string", where, i);
    return 0;
}

/* spec[key], when present: an object whose values are key names (MAP_KEY), {index: key name}
 * objects (MAP_INDEX_KEY) or arrays of strings (MAP_NAMES). */
static int check_map(json_t *spec, const char *key, enum map_shape shape, em_err *err)
{
    json_t *m = json_object_get(spec, key), *v, *w;
    const char *name, *idx;
    if (!m)
        return 0;
    if (!json_is_object(m))
        return em_fail_input(err, "%s: expected an object", key);
    json_object_foreach(m, name, v)
    {
        if (shape == MAP_KEY && !json_is_string(v))
            return em_fail_input(err, "%s.%.100s: expected the result's key (a string)", key, name);
        if (shape == MAP_NAMES) {
            _cleanup_free_ char *where = xasprintf("%s.%.100s", key, name);
            if (check_names(v, where, err) < 0)
                return -1;
        }
        if (shape != MAP_INDEX_KEY)
            continue;
        if (!json_is_object(v))
            return em_fail_input(err, "%s.%.100s: expected an object {index: key}", key, name);
        json_object_foreach(v, idx, w)
        {
            if (!index_text(idx))
                return em_fail_input(err, "%s.%.100s: `%.40s` is not an index", key, name, idx);
            if (!json_is_string(w))
                return em_fail_input(err, "%s.%.100s.%.40s: expected the result's key (a string)", key, name, idx);
        }
    }
    return 0;
}

static int check_html_parse(json_t *spec, em_err *err)
{
    static const struct {
        const char *category, *key;
        enum map_shape shape;
    } maps[] = {
        {"class", "class_multiObject", MAP_INDEX_KEY},      {"class", "class_multiObject_child", MAP_INDEX_KEY},
        {"class", "class_multiObject_only_child", MAP_INDEX_KEY},
        {"class", "class_multiObject_search_exist", MAP_NAMES}, {"class", "class_singleObject", MAP_KEY},
        {"label", "labelObject", MAP_KEY},                   {"xpath", "xpathObject", MAP_KEY},
        {"input", "inputObject", MAP_KEY},                   {"class&url", "class_multiObject", MAP_NAMES},
        {"class&url", "class_multiObject_li", MAP_NAMES},    {"class&url", "url_include_expected_multichoice", MAP_KEY},
    };
    const char *cat = json_string_value(json_object_get(spec, "category"));
    json_t *gp = json_object_get(spec, "goto_prefix");
    bool known = false;
    if (gp && !json_is_string(gp))
        return em_fail_input(err, "goto_prefix: expected a string");
    for (size_t i = 0; cat && i < ARRAY_LEN(maps); i++) {
        if (strcmp(maps[i].category, cat))
            continue;
        known = true;
        if (check_map(spec, maps[i].key, maps[i].shape, err) < 0)
            return -1;
    }
    if (!known)
        return em_fail_input(err, "category: expected \"class\", \"label\", \"xpath\", \"input\" or \"class&url\"");
    json_t *inc = json_object_get(spec, "url_include_expected");
    if (!strcmp(cat, "class&url") && inc && check_names(inc, "url_include_expected", err) < 0)
        return -1;
    return 0;
}

/* The tab showing the address bar's URL (goto_prefix + its text, as OSWorld) queried in place:
 * null without an address bar, {} when no tab shows that URL. */
static int run_html_parse(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *url = NULL, *spec_text = NULL;
    if (address_bar_url(gc, "active_tab_html_parse", spec, &url, err) < 0)
        return -1;
    if (!url) {
        *art = getter_json_artifact(NULL);
        return 0;
    }
    spec_text = json_dumps(spec, JSON_COMPACT);
    const char *args[] = {"chrome-html-parse", "--url", url, "--spec", spec_text, NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "active_tab_html_parse", args, &a, err) < 0)
        return -1;
    json_t *v = json_object_get(a, "value");
    if (!json_is_object(v))
        return em_fail(err, "active_tab_html_parse: envmgr-guest's answer has no `value` object");
    *art = getter_json_artifact(json_incref(v));
    json_object_set(*art, "url", json_object_get(a, "url") ?: json_string(url));
    return 0;
}

/* An appearance mode (light, dark, system) answered by `envmgr-guest SUB`, with where it was read
 * (`from`) and, after a fallback, why (`why`). */
static int toolbelt_mode(const getter_call *gc, const char *type, const char *sub, double timeout_s, json_t **art,
                         em_err *err)
{
    const char *args[] = {sub, NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run_for(gc, type, args, timeout_s, &a, err) < 0 || toolbelt_text(type, a, "mode", art, err) < 0)
        return -1;
    const char *extra[] = {"from", "why"};
    for (size_t i = 0; i < ARRAY_LEN(extra); i++)
        if (json_object_get(a, extra[i]))
            json_object_set(*art, extra[i], json_object_get(a, extra[i]));
    return 0;
}

/* chrome://settings/appearance in a tab opened and closed again, else the profile's files; the page
 * takes a minute to come up under TCG, its fallback reads Preferences for 5 s. */
static int run_appearance(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return toolbelt_mode(gc, "chrome_appearance_mode_ui", "chrome-appearance", 240.0, art, err);
}

/* OSWorld's file-based mode: the profiles' Preferences. */
static int run_color_scheme(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return toolbelt_mode(gc, "chrome_color_scheme", "chrome-color-scheme", TOOLBELT_TIMEOUT_S, art, err);
}

/* ---- the profile's settings (`envmgr-guest chrome-prefs`) ---- */

enum pref_shape {
    PREF_RAW,         /* the value as it is */
    PREF_TRUE_FALSE,  /* "true" / "false" */
    PREF_NOT_NULL,    /* "true" when the setting exists */
    PREF_EXT_PATHS,   /* the extensions' paths */
    PREF_EXT_NAMES,   /* the extensions' names */
};

/* One getter per setting: where it is in chrome-prefs' answer, its shape, and OSWorld's value
 * when the profile cannot be read (JSON text; several of OSWorld's are "Google", kept as they are). */
static const struct {
    const char *getter, *key;
    enum pref_shape shape;
    const char *fallback;
} prefs[] = {
    {"default_search_engine", "default_search_engine", PREF_RAW, "\"Google\""},
    {"enable_do_not_track", "enable_do_not_track", PREF_TRUE_FALSE, "\"false\""},
    {"profile_name", "profile_name", PREF_RAW, "null"},
    {"chrome_language", "language", PREF_RAW, "\"en-US\""},
    {"chrome_font_size", "font_size", PREF_RAW, "{\"default_fixed_font_size\": 13, \"default_font_size\": 16}"},
    {"enabled_experiments", "enabled_experiments", PREF_RAW, "[]"},
    {"enable_enhanced_safety_browsing", "enhanced_safe_browsing", PREF_TRUE_FALSE, "\"Google\""},
    {"enable_safe_browsing", "safe_browsing", PREF_TRUE_FALSE, "\"false\""},
    {"new_startup_page", "new_startup_page", PREF_TRUE_FALSE, "\"Google\""},
    {"data_delete_automacally", "default_content_setting_values", PREF_NOT_NULL, "\"Google\""},
    {"find_unpacked_extension_path", "extensions", PREF_EXT_PATHS, "\"Google\""},
    {"find_installed_extension_name", "extensions", PREF_EXT_NAMES, "\"Google\""},
};

/* Chromium writes its own migration flags (has_migrated_local_network_access, Chromium 156) into
 * profile.default_content_setting_values on every start: a dict of nothing else is Chrome's
 * default, not a setting the user made, or "delete data on close" would start solved. */
static bool only_migration_flags(json_t *v)
{
    const char *k;
    json_t *x;
    if (!json_is_object(v))
        return false;
    json_object_foreach(v, k, x)
    {
        if (strncmp(k, "has_migrated_", 13) != 0)
            return false;
    }
    return true;
}

static json_t *pref_value(json_t *answer, const char *key, enum pref_shape shape)
{
    json_t *v = json_object_get(answer, key), *e, *out;
    size_t i;
    switch (shape) {
    case PREF_TRUE_FALSE:
        return json_string(json_is_true(v) ? "true" : "false");
    case PREF_NOT_NULL:
        return json_string(v && !json_is_null(v) && !only_migration_flags(v) ? "true" : "false");
    case PREF_EXT_PATHS:
    case PREF_EXT_NAMES:
        out = json_array();
        json_array_foreach(v, i, e)
        {
            json_t *x = json_object_get(e, shape == PREF_EXT_PATHS ? "path" : "name");
            if (json_is_string(x))
                json_array_append(out, x);
        }
        return out;
    default:
        return v ? json_incref(v) : json_null();
    }
}

static int run_pref(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *type = json_string_value(json_object_get(spec, "type"));
    size_t p = 0;
    while (p < ARRAY_LEN(prefs) - 1 && strcmp(prefs[p].getter, type))
        p++;
    const char *args[] = {"chrome-prefs", NULL};
    json_auto_t *a = NULL;
    int rc = toolbelt_run(gc, prefs[p].getter, args, &a, err);
    if (rc == TOOLBELT_REPORTED) { /* no profile: OSWorld's value for that case */
        em_err_clear(err);
        *art = getter_json_artifact(json_loads(prefs[p].fallback, JSON_DECODE_ANY, NULL));
        return 0;
    }
    if (rc < 0)
        return -1;
    json_t *v = pref_value(a, prefs[p].key, prefs[p].shape);
    *art = json_is_string(v) ? json_pack("{s:s, s:o}", "type", "text", "value", v) : getter_json_artifact(v);
    return 0;
}

/* Bookmarks' roots ([] without a profile, as OSWorld); History's and Cookies' rows (null). */
static int run_profile_data(const getter_call *gc, const char *type, const char *sub, const char *member,
                            const char *fallback, json_t **art, em_err *err)
{
    const char *args[] = {sub, NULL};
    json_auto_t *a = NULL;
    int rc = toolbelt_run(gc, type, args, &a, err);
    if (rc == TOOLBELT_REPORTED) {
        em_err_clear(err);
        *art = getter_json_artifact(json_loads(fallback, JSON_DECODE_ANY, NULL));
        return 0;
    }
    if (rc < 0)
        return -1;
    json_t *v = json_object_get(a, member);
    *art = getter_json_artifact(v ? json_incref(v) : json_null());
    return 0;
}

static int run_bookmarks(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_profile_data(gc, "bookmarks", "chrome-bookmarks", "roots", "[]", art, err);
}

static int run_history(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_profile_data(gc, "history", "chrome-history", "rows", "null", art, err);
}

static int run_cookies(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_profile_data(gc, "cookie_data", "chrome-cookies", "rows", "null", art, err);
}

#define PREFS_NOTE "from the profile's Preferences / Local State (`envmgr-guest chrome-prefs`); OSWorld's value when it cannot be read"

static const getter_def defs[] = {
    {"open_tabs_info", getter_check_nothing, run_open_tabs, false,
     "[{title, url}] of the open tabs, over DevTools inside the guest (127.0.0.1)"},
    {"active_tab_info", getter_check_nothing, run_active_tab, false,
     "{title, url, content} of the visible tab, over DevTools inside the guest (the page is not reloaded, "
     "unlike OSWorld); null without one"},
    {"active_url_from_accessTree", getter_check_nothing, run_url_from_tree, false,
     "goto_prefix + the address bar's text, from the accessibility tree; null without one"},
    {"active_tab_url_parse", check_url_parse, run_url_parse, false,
     "parse_keys of the address bar URL's query (first values, parse_qs decoding), renamed by replace, split at "
     "commas with split_list"},
    {"url_dashPart", check_dash, run_dash, false, "partIndex of the address bar URL split at `/`, as string or {key: part}"},
    {"url_path_parse", check_path_parse, run_path_parse, false,
     "OSWorld's Macy's product URL reader on the address bar URL: mens_clothing, shirts, short_sleeve and the "
     "parse_keys found in its comma-separated path segments"},
    {"macys_product_url_parse", check_path_parse, run_path_parse, false, "OSWorld's name for url_path_parse"},
    {"active_tab_html_parse", check_html_parse, run_html_parse, false,
     "OSWorld's DOM queries (categories class, label, xpath, input, class&url) run in the tab showing the "
     "address bar's URL, over DevTools inside the guest (`envmgr-guest chrome-html-parse`); null without an "
     "address bar, {} when no tab shows it"},
    {"chrome_appearance_mode_ui", getter_check_nothing, run_appearance, false,
     "the mode chrome://settings/appearance shows, in a background tab closed again (OSWorld leaves its tab "
     "open); else Preferences' color_scheme, as OSWorld"},
    {"chrome_color_scheme", getter_check_nothing, run_color_scheme, false,
     "light, dark or system from the profiles' Preferences (browser.theme.color_scheme2 or color_scheme; "
     "extensions.theme.system_theme 0 is light), newest profile first, read again for 5 s as OSWorld"},
    {"bookmarks", getter_check_nothing, run_bookmarks, false, "the Bookmarks file's roots; [] without one"},
    {"history", getter_check_nothing, run_history, false,
     "[url, title, last_visit_time] rows of the History database (read from a copy); null without one"},
    {"cookie_data", getter_check_nothing, run_cookies, false,
     "the rows of the Cookies database's cookies table (read from a copy); null without one"},
    {"default_search_engine", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"enable_do_not_track", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"profile_name", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"chrome_language", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"chrome_font_size", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"enabled_experiments", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"enable_enhanced_safety_browsing", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"enable_safe_browsing", getter_check_nothing, run_pref, false,
     "\"true\" when Preferences' safebrowsing.enabled or .enhanced is set (a missing key is off, as in OSWorld); "
     "\"false\" when the profile cannot be read"},
    {"new_startup_page", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"data_delete_automacally", getter_check_nothing, run_pref, false,
     PREFS_NOTE ". Differs: `profile.default_content_setting_values` holding only Chromium's `has_migrated_*` "
                "flags (Chromium 156 writes one on every start) counts as absent, \"false\": OSWorld's \"the key "
                "exists\" would make chrome/99146c54 start solved"},
    {"find_unpacked_extension_path", getter_check_nothing, run_pref, false, PREFS_NOTE},
    {"find_installed_extension_name", getter_check_nothing, run_pref, false, PREFS_NOTE},
};

const getter_def *getter_chrome_defs(size_t *n)
{
    *n = ARRAY_LEN(defs);
    return defs;
}

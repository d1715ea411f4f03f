/* OSWorld's getters that load a URL in the browser (page_info, pdf_from_url, info_from_website).
 * OSWorld's host drives the guest's own Chrome for them (playwright over DevTools); here the
 * guest toolbelt does (`envmgr-guest chrome-page-info`, `chrome-pdf`, `chrome-website-info`), in
 * a tab it opens and closes again. The page loads through the guest's network, so the task's
 * allowlist decides what it reaches: a page that does not load is an evaluator error naming it
 * (OSWorld scores such a task 0 with a placeholder), except for info_from_website, whose task
 * gives its own fallback (`backups`), used as OSWorld uses it. */
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/base64.h"
#include "envmgr/base/util.h"
#include "evaluator/getter_call.h"
#include "evaluator/getter_parse.h"
#include "evaluator/getters.h"

/* envmgr-guest waits up to 120 s for a browser it has to start, PAGE_LOAD_S for each load and as
 * long again for the network to be quiet; the exec gets room for all and the answer. */
#define PAGE_LOAD_S "60"
#define PAGE_EXEC_S 330.0

/* A URL the guest's browser may load: http(s) or a guest file. */
static int check_url(json_t *spec, const char *key, em_err *err)
{
    if (getter_check_string(spec, key, true, err) < 0)
        return -1;
    const char *u = json_string_value(json_object_get(spec, key));
    if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8) && strncmp(u, "file://", 7))
        return em_fail_input(err, "%s: `%.200s`: expected an http(s) or file URL", key, u);
    return 0;
}

static int check_page_info(json_t *spec, em_err *err) { return check_url(spec, "url", err); }

static int check_pdf(json_t *spec, em_err *err)
{
    return check_url(spec, "path", err) < 0 ? -1 : getter_check_string(spec, "dest", true, err);
}

/* infos: [{action, selector, attribute?}]: OSWorld's four actions (any other fails there, to its
 * backups, every time: refused here); the click_ forms take a list of selectors. */
static int check_website(json_t *spec, em_err *err)
{
    static const char *const actions[] = {"inner_text", "attribute", "click_and_inner_text", "click_and_attribute"};
    json_t *infos = json_object_get(spec, "infos"), *info;
    size_t i;
    if (check_url(spec, "url", err) < 0)
        return -1;
    if (!json_is_array(infos) || !json_array_size(infos))
        return em_fail_input(err, "infos: expected a non-empty array of {action, selector}");
    json_array_foreach(infos, i, info)
    {
        json_t *a = json_object_get(info, "action"), *sel = json_object_get(info, "selector");
        const char *as = a ? json_string_value(a) : "inner_text";
        size_t k = 0;
        while (as && k < ARRAY_LEN(actions) && strcmp(actions[k], as))
            k++;
        if (!json_is_object(info) || !as || k == ARRAY_LEN(actions))
            return em_fail_input(err, "infos[%zu].action: expected inner_text, attribute, click_and_inner_text or "
                                      "click_and_attribute", i);
        bool clicks = k >= 2;
        if (!clicks && (!json_is_string(sel) || !json_string_length(sel)))
            return em_fail_input(err, "infos[%zu].selector: expected a CSS selector", i);
        if (clicks && (!json_is_array(sel) || !json_array_size(sel)))
            return em_fail_input(err, "infos[%zu].selector: expected a list of CSS selectors (click each, read the "
                                      "last)", i);
        json_t *s;
        size_t j;
        json_array_foreach(clicks ? sel : NULL, j, s) if (!json_is_string(s) || !json_string_length(s))
            return em_fail_input(err, "infos[%zu].selector[%zu]: expected a CSS selector", i, j);
        if ((k == 1 || k == 3) && getter_check_string(info, "attribute", true, err) < 0)
            return em_prefix(err, "infos[%zu].", i);
    }
    return 0;
}

static int run_page_info(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *args[] = {"chrome-page-info", "--url", json_string_value(json_object_get(spec, "url")),
                          "--timeout", PAGE_LOAD_S, NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run_for(gc, "page_info", args, PAGE_EXEC_S, &a, err) < 0)
        return -1;
    json_t *v = json_pack("{s:O?, s:O?, s:O?}", "title", json_object_get(a, "title"), "url", json_object_get(a, "url"),
                          "content", json_object_get(a, "content"));
    *art = getter_json_artifact(v);
    return 0;
}

static int run_pdf(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *args[] = {"chrome-pdf", "--url", json_string_value(json_object_get(spec, "path")), "--timeout",
                          PAGE_LOAD_S, NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run_for(gc, "pdf_from_url", args, PAGE_EXEC_S, &a, err) < 0)
        return -1;
    const char *b64 = json_string_value(json_object_get(a, "pdf_base64"));
    unsigned char *pdf = NULL;
    size_t n = 0;
    if (!b64 || base64_decode(b64, &pdf, &n) < 0)
        return em_fail(err, "pdf_from_url: envmgr-guest's answer has no PDF");
    int rc = getter_save_bytes(gc, "pdf_from_url", json_string_value(json_object_get(spec, "dest")),
                               (const char *)pdf, n, art, err);
    free(pdf);
    if (rc == 0)
        json_object_set(*art, "url", json_object_get(spec, "path"));
    return rc;
}

/* The values read from the page; when reading fails in the guest (the page, a selector, a click),
 * the task's backups (null without them), marked so in the artifact. */
static int run_website(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *infos = json_dumps(json_object_get(spec, "infos"), JSON_COMPACT);
    const char *args[] = {"chrome-website-info", "--url", json_string_value(json_object_get(spec, "url")),
                          "--infos", infos, "--timeout", PAGE_LOAD_S, NULL};
    json_auto_t *a = NULL;
    int rc = toolbelt_run_for(gc, "info_from_website", args, PAGE_EXEC_S, &a, err);
    if (rc == TOOLBELT_REPORTED) {
        json_t *backups = json_object_get(spec, "backups");
        *art = getter_json_artifact(backups ? json_incref(backups) : NULL);
        json_object_set_new(*art, "backups_because", json_string(err->msg));
        em_err_clear(err);
        return 0;
    }
    if (rc < 0)
        return -1;
    json_t *v = json_object_get(a, "infos");
    if (!json_is_array(v))
        return em_fail(err, "info_from_website: envmgr-guest's answer has no `infos` list");
    *art = getter_json_artifact(json_incref(v));
    return 0;
}

static const getter_def defs[] = {
    {"page_info", check_page_info, run_page_info, false,
     "{title, url, content} of `url` loaded in a new tab of the guest's browser once the network is quiet "
     "(`envmgr-guest chrome-page-info`), through the task's allowlist; a page that does not load is an error "
     "naming why (OSWorld: a \"Connection failed\" value)"},
    {"pdf_from_url", check_pdf, run_pdf, true,
     "`path` loaded in a new tab of a fresh browser context in the guest and printed as playwright prints "
     "(Letter, no margins), saved under `dest`; a page that does not load is an error (OSWorld: an empty PDF)"},
    {"info_from_website", check_website, run_website, false,
     "OSWorld's inner_text / attribute / click_and_ actions on `url` in a new tab of the guest's browser (a DOM "
     "click(), not a mouse click); the task's `backups` when reading fails, as OSWorld"},
};

const getter_def *getter_web_defs(size_t *n)
{
    *n = ARRAY_LEN(defs);
    return defs;
}

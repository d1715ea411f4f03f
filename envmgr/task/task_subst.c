/* OSWorld's placeholders in a task's strings, settled for one env. */
#include "envmgr/task/task_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/sbuf.h"
#include "envmgr/base/util.h"
#include "evaluator/spec.h"

/* ---- {SCREEN_WIDTH} and friends ---- */

#define NVARS 5

static void substitute(json_t *j, const char *const names[NVARS], const char *const values[NVARS])
{
    if (json_is_string(j)) {
        const char *s = json_string_value(j);
        size_t n = json_string_length(j);
        if (!memchr(s, '{', n))
            return;
        sbuf out = {0};
        bool changed = false;
        for (size_t i = 0; i < n;) {
            size_t k;
            for (k = 0; k < NVARS; k++) {
                size_t nl = strlen(names[k]);
                if (values[k] && n - i >= nl && !memcmp(s + i, names[k], nl))
                    break;
            }
            if (k < NVARS) {
                sbuf_puts(&out, values[k]);
                i += strlen(names[k]);
                changed = true;
            } else {
                sbuf_add(&out, s + i, 1);
                i++;
            }
        }
        if (changed)
            json_string_setn(j, out.s ? out.s : "", out.len);
        sbuf_release(&out);
    } else if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) substitute(v, names, values);
    } else if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) substitute(v, names, values);
    }
}

int task_substitute(task *t, const task_vars *v, em_err *err)
{
    if (!t || !v)
        return em_fail(err, "task_substitute: no task");
    int w = v->screen_w, h = v->screen_h;
    if (w <= 0 || h <= 0 || w > SCREEN_SIDE_MAX || h > SCREEN_SIDE_MAX)
        return em_fail_input(err, "screen size %dx%d is out of range (1..%d)", w, h, SCREEN_SIDE_MAX);
    char vw[16], vh[16], vw2[16], vh2[16];
    snprintf(vw, sizeof vw, "%d", w);
    snprintf(vh, sizeof vh, "%d", h);
    snprintf(vw2, sizeof vw2, "%d", w / 2);
    snprintf(vh2, sizeof vh2, "%d", h / 2);
    static const char *const names[NVARS] = {"{SCREEN_WIDTH_HALF}", "{SCREEN_HEIGHT_HALF}", "{SCREEN_WIDTH}",
                                             "{SCREEN_HEIGHT}", "{CLIENT_PASSWORD}"};
    const char *const values[NVARS] = {vw2, vh2, vw, vh, v->client_password};
    /* The parsed views hold pointers into the document: drop them before it changes. */
    task_steps_free(t->config, t->nconfig);
    task_steps_free(t->postconfig, t->npostconfig);
    eval_spec_free(&t->eval);
    t->config = t->postconfig = NULL;
    t->nconfig = t->npostconfig = 0;
    if (!t->pristine) {
        t->pristine = json_deep_copy(t->json);
    } else {
        json_decref(t->json);
        t->json = json_deep_copy(t->pristine);
    }
    if (!t->pristine || !t->json)
        return em_fail(err, "task_substitute: out of memory");
    json_t *config = json_object_get(t->json, "config"), *ev = json_object_get(t->json, "evaluator");
    if (config)
        substitute(config, names, values);
    if (ev)
        substitute(ev, names, values);
    pctx c = {.t = t, .warn = false};
    int rc = task_parse_config_and_evaluator(&c, err);
    task_problems_free(&c);
    return rc;
}

int task_substitute_screen(task *t, int w, int h, em_err *err)
{
    task_vars v = {.screen_w = w, .screen_h = h};
    return task_substitute(t, &v, err);
}


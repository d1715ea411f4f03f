/* The episode plan's image rule (plan.h). OSWorld's task files name no image, only the apps they
 * are about (related_apps); an image's manifest lists its Debian packages, so whether an image can
 * run a task is known before a VM starts, instead of a `launch vlc` that "succeeds" on an image
 * without VLC and a score of 0 for the wrong reason. */
#include "envmgr/episode/plan.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/util.h"
#include "envmgr/env/env_image.h"
#include "evaluator/getters.h"
#include "evaluator/osworld.h"

/* The apps of t's related_apps that m lacks, comma-separated; NULL when it has them all. */
static char *missing_apps(const task *t, const env_image_facts *m)
{
    sbuf b = {0};
    for (size_t i = 0; i < t->nrelated_apps; i++) {
        const char *pkg = osworld_app_package(t->related_apps[i]);
        if (pkg && !env_image_has_package(m, pkg))
            sbuf_printf(&b, "%s%s", b.len ? ", " : "", t->related_apps[i]);
    }
    return b.len ? sbuf_steal(&b) : NULL;
}

/* Each built image's facts in turn (unreadable ones skipped) until each_image's fn returns true;
 * that image's name (caller frees), or NULL. */
static char *each_image(bool (*fn)(const char *name, const env_image_facts *m, void *ctx), void *ctx)
{
    DIR *d = opendir(paths_image_root());
    struct dirent *e;
    char *found = NULL;
    while (!found && d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        env_image_facts m;
        em_err ignored;
        if (env_image_facts_read(e->d_name, &m, &ignored) < 0)
            continue;
        if (fn(e->d_name, &m, ctx))
            found = xstrdup(e->d_name);
        env_image_facts_free(&m);
    }
    if (d)
        closedir(d);
    return found;
}

struct with_apps {
    const task *t;
    const char *except;
    sbuf b;
};

static bool add_if_it_has_apps(const char *name, const env_image_facts *m, void *ctx)
{
    struct with_apps *w = ctx;
    if (!strcmp(name, w->except))
        return false;
    _cleanup_free_ char *missing = missing_apps(w->t, m);
    if (!missing)
        sbuf_printf(&w->b, "%s`%s`", w->b.len ? ", " : "", name);
    return false;
}

/* The built images (other than `except`) with every app t names: "`apps`, `big`"; NULL if none. */
static char *images_with(const task *t, const char *except)
{
    struct with_apps w = {.t = t, .except = except};
    each_image(add_if_it_has_apps, &w);
    return w.b.len ? sbuf_steal(&w.b) : NULL;
}

static bool has_sha(const char *name, const env_image_facts *m, void *ctx)
{
    (void)name;
    return !strcmp(m->sha256, ctx);
}

char *plan_image_with_manifest(const char *manifest_sha256)
{
    return manifest_sha256 ? each_image(has_sha, (void *)manifest_sha256) : NULL;
}

/* Whether the image has every application t's related_apps names: plan_image's refusal, and
 * plan_for_env's for an env that already runs. */
static int plan_check_apps(const task *t, const env_image_facts *m, em_err *err)
{
    _cleanup_free_ char *missing = missing_apps(t, m);
    if (!missing)
        return 0;
    _cleanup_free_ char *others = images_with(t, m->name);
    if (others)
        return em_fail_input(err, "related_apps: %s: not on image `%s`; image %s has them (--image %.*s)", missing,
                             m->name, others, (int)strcspn(others + 1, "`"), others + 1);
    return em_fail_input(err, "related_apps: %s: not on image `%s`, nor on any other image built here", missing,
                         m->name);
}

/* What a step needs of the guest, on getter_guest_need's scale (one table for every guest interface):
 * nothing (on the host: sleep, the network policy; through the env's screen and input: wait_screen,
 * act), a guest agent's commands and files (execute, command, upload_file, download: any agent), or
 * envmgr's own image (every other step: its desktop user's session, wmctrl, exo-open, the browser,
 * the toolbelt's helpers). */
static getter_need step_guest_need(const task_step *s)
{
    switch (s->type) {
    case STEP_SLEEP:
    case STEP_WAIT_SCREEN:
    case STEP_ACT:
    case STEP_PROXY:
        return GETTER_OFF_GUEST;
    case STEP_EXECUTE:
    case STEP_COMMAND:
    case STEP_UPLOAD_FILE:
    case STEP_DOWNLOAD:
        return GETTER_GUEST_AGENT;
    default:
        return GETTER_GUEST_TOOLBELT;
    }
}

/* The steps OSWorld's server does itself (guest interface osworld, episode/setup.c: server_step),
 * beyond a guest agent's commands and files; and execute_with_verification, commands through its
 * /execute (wmctrl for window_exists, which OSWorld's image has: its server uses it). */
static bool osworld_step(const task_step *s)
{
    switch (s->type) {
    case STEP_EXECUTE_WITH_VERIFICATION:
    case STEP_LAUNCH:
    case STEP_OPEN:
    case STEP_ACTIVATE_WINDOW:
    case STEP_CLOSE_WINDOW:
    case STEP_CHANGE_WALLPAPER:
        return true;
    default:
        return false;
    }
}

/* What step s needs beyond what the interface has (has: its level; osworld: its server's own steps too). */
static bool step_refused(const task_step *s, getter_need has, bool osworld)
{
    return step_guest_need(s) > has && !(osworld && osworld_step(s));
}

int plan_guest_refusal(const task *t, const char *iface, const char *image, em_err *err)
{
    /* what the interface reaches: none, a guest agent's commands and files (qga), those and the steps
     * OSWorld's server does itself (osworld), everything (envmgr) */
    bool osworld = !strcmp(iface, "osworld");
    getter_need has = !strcmp(iface, "none")             ? GETTER_OFF_GUEST
                      : !strcmp(iface, "qga") || osworld ? GETTER_GUEST_AGENT
                                                         : GETTER_GUEST_TOOLBELT;
    if (has == GETTER_GUEST_TOOLBELT)
        return 0;
    const char *what = NULL;
    char where[96] = "";
    for (size_t i = 0; !what && i < t->nconfig; i++)
        if (step_refused(&t->config[i], has, osworld)) {
            what = task_step_type_name(t->config[i].type);
            snprintf(where, sizeof where, "config[%zu]", i);
        }
    for (size_t i = 0; !what && i < t->eval.nmetrics; i++) {
        json_t *spec[2] = {t->eval.metrics[i].result, t->eval.metrics[i].expected};
        for (size_t k = 0; !what && k < 2; k++)
            if (getter_guest_need(spec[k]) > has && !(osworld && getter_osworld_native(spec[k]))) {
                what = json_string_value(json_object_get(spec[k], "type"));
                snprintf(where, sizeof where, "evaluator.%s[%zu]", k ? "expected" : "result", i);
            }
    }
    for (size_t i = 0; !what && i < t->npostconfig; i++)
        if (step_refused(&t->postconfig[i], has, osworld)) {
            what = task_step_type_name(t->postconfig[i].type);
            snprintf(where, sizeof where, "evaluator.postconfig[%zu]", i);
        }
    if (!what)
        return 0;
    if (has == GETTER_OFF_GUEST)
        return em_fail_input(err, "%s: %.64s needs the guest, and image `%s` has no guest interface (guest none: "
                                  "screenshots and input only)", where, what ? what : "?", image);
    if (osworld)
        return em_fail_input(err, "%s: %.64s needs envmgr's toolbelt in the guest (its desktop session and helpers); "
                                  "image `%s` has guest osworld (OSWorld's server: commands, files, launch, open, "
                                  "windows, wallpaper, accessibility tree)", where, what ? what : "?", image);
    return em_fail_input(err, "%s: %.64s needs envmgr's toolbelt in the guest (its desktop session and helpers); "
                              "image `%s` has guest %s (the QEMU guest agent: commands and files only)",
                         where, what ? what : "?", image, iface);
}

/* On an image whose guest interface reaches less than envmgr's own (none, qga), the first setup
 * step, getter or postconfig step it cannot run refuses the task, before any VM starts. */
static int plan_check_guest(const task *t, const env_image_facts *m, em_err *err)
{
    return plan_guest_refusal(t, m->guest, m->name, err);
}

int plan_image(const task *t, const plan_image_choice *op, char **image, em_err *err)
{
    const char *name = op && op->image && (op->force || !t->image_named) ? op->image
                       : t->image_named                                 ? t->image
                                                                        : IMAGE_DEFAULT;
    env_image_facts m;
    em_err why = {0};
    if (env_image_facts_read(name, &m, &why) == 0) {
        int rc = plan_check_apps(t, &m, err);
        if (rc == 0)
            rc = plan_check_guest(t, &m, err);
        env_image_facts_free(&m);
        if (rc < 0)
            return -1;
    } else if (t->nrelated_apps) { /* else env_up fails on the image with its own message */
        *err = why;
        return em_prefix(err, "image `%s`: ", name);
    }
    *image = xstrdup(name);
    return 0;
}

int plan_network(const netpolicy *current, const task *t, netpolicy *out, em_err *err)
{
    return netpolicy_for_task(current, &t->net, out, err);
}

int plan_settle(task *t, const netpolicy *net, const task_vars *v, em_err *err)
{
    netpolicy dflt, runs_under;
    if (!net) {
        netpolicy_init(&dflt);
        net = &dflt;
    }
    if (plan_network(net, t, &runs_under, err) < 0)
        return -1;
    return v ? task_substitute(t, v, err) : 0;
}

int plan_new_env(task *t, const plan_image_choice *op, const netpolicy *op_net, char **image, em_err *err)
{
    *image = NULL;
    if (plan_image(t, op, image, err) < 0)
        return -1;
    task_vars v = {0};
    /* an unreadable image: the default screen here, and env_up fails on the image with its own message */
    env_image_screen(*image, &v.screen_w, &v.screen_h);
    if (plan_settle(t, op_net, &v, err) < 0) {
        free(*image);
        *image = NULL;
        return -1;
    }
    return 0;
}

int plan_for_env(env *e, task *t, em_err *err)
{
    netpolicy cur;
    env_image_facts m;
    env_image_facts_of(e, &m);
    int rc = plan_check_apps(t, &m, err);
    if (rc == 0)
        rc = plan_check_guest(t, &m, err);
    env_image_facts_free(&m);
    if (rc < 0 || env_network(e, &cur, err) < 0)
        return -1;
    _cleanup_free_ char *pw = env_user_password(e);
    task_vars v = {.screen_w = env_width(e), .screen_h = env_height(e), .client_password = pw};
    return plan_settle(t, &cur, &v, err);
}

/* Images and the host's QEMU for the layers above env (env_image.h). */
#include "envmgr/env/env_image.h"

#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/state/golden.h"
#include "envmgr/vm/accel.h"
#include "envmgr/vm/image_import.h"
#include "envmgr/vm/manifest.h"
#include "envmgr/vm/qemu_log.h"
#include "envmgr/vm/vm.h"

static void facts_of(const manifest *m, env_image_facts *out)
{
    const char *built = json_string_value(json_object_get(m->json, "built"));
    *out = (env_image_facts){.dir = xstrdup(m->dir),
                             .name = xstrdup(m->name),
                             .built = built ? xstrdup(built) : NULL,
                             .width = m->width,
                             .height = m->height,
                             .memory_mb = m->memory_mb,
                             .cpus = m->cpus,
                             .files = json_object_size(json_object_get(m->json, "files")),
                             .packages = json_incref(json_object_get(m->json, "packages")),
                             .guest = manifest_guest_name(m->guest),
                             .imported = json_object_get(m->json, "imported") != NULL,
                             .firmware = m->uefi ? "uefi" : "bios"};
    memcpy(out->sha256, m->sha256, sizeof out->sha256);
}

/* Load the image's manifest, check it (full: every file's sha256, else sizes; -1: not at all), and
 * when it holds, its facts and (accel non-NULL) the accelerator and the golden state. */
static int load(const char *image, int full, const char *accel, const char **chosen, env_image_facts *out,
                em_err *err)
{
    memset(out, 0, sizeof *out);
    _cleanup_free_ char *dir = paths_image_dir(image);
    manifest *m = NULL;
    golden *g = NULL;
    int rc = manifest_load(dir, &m, err);
    if (rc == 0 && full >= 0)
        rc = manifest_verify(m, full, err);
    if (rc == 0 && accel)
        rc = accel_choose(accel, m, chosen, err);
    if (rc == 0 && accel)
        rc = golden_ensure(m, *chosen, &g, err);
    if (rc == 0)
        facts_of(m, out);
    golden_free(g);
    manifest_free(m);
    return rc;
}

int env_image_facts_read(const char *image, env_image_facts *out, em_err *err)
{
    return load(image, -1, NULL, NULL, out, err);
}

int env_image_verify(const char *image, env_image_facts *out, em_err *err)
{
    return load(image, 1, NULL, NULL, out, err);
}

int env_image_prepare(const char *image, const char *accel, const char **chosen, env_image_facts *out,
                      em_err *err)
{
    return load(image, 0, accel, chosen, out, err);
}

void env_image_facts_free(env_image_facts *f)
{
    free(f->dir);
    free(f->name);
    free(f->built);
    json_decref(f->packages);
    f->dir = f->name = f->built = NULL;
    f->packages = NULL;
}

void env_image_facts_of(const env *e, env_image_facts *out) { facts_of(env_manifest(e), out); }

bool env_image_has_package(const env_image_facts *f, const char *package)
{
    size_t i;
    json_t *p;
    json_array_foreach(f->packages, i, p) {
        const char *name = json_string_value(json_object_get(p, "name"));
        if (name && !strcmp(name, package))
            return true;
    }
    return false;
}

int env_image_import(const char *name, const char *disk, const env_image_import_opts *o, env_image_facts *out,
                     em_err *err)
{
    memset(out, 0, sizeof *out);
    int gi = manifest_guest_parse(o->guest ? o->guest : "none");
    if (gi < 0)
        return em_fail_input(err, "--guest: expected envmgr, osworld, qga or none, got `%.32s`", o->guest);
    if (gi == MANIFEST_GUEST_ENVMGR) /* golden.c's readiness and env_guest dispatch on it */
        return em_fail_input(err, "--guest envmgr: only for images envmgr builds (none: screenshots and input; qga: "
                                  "the QEMU guest agent; osworld: OSWorld's server)");
    image_import_opts io = {.guest = (manifest_guest)gi,
                            .width = o->width ? o->width : MANIFEST_DEFAULT_WIDTH,
                            .height = o->height ? o->height : MANIFEST_DEFAULT_HEIGHT,
                            .memory_mb = o->memory_mb ? o->memory_mb : 2048,
                            .cpus = o->cpus ? o->cpus : 1,
                            .ready_timeout_s = o->ready_timeout_s ? o->ready_timeout_s
                                                                  : IMAGE_IMPORT_DEFAULT_READY_TIMEOUT_S,
                            .uefi = o->uefi};
    _cleanup_free_ char *dir = NULL;
    if (image_import(name, disk, &io, &dir, err) < 0)
        return -1;
    const char *chosen;
    int rc = o->accel ? env_image_prepare(name, o->accel, &chosen, out, err) : env_image_facts_read(name, out, err);
    if (rc < 0) { /* an image without a golden state it can reach is not kept */
        em_err ignored;
        image_remove(name, &ignored);
        err->code = EM_EXIT_USAGE;
        return em_prefix(err, "image import: %s: not kept: ", name);
    }
    return 0;
}

int env_image_remove(const char *name, em_err *err)
{
    json_t *envs = NULL;
    if (env_list(&envs, err) < 0)
        return -1;
    _cleanup_free_ char *dir = paths_image_dir(name);
    char real[PATH_MAX];
    const char *want = realpath(dir, real) ? real : dir;
    size_t i;
    json_t *row;
    int rc = 0;
    json_array_foreach(envs, i, row) {
        const char *image = json_string_value(json_object_get(row, "image"));
        const char *status = json_string_value(json_object_get(row, "status"));
        if (rc == 0 && image && !strcmp(image, want) && status && strcmp(status, "dead"))
            rc = em_fail_input(err, "image `%s`: env %s runs on it (envmgr down %s first)", name,
                               json_string_value(json_object_get(row, "name")),
                               json_string_value(json_object_get(row, "name")));
    }
    json_decref(envs);
    return rc < 0 ? rc : image_remove(name, err);
}

void env_image_screen(const char *image, int *width, int *height)
{
    *width = MANIFEST_DEFAULT_WIDTH;
    *height = MANIFEST_DEFAULT_HEIGHT;
    env_image_facts f;
    em_err ignored = {0};
    if (env_image_facts_read(image, &f, &ignored) == 0) {
        *width = f.width;
        *height = f.height;
        env_image_facts_free(&f);
    }
}

pid_t env_qemu_pid(const char *name)
{
    _cleanup_free_ char *dir = paths_env_dir(name);
    pid_t pid;
    em_err ignored;
    if (vm_read_pid(dir, &pid, &ignored) < 0 || !vm_alive(pid, dir))
        return 0;
    return pid;
}

int env_hold_by_name(const char *name, bool hold, em_err *err)
{
    _cleanup_free_ char *dir = paths_env_dir(name);
    return vm_hold(dir, hold, err) < 0 ? em_prefix(err, "env %s: ", name) : 0;
}

char *env_vnc_socket(const char *name)
{
    _cleanup_free_ char *dir = paths_env_dir(name);
    return xasprintf("%s/" VM_VNC_SOCK, dir);
}

int env_host_qemu_version(char **version, em_err *err) { return vm_qemu_version(version, err); }
const char *env_host_qemu_binary(void) { return vm_qemu_binary(); }
const char *env_host_accel_cached(void) { return accel_cached(); }
int env_log_keeper_main(const char *dir) { return vm_log_keeper_main(dir); }

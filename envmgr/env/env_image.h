/* Images and the host's QEMU as the layers above env see them (the API, suites, the CLI): facts
 * read from an image's manifest and the host, never the manifest or QEMU themselves, which are
 * vm/'s. With env.h, this is the one way down from those layers to what runs a guest. */
#ifndef ENVMGR_ENV_IMAGE_H
#define ENVMGR_ENV_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "envmgr/base/err.h"
#include "envmgr/env/env.h"

typedef struct env_image_facts {
    char *dir;     /* absolute image directory */
    char *name;    /* the name its manifest gives it */
    char *built;   /* when it was built (manifest "built"), or NULL */
    char sha256[65]; /* of its manifest: names the image exactly */
    int width, height, memory_mb, cpus;
    size_t files;  /* files its manifest lists */
    json_t *packages; /* the Debian packages it has (manifest "packages": [{name, ...}]), owned */
    const char *guest; /* its guest interface: "envmgr", "osworld", "qga" or "none" (static) */
    bool imported;     /* made by `image import` (boots from its own bootloader) */
    const char *firmware; /* "bios" or "uefi" (static) */
} env_image_facts;

/* The facts of image `image` (a name under the image root, or a directory). */
int env_image_facts_read(const char *image, env_image_facts *out, em_err *err);
void env_image_facts_free(env_image_facts *f);
/* The facts of the image env e runs, as it read them when it opened. */
void env_image_facts_of(const env *e, env_image_facts *out);
/* Whether the image has Debian package `package` installed. */
bool env_image_has_package(const env_image_facts *f, const char *package);
/* The same after hashing every file the manifest lists against its sha256. */
int env_image_verify(const char *image, env_image_facts *out, em_err *err);
/* Ready to run: the image checked (sizes), the accelerator chosen (accel: auto, kvm or tcg; *chosen
 * is a static string) and its golden state found or built. */
int env_image_prepare(const char *image, const char *accel, const char **chosen, env_image_facts *out,
                      em_err *err);
/* `envmgr image import`: disk checked as hostile input and copied into image `name` (vm/image_import.h)
 * with the options that are not the image root's (guest interface by name; width etc. 0: defaults), then
 * its golden state made with accel (NULL: none made); a disk or guest refused, or a golden state
 * that could not be made, leaves nothing in the image root. */
typedef struct env_image_import_opts {
    const char *guest;  /* "none" or "qga" ("envmgr", "osworld": refused as not supported yet) */
    int width, height, memory_mb, cpus, ready_timeout_s;
    bool uefi;
    const char *accel;  /* the golden state's; NULL: not made now */
} env_image_import_opts;
int env_image_import(const char *name, const char *disk, const env_image_import_opts *o, env_image_facts *out,
                     em_err *err);
/* `envmgr image rm NAME`: an imported image, refused while an env runs on it. */
int env_image_remove(const char *name, em_err *err);
/* The screen an image's envs have; the default size when its manifest cannot be read. */
void env_image_screen(const char *image, int *width, int *height);

/* The pid of env `name`'s QEMU, 0 when none runs (no lock taken: for watchers such as a suite's). */
pid_t env_qemu_pid(const char *name);
/* Pause or resume env `name`'s guest without opening the env (its owner, the API server, holds its
 * lock and lets a live viewer drive it). */
int env_hold_by_name(const char *name, bool hold, em_err *err);
/* The VNC socket of env `name` (caller frees). */
char *env_vnc_socket(const char *name);

/* The host: QEMU's version (caller frees) and binary; the accelerator verdict cached by an earlier
 * probe ("kvm", "tcg") or NULL. */
int env_host_qemu_version(char **version, em_err *err);
const char *env_host_qemu_binary(void);
const char *env_host_accel_cached(void);
/* `envmgr __qemu-log DIR`: the process that keeps an env's QEMU log capped (started by envmgr). */
int env_log_keeper_main(const char *dir);

#endif

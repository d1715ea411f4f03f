/* An image's manifest.json: boot parameters and the sha256 of every file.
 * `envmgr image verify` and every boot check the files against it. */
#ifndef ENVMGR_MANIFEST_H
#define ENVMGR_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>

#include "envmgr/base/err.h"
#include "envmgr/base/sha256.h"

/* Screen size of an image whose manifest does not say (the small desktop's). */
#define MANIFEST_DEFAULT_WIDTH 1280
#define MANIFEST_DEFAULT_HEIGHT 800
/* How long a cold boot may take to reach a ready desktop when the manifest does not say
 * (boot.ready_timeout_s): a cold boot of the small image under TCG takes ~80-120 s; room for a
 * loaded host. */
#define MANIFEST_DEFAULT_READY_TIMEOUT_S 400
/* boot.cpus at most: each vCPU is a host thread under TCG (MTTCG) */
#define MANIFEST_MAX_CPUS 16

/* How envmgr reaches inside a guest (manifest "guest"; docs/images.md): its own agent on a
 * virtio-serial port (images envmgr builds), OSWorld's HTTP server, the QEMU guest agent, or nothing
 * (screenshots and input only). guest_ops dispatches on it; only envmgr and none run today. */
typedef enum {
    MANIFEST_GUEST_ENVMGR,
    MANIFEST_GUEST_OSWORLD,
    MANIFEST_GUEST_QGA,
    MANIFEST_GUEST_NONE,
} manifest_guest;

/* The guest interface named s ("envmgr", "osworld", "qga", "none"); -1 for another name. */
int manifest_guest_parse(const char *s);
const char *manifest_guest_name(manifest_guest g);

typedef struct manifest {
    char *dir;         /* absolute image directory */
    char *name;
    char *kernel, *initrd; /* absolute paths; both NULL for an image that boots from its own bootloader */
    char *disk;        /* absolute path */
    char *append;      /* NULL without a kernel */
    manifest_guest guest; /* "guest" (default envmgr) */
    bool uefi;         /* boot.firmware "uefi" (OVMF); "bios" (SeaBIOS, the default) otherwise */
    char *machine;     /* boot.machine: "pc" (the default) or "q35" */
    int width, height, memory_mb;
    int cpus;            /* boot.cpus: the guest's vCPUs (-smp); 1 unless the image asks for more */
    int ready_timeout_s; /* boot.ready_timeout_s: cold boot to a ready desktop, at most */
    char sha256[SHA256_HEX_LEN + 1]; /* of manifest.json itself: names the image exactly */
    json_t *json;
} manifest;

int manifest_load(const char *image_dir, manifest **out, em_err *err);
/* OVMF's firmware file for a uefi image (Debian's ovmf package), or NULL when it is not installed
 * (ENVMGR_OVMF overrides the path). */
const char *manifest_ovmf_path(void);
void manifest_free(manifest *m);
/* The image user's password ({CLIENT_PASSWORD} in OSWorld's tasks): manifest.json's
 * "user": {"name", "password"} when the image records it, else GUEST_PASSWORD in the image
 * recipe's image.conf (<source>/vm-images/<name>/image.conf), else OSWorld's default
 * "password". Caller frees. */
char *manifest_user_password(const manifest *m);
/* Recompute every file's sha256 (libgcrypt). full=0 checks sizes only (fast, every boot). */
int manifest_verify(const manifest *m, int full, em_err *err);

#endif

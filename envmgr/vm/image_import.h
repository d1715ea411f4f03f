/* `envmgr image import`: a disk envmgr did not build becomes an image (docs/images.md, "Imported
 * images"). The disk is hostile input: its format is read from its header, never guessed (qcow2 or
 * raw); the qcow2 header is read by envmgr itself before any tool opens the file, and refused when
 * it names another file (a backing file, an external data file) or is encrypted; qemu-img then
 * reads it in a child under limits (CPU time, address space, a deadline, capped output) and its
 * answer is checked again; sizes are bounded; what the image keeps is envmgr's own qcow2 copy
 * (qemu-img convert with the format given). Every refusal is one line naming the field, an input
 * error (exit 2), and leaves nothing in the image root. */
#ifndef ENVMGR_IMAGE_IMPORT_H
#define ENVMGR_IMAGE_IMPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"
#include "envmgr/vm/manifest.h"

/* The bounds an imported disk is held to by default (ENVMGR_IMPORT_MAX_GIB overrides both). */
#define IMAGE_IMPORT_MAX_VIRTUAL ((uint64_t)256 << 30) /* the guest's disk size */
#define IMAGE_IMPORT_MAX_FILE ((uint64_t)256 << 30)    /* the file's own size */
#define IMAGE_IMPORT_HEADER_MAX 65536                  /* bytes of a qcow2 header (and extensions) read */
#define IMAGE_IMPORT_INFO_MAX 65536                    /* bytes of qemu-img's answer read */

typedef struct image_limits {
    uint64_t max_virtual, max_file;
} image_limits;

void image_limits_default(image_limits *l);

/* The format the disk's first bytes say: "qcow2" (magic QFI\xfb) or "raw" (anything else but the
 * magic of another format qemu reads, which is refused: vmdk, vdi, vhdx, vpc, qed, ...). */
int image_probe_format(const unsigned char *head, size_t len, const char **format, em_err *err);

/* A qcow2 header (the first len bytes of the file, header extensions included as far as read):
 * refused when it names a backing file, an external data file, is encrypted, marked corrupt, has
 * incompatible features envmgr does not know, or a virtual size over the bound. */
int image_check_qcow2_header(const unsigned char *head, size_t len, const image_limits *lim, uint64_t *virtual_size,
                             em_err *err);

/* What `qemu-img info --output=json -f FORMAT` answered, checked: the format is the one asked for,
 * no backing file, no data file, not encrypted, not corrupt or dirty, sizes within the bounds. */
typedef struct image_info {
    uint64_t virtual_size, actual_size;
} image_info;
int image_check_info(const char *json_text, size_t len, const char *format, const image_limits *lim,
                     image_info *out, em_err *err);

/* The choices of `envmgr image import` that go into the manifest. */
typedef struct image_import_opts {
    manifest_guest guest;
    int width, height, memory_mb, cpus, ready_timeout_s;
    bool uefi;
} image_import_opts;
#define IMAGE_IMPORT_DEFAULT_READY_TIMEOUT_S 600

/* Import disk as image `name` under the image root: the checks above, envmgr's copy, its manifest;
 * in a temporary folder inside the root renamed into place at the end (removed on any failure).
 * *dir: the image's folder (caller frees). */
int image_import(const char *name, const char *disk, const image_import_opts *o, char **dir, em_err *err);
/* Remove image `name` that `image import` made (an image envmgr built is refused: it is a link to the
 * build cache, `make image` rebuilds it). */
int image_remove(const char *name, em_err *err);

/* `envmgr gc`: the work folders (`.import-*`, `.rm-*`) in the image root of imports and removals whose
 * envmgr was killed; removed unless dry_run. *list: their paths, one a line (caller frees; NULL for
 * none). Returns how many. */
int image_import_orphans(bool dry_run, char **list);

#endif

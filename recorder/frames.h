/* Internal: the trace's content-addressed stores: frames (dir/frames/<sha256>.png) and
 * accessibility trees (dir/a11y/<sha256>.xml), one blob per distinct content. A name is only
 * ever built from 64 checked lowercase hex digits, so no blob name can point outside its folder. */
#ifndef ENVMGR_RECORDER_FRAMES_H
#define ENVMGR_RECORDER_FRAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

/* One store: its folder in the trace, the file name's extension, what errors call a blob, the
 * largest blob it accepts, and whether a blob must start with the PNG signature (a frame: the
 * HTML export copies it out as .png, and bytes that are not a PNG have no business there). */
typedef struct blob_kind {
    const char *subdir, *ext, *what;
    size_t max;
    bool png;
} blob_kind;

extern const blob_kind BLOB_FRAME; /* frames/<sha>.png */
extern const blob_kind BLOB_A11Y;  /* a11y/<sha>.xml */

/* dir/<subdir>/<sha><ext>, or NULL when sha is not 64 lowercase hex digits. */
char *blob_path(const char *dir, const blob_kind *k, const char *sha);
/* Store bytes under their sha256 unless a file of that name and size is there. */
int blob_store(const char *dir, const blob_kind *k, const void *data, size_t len, char out_sha[65], em_err *err);
/* Whether the blob exists as a regular file (for the writer: cheap, no hashing). */
bool blob_exist(const char *dir, const blob_kind *k, const char *sha);
/* Read a blob (regular file, no symlink, within k->max) and check that its bytes hash to its name
 * (and, for k->png, that they are a PNG). */
int blob_load(const char *dir, const blob_kind *k, const char *sha, char **data, size_t *len, em_err *err);
/* blob_load, then write the bytes to dest (temp file + rename). */
int blob_copy_to(const char *dir, const blob_kind *k, const char *sha, const char *dest, em_err *err);

/* The frame store's names for the above. */
int frames_store_png(const char *dir, const void *png, size_t len, char out_sha[65], em_err *err);
bool frames_exist(const char *dir, const char *sha);
int frames_load(const char *dir, const char *sha, char **data, size_t *len, em_err *err);
int frames_copy_to(const char *dir, const char *sha, const char *dest, em_err *err);

#endif

/* Internal: the content-addressed frame store, dir/frames/<sha256>.png.
 * A name is only ever built from 64 checked lowercase hex digits, so no
 * frame name can point outside frames/. */
#ifndef ENVMGR_RECORDER_FRAMES_H
#define ENVMGR_RECORDER_FRAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

/* dir/frames/<sha>.png, or NULL when sha is not 64 lowercase hex digits. */
char *frames_path(const char *dir, const char *sha);
/* Store PNG bytes under their sha256 unless a file of that name and size is there. */
int frames_store_png(const char *dir, const void *png, size_t len, char out_sha[65], em_err *err);
/* Whether frames/<sha>.png exists as a regular file (for the writer: cheap, no hashing). */
bool frames_exist(const char *dir, const char *sha);
/* Read frames/<sha>.png (regular file, no symlink, within TRACE_MAX_FRAME_BYTES)
 * and check that its bytes hash to its name. */
int frames_load(const char *dir, const char *sha, char **data, size_t *len, em_err *err);
/* frames_load, then write the bytes to dest (temp file + rename). */
int frames_copy_to(const char *dir, const char *sha, const char *dest, em_err *err);

#endif

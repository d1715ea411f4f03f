/* The trace's blob stores: files named by the sha256 of their bytes, written through a temp file
 * and a rename so a reader never sees half a blob. */
#include "frames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/png.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "trace.h"

const blob_kind BLOB_FRAME = {TRACE_FRAMES_DIR, ".png", "frame", TRACE_MAX_FRAME_BYTES, true};
const blob_kind BLOB_A11Y = {TRACE_A11Y_DIR, ".xml", "accessibility tree", TRACE_MAX_A11Y_BYTES, false};

char *blob_path(const char *dir, const blob_kind *k, const char *sha)
{
    if (!is_sha256_hex(sha))
        return NULL;
    return xasprintf("%s/%s/%s%s", dir, k->subdir, sha, k->ext);
}

int blob_store(const char *dir, const blob_kind *k, const void *data, size_t len, char out_sha[65], em_err *err)
{
    if (len > k->max)
        return em_fail_input(err, "%s: %zu bytes, more than the limit of %zu", k->what, len, k->max);
    char sha[SHA256_HEX_LEN + 1];
    sha256_hex(data, len, sha);
    _cleanup_free_ char *path = blob_path(dir, k, sha);
    struct stat st;
    /* Same name and size: the same blob, stored already. Anything else under
     * that name (a partial file from a crash, a symlink) is replaced. */
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) {
        memcpy(out_sha, sha, sizeof sha);
        return 0;
    }
    _cleanup_free_ char *sub = xasprintf("%s/%s", dir, k->subdir);
    if (mkdir(sub, 0755) < 0 && errno != EEXIST)
        return em_fail_errno(err, "%s: mkdir `%s`", k->what, sub);
    if (write_file_atomic(path, data, len, 0644, err) < 0)
        return em_prefix(err, "%s: ", k->what);
    memcpy(out_sha, sha, sizeof sha);
    return 0;
}

bool blob_exist(const char *dir, const blob_kind *k, const char *sha)
{
    _cleanup_free_ char *path = blob_path(dir, k, sha);
    struct stat st;
    return path && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int blob_load(const char *dir, const blob_kind *k, const char *sha, char **data, size_t *len, em_err *err)
{
    _cleanup_free_ char *path = blob_path(dir, k, sha);
    if (!path)
        return em_fail_input(err, "%s name is not 64 lowercase hex digits", k->what);
    struct stat st;
    if (lstat(path, &st) < 0 && errno == ENOENT)
        return em_fail_input(err, "`%s` is missing", path);
    _cleanup_free_ char *buf = NULL;
    size_t n;
    if (read_file_flags(path, k->max, FILE_NOFOLLOW, &buf, &n, err) < 0)
        return -1;
    char got[SHA256_HEX_LEN + 1];
    sha256_hex(buf, n, got);
    if (strcmp(got, sha))
        return em_fail_input(err, "`%s`: content does not match its name (the %s was changed)", path, k->what);
    if (k->png && !png_signature_ok(buf, n))
        return em_fail_input(err, "`%s`: not a PNG file (a %s must be one)", path, k->what);
    *data = buf;
    buf = NULL;
    *len = n;
    return 0;
}

int blob_copy_to(const char *dir, const blob_kind *k, const char *sha, const char *dest, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (blob_load(dir, k, sha, &data, &len, err) < 0)
        return -1;
    return write_file_atomic(dest, data, len, 0644, err);
}

int frames_store_png(const char *dir, const void *png, size_t len, char out_sha[65], em_err *err)
{
    return blob_store(dir, &BLOB_FRAME, png, len, out_sha, err);
}
bool frames_exist(const char *dir, const char *sha) { return blob_exist(dir, &BLOB_FRAME, sha); }
int frames_load(const char *dir, const char *sha, char **data, size_t *len, em_err *err)
{
    return blob_load(dir, &BLOB_FRAME, sha, data, len, err);
}
int frames_copy_to(const char *dir, const char *sha, const char *dest, em_err *err)
{
    return blob_copy_to(dir, &BLOB_FRAME, sha, dest, err);
}

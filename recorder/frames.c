/* The frame store: PNG files named by the sha256 of their bytes, written
 * through a temp file and a rename so a reader never sees half a frame. */
#include "frames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "trace.h"
#include "envmgr/base/fileio.h"

char *frames_path(const char *dir, const char *sha)
{
    if (!is_sha256_hex(sha))
        return NULL;
    return xasprintf("%s/" TRACE_FRAMES_DIR "/%s.png", dir, sha);
}

int frames_store_png(const char *dir, const void *png, size_t len, char out_sha[65], em_err *err)
{
    if (len > TRACE_MAX_FRAME_BYTES)
        return em_fail_input(err, "frame: %zu bytes of PNG, more than the limit of %zu", len,
                             TRACE_MAX_FRAME_BYTES);
    char sha[SHA256_HEX_LEN + 1];
    sha256_hex(png, len, sha);
    _cleanup_free_ char *path = frames_path(dir, sha);
    struct stat st;
    /* Same name and size: the same frame, stored already. Anything else under
     * that name (a partial file from a crash, a symlink) is replaced. */
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) {
        memcpy(out_sha, sha, sizeof sha);
        return 0;
    }
    if (write_file_atomic(path, png, len, 0644, err) < 0)
        return em_prefix(err, "frame: ");
    memcpy(out_sha, sha, sizeof sha);
    return 0;
}

bool frames_exist(const char *dir, const char *sha)
{
    _cleanup_free_ char *path = frames_path(dir, sha);
    struct stat st;
    return path && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int frames_load(const char *dir, const char *sha, char **data, size_t *len, em_err *err)
{
    _cleanup_free_ char *path = frames_path(dir, sha);
    if (!path)
        return em_fail_input(err, "frame name is not 64 lowercase hex digits");
    struct stat st;
    if (lstat(path, &st) < 0 && errno == ENOENT)
        return em_fail_input(err, "`%s` is missing", path);
    _cleanup_free_ char *buf = NULL;
    size_t n;
    if (read_file_flags(path, TRACE_MAX_FRAME_BYTES, FILE_NOFOLLOW, &buf, &n, err) < 0)
        return -1;
    char got[SHA256_HEX_LEN + 1];
    sha256_hex(buf, n, got);
    if (strcmp(got, sha))
        return em_fail_input(err, "`%s`: content does not match its name (the frame was changed)", path);
    *data = buf;
    buf = NULL;
    *len = n;
    return 0;
}

int frames_copy_to(const char *dir, const char *sha, const char *dest, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (frames_load(dir, sha, &data, &len, err) < 0)
        return -1;
    return write_file_atomic(dest, data, len, 0644, err);
}

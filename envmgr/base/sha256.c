#include "envmgr/base/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <gcrypt.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    if (!gcry_check_version(GCRYPT_VERSION)) {
        em_log(EM_LOG_ERROR, "envmgr: libgcrypt version mismatch");
        abort();
    }
    gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
}

void crypto_init(void)
{
    pthread_once(&once, init_once);
}


void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1])
{
    crypto_init();
    unsigned char d[32];
    gcry_md_hash_buffer(GCRY_MD_SHA256, d, data, len);
    hex_encode(d, 32, out);
}

int sha256_file_hex(const char *path, char out[SHA256_HEX_LEN + 1], em_err *err)
{
    crypto_init();
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return em_fail_errno(err, "open `%s`", path);
    gcry_md_hd_t h;
    if (gcry_md_open(&h, GCRY_MD_SHA256, 0))
        return em_fail(err, "sha256 `%s`: cannot open digest", path);
    enum { CHUNK = 1 << 20 };
    _cleanup_free_ char *buf = xmalloc(CHUNK);
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            gcry_md_close(h);
            return em_fail_errno(err, "read `%s`", path);
        }
        if (r == 0)
            break;
        gcry_md_write(h, buf, (size_t)r);
    }
    hex_encode(gcry_md_read(h, GCRY_MD_SHA256), 32, out);
    gcry_md_close(h);
    return 0;
}

int hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len, char out[SHA256_HEX_LEN + 1],
                    em_err *err)
{
    crypto_init();
    gcry_md_hd_t h;
    if (gcry_md_open(&h, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC))
        return em_fail(err, "hmac: cannot open digest");
    if (gcry_md_setkey(h, key, key_len)) {
        gcry_md_close(h);
        return em_fail(err, "hmac: cannot set key");
    }
    gcry_md_write(h, data, len);
    hex_encode(gcry_md_read(h, GCRY_MD_SHA256), 32, out);
    gcry_md_close(h);
    return 0;
}

int const_time_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

int is_sha256_hex(const char *s)
{
    if (!s || strlen(s) != SHA256_HEX_LEN)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

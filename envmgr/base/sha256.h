/* SHA-256 and HMAC-SHA256 through libgcrypt, as lowercase hex. */
#ifndef ENVMGR_SHA256_H
#define ENVMGR_SHA256_H

#include <stddef.h>

#include "envmgr/base/err.h"

#define SHA256_HEX_LEN 64

/* libgcrypt must be initialised once per process before any digest. */
void crypto_init(void);

void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1]);
int sha256_file_hex(const char *path, char out[SHA256_HEX_LEN + 1], em_err *err);
int hmac_sha256_hex(const void *key, size_t key_len, const void *data, size_t len, char out[SHA256_HEX_LEN + 1],
                    em_err *err);
/* Compare two strings in time independent of where they differ. */
int const_time_equal(const char *a, const char *b);
int is_sha256_hex(const char *s);

#endif

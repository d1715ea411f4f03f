/* Base64 (RFC 4648) for the guest agent's buf-b64 / out-data fields. */
#ifndef ENVMGR_BASE64_H
#define ENVMGR_BASE64_H

#include <stddef.h>

char *base64_encode(const void *data, size_t len);
/* Returns -1 on a character outside the alphabet or bad padding, BASE64_NOMEM when there is no
 * memory for the result (its size is the text's: a guest's, not to abort on). *out is
 * NUL-terminated. */
#define BASE64_NOMEM (-2)
int base64_decode(const char *text, unsigned char **out, size_t *out_len);

#endif

/* Base64 (RFC 4648) for the guest agent's buf-b64 / out-data fields. */
#ifndef ENVMGR_BASE64_H
#define ENVMGR_BASE64_H

#include <stddef.h>

char *base64_encode(const void *data, size_t len);
/* Returns -1 on a character outside the alphabet or bad padding. *out is NUL-terminated. */
int base64_decode(const char *text, unsigned char **out, size_t *out_len);

#endif

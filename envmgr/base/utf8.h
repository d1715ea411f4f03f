/* UTF-8, decoded one strict way for every reader of untrusted text (guest output, agent
 * messages, traces): no overlong forms, no surrogates, nothing above U+10FFFF. */
#ifndef ENVMGR_BASE_UTF8_H
#define ENVMGR_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid sequence at s (n bytes available), 0 when it is not valid UTF-8.
 * *cp gets its code point (cp may be NULL). A NUL byte is a valid one-byte sequence. */
size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* Is all of s valid UTF-8 (and free of NUL bytes when no_nul)? */
bool utf8_valid(const char *s, size_t n, bool no_nul);

/* A malloc'd copy of s in which every byte that does not start a valid sequence (and every NUL)
 * became U+FFFD: what jansson and every JSON reader accept. *out_len is its length. */
char *utf8_sanitize(const char *s, size_t n, size_t *out_len);

#endif

/* RFB's VNC Authentication (RFC 6143 §7.2.2), the server side: the only password check every VNC
 * viewer speaks. A TCP viewer endpoint offers nothing else. */
#ifndef ENVMGR_VIEW_VNC_AUTH_H
#define ENVMGR_VIEW_VNC_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define VNC_AUTH_PASSWORD_LEN 8 /* the protocol uses at most 8 bytes of a password */

/* A fresh random password of VNC_AUTH_PASSWORD_LEN letters and digits (out: 9 bytes). */
void vnc_auth_new_password(char out[VNC_AUTH_PASSWORD_LEN + 1]);
/* A random challenge and the response a viewer knowing password must send. */
int vnc_auth_challenge(const char *password, uint8_t challenge[16], uint8_t response[16], em_err *err);
/* The viewer's answer against the expected response, in constant time. */
bool vnc_auth_check(const uint8_t expected[16], const uint8_t got[16]);
/* What a viewer computes (DES with the bit-reversed password as key); for tests and the check above. */
int vnc_auth_response(const char *password, const uint8_t challenge[16], uint8_t response[16], em_err *err);

#endif

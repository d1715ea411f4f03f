#include "envmgr/view/vnc_auth.h"

#include <gcrypt.h>
#include <string.h>

#include "envmgr/base/sha256.h"

void vnc_auth_new_password(char out[VNC_AUTH_PASSWORD_LEN + 1])
{
    static const char alphabet[] = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"; /* no look-alikes */
    uint8_t r[VNC_AUTH_PASSWORD_LEN];
    crypto_init();
    gcry_randomize(r, sizeof r, GCRY_STRONG_RANDOM);
    for (size_t i = 0; i < VNC_AUTH_PASSWORD_LEN; i++)
        out[i] = alphabet[r[i] % (sizeof alphabet - 1)];
    out[VNC_AUTH_PASSWORD_LEN] = '\0';
}

int vnc_auth_response(const char *password, const uint8_t challenge[16], uint8_t response[16], em_err *err)
{
    /* RFB's quirk: each key byte is the password byte with its bits in reverse order */
    uint8_t key[8] = {0};
    for (size_t i = 0; i < 8 && password[i]; i++) {
        uint8_t b = (uint8_t)password[i], r = 0;
        for (int k = 0; k < 8; k++)
            r |= (uint8_t)(((b >> k) & 1) << (7 - k));
        key[i] = r;
    }
    crypto_init();
    gcry_cipher_hd_t h;
    if (gcry_cipher_open(&h, GCRY_CIPHER_DES, GCRY_CIPHER_MODE_ECB, 0))
        return em_fail(err, "vnc auth: DES unavailable in libgcrypt");
    gcry_error_t e = gcry_cipher_setkey(h, key, sizeof key);
    if (e && gcry_err_code(e) != GPG_ERR_WEAK_KEY) { /* a weak key still encrypts; RFB has no choice */
        gcry_cipher_close(h);
        return em_fail(err, "vnc auth: DES key: %s", gcry_strerror(e));
    }
    e = gcry_cipher_encrypt(h, response, 16, challenge, 16);
    gcry_cipher_close(h);
    if (e)
        return em_fail(err, "vnc auth: DES: %s", gcry_strerror(e));
    return 0;
}

int vnc_auth_challenge(const char *password, uint8_t challenge[16], uint8_t response[16], em_err *err)
{
    crypto_init();
    gcry_randomize(challenge, 16, GCRY_STRONG_RANDOM);
    return vnc_auth_response(password, challenge, response, err);
}

bool vnc_auth_check(const uint8_t expected[16], const uint8_t got[16])
{
    uint8_t d = 0;
    for (int i = 0; i < 16; i++)
        d |= expected[i] ^ got[i];
    return d == 0;
}

/* The evaluator's only way into an env. The env layer (guest agent, VNC)
 * fills this in; getters call through it and never learn about QEMU.
 * Tests fill it with callbacks that record calls and return canned data.
 *
 * Every callback returns 0 or a negative status with err set. Buffers
 * handed back (*out, *data) are malloc'd and NUL-terminated one past
 * their length; the caller frees them. Guest output is untrusted: the
 * caps below are hard limits, not hints. */
#ifndef ENVMGR_ENV_OPS_H
#define ENVMGR_ENV_OPS_H

#include <stddef.h>

#include "envmgr/base/err.h"

typedef struct em_env_ops {
    void *ctx;
    /* Run argv (no shell unless argv says so) as root in the guest with
     * DISPLAY=:0; at most out_cap bytes of stdout come back; exit_code is
     * -1 when the command was killed or timed out. */
    int (*exec)(void *ctx, const char *const *argv, double timeout_s, size_t out_cap, char **out, size_t *out_len,
                int *exit_code, em_err *err);
    /* Read a guest file; a file larger than cap is an error, not a truncation. */
    int (*read_file)(void *ctx, const char *guest_path, size_t cap, char **data, size_t *len, em_err *err);
    /* Write the current screen as a PNG file on the host. */
    int (*screenshot_png)(void *ctx, const char *host_png_path, em_err *err);
    int screen_w, screen_h;
} em_env_ops;

#endif

/* KVM or TCG. /dev/kvm opening is not enough (a paravirtual host KVM opens
 * fine and then cannot boot Debian's kernel), so "auto" boots the image's
 * kernel under KVM once with a timeout and caches the verdict per host. */
#ifndef ENVMGR_ACCEL_H
#define ENVMGR_ACCEL_H

#include "envmgr/base/err.h"
#include "envmgr/vm/manifest.h"

/* requested: "auto", "kvm" or "tcg". out: "kvm" or "tcg" (static string). */
int accel_choose(const char *requested, const manifest *image, const char **out, em_err *err);

/* The verdict `auto` cached for this host (kernel, QEMU, CPU): "kvm" or "tcg", or NULL when this
 * host was not probed yet (the first `envmgr up` of an image probes). */
const char *accel_cached(void);

#endif

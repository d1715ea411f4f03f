#include "envmgr/base/paths.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

#ifndef ENVMGR_SOURCE_DIR
#define ENVMGR_SOURCE_DIR "."
#endif

static char run_root[512], cache_root[512], image_root[512];

const char *paths_run_root(void)
{
    if (!run_root[0]) {
        const char *e = getenv("ENVMGR_RUN_DIR"), *xdg = getenv("XDG_RUNTIME_DIR");
        if (e && *e)
            snprintf(run_root, sizeof run_root, "%s", e);
        else if (geteuid() == 0)
            snprintf(run_root, sizeof run_root, "/run/envmgr");
        else if (xdg && *xdg)
            snprintf(run_root, sizeof run_root, "%s/envmgr", xdg);
        else
            snprintf(run_root, sizeof run_root, "/tmp/envmgr-%u", (unsigned)geteuid());
    }
    return run_root;
}

const char *paths_cache_root(void)
{
    if (!cache_root[0]) {
        const char *e = getenv("ENVMGR_CACHE_DIR"), *home = getenv("HOME");
        if (e && *e)
            snprintf(cache_root, sizeof cache_root, "%s", e);
        else if (geteuid() == 0 || !home)
            snprintf(cache_root, sizeof cache_root, "/var/cache/envmgr");
        else
            snprintf(cache_root, sizeof cache_root, "%s/.cache/envmgr", home);
    }
    return cache_root;
}

const char *paths_image_root(void)
{
    if (!image_root[0]) {
        const char *e = getenv("ENVMGR_IMAGE_DIR");
        snprintf(image_root, sizeof image_root, "%s", e && *e ? e : ENVMGR_SOURCE_DIR "/vm-images/out");
    }
    return image_root;
}

char *paths_image_dir(const char *image)
{
    if (strchr(image, '/'))
        return xstrdup(image);
    return xasprintf("%s/%s", paths_image_root(), image);
}

char *paths_env_dir(const char *name)
{
    return xasprintf("%s/%s", paths_run_root(), name);
}

int paths_ensure_run_root(em_err *err)
{
    return mkdir_p(paths_run_root(), 0700, err);
}

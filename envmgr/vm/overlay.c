#include "envmgr/vm/overlay.h"

#include <dirent.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"

static bool in_memory(const char *dir)
{
    struct statfs fs;
    return statfs(dir, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

static char *overlay_root(void)
{
    return xasprintf("%s/" VM_OVERLAY_DIR, paths_cache_root());
}

char *vm_spill_path(const char *env_dir, const char *suffix)
{
    if (!in_memory(env_dir))
        return NULL;
    _cleanup_free_ char *root = overlay_root();
    char h[65];
    sha256_hex(env_dir, strlen(env_dir), h);
    return xasprintf("%s/%.24s%s", root, h, suffix);
}

int vm_spill_claim(const char *env_dir, const char *path, em_err *err)
{
    _cleanup_free_ char *root = overlay_root(), *owner = xasprintf("%s.owner", path);
    if (mkdir_p(root, 0700, err) < 0)
        return em_prefix(err, "overlay: ");
    return write_file_atomic(owner, env_dir, strlen(env_dir), 0600, err);
}

void vm_spill_remove(const char *path)
{
    _cleanup_free_ char *prev = xasprintf("%s.prev", path), *owner = xasprintf("%s.owner", path);
    unlink(path);
    unlink(prev);
    unlink(owner);
}

int vm_overlay_place(const char *env_dir, char **path, em_err *err)
{
    *path = NULL;
    _cleanup_free_ char *link = xasprintf("%s/" VM_OVERLAY, env_dir);
    vm_overlay_remove(env_dir); /* a reset's new overlay replaces the old one */
    unlink(link);
    char *target = vm_spill_path(env_dir, ".qcow2");
    if (!target) {
        *path = xstrdup(link);
        return 0;
    }
    int rc = vm_spill_claim(env_dir, target, err);
    if (rc == 0 && symlink(target, link) < 0)
        rc = em_fail_errno(err, "overlay: link `%s`", link);
    if (rc < 0) {
        vm_spill_remove(target);
        free(target);
        return -1;
    }
    *path = target;
    return 0;
}

void vm_overlay_remove(const char *env_dir)
{
    _cleanup_free_ char *link = xasprintf("%s/" VM_OVERLAY, env_dir), *root = overlay_root();
    char target[4096];
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
        return;
    target[n] = '\0';
    /* only ever a file of ours: the link could have been replaced by anything */
    size_t rl = strlen(root);
    if (strncmp(target, root, rl) || target[rl] != '/' || strchr(target + rl + 1, '/'))
        return;
    vm_spill_remove(target);
}

int vm_overlay_orphans(bool dry_run, char **list, double *mib)
{
    *list = NULL;
    *mib = 0;
    _cleanup_free_ char *root = overlay_root();
    DIR *d = opendir(root);
    if (!d)
        return 0;
    sbuf out = {0};
    int count = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 7 || strcmp(de->d_name + n - 6, ".owner"))
            continue;
        _cleanup_free_ char *owner = xasprintf("%s/%s", root, de->d_name), *text = NULL;
        _cleanup_free_ char *disk = xasprintf("%s/%.*s", root, (int)(n - 6), de->d_name);
        em_err ignored;
        if (read_file_capped(owner, 4096, &text, NULL, &ignored) < 0)
            continue;
        struct stat st;
        if (stat(text, &st) == 0) /* its env is still there */
            continue;
        if (stat(disk, &st) == 0)
            *mib += (double)st.st_blocks * 512 / (1 << 20);
        sbuf_printf(&out, "%s\n", disk);
        if (!dry_run)
            vm_spill_remove(disk);
        count++;
    }
    closedir(d);
    *list = sbuf_steal(&out);
    return count;
}

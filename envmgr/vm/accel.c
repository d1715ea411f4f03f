#include "envmgr/vm/accel.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/vm/vm.h"

#define PROBE_TIMEOUT_MS 20000.0

/* The verdict is only valid for this kernel, this QEMU and this CPU. */
static char *host_key(void)
{
    struct utsname u;
    uname(&u);
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c)
                    snprintf(model, sizeof model, "%s", c + 2);
                model[strcspn(model, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    char *ver = NULL;
    em_err ignored;
    if (vm_qemu_version(&ver, &ignored) < 0)
        ver = xstrdup("unknown");
    char *key = xasprintf("%s|%s|%s|%s", u.release, u.machine, model, ver);
    free(ver);
    return key;
}

/* Boot the kernel with no root: a working KVM gets as far as the
 * "VFS: Unable to mount root fs" panic within seconds; a broken one hangs. */
static int probe_kvm(const manifest *m, bool *works, em_err *err)
{
    *works = false;
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return 0;
    close(fd);
    char tmpl[] = "/tmp/envmgr-kvm-probe-XXXXXX";
    int out = mkstemp(tmpl);
    if (out < 0)
        return em_fail_errno(err, "kvm probe: mkstemp");
    _cleanup_free_ char *serial = xasprintf("file:%s", tmpl);
    char *argv[] = {(char *)vm_qemu_binary(), "-nodefaults", "-no-user-config", "-machine", "pc,accel=kvm", "-cpu",
                    "host", "-m", "256", "-display", "none", "-no-reboot", "-kernel", m->kernel, "-append",
                    "console=ttyS0 panic=-1 root=/dev/envmgr-none", "-serial", serial, NULL};
    /* A broken KVM hangs: the deadline ends it, and what the serial file holds decides. */
    spawn_opts so = {.argv = (const char *const *)argv};
    spawn_io io = {.out_cap = 64 * 1024, .err_cap = 64 * 1024, .timeout_ms = PROBE_TIMEOUT_MS};
    spawn_result r;
    if (spawn_run(&so, &io, &r, err) < 0) {
        close(out);
        unlink(tmpl);
        return em_prefix(err, "kvm probe: ");
    }
    spawn_result_free(&r);
    char buf[65536];
    ssize_t n = pread(out, buf, sizeof buf - 1, 0);
    close(out);
    unlink(tmpl);
    buf[n > 0 ? n : 0] = '\0';
    *works = strstr(buf, "Unable to mount root") || strstr(buf, "Kernel panic");
    return 0;
}

/* "kvm" or "tcg" when path holds a verdict for this host key, else NULL. */
static const char *cached_verdict(const char *path, const char *key)
{
    json_auto_t *cached = json_load_file(path, 0, NULL);
    const char *k = json_string_value(json_object_get(cached, "host"));
    const char *v = json_string_value(json_object_get(cached, "accel"));
    if (!k || !v || strcmp(k, key))
        return NULL;
    return !strcmp(v, "kvm") ? "kvm" : !strcmp(v, "tcg") ? "tcg" : NULL;
}

const char *accel_cached(void)
{
    _cleanup_free_ char *key = host_key();
    _cleanup_free_ char *path = xasprintf("%s/accel.json", paths_cache_root());
    return cached_verdict(path, key);
}

int accel_choose(const char *requested, const manifest *image, const char **out, em_err *err)
{
    if (!strcmp(requested, "tcg") || !strcmp(requested, "kvm")) {
        *out = !strcmp(requested, "kvm") ? "kvm" : "tcg";
        return 0;
    }
    if (strcmp(requested, "auto"))
        return em_fail_input(err, "--accel: expected auto, kvm or tcg, got `%.32s`", requested);

    _cleanup_free_ char *key = host_key();
    _cleanup_free_ char *path = xasprintf("%s/accel.json", paths_cache_root());
    if ((*out = cached_verdict(path, key)))
        return 0;
    bool works;
    if (!image->kernel) { /* an imported image: no kernel to probe KVM with; a built image's probe decides */
        *out = "tcg";
        em_warn("envmgr: no KVM verdict cached and image %s has no kernel to probe with: TCG (the first `up` of a "
                "built image probes KVM; --accel kvm forces it)", image->name);
        return 0;
    }
    if (probe_kvm(image, &works, err) < 0)
        return -1;
    *out = works ? "kvm" : "tcg";
    json_t *j = json_pack("{s:s, s:s}", "host", key, "accel", *out);
    int rc = mkdir_p(paths_cache_root(), 0755, err);
    if (rc == 0)
        rc = json_save(path, j, JSON_INDENT(2), 0644, err);
    json_decref(j);
    if (rc < 0)
        return em_prefix(err, "cache the accel verdict: ");
    return 0;
}

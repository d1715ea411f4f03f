#include "envmgr/vm/manifest.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"

#define MANIFEST_MAX (4u << 20)

void manifest_free(manifest *m)
{
    if (!m)
        return;
    free(m->dir);
    free(m->name);
    free(m->kernel);
    free(m->initrd);
    free(m->disk);
    free(m->append);
    free(m->machine);
    json_decref(m->json);
    free(m);
}

/* A file name from the manifest must stay inside the image directory. */
static int file_in_image(const manifest *m, const char *field, const char *name, char **out, em_err *err)
{
    if (!name || !*name || strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, "."))
        return em_fail_input(err, "manifest %s/manifest.json: %s: must be a plain file name", m->dir, field);
    *out = xasprintf("%s/%s", m->dir, name);
    return 0;
}

static int get_boot_int(const char *path, json_t *boot, const char *key, int lo, int hi, int dflt, int *out,
                        em_err *err)
{
    json_t *v = json_object_get(boot, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return em_fail_input(err, "manifest `%s`: boot.%s: must be an integer from %d to %d", path, key, lo, hi);
    *out = (int)json_integer_value(v);
    return 0;
}

static const char *const guest_names[] = {"envmgr", "osworld", "qga", "none"};

int manifest_guest_parse(const char *s)
{
    for (size_t i = 0; s && i < ARRAY_LEN(guest_names); i++)
        if (!strcmp(s, guest_names[i]))
            return (int)i;
    return -1;
}

const char *manifest_guest_name(manifest_guest g)
{
    return (size_t)g < ARRAY_LEN(guest_names) ? guest_names[g] : "?";
}

const char *manifest_ovmf_path(void)
{
    const char *env = getenv("ENVMGR_OVMF");
    if (env && *env)
        return access(env, R_OK) == 0 ? env : NULL;
    static const char *const paths[] = {"/usr/share/ovmf/OVMF.fd", "/usr/share/qemu/OVMF.fd"};
    for (size_t i = 0; i < ARRAY_LEN(paths); i++)
        if (access(paths[i], R_OK) == 0)
            return paths[i];
    return NULL;
}

/* The string member key of obj: dflt when absent, else one of the allowed words. */
static int get_word(const char *path, json_t *obj, const char *field, const char *key, const char *const *allowed,
                    size_t n, const char *dflt, const char **out, em_err *err)
{
    json_t *v = json_object_get(obj, key);
    *out = dflt;
    if (!v)
        return 0;
    for (size_t i = 0; json_is_string(v) && i < n; i++)
        if (!strcmp(json_string_value(v), allowed[i])) {
            *out = allowed[i];
            return 0;
        }
    char list[128] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
    return em_fail_input(err, "manifest `%s`: %s: must be one of %s", path, field, list);
}

int manifest_load(const char *image_dir, manifest **out, em_err *err)
{
    char real[PATH_MAX];
    if (!realpath(image_dir, real))
        return em_fail_errno(err, "image `%s` (run `make image` to build it)", image_dir);
    manifest *m = xcalloc(1, sizeof *m);
    m->dir = xstrdup(real);
    _cleanup_free_ char *path = xasprintf("%s/manifest.json", real);
    _cleanup_free_ char *text = NULL;
    size_t len;
    if (read_file_capped(path, MANIFEST_MAX, &text, &len, err) < 0)
        goto fail;
    sha256_hex(text, len, m->sha256);
    json_error_t je;
    m->json = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!m->json || !json_is_object(m->json)) {
        em_fail_input(err, "manifest `%s`: invalid JSON at line %d: %s", path, je.line, m->json ? "not an object" : je.text);
        goto fail;
    }
    json_t *boot = json_object_get(m->json, "boot");
    if (!json_is_object(boot)) {
        em_fail_input(err, "manifest `%s`: boot: missing or not an object", path);
        goto fail;
    }
    const char *name = json_string_value(json_object_get(m->json, "name"));
    m->name = xstrdup(name ? name : "image");
    /* No boot.kernel: the disk boots from its own bootloader (an imported image). */
    const char *kernel = json_string_value(json_object_get(boot, "kernel"));
    if (kernel || json_object_get(boot, "initrd")) {
        if (file_in_image(m, "boot.kernel", kernel, &m->kernel, err) < 0 ||
            file_in_image(m, "boot.initrd", json_string_value(json_object_get(boot, "initrd")), &m->initrd, err) < 0)
            goto fail;
        const char *append = json_string_value(json_object_get(boot, "append"));
        m->append = xstrdup(append ? append : "root=/dev/vda rw console=ttyS0 quiet");
    }
    if (file_in_image(m, "boot.disk", json_string_value(json_object_get(boot, "disk")), &m->disk, err) < 0)
        goto fail;
    const char *guest, *firmware, *machine;
    static const char *const firmwares[] = {"bios", "uefi"}, *const machines[] = {"pc", "q35"};
    if (get_word(path, m->json, "guest", "guest", guest_names, ARRAY_LEN(guest_names), "envmgr", &guest, err) < 0 ||
        get_word(path, boot, "boot.firmware", "firmware", firmwares, 2, "bios", &firmware, err) < 0 ||
        get_word(path, boot, "boot.machine", "machine", machines, 2, "pc", &machine, err) < 0)
        goto fail;
    m->guest = (manifest_guest)manifest_guest_parse(guest);
    m->uefi = !strcmp(firmware, "uefi");
    m->machine = xstrdup(machine);
    if (get_boot_int(path, boot, "width", 320, 7680, MANIFEST_DEFAULT_WIDTH, &m->width, err) < 0 ||
        get_boot_int(path, boot, "height", 200, 4320, MANIFEST_DEFAULT_HEIGHT, &m->height, err) < 0 ||
        get_boot_int(path, boot, "memory_mb", 256, 65536, 1024, &m->memory_mb, err) < 0 ||
        get_boot_int(path, boot, "cpus", 1, MANIFEST_MAX_CPUS, 1, &m->cpus, err) < 0 ||
        get_boot_int(path, boot, "ready_timeout_s", 10, 7200, MANIFEST_DEFAULT_READY_TIMEOUT_S, &m->ready_timeout_s,
                     err) < 0)
        goto fail;
    if (!json_is_object(json_object_get(m->json, "files"))) {
        em_fail_input(err, "manifest `%s`: files: missing or not an object", path);
        goto fail;
    }
    *out = m;
    return 0;
fail:
    manifest_free(m);
    return -1;
}

int manifest_verify(const manifest *m, int full, em_err *err)
{
    json_t *files = json_object_get(m->json, "files");
    const char *name;
    json_t *entry;
    if (json_object_size(files) == 0)
        return em_fail(err, "image %s: manifest lists no files", m->dir);
    json_object_foreach(files, name, entry)
    {
        _cleanup_free_ char *path = NULL;
        if (file_in_image(m, "files", name, &path, err) < 0)
            return -1;
        const char *want = json_string_value(json_object_get(entry, "sha256"));
        json_t *size = json_object_get(entry, "size");
        if (!is_sha256_hex(want))
            return em_fail(err, "image %s: files.%s.sha256: missing or not a sha256", m->dir, name);
        struct stat st;
        if (stat(path, &st) < 0)
            return em_fail_errno(err, "image %s: %s", m->dir, name);
        if (json_is_integer(size) && (json_int_t)st.st_size != json_integer_value(size))
            return em_fail(err, "image %s: %s is %lld bytes, the manifest says %lld: the image was changed", m->dir,
                           name, (long long)st.st_size, (long long)json_integer_value(size));
        if (!full)
            continue;
        char got[SHA256_HEX_LEN + 1];
        if (sha256_file_hex(path, got, err) < 0)
            return -1;
        if (strcmp(got, want))
            return em_fail(err, "image %s: %s has sha256 %.12s…, the manifest says %.12s…: the image was changed",
                           m->dir, name, got, want);
    }
    return 0;
}

char *manifest_user_password(const manifest *m)
{
    const char *pw = json_string_value(json_object_get(json_object_get(m ? m->json : NULL, "user"), "password"));
    if (pw)
        return xstrdup(pw);
    em_err bad;
    if (m && m->name && check_name("image", m->name, &bad) == 0) {
        _cleanup_free_ char *conf = xasprintf("%s/vm-images/%s/image.conf", paths_data_dir(), m->name), *text = NULL;
        size_t len;
        em_err ignored;
        if (read_file_capped(conf, 64 * 1024, &text, &len, &ignored) == 0) {
            for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                if (strncmp(line, "GUEST_PASSWORD=", 15))
                    continue;
                char *v = line + 15, *end = v + strcspn(v, " \t#");
                *end = '\0';
                if (*v == '"' || *v == '\'') { /* shell quoting of a plain word */
                    v++;
                    if (end > v && (end[-1] == '"' || end[-1] == '\''))
                        end[-1] = '\0';
                }
                return xstrdup(v);
            }
        }
    }
    return xstrdup("password");
}

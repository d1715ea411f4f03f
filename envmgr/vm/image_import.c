/* `envmgr image import`: a disk envmgr did not build, checked as hostile input (image_import.h). */
#include "envmgr/vm/image_import.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"

#define DISK_NAME "disk.qcow2"
/* qemu-img reading a header: seconds of CPU, bytes of address space, a deadline */
#define INFO_CPU_S 20
#define INFO_AS ((rlim_t)1 << 30)
#define INFO_TIMEOUT_MS 60000.0
/* qemu-img copying the disk: its time grows with the disk (256 GiB at 100 MB/s is 45 min) */
#define CONVERT_CPU_S 7200
#define CONVERT_AS ((rlim_t)2 << 30)
#define CONVERT_TIMEOUT_MS (3 * 3600 * 1000.0)

void image_limits_default(image_limits *l)
{
    l->max_virtual = IMAGE_IMPORT_MAX_VIRTUAL;
    l->max_file = IMAGE_IMPORT_MAX_FILE;
    long gib;
    const char *e = getenv("ENVMGR_IMPORT_MAX_GIB");
    if (e && parse_int(e, 1, 1 << 20, &gib) == 0)
        l->max_virtual = l->max_file = (uint64_t)gib << 30;
}

/* ---- the header, read by envmgr ---- */

static const struct {
    size_t off;
    const char *magic;
    size_t len;
    const char *name;
} other_formats[] = {
    {0, "KDMV", 4, "vmdk"},
    {0, "# Disk DescriptorFile", 21, "vmdk (a descriptor naming other files)"},
    {0, "COWD", 4, "vmdk (ESX)"},
    {0, "conectix", 8, "vpc (VHD)"},
    {0, "vhdxfile", 8, "vhdx"},
    {64, "\x7f\x10\xda\xbe", 4, "vdi"},
    {0, "QED\0", 4, "qed"},
    {0, "Bochs Virtual HD Image", 22, "bochs"},
    {0, "#!/bin/sh\n#V2.0 Format", 22, "cloop"},
    {0, "WithoutFreeSpace", 16, "parallels"},
    {0, "WithouFreSpacExt", 16, "parallels"},
    {0, "LUKS\xba\xbe", 6, "luks (encrypted)"},
    {0, "OOOM", 4, "qcow (version 1)"},
};

int image_probe_format(const unsigned char *head, size_t len, const char **format, em_err *err)
{
    if (len >= 4 && !memcmp(head, "QFI\xfb", 4)) {
        *format = "qcow2";
        return 0;
    }
    for (size_t i = 0; i < ARRAY_LEN(other_formats); i++)
        if (len >= other_formats[i].off + other_formats[i].len &&
            !memcmp(head + other_formats[i].off, other_formats[i].magic, other_formats[i].len))
            return em_fail_input(err, "format: the disk is %s; only qcow2 and raw are imported (convert it first: "
                                      "qemu-img convert -O qcow2)", other_formats[i].name);
    *format = "raw";
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const unsigned char *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

#define QCOW2_EXT_DATA_FILE 0x44415441u
#define QCOW2_EXT_CRYPTO 0x0537be77u
#define QCOW2_EXT_BACKING_FORMAT 0xe2792acau
#define QCOW2_INCOMPAT_DIRTY (1u << 0)
#define QCOW2_INCOMPAT_CORRUPT (1u << 1)
#define QCOW2_INCOMPAT_DATA_FILE (1u << 2)
#define QCOW2_INCOMPAT_KNOWN 0x1fu /* dirty, corrupt, data file, compression type, extended L2 */

int image_check_qcow2_header(const unsigned char *h, size_t len, const image_limits *lim, uint64_t *virtual_size,
                             em_err *err)
{
    if (len < 72 || memcmp(h, "QFI\xfb", 4))
        return em_fail_input(err, "qcow2 header: truncated (%zu bytes)", len);
    uint32_t version = be32(h + 4);
    if (version != 2 && version != 3)
        return em_fail_input(err, "qcow2 header: version %u (only 2 and 3 exist)", version);
    if (be64(h + 8) != 0 || be32(h + 16) != 0)
        return em_fail_input(err, "qcow2 header: backing_file_offset: the disk names a backing file (another "
                                  "file it reads through); import a flattened copy (qemu-img convert -O qcow2)");
    uint32_t cluster_bits = be32(h + 20);
    if (cluster_bits < 9 || cluster_bits > 21)
        return em_fail_input(err, "qcow2 header: cluster_bits %u is out of range (9-21): a corrupt header",
                             cluster_bits);
    uint64_t size = be64(h + 24);
    if (size > lim->max_virtual)
        return em_fail_input(err, "qcow2 header: size: the virtual disk is %llu GiB, over the bound of %llu GiB "
                                  "(ENVMGR_IMPORT_MAX_GIB)", (unsigned long long)(size >> 30),
                             (unsigned long long)(lim->max_virtual >> 30));
    if (be32(h + 32) != 0)
        return em_fail_input(err, "qcow2 header: crypt_method %u: the disk is encrypted; import a decrypted copy",
                             be32(h + 32));
    size_t ext = 72;
    if (version == 3) {
        if (len < 104)
            return em_fail_input(err, "qcow2 header: truncated version 3 header (%zu bytes)", len);
        uint64_t incompat = be64(h + 72);
        if (incompat & QCOW2_INCOMPAT_DATA_FILE)
            return em_fail_input(err, "qcow2 header: incompatible_features: external data file: the disk's data "
                                      "lives in another file it names; import a copy without one (qemu-img convert "
                                      "-O qcow2)");
        if (incompat & QCOW2_INCOMPAT_CORRUPT)
            return em_fail_input(err, "qcow2 header: incompatible_features: the disk is marked corrupt");
        if (incompat & QCOW2_INCOMPAT_DIRTY)
            return em_fail_input(err, "qcow2 header: incompatible_features: the disk was not closed cleanly (dirty); "
                                      "repair a copy first (qemu-img check -r all)");
        if (incompat & ~(uint64_t)QCOW2_INCOMPAT_KNOWN)
            return em_fail_input(err, "qcow2 header: incompatible_features: unknown bits 0x%llx",
                                 (unsigned long long)(incompat & ~(uint64_t)QCOW2_INCOMPAT_KNOWN));
        uint32_t hlen = be32(h + 100);
        if (hlen < 104 || hlen > IMAGE_IMPORT_HEADER_MAX || hlen % 8)
            return em_fail_input(err, "qcow2 header: header_length %u is out of range: a corrupt header", hlen);
        ext = hlen;
    }
    /* Header extensions: a data file's name or an encryption header refuse the disk whatever the
     * feature bits say. */
    while (ext + 8 <= len) {
        uint32_t type = be32(h + ext), elen = be32(h + ext + 4);
        if (type == 0)
            break;
        if (type == QCOW2_EXT_DATA_FILE)
            return em_fail_input(err, "qcow2 header: extension data-file: the disk names an external data file");
        if (type == QCOW2_EXT_CRYPTO)
            return em_fail_input(err, "qcow2 header: extension full-disk-encryption: the disk is encrypted");
        if (type == QCOW2_EXT_BACKING_FORMAT)
            return em_fail_input(err, "qcow2 header: extension backing-format: the disk names a backing file");
        if (elen > len - ext - 8)
            break; /* past what was read: qemu-img's check reads the rest */
        ext += 8 + (((size_t)elen + 7) & ~(size_t)7);
    }
    *virtual_size = size;
    return 0;
}

/* ---- qemu-img's answer ---- */

int image_check_info(const char *json_text, size_t len, const char *format, const image_limits *lim,
                     image_info *out, em_err *err)
{
    memset(out, 0, sizeof *out);
    if (len > IMAGE_IMPORT_INFO_MAX)
        return em_fail_input(err, "qemu-img info: the answer is over %d bytes", IMAGE_IMPORT_INFO_MAX);
    json_error_t je;
    json_auto_t *j = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(j))
        return em_fail_input(err, "qemu-img info: not a JSON object (%s)", j ? "another type" : je.text);
    const char *fmt = json_string_value(json_object_get(j, "format"));
    if (!fmt)
        return em_fail_input(err, "qemu-img info: format: missing or not a string");
    if (strcmp(fmt, format))
        return em_fail_input(err, "format: qemu-img reads the disk as %.32s, not %s; only qcow2 and raw are imported",
                             fmt, format);
    static const char *const backing[] = {"backing-filename", "full-backing-filename", "backing-filename-format",
                                          "backing-image"};
    for (size_t i = 0; i < ARRAY_LEN(backing); i++)
        if (json_object_get(j, backing[i]))
            return em_fail_input(err, "%s: the disk names a backing file (another file it reads through); import a "
                                      "flattened copy (qemu-img convert -O qcow2)", backing[i]);
    json_t *specific = json_object_get(j, "format-specific");
    if (specific && !json_is_object(specific))
        return em_fail_input(err, "qemu-img info: format-specific: not an object");
    json_t *data = json_object_get(specific, "data");
    if (data && !json_is_object(data))
        return em_fail_input(err, "qemu-img info: format-specific.data: not an object");
    if (json_object_get(data, "data-file") || json_object_get(data, "data-file-raw"))
        return em_fail_input(err, "format-specific.data.data-file: the disk names an external data file; import a "
                                  "copy without one (qemu-img convert -O qcow2)");
    json_t *enc = json_object_get(j, "encrypted");
    if ((enc && !json_is_false(enc)) || json_object_get(data, "encrypt"))
        return em_fail_input(err, "encrypted: the disk is encrypted; import a decrypted copy");
    json_t *corrupt = json_object_get(data, "corrupt");
    if (corrupt && !json_is_false(corrupt))
        return em_fail_input(err, "format-specific.data.corrupt: the disk is marked corrupt");
    json_t *dirty = json_object_get(j, "dirty-flag");
    if (dirty && !json_is_false(dirty))
        return em_fail_input(err, "dirty-flag: the disk was not closed cleanly; repair a copy first (qemu-img check "
                                  "-r all)");
    json_t *vs = json_object_get(j, "virtual-size"), *as = json_object_get(j, "actual-size");
    if (!json_is_integer(vs) || json_integer_value(vs) <= 0)
        return em_fail_input(err, "virtual-size: missing or not a positive integer");
    if ((uint64_t)json_integer_value(vs) > lim->max_virtual)
        return em_fail_input(err, "virtual-size: the virtual disk is %llu GiB, over the bound of %llu GiB "
                                  "(ENVMGR_IMPORT_MAX_GIB)", (unsigned long long)(json_integer_value(vs) >> 30),
                             (unsigned long long)(lim->max_virtual >> 30));
    if (as && (!json_is_integer(as) || json_integer_value(as) < 0))
        return em_fail_input(err, "actual-size: not a non-negative integer");
    if (as && (uint64_t)json_integer_value(as) > lim->max_file)
        return em_fail_input(err, "actual-size: the disk file holds %llu GiB, over the bound of %llu GiB "
                                  "(ENVMGR_IMPORT_MAX_GIB)", (unsigned long long)(json_integer_value(as) >> 30),
                             (unsigned long long)(lim->max_file >> 30));
    out->virtual_size = (uint64_t)json_integer_value(vs);
    out->actual_size = as ? (uint64_t)json_integer_value(as) : 0;
    return 0;
}

/* ---- qemu-img under limits ---- */

typedef struct tool_run {
    int status;      /* exit code, or -1: killed, timed out, or over the output cap */
    char *out;       /* stdout (and stderr) */
    size_t out_len;
} tool_run;

/* qemu-img ARGS... in a child with limits; the source disk's fd is the child's fd 3 (/dev/fd/3), so
 * the file checked is the file read. */
static int qemu_img(const char *const *argv, int src_fd, rlim_t cpu_s, rlim_t as, double timeout_ms, tool_run *r,
                    em_err *err)
{
    spawn_rlimit lims[] = {{RLIMIT_CPU, cpu_s}, {RLIMIT_AS, as}, {RLIMIT_CORE, 0}, {RLIMIT_NPROC, 4096}};
    spawn_opts so = {.argv = argv, .flags = SPAWN_PRIVATE_FILES | SPAWN_NO_NEW_PRIVS, .rlimits = lims,
                     .nrlimits = ARRAY_LEN(lims), .pass_fds = &src_fd, .npass = 1};
    spawn_io io = {.out_cap = IMAGE_IMPORT_INFO_MAX, .err_cap = 4096, .timeout_ms = timeout_ms};
    spawn_result res;
    memset(r, 0, sizeof *r);
    if (spawn_run(&so, &io, &res, err) < 0)
        return em_prefix(err, "qemu-img: ");
    char how[128];
    if (res.timed_out || res.overflow || res.lost || !WIFEXITED(res.status)) {
        spawn_status_text(&res, how, sizeof how);
        r->status = -1;
        r->out = xasprintf("%s%s", res.overflow ? "its output went over the cap: " : "", how);
    } else {
        r->status = WEXITSTATUS(res.status);
        if (r->status != 0 && res.errs && res.errs[0]) {
            res.errs[strcspn(res.errs, "\n")] = '\0';
            r->out = xstrdup(res.errs);
        } else {
            r->out = res.out;
            res.out = NULL;
        }
    }
    r->out_len = strlen(r->out);
    spawn_result_free(&res);
    return 0;
}

static int read_head(int fd, unsigned char *buf, size_t cap, size_t *len, em_err *err)
{
    *len = 0;
    while (*len < cap) {
        ssize_t n = pread(fd, buf + *len, cap - *len, (off_t)*len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return em_fail_errno(err, "read the disk's header");
        if (n == 0)
            break;
        *len += (size_t)n;
    }
    return 0;
}

/* Every check of the source disk (open as fd): header, qemu-img info, qemu-img check. */
static int check_source(int fd, const char *disk, const image_limits *lim, const char **format, image_info *info,
                        em_err *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return em_fail_errno(err, "`%s`", disk);
    if (!S_ISREG(st.st_mode))
        return em_fail_input(err, "`%s`: not a regular file", disk);
    if ((uint64_t)st.st_size > lim->max_file)
        return em_fail_input(err, "size: the disk file is %llu GiB, over the bound of %llu GiB (ENVMGR_IMPORT_MAX_GIB)",
                             (unsigned long long)((uint64_t)st.st_size >> 30),
                             (unsigned long long)(lim->max_file >> 30));
    if (st.st_size == 0)
        return em_fail_input(err, "size: the disk file is empty");
    unsigned char *head = xmalloc(IMAGE_IMPORT_HEADER_MAX);
    size_t len;
    uint64_t vsize = 0;
    int rc = read_head(fd, head, IMAGE_IMPORT_HEADER_MAX, &len, err);
    if (rc == 0)
        rc = image_probe_format(head, len, format, err);
    if (rc == 0 && !strcmp(*format, "qcow2"))
        rc = image_check_qcow2_header(head, len, lim, &vsize, err);
    free(head);
    if (rc < 0)
        return -1;
    const char *info_argv[] = {"qemu-img", "info", "--output=json", "-f", *format, "/dev/fd/3", NULL};
    tool_run r;
    if (qemu_img(info_argv, fd, INFO_CPU_S, INFO_AS, INFO_TIMEOUT_MS, &r, err) < 0)
        return -1;
    if (r.status != 0)
        rc = em_fail_input(err, "qemu-img info: %s: the header is corrupt or unreadable", r.out);
    else
        rc = image_check_info(r.out, r.out_len, *format, lim, info, err);
    free(r.out);
    if (rc < 0 || strcmp(*format, "qcow2"))
        return rc;
    /* qemu-img check: 0 clean, 3 only leaked clusters (the copy drops them); else corrupt. */
    const char *check_argv[] = {"qemu-img", "check", "-q", "-f", "qcow2", "/dev/fd/3", NULL};
    if (qemu_img(check_argv, fd, INFO_CPU_S * 6, INFO_AS, INFO_TIMEOUT_MS * 5, &r, err) < 0)
        return -1;
    if (r.status != 0 && r.status != 3)
        rc = em_fail_input(err, "qemu-img check: %s: the disk is corrupt (exit %d)",
                           r.out[0] ? r.out : "errors found", r.status);
    free(r.out);
    return rc;
}

static int write_manifest(const char *tmp, const char *name, const char *disk, const char *format,
                          const image_info *info, const char *src_sha, const image_import_opts *o, em_err *err)
{
    _cleanup_free_ char *copy = xasprintf("%s/" DISK_NAME, tmp), *mpath = xasprintf("%s/manifest.json", tmp);
    char sha[SHA256_HEX_LEN + 1], when[40];
    struct stat st;
    if (sha256_file_hex(copy, sha, err) < 0)
        return -1;
    if (stat(copy, &st) < 0)
        return em_fail_errno(err, "`%s`", copy);
    iso8601_now(when, sizeof when);
    char real[PATH_MAX];
    json_t *m = json_pack(
        "{s:i, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:I, s:I}, s:{s:s, s:i, s:i, s:i, s:i, s:i, s:s, s:s}, "
        "s:{s:{s:s, s:I}}}",
        "format", 1, "name", name, "built", when, "guest", manifest_guest_name(o->guest), "imported", "source",
        realpath(disk, real) ? real : disk, "source_format", format, "source_sha256", src_sha, "source_size",
        (json_int_t)info->actual_size, "virtual_size", (json_int_t)info->virtual_size, "boot", "disk", DISK_NAME,
        "width", o->width, "height", o->height, "memory_mb", o->memory_mb, "cpus", o->cpus, "ready_timeout_s",
        o->ready_timeout_s, "firmware", o->uefi ? "uefi" : "bios", "machine", "pc", "files", DISK_NAME, "sha256", sha,
        "size", (json_int_t)st.st_size);
    json_object_set_new(json_object_get(m, "imported"), "imported", json_string(when));
    int rc = json_save(mpath, m, JSON_INDENT(2), 0644, err);
    json_decref(m);
    return rc;
}

int image_import(const char *name, const char *disk, const image_import_opts *o, char **dir_out, em_err *err)
{
    if (check_name("image", name, err) < 0)
        return -1;
    if (o->uefi && !manifest_ovmf_path())
        return em_fail_input(err, "--firmware uefi: needs OVMF (Debian's ovmf package), which is not installed");
    const char *root = paths_image_root();
    _cleanup_free_ char *final = xasprintf("%s/%s", root, name);
    struct stat st;
    if (lstat(final, &st) == 0)
        return em_fail_input(err, "image `%s` exists (%s); remove it first (envmgr image rm %s)", name, final, name);
    _cleanup_close_ int fd = open(disk, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        em_fail_errno(err, "image import: disk `%s`", disk);
        err->code = EM_EXIT_USAGE;
        return -1;
    }
    image_limits lim;
    image_limits_default(&lim);
    const char *format = NULL;
    image_info info;
    double t0 = now_ms();
    if (check_source(fd, disk, &lim, &format, &info, err) < 0)
        return em_prefix(err, "image import `%s`: ", disk);
    em_info("envmgr: %s: %s disk, %llu MiB virtual, checked in %.1f s; copying...", disk, format,
            (unsigned long long)(info.virtual_size >> 20), (now_ms() - t0) / 1000);
    if (mkdir_p(root, 0755, err) < 0)
        return -1;
    _cleanup_free_ char *tmp = xasprintf("%s/.import-%s.%d.XXXXXX", root, name, (int)getpid()); /* gc: its pid */
    if (!mkdtemp(tmp))
        return em_fail_errno(err, "create a folder in `%s`", root);
    chmod(tmp, 0755);
    _cleanup_free_ char *copy = xasprintf("%s/" DISK_NAME, tmp);
    char src_sha[SHA256_HEX_LEN + 1];
    _cleanup_free_ char *fdpath = xasprintf("/proc/self/fd/%d", fd); /* the file checked, not the path again */
    int rc = sha256_file_hex(fdpath, src_sha, err);
    const char *conv_argv[] = {"qemu-img", "convert", "-q", "-f", format, "-O", "qcow2", "/dev/fd/3", copy, NULL};
    tool_run r = {0};
    if (rc == 0)
        rc = qemu_img(conv_argv, fd, CONVERT_CPU_S, CONVERT_AS, CONVERT_TIMEOUT_MS, &r, err);
    if (rc == 0 && r.status != 0)
        rc = em_fail_input(err, "qemu-img convert: %s: the disk could not be copied (exit %d)", r.out, r.status);
    free(r.out);
    /* The copy is envmgr's own: checked again as the source was (it must be a plain qcow2 now). */
    if (rc == 0) {
        _cleanup_close_ int cfd = open(copy, O_RDONLY | O_CLOEXEC);
        const char *cformat;
        image_info cinfo;
        rc = cfd < 0 ? em_fail_errno(err, "`%s`", copy) : check_source(cfd, copy, &lim, &cformat, &cinfo, err);
        if (rc == 0 && strcmp(cformat, "qcow2"))
            rc = em_fail(err, "the copy is %s, not qcow2", cformat);
    }
    if (rc == 0)
        rc = write_manifest(tmp, name, disk, format, &info, src_sha, o, err);
    if (rc == 0 && chmod(copy, 0444) < 0)
        rc = em_fail_errno(err, "chmod `%s`", copy);
    if (rc == 0 && rename(tmp, final) < 0)
        rc = em_fail_errno(err, "rename `%s` to `%s`", tmp, final);
    if (rc < 0) {
        remove_tree(tmp, NULL);
        return em_prefix(err, "image import `%s`: ", disk);
    }
    *dir_out = xstrdup(final);
    return 0;
}

int image_remove(const char *name, em_err *err)
{
    if (check_name("image", name, err) < 0)
        return -1;
    _cleanup_free_ char *dir = xasprintf("%s/%s", paths_image_root(), name);
    struct stat st;
    if (lstat(dir, &st) < 0)
        return errno == ENOENT ? em_fail_input(err, "image `%s`: no such image in %s", name, paths_image_root())
                               : em_fail_errno(err, "image `%s`", dir);
    manifest *m = NULL;
    em_err why;
    bool imported = false;
    if (S_ISDIR(st.st_mode) && manifest_load(dir, &m, &why) == 0)
        imported = json_object_get(m->json, "imported") != NULL;
    manifest_free(m);
    if (!imported)
        return em_fail_input(err, "image `%s`: not an imported image (a built image is rebuilt by `make image`; "
                                  "only `image import`'s images are removed here)", name);
    /* Renamed aside first: a concurrent `up` sees the image gone, never half of it. */
    _cleanup_free_ char *aside = xasprintf("%s/.rm-%s.%d", paths_image_root(), name, (int)getpid());
    if (rename(dir, aside) < 0)
        return em_fail_errno(err, "image `%s`: rename", dir);
    return remove_tree(aside, err);
}

/* The pid in a work folder's name: `.import-NAME.PID.XXXXXX` or `.rm-NAME.PID`; 0 when there is none. */
static pid_t work_pid(const char *name)
{
    bool import = !strncmp(name, ".import-", 8);
    if (!import && strncmp(name, ".rm-", 4))
        return 0;
    const char *end = name + strlen(name), *dot = end;
    if (import) { /* skip mkdtemp's suffix */
        while (dot > name && dot[-1] != '.')
            dot--;
        end = dot > name ? dot - 1 : name;
    }
    const char *p = end;
    while (p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p == end || p == name || p[-1] != '.' || end - p > 9)
        return 0;
    return (pid_t)strtol(p, NULL, 10);
}

int image_import_orphans(bool dry_run, char **list)
{
    *list = NULL;
    const char *root = paths_image_root();
    DIR *d = opendir(root);
    if (!d)
        return 0;
    int n = 0;
    sbuf b = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        pid_t pid = work_pid(de->d_name);
        if (pid <= 0 || (kill(pid, 0) == 0 || errno == EPERM))
            continue; /* no work folder, or its envmgr still runs */
        _cleanup_free_ char *dir = xasprintf("%s/%s", root, de->d_name);
        sbuf_printf(&b, "%s\n", dir);
        if (!dry_run)
            remove_tree(dir, NULL);
        n++;
    }
    closedir(d);
    *list = b.len ? sbuf_steal(&b) : NULL;
    return n;
}

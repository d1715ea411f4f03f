/* `envmgr image import`'s checks of a hostile disk (vm/image_import.h): the format from the header's
 * magic, the qcow2 header read by envmgr, qemu-img info's JSON, and manifests of imported images. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/util.h"
#include "envmgr/vm/image_import.h"
#include "envmgr/vm/manifest.h"
#include "helpers/cunit_main.h"

static const image_limits lim = {.max_virtual = (uint64_t)256 << 30, .max_file = (uint64_t)256 << 30};

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* A clean version 3 qcow2 header of 1 GiB with 64 KiB clusters, 104 bytes and an end extension. */
static size_t qcow2_header(unsigned char *h, size_t cap)
{
    memset(h, 0, cap);
    memcpy(h, "QFI\xfb", 4);
    put32(h + 4, 3);
    put32(h + 20, 16);
    put64(h + 24, (uint64_t)1 << 30);
    put32(h + 96, 4);   /* refcount_order */
    put32(h + 100, 104); /* header_length */
    return 112;          /* the header and an end-of-extensions marker */
}

/* A check's verdict: 0 when want is NULL, else -1, an input error of one line containing want. */
static void expect_verdict(int rc, const em_err *err, const char *want)
{
    if (!want) {
        CU_ASSERT_EQUAL(rc, 0);
        if (rc)
            fprintf(stderr, "unexpected: %s\n", err->msg);
        return;
    }
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(err->code, EM_EXIT_USAGE);
    CU_ASSERT_PTR_NULL(strchr(err->msg, '\n'));
    CU_ASSERT_PTR_NOT_NULL(strstr(err->msg, want));
    if (!strstr(err->msg, want))
        fprintf(stderr, "want `%s` in: %s\n", want, err->msg);
}

static void expect_header(const unsigned char *h, size_t len, const char *want)
{
    em_err err = {0};
    uint64_t vs = 0;
    expect_verdict(image_check_qcow2_header(h, len, &lim, &vs, &err), &err, want);
}

static void test_probe_format(void)
{
    const char *f = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL(image_probe_format((const unsigned char *)"QFI\xfb\0\0\0\3", 8, &f, &err), 0);
    CU_ASSERT_STRING_EQUAL(f, "qcow2");
    unsigned char boot[512] = {0};
    boot[510] = 0x55, boot[511] = 0xaa;
    CU_ASSERT_EQUAL(image_probe_format(boot, sizeof boot, &f, &err), 0);
    CU_ASSERT_STRING_EQUAL(f, "raw");
    CU_ASSERT_EQUAL(image_probe_format(boot, 0, &f, &err), 0); /* too short for any magic: raw */
    CU_ASSERT_STRING_EQUAL(f, "raw");
    const char *others[][2] = {{"KDMV", "vmdk"}, {"# Disk DescriptorFile\n", "vmdk"}, {"conectix", "vpc"},
                               {"vhdxfile", "vhdx"}, {"QED\0", "qed"}, {"LUKS\xba\xbe", "luks"}};
    for (size_t i = 0; i < ARRAY_LEN(others); i++) {
        unsigned char head[128] = {0};
        memcpy(head, others[i][0], strlen(others[i][0]) + (i == 4)); /* QED's magic holds its NUL */
        err = (em_err){0};
        CU_ASSERT_EQUAL(image_probe_format(head, sizeof head, &f, &err), -1);
        CU_ASSERT_EQUAL(err.code, EM_EXIT_USAGE);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, others[i][1]));
    }
    unsigned char vdi[128] = {0};
    memcpy(vdi + 64, "\x7f\x10\xda\xbe", 4);
    CU_ASSERT_EQUAL(image_probe_format(vdi, sizeof vdi, &f, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "vdi"));
}

static void test_qcow2_header(void)
{
    unsigned char h[4096];
    size_t n = qcow2_header(h, sizeof h);
    expect_header(h, n, NULL);
    uint64_t vs = 0;
    em_err err = {0};
    CU_ASSERT_EQUAL(image_check_qcow2_header(h, n, &lim, &vs, &err), 0);
    CU_ASSERT_EQUAL(vs, (uint64_t)1 << 30);

    expect_header(h, 40, "truncated");
    qcow2_header(h, sizeof h);
    put32(h + 4, 7);
    expect_header(h, n, "version 7");
    qcow2_header(h, sizeof h);
    put32(h + 4, 2); /* version 2: no feature fields, extensions at 72 */
    memset(h + 72, 0, 40);
    expect_header(h, n, NULL);

    qcow2_header(h, sizeof h);
    put64(h + 8, 0x1000);
    put32(h + 16, 10);
    expect_header(h, n, "backing_file_offset");
    qcow2_header(h, sizeof h);
    put32(h + 16, 10); /* a size without an offset is a backing file too */
    expect_header(h, n, "backing_file_offset");

    qcow2_header(h, sizeof h);
    put32(h + 20, 30);
    expect_header(h, n, "cluster_bits 30");
    qcow2_header(h, sizeof h);
    put64(h + 24, (uint64_t)300 << 30);
    expect_header(h, n, "size: the virtual disk is 300 GiB, over the bound of 256 GiB");
    qcow2_header(h, sizeof h);
    put64(h + 24, UINT64_MAX);
    expect_header(h, n, "over the bound");
    qcow2_header(h, sizeof h);
    put32(h + 32, 1);
    expect_header(h, n, "crypt_method 1");

    qcow2_header(h, sizeof h);
    put64(h + 72, 1u << 2);
    expect_header(h, n, "external data file");
    qcow2_header(h, sizeof h);
    put64(h + 72, 1u << 1);
    expect_header(h, n, "marked corrupt");
    qcow2_header(h, sizeof h);
    put64(h + 72, 1u << 0);
    expect_header(h, n, "dirty");
    qcow2_header(h, sizeof h);
    put64(h + 72, (uint64_t)1 << 40);
    expect_header(h, n, "unknown bits");
    qcow2_header(h, sizeof h);
    put64(h + 72, (1u << 3) | (1u << 4)); /* compression type, extended L2: fine */
    expect_header(h, n, NULL);

    qcow2_header(h, sizeof h);
    put32(h + 100, 90);
    expect_header(h, n, "header_length 90");
    qcow2_header(h, sizeof h);
    put32(h + 100, 0xfffffff8u);
    expect_header(h, n, "header_length");
    qcow2_header(h, sizeof h);
    expect_header(h, 100, "truncated version 3");
}

/* Extensions: a data file's name, an encryption header or a backing format refuse the disk
 * whatever the bits say; a length past what was read ends the walk. */
static void test_qcow2_extensions(void)
{
    unsigned char h[4096];
    struct {
        uint32_t type;
        const char *want;
    } cases[] = {{0x44415441u, "extension data-file"},
                 {0x0537be77u, "full-disk-encryption"},
                 {0xe2792acau, "backing-format"},
                 {0x6803f857u, NULL}};
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        qcow2_header(h, sizeof h);
        /* a harmless feature-name table first, then the case's extension */
        put32(h + 104, 0x6803f857u);
        put32(h + 108, 5);
        memcpy(h + 112, "abcde", 5);
        put32(h + 120, cases[i].type);
        put32(h + 124, 9);
        memcpy(h + 128, "/etc/pass", 9);
        expect_header(h, 160, cases[i].want);
    }
    qcow2_header(h, sizeof h);
    put32(h + 104, 0x6803f857u);
    put32(h + 108, 0xffffffffu); /* longer than anything read */
    expect_header(h, 200, NULL);
    qcow2_header(h, sizeof h);
    put32(h + 104, 0x44415441u); /* the type alone, its length cut off */
    expect_header(h, 110, NULL);
    expect_header(h, 112, "data-file");
}

static int info(const char *json, const char *format, image_info *out, em_err *err)
{
    *err = (em_err){0};
    return image_check_info(json, strlen(json), format, &lim, out, err);
}

static void expect_info(const char *json, const char *format, const char *want)
{
    image_info out;
    em_err err;
    expect_verdict(info(json, format, &out, &err), &err, want);
}

static void test_info_json(void)
{
    const char *clean = "{\"virtual-size\": 10485760, \"filename\": \"/dev/fd/3\", \"cluster-size\": 65536,"
                        " \"format\": \"qcow2\", \"actual-size\": 200704, \"format-specific\": {\"type\": \"qcow2\","
                        " \"data\": {\"compat\": \"1.1\", \"corrupt\": false, \"extended-l2\": false}},"
                        " \"dirty-flag\": false}";
    image_info out;
    em_err err;
    CU_ASSERT_EQUAL(info(clean, "qcow2", &out, &err), 0);
    CU_ASSERT_EQUAL(out.virtual_size, 10485760u);
    CU_ASSERT_EQUAL(out.actual_size, 200704u);
    expect_info("{\"virtual-size\": 18874368, \"format\": \"raw\", \"actual-size\": 17829888}", "raw", NULL);
    expect_info(clean, "raw", "format: qemu-img reads the disk as qcow2, not raw");
    expect_info("{\"virtual-size\": 1, \"format\": \"vmdk\"}", "qcow2", "reads the disk as vmdk");
    expect_info("{\"virtual-size\": 1, \"format\": 7}", "qcow2", "format: missing or not a string");
    expect_info("{\"virtual-size\": 1}", "qcow2", "format: missing");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"backing-filename\": \"/etc/shadow\"}", "qcow2",
                "backing-filename: the disk names a backing file");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"full-backing-filename\": \"/x\"}", "qcow2",
                "full-backing-filename");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"backing-filename-format\": \"raw\"}", "qcow2",
                "backing-filename-format");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"format-specific\": {\"type\": \"qcow2\", \"data\":"
                " {\"data-file\": \"/dev/sda\", \"data-file-raw\": false}}}", "qcow2",
                "format-specific.data.data-file");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"format-specific\": {\"data\": {\"data-file-raw\":"
                " true}}}", "qcow2", "data-file");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"encrypted\": true}", "qcow2", "encrypted");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"encrypted\": \"no\"}", "qcow2", "encrypted");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"format-specific\": {\"data\": {\"encrypt\": {}}}}",
                "qcow2", "encrypted");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"format-specific\": {\"data\": {\"corrupt\": true}}}",
                "qcow2", "format-specific.data.corrupt");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"format-specific\": 3}", "qcow2",
                "format-specific: not an object");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"format-specific\": {\"data\": []}}", "qcow2",
                "format-specific.data: not an object");
    expect_info("{\"virtual-size\": 1, \"format\": \"qcow2\", \"dirty-flag\": true}", "qcow2", "dirty-flag");
    expect_info("{\"virtual-size\": 322122547200, \"format\": \"qcow2\"}", "qcow2",
                "virtual-size: the virtual disk is 300 GiB, over the bound of 256 GiB");
    expect_info("{\"virtual-size\": 1, \"format\": \"raw\", \"actual-size\": 322122547200}", "raw",
                "actual-size: the disk file holds 300 GiB");
    expect_info("{\"virtual-size\": 1, \"format\": \"raw\", \"actual-size\": -1}", "raw", "actual-size");
    expect_info("{\"virtual-size\": 0, \"format\": \"raw\"}", "raw", "virtual-size: missing or not a positive");
    expect_info("{\"virtual-size\": -5, \"format\": \"raw\"}", "raw", "virtual-size");
    expect_info("{\"virtual-size\": 1.5, \"format\": \"raw\"}", "raw", "virtual-size");
    expect_info("{\"format\": \"raw\"}", "raw", "virtual-size");
    expect_info("[1, 2]", "raw", "not a JSON object");
    expect_info("{\"format\": \"raw\", \"format\": \"qcow2\", \"virtual-size\": 1}", "raw", "not a JSON object");
    expect_info("{\"virtual-size\": 1, ", "raw", "not a JSON object");
    expect_info("", "raw", "not a JSON object");
    char *big = xmalloc(IMAGE_IMPORT_INFO_MAX + 2);
    memset(big, ' ', IMAGE_IMPORT_INFO_MAX + 1);
    big[IMAGE_IMPORT_INFO_MAX + 1] = '\0';
    expect_info(big, "raw", "over");
    free(big);
}

static void put_manifest(const char *dir, const char *body)
{
    char path[600];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "w");
    fputs(body, f);
    fclose(f);
}

/* An imported image's manifest: no kernel, a guest interface, firmware and machine. */
static void test_imported_manifest(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/imported", test_tmpdir());
    mkdir(dir, 0755);
    put_manifest(dir, "{\"name\": \"i\", \"guest\": \"none\", \"boot\": {\"disk\": \"disk.qcow2\", \"firmware\": "
                      "\"uefi\", \"machine\": \"q35\"}, \"files\": {}}");
    manifest *m = NULL;
    em_err err = {0};
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &m, &err), 0);
    CU_ASSERT_PTR_NULL(m->kernel);
    CU_ASSERT_PTR_NULL(m->initrd);
    CU_ASSERT_PTR_NULL(m->append);
    CU_ASSERT_EQUAL(m->guest, MANIFEST_GUEST_NONE);
    CU_ASSERT(m->uefi);
    CU_ASSERT_STRING_EQUAL(m->machine, "q35");
    manifest_free(m);
    put_manifest(dir, "{\"name\": \"i\", \"boot\": {\"disk\": \"disk.qcow2\"}, \"files\": {}}");
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &m, &err), 0);
    CU_ASSERT_EQUAL(m->guest, MANIFEST_GUEST_ENVMGR); /* the defaults: a built image's */
    CU_ASSERT(!m->uefi);
    CU_ASSERT_STRING_EQUAL(m->machine, "pc");
    manifest_free(m);
    const char *bad[][2] = {
        {"{\"guest\": \"rdp\", \"boot\": {\"disk\": \"d\"}, \"files\": {}}", "guest: must be one of envmgr, osworld"},
        {"{\"guest\": 1, \"boot\": {\"disk\": \"d\"}, \"files\": {}}", "guest: must be one of"},
        {"{\"boot\": {\"disk\": \"d\", \"firmware\": \"coreboot\"}, \"files\": {}}", "boot.firmware: must be one of"},
        {"{\"boot\": {\"disk\": \"d\", \"machine\": \"virt\"}, \"files\": {}}", "boot.machine: must be one of pc, q35"},
        {"{\"boot\": {\"disk\": \"d\", \"initrd\": \"i\"}, \"files\": {}}", "boot.kernel: must be a plain file name"},
        {"{\"boot\": {\"disk\": \"../d\"}, \"files\": {}}", "boot.disk: must be a plain file name"},
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        put_manifest(dir, bad[i][0]);
        err = (em_err){0};
        m = NULL;
        CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[i][1]));
        if (!strstr(err.msg, bad[i][1]))
            fprintf(stderr, "want `%s` in: %s\n", bad[i][1], err.msg);
        manifest_free(m);
    }
    CU_ASSERT_EQUAL(manifest_guest_parse("qga"), MANIFEST_GUEST_QGA);
    CU_ASSERT_EQUAL(manifest_guest_parse("Qga"), -1);
    CU_ASSERT_EQUAL(manifest_guest_parse(NULL), -1);
    CU_ASSERT_STRING_EQUAL(manifest_guest_name(MANIFEST_GUEST_OSWORLD), "osworld");
}

static void test_limits_from_the_environment(void)
{
    image_limits l;
    unsetenv("ENVMGR_IMPORT_MAX_GIB");
    image_limits_default(&l);
    CU_ASSERT_EQUAL(l.max_virtual, IMAGE_IMPORT_MAX_VIRTUAL);
    setenv("ENVMGR_IMPORT_MAX_GIB", "2", 1);
    image_limits_default(&l);
    CU_ASSERT_EQUAL(l.max_virtual, (uint64_t)2 << 30);
    CU_ASSERT_EQUAL(l.max_file, (uint64_t)2 << 30);
    setenv("ENVMGR_IMPORT_MAX_GIB", "lots", 1); /* ignored: the default stands */
    image_limits_default(&l);
    CU_ASSERT_EQUAL(l.max_virtual, IMAGE_IMPORT_MAX_VIRTUAL);
    unsetenv("ENVMGR_IMPORT_MAX_GIB");
}

static CU_TestInfo tests[] = {
    {"the format from the header's magic", test_probe_format},
    {"the qcow2 header's fields", test_qcow2_header},
    {"the qcow2 header's extensions", test_qcow2_extensions},
    {"qemu-img info's JSON", test_info_json},
    {"an imported image's manifest", test_imported_manifest},
    {"the bounds from ENVMGR_IMPORT_MAX_GIB", test_limits_from_the_environment},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("image_import", tests);
}

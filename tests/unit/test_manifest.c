/* Image manifests: loading, path confinement, and sha256 verification (libgcrypt). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/vm/cgroup.h"
#include "envmgr/state/golden.h"
#include "envmgr/vm/manifest.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

static char dir[512];

static void put(const char *name, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void make_image(void)
{
    snprintf(dir, sizeof dir, "%s/img", test_tmpdir());
    mkdir(dir, 0755);
    put("vmlinuz", "kernel bytes");
    put("initrd.img", "initrd bytes");
    put("disk.qcow2", "disk bytes");
    char files[2048] = "", sha[65];
    const char *names[] = {"vmlinuz", "initrd.img", "disk.qcow2"};
    const char *bodies[] = {"kernel bytes", "initrd bytes", "disk bytes"};
    for (int i = 0; i < 3; i++) {
        sha256_hex(bodies[i], strlen(bodies[i]), sha);
        char row[256];
        snprintf(row, sizeof row, "%s\"%s\": {\"sha256\": \"%s\", \"size\": %zu}", i ? "," : "", names[i], sha,
                 strlen(bodies[i]));
        strcat(files, row);
    }
    char m[4096];
    snprintf(m, sizeof m,
             "{\"format\":1,\"name\":\"t\",\"boot\":{\"kernel\":\"vmlinuz\",\"initrd\":\"initrd.img\","
             "\"disk\":\"disk.qcow2\",\"width\":1280,\"height\":800,\"memory_mb\":1024},\"files\":{%s}}",
             files);
    put("manifest.json", m);
}

static void test_sha256_known_vectors(void)
{
    char out[65];
    sha256_hex("abc", 3, out);
    CU_ASSERT_STRING_EQUAL(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_hex("", 0, out);
    CU_ASSERT_STRING_EQUAL(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    em_err err = {0};
    /* RFC 4231 test case 2 */
    CU_ASSERT_EQUAL(hmac_sha256_hex("Jefe", 4, "what do ya want for nothing?", 28, out, &err), 0);
    CU_ASSERT_STRING_EQUAL(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    CU_ASSERT(const_time_equal("abc", "abc"));
    CU_ASSERT_FALSE(const_time_equal("abc", "abd"));
    CU_ASSERT_FALSE(const_time_equal("abc", "ab"));
    CU_ASSERT(is_sha256_hex(out));
    CU_ASSERT_FALSE(is_sha256_hex("../../etc/passwd"));
}

static void test_load_and_verify(void)
{
    make_image();
    em_err err = {0};
    manifest *m = NULL;
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &m, &err), 0);
    CU_ASSERT_EQUAL(m->width, 1280);
    CU_ASSERT_EQUAL(m->memory_mb, 1024);
    CU_ASSERT_EQUAL(m->ready_timeout_s, MANIFEST_DEFAULT_READY_TIMEOUT_S); /* not in this manifest */
    CU_ASSERT_EQUAL(m->cpus, 1);                                           /* nor this */
    CU_ASSERT_PTR_NOT_NULL(strstr(m->kernel, "/img/vmlinuz"));
    CU_ASSERT_EQUAL(manifest_verify(m, 1, &err), 0);
    manifest_free(m);
}

static void test_tampered_file_is_refused(void)
{
    make_image();
    put("initrd.img", "initrd bytez"); /* same size, one byte changed */
    em_err err = {0};
    manifest *m = NULL;
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &m, &err), 0);
    CU_ASSERT_EQUAL(manifest_verify(m, 0, &err), 0); /* the quick check only sees sizes */
    CU_ASSERT_EQUAL(manifest_verify(m, 1, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "initrd.img"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the image was changed"));
    put("disk.qcow2", "disk bytes and more");
    CU_ASSERT_EQUAL(manifest_verify(m, 0, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "disk.qcow2"));
    manifest_free(m);
}

static void test_bad_manifests(void)
{
    make_image();
    em_err err = {0};
    manifest *m = NULL;
    put("manifest.json", "{\"boot\":{\"kernel\":\"../../etc/passwd\",\"initrd\":\"i\",\"disk\":\"d\"},\"files\":{}}");
    CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "boot.kernel"));
    put("manifest.json", "{\"boot\":{\"kernel\":\"k\",\"initrd\":\"i\",\"disk\":\"d\",\"width\":5},\"files\":{}}");
    CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "width"));
    put("manifest.json", "{\"boot\":{\"kernel\":\"k\",\"initrd\":\"i\",\"disk\":\"d\",\"ready_timeout_s\":5},\"files\":{}}");
    CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "ready_timeout_s"));
    put("manifest.json", "{\"boot\":{\"kernel\":\"k\",\"initrd\":\"i\",\"disk\":\"d\",\"cpus\":0},\"files\":{}}");
    CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "boot.cpus: must be an integer from 1 to 16"));
    put("manifest.json", "{\"boot\":{\"kernel\":\"k\",\"initrd\":\"i\",\"disk\":\"d\",\"cpus\":\"2\"},\"files\":{}}");
    CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "boot.cpus"));
    put("manifest.json", "{\"boot\":{\"kernel\":\"k\",\"initrd\":\"i\",\"disk\":\"d\",\"ready_timeout_s\":900},\"files\":{}}");
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &m, &err), 0); /* the apps image's: a longer cold boot */
    CU_ASSERT_EQUAL(m->ready_timeout_s, 900);
    manifest_free(m);
    put("manifest.json", "{not json");
    CU_ASSERT_EQUAL(manifest_load(dir, &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "invalid JSON"));
    CU_ASSERT_EQUAL(manifest_load("/nonexistent/image", &m, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "make image"));
}

/* The apps image asks for two vCPUs: -smp follows, and so does the env's CPU quota (a core per
 * vCPU plus half of one for QEMU's own threads), or the second vCPU would only share the first's. */
static void test_cpus_set_the_cpu_quota(void)
{
    make_image();
    em_err err = {0};
    manifest *m = NULL;
    put("manifest.json", "{\"boot\":{\"kernel\":\"k\",\"initrd\":\"i\",\"disk\":\"d\",\"cpus\":2,"
                         "\"memory_mb\":3072},\"files\":{}}");
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &m, &err), 0);
    CU_ASSERT_EQUAL(m->cpus, 2);
    vm_cgroup_limits lim;
    vm_cgroup_limits_for(m->memory_mb, m->cpus, &lim);
    CU_ASSERT_EQUAL(lim.cpu_percent, 250);
    CU_ASSERT_EQUAL(lim.memory_bytes, (uint64_t)(3072 + 1024) << 20);
    vm_cgroup_limits_for(1024, 1, &lim);
    CU_ASSERT_EQUAL(lim.cpu_percent, 150); /* the desktop image's */
    manifest_free(m);
}

/* golden.qcow2 records the image disk's path as its backing file: the same image copied elsewhere
 * must get a golden state of its own, or every env of the copy fails "Could not open backing file". */
static void test_golden_key_follows_the_disk_path(void)
{
    make_image();
    em_err err = {0};
    manifest *a = NULL, *b = NULL;
    CU_ASSERT_EQUAL_FATAL(manifest_load(dir, &a, &err), 0);
    char moved[600];
    snprintf(moved, sizeof moved, "%s/moved", test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(rename(dir, moved), 0);
    CU_ASSERT_EQUAL_FATAL(manifest_load(moved, &b, &err), 0);
    CU_ASSERT_STRING_EQUAL(a->sha256, b->sha256); /* the same image... */
    char ka[65], kb[65], kc[65], kd[65];
    golden_key(a, "tcg", "7.2.0", ka);
    golden_key(b, "tcg", "7.2.0", kb);
    CU_ASSERT_STRING_NOT_EQUAL(ka, kb); /* ...at another place */
    golden_key(a, "kvm", "7.2.0", kc);
    golden_key(a, "tcg", "8.0.0", kd);
    CU_ASSERT_STRING_NOT_EQUAL(ka, kc);
    CU_ASSERT_STRING_NOT_EQUAL(ka, kd);
    golden_key(a, "tcg", "7.2.0", kc);
    CU_ASSERT_STRING_EQUAL(ka, kc); /* and stable */
    manifest_free(a);
    manifest_free(b);
    CU_ASSERT_EQUAL(rename(moved, dir), 0);
}

static CU_TestInfo tests[] = {
    {"sha256 and HMAC known vectors", test_sha256_known_vectors},
    {"load and verify an image", test_load_and_verify},
    {"a tampered file is refused", test_tampered_file_is_refused},
    {"bad manifests", test_bad_manifests},
    {"boot.cpus sets the env's CPU quota", test_cpus_set_the_cpu_quota},
    {"the golden state's key follows the disk's path", test_golden_key_follows_the_disk_path},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("manifest", tests);
}

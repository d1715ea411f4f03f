/* The ground floor: files, UTF-8, hex, exit causes, listening sockets, newline-delimited JSON, the data directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/base/copyrange.h"
#include "envmgr/base/exit_cause.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/jsonline.h"
#include "envmgr/base/listen.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"

static char *tmp(const char *name) { return xasprintf("%s/%s", test_tmpdir(), name); }

static void test_read_file(void)
{
    em_err err = {0};
    _cleanup_free_ char *p = tmp("f.txt"), *fifo = tmp("fifo"), *link = tmp("link"), *data = NULL;
    CU_ASSERT_EQUAL(write_file_atomic(p, "hello", 5, 0600, &err), 0);
    size_t n;
    CU_ASSERT_EQUAL(read_file_capped(p, 5, &data, &n, &err), 0);
    CU_ASSERT_EQUAL(n, 5);
    CU_ASSERT_STRING_EQUAL(data, "hello");
    free(data);
    data = NULL;
    CU_ASSERT_EQUAL(read_file_capped(p, 4, &data, &n, &err), -1); /* over the cap: an error, not a truncation */
    CU_ASSERT_PTR_NULL(data);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "more than the limit of 4"));
    /* a FIFO with no writer must not hang the reader */
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    double t0 = now_ms();
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(read_file_capped(fifo, 100, &data, &n, &err), -1);
    CU_ASSERT(now_ms() - t0 < 1000);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a regular file"));
    /* a symbolic link: followed by default, refused with FILE_NOFOLLOW */
    CU_ASSERT_EQUAL_FATAL(symlink(p, link), 0);
    CU_ASSERT_EQUAL(read_file_flags(link, 100, 0, &data, &n, &err), 0);
    free(data);
    data = NULL;
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(read_file_flags(link, 100, FILE_NOFOLLOW, &data, &n, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "symbolic link"));
}

static void test_write_atomic(void)
{
    em_err err = {0};
    _cleanup_free_ char *dir = tmp("atomic"), *p = tmp("atomic/state.json");
    CU_ASSERT_EQUAL_FATAL(mkdir_p(dir, 0700, &err), 0);
    for (int i = 0; i < 20; i++) {
        char text[32];
        int len = snprintf(text, sizeof text, "{\"n\": %d}", i);
        CU_ASSERT_EQUAL(write_file_atomic(p, text, (size_t)len, 0640, &err), 0);
    }
    _cleanup_free_ char *data = NULL;
    CU_ASSERT_EQUAL(read_file_capped(p, 100, &data, NULL, &err), 0);
    CU_ASSERT_STRING_EQUAL(data, "{\"n\": 19}");
    struct stat st;
    CU_ASSERT_EQUAL(stat(p, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0640);
    /* no temp file left behind */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A '%s' | wc -l)\" = 1", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
    /* a temp name planted as a symlink is not written through (O_EXCL|O_NOFOLLOW): the write picks
     * another name or fails, and the link's target is never touched */
    _cleanup_free_ char *victim = tmp("victim");
    CU_ASSERT_EQUAL(write_file_atomic(victim, "keep", 4, 0600, &err), 0);
    CU_ASSERT_EQUAL(remove_tree(dir, &err), 0);
    CU_ASSERT_EQUAL(access(dir, F_OK), -1);
}

static void test_path_inside(void)
{
    em_err err = {0};
    char *abs = NULL;
    const char *dir = test_tmpdir();
    CU_ASSERT_EQUAL(path_inside(dir, "a/b.png", false, &abs, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(abs && strstr(abs, "/a/b.png"));
    free(abs);
    CU_ASSERT_EQUAL(path_inside(dir, "../etc/passwd", false, &abs, &err), -1);
    CU_ASSERT_EQUAL(path_inside(dir, "a/../../x", false, &abs, &err), -1);
    CU_ASSERT_EQUAL(path_inside(dir, "/etc/passwd", false, &abs, &err), -1);
    /* a link inside that points outside: refused once resolved */
    _cleanup_free_ char *link = tmp("out-link");
    CU_ASSERT_EQUAL_FATAL(symlink("/etc/hostname", link), 0);
    CU_ASSERT_EQUAL(path_inside(dir, "out-link", true, &abs, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "resolves outside"));
}

static void test_utf8(void)
{
    uint32_t cp;
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"A", 1, &cp), 1);
    CU_ASSERT_EQUAL(cp, 'A');
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xc3\xa9", 2, &cp), 2);
    CU_ASSERT_EQUAL(cp, 0xe9);
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xf0\x9f\x98\x80", 4, &cp), 4);
    CU_ASSERT_EQUAL(cp, 0x1f600);
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xc0\xaf", 2, NULL), 0);         /* overlong '/' */
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xe0\x80\xaf", 3, NULL), 0);     /* overlong */
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xed\xa0\x80", 3, NULL), 0);     /* surrogate */
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xf4\x90\x80\x80", 4, NULL), 0); /* > U+10FFFF */
    CU_ASSERT_EQUAL(utf8_decode((const unsigned char *)"\xc3", 1, NULL), 0);             /* truncated */
    CU_ASSERT_TRUE(utf8_valid("h\xc3\xa9llo", 6, true));
    CU_ASSERT_FALSE(utf8_valid("a\0b", 3, true));
    CU_ASSERT_TRUE(utf8_valid("a\0b", 3, false));
    size_t n;
    _cleanup_free_ char *clean = utf8_sanitize("a\xff" "b\0c\xc3\xa9", 7, &n);
    CU_ASSERT_EQUAL(n, 11);
    CU_ASSERT_EQUAL(memcmp(clean, "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xc3\xa9", 11), 0);
    CU_ASSERT_TRUE(utf8_valid(clean, n, true));
}

static void test_small_helpers(void)
{
    char hex[9];
    hex_encode("\x00\x01\xab\xff", 4, hex);
    CU_ASSERT_STRING_EQUAL(hex, "0001abff");
    for (int c = EXIT_DONE; c < EXIT_CAUSE_COUNT; c++) {
        const char *name = exit_cause_name((exit_cause)c);
        CU_ASSERT_PTR_NOT_NULL_FATAL(name);
        CU_ASSERT_EQUAL(exit_cause_from_name(name), c);
    }
    CU_ASSERT_PTR_NULL(exit_cause_name(EXIT_NONE));
    CU_ASSERT_EQUAL(exit_cause_from_name("Done"), EXIT_NONE);
    CU_ASSERT_EQUAL(exit_cause_from_name(NULL), EXIT_NONE);
    long v;
    CU_ASSERT_EQUAL(parse_int("42", 0, 100, &v), 0);
    CU_ASSERT_EQUAL(v, 42);
    CU_ASSERT_EQUAL(parse_int("101", 0, 100, &v), -1);
    CU_ASSERT_EQUAL(parse_int("4x", 0, 100, &v), -1);
    CU_ASSERT_EQUAL(parse_int("", 0, 100, &v), -1);
    CU_ASSERT_TRUE(dns_name_valid("example.com", true));
    CU_ASSERT_FALSE(dns_name_valid("-a.com", true));
    CU_ASSERT_FALSE(dns_name_valid("a..com", true));
}

static void test_listen(void)
{
    em_err err = {0};
    _cleanup_free_ char *sock = tmp("l.sock"), *file = tmp("not-a-socket");
    int fd;
    CU_ASSERT_EQUAL_FATAL(listen_unix(sock, &fd, &err), 0);
    struct stat st;
    CU_ASSERT_EQUAL(lstat(sock, &st), 0);
    CU_ASSERT_TRUE(S_ISSOCK(st.st_mode));
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
    /* in use: refused */
    int fd2;
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(listen_unix(sock, &fd2, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "in use"));
    /* stale (its server gone): replaced */
    close(fd);
    CU_ASSERT_EQUAL(listen_unix(sock, &fd2, &err), 0);
    close(fd2);
    /* not a socket: refused, left alone */
    CU_ASSERT_EQUAL(write_file_atomic(file, "x", 1, 0600, &err), 0);
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(listen_unix(file, &fd2, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a socket"));
    CU_ASSERT_EQUAL(access(file, F_OK), 0);

    char where[LISTEN_WHERE_MAX];
    CU_ASSERT_EQUAL_FATAL(listen_tcp("127.0.0.1:0", true, &fd, where, &err), 0);
    CU_ASSERT_EQUAL(strncmp(where, "127.0.0.1:", 10), 0);
    CU_ASSERT(atoi(where + 10) > 0);
    close(fd);
    if (listen_tcp("[::1]:0", true, &fd, where, &err) == 0) { /* where the host has IPv6 loopback */
        CU_ASSERT_EQUAL(strncmp(where, "[::1]:", 6), 0);
        close(fd);
    }
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(listen_tcp("0.0.0.0:0", true, &fd, where, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "loopback addresses only"));
    CU_ASSERT_EQUAL(listen_tcp("127.0.0.1", true, &fd, where, &err), -1);
    CU_ASSERT_EQUAL(listen_tcp("127.0.0.1:99999", true, &fd, where, &err), -1);
}

static void test_jsonline(void)
{
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    jsonline a, b;
    jsonline_init(&a, sv[0], "a", 64);
    jsonline_init(&b, sv[1], "b", 64);
    em_err err = {0};
    json_t *m = json_pack("{s:i}", "n", 1), *got = NULL;
    CU_ASSERT_EQUAL(jsonline_send(&a, m, -1, &err), 0);
    CU_ASSERT_EQUAL(jsonline_send(&a, m, -1, &err), 0); /* two lines in one read: both come out */
    json_decref(m);
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 1000, &got, &err), 0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(got, "n")), 1);
    json_decref(got);
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 1000, &got, &err), 0);
    json_decref(got);
    /* nothing more: the deadline ends the wait */
    double t0 = now_ms();
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 200, &got, &err), -1);
    CU_ASSERT(now_ms() - t0 < 1500);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "timed out"));
    /* garbage, an array, and a line over the cap are errors */
    const char *bad[] = {"not json\n", "[1,2]\n"};
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(write(sv[0], bad[i], strlen(bad[i])), (ssize_t)strlen(bad[i]));
        memset(&err, 0, sizeof err);
        CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 1000, &got, &err), -1);
    }
    char big[200];
    memset(big, 'x', sizeof big);
    CU_ASSERT_EQUAL(write(sv[0], big, sizeof big), (ssize_t)sizeof big);
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 1000, &got, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "longer than 64"));
    /* the peer gone: said so */
    jsonline_release(&a);
    jsonline_release(&b);
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    jsonline_init(&b, sv[1], "b", 64);
    close(sv[0]);
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 1000, &got, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "closed the connection"));
    jsonline_release(&b);
    /* a reply of very many tiny values is refused before jansson allocates them; one long string is fine */
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    jsonline_init(&a, sv[0], "a", 8u << 20);
    jsonline_init(&b, sv[1], "b", 8u << 20);
    size_t n = 2 * (JSONLINE_VALUES_MAX + 10);
    char *many = xmalloc(n + 16);
    size_t o = (size_t)sprintf(many, "{\"r\":[");
    for (size_t i = 0; i < JSONLINE_VALUES_MAX + 1; i++)
        o += (size_t)sprintf(many + o, i ? ",0" : "0");
    o += (size_t)sprintf(many + o, "]}\n");
    CU_ASSERT_EQUAL(send_full(sv[0], many, o, &err), 0);
    memset(&err, 0, sizeof err);
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 5000, &got, &err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "JSON values"));
    memset(many, 'A', n);
    memcpy(many, "{\"r\":\"", 6);
    memcpy(many + n - 3, "\"}\n", 3);
    CU_ASSERT_EQUAL(send_full(sv[0], many, n, &err), 0);
    CU_ASSERT_EQUAL(jsonline_read(&b, now_ms() + 5000, &got, &err), 0);
    json_decref(got);
    free(many);
    jsonline_release(&a);
    jsonline_release(&b);
}

/* Sizes a guest or a client decides are allocated with try_malloc: an impossible one is an error
 * with code EM_EXIT_NOMEM (the API answers 503), never an abort. */
static void test_fallible_alloc(void)
{
    em_err err = {0};
    size_t huge = SIZE_MAX / 2;
    CU_ASSERT_PTR_NULL(try_malloc(huge, "a test buffer", &err));
    CU_ASSERT_EQUAL(err.code, EM_EXIT_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "out of memory: cannot allocate"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "for a test buffer"));
    char *p = try_malloc(16, "a small one", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    memcpy(p, "kept", 5);
    memset(&err, 0, sizeof err);
    CU_ASSERT_PTR_NULL(try_realloc(p, huge, "a test buffer", &err)); /* p stays valid */
    CU_ASSERT_EQUAL(err.code, EM_EXIT_NOMEM);
    CU_ASSERT_STRING_EQUAL(p, "kept");
    p = try_realloc(p, 32, "a test buffer", &err);
    CU_ASSERT_STRING_EQUAL(p, "kept");
    free(p);
    CU_ASSERT_PTR_NULL(try_malloc(huge, "no error wanted", NULL));
}

/* A build-tree binary (this test, in build/tests/) finds the checkout it was built in by walking
 * up from where it runs, not from a compiled-in path; images are under its vm-images/out. */
static void test_data_dir(void)
{
    if (getenv("ENVMGR_DATA_DIR") || getenv("ENVMGR_IMAGE_DIR"))
        return; /* moved on purpose: nothing to find */
    char *checkout = realpath(ENVMGR_SOURCE_DIR, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(checkout);
    CU_ASSERT_STRING_EQUAL(paths_data_dir(), checkout);
    char *images = xasprintf("%s/vm-images/out", checkout);
    CU_ASSERT_STRING_EQUAL(paths_image_root(), images);
    free(images);
    free(checkout);
}

/* copy_range between file systems, which copy_file_range refuses (EXDEV): tmpfs to this test's
 * folder, at offsets and at the files' positions. */
static void test_copy_range(void)
{
    char src[] = "/dev/shm/envmgr-copy-XXXXXX";
    int in = mkstemp(src);
    if (in < 0) {
        fprintf(stderr, "SKIP copy across file systems: no /dev/shm\n");
        return;
    }
    unlink(src);
    _cleanup_free_ char *dst = xasprintf("%s/copied", test_tmpdir());
    int out = open(dst, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL(out >= 0);
    size_t n = (3u << 20) + 5; /* more than one buffer */
    char *data = xmalloc(n), *back = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)(i * 7 + i / 4096);
    CU_ASSERT_EQUAL(write(in, data, n), (ssize_t)n);
    off_t a = 100, b = 4096;
    size_t total = 0;
    for (ssize_t r; (r = copy_range(in, &a, out, &b, n)) > 0;)
        total += (size_t)r;
    CU_ASSERT_EQUAL(total, n - 100);
    CU_ASSERT(a == (off_t)n && b == (off_t)(4096 + n - 100));
    CU_ASSERT(pread(out, back, n - 100, 4096) == (ssize_t)(n - 100) && !memcmp(back, data + 100, n - 100));
    CU_ASSERT(lseek(in, 0, SEEK_SET) == 0 && lseek(out, 0, SEEK_SET) == 0 && ftruncate(out, 0) == 0);
    total = 0;
    for (ssize_t r; (r = copy_range(in, NULL, out, NULL, 1 << 20)) > 0;)
        total += (size_t)r;
    CU_ASSERT_EQUAL(total, n);
    CU_ASSERT(pread(out, back, n, 0) == (ssize_t)n && !memcmp(back, data, n));
    free(data);
    free(back);
    close(in);
    close(out);
}

/* A non-blocking socket (the suite's worker channel) and a message larger than its buffer: send_full fails at
 * the first EAGAIN, send_full_wait waits for the reader, and gives up on one that reads nothing. */
static void test_send_wait(void)
{
    enum { BIG = 4 << 20 };
    char *big = calloc(1, BIG);
    em_err err = {0};
    int sv[2];
    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    CU_ASSERT_EQUAL(send_full(sv[0], big, BIG, &err), -1); /* no reader: the buffer fills */
    close(sv[0]);
    close(sv[1]);

    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    double t0 = now_ms();
    CU_ASSERT_EQUAL(send_full_wait(sv[0], big, BIG, 200, &err), -1);
    CU_ASSERT(now_ms() - t0 >= 190);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "read nothing for 200 ms"));
    close(sv[0]);
    close(sv[1]);

    CU_ASSERT_FATAL(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    pid_t pid = fork();
    if (pid == 0) { /* a reader that starts late, then takes it all */
        close(sv[0]);
        free(big); /* the parent's to send; freed here so that valgrind's leak check of the child passes */
        usleep(100000);
        size_t got = 0;
        char b[65536];
        ssize_t r;
        while ((r = read(sv[1], b, sizeof b)) > 0)
            got += (size_t)r;
        _exit(got == BIG ? 0 : 1);
    }
    close(sv[1]);
    CU_ASSERT_EQUAL(send_full_wait(sv[0], big, BIG, 10000, &err), 0);
    close(sv[0]);
    int st = -1;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    free(big);
}

static CU_TestInfo tests[] = {
    {"capped reads: caps, FIFOs, symbolic links", test_read_file},
    {"atomic writes: content, mode, no temp left", test_write_atomic},
    {"paths inside a folder", test_path_inside},
    {"UTF-8: strict decoding and sanitizing", test_utf8},
    {"hex, exit causes, integers, host names", test_small_helpers},
    {"listening: 0600 unix sockets, the stale rule, loopback TCP", test_listen},
    {"newline-delimited JSON: lines, deadlines, caps, garbage, hang-up", test_jsonline},
    {"sending on a non-blocking socket: fail at once, or wait for the reader (bounded)", test_send_wait},
    {"the data directory of a build-tree binary is its checkout", test_data_dir},
    {"copy_range: between file systems (copy_file_range's EXDEV)", test_copy_range},
    {"fallible allocation: an impossible size is an error, not an abort", test_fallible_alloc},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("base", tests);
}

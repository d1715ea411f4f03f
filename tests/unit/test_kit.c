/* The reading kit in envmgr/base: the warning hook, the line scanner. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>

#include "envmgr/base/linebuf.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "helpers/cunit_main.h"

typedef struct seen {
    int calls;
    em_log_level level;
    char msg[EM_WARN_LINE_MAX];
} seen;

static void catch_it(em_log_level level, const char *msg, void *arg)
{
    seen *s = arg;
    s->calls++;
    s->level = level;
    snprintf(s->msg, sizeof s->msg, "%s", msg);
}

/* A sink gets every message with its level and no trailing newline; NULL puts stderr back. */
static void test_warn_hook(void)
{
    seen s = {0};
    em_warn_set(catch_it, &s);
    em_warn("envmgr: %s is %d", "x", 3);
    CU_ASSERT_EQUAL(s.calls, 1);
    CU_ASSERT_EQUAL(s.level, EM_LOG_WARNING);
    CU_ASSERT_STRING_EQUAL(s.msg, "envmgr: x is 3");
    em_info("up in %.1f s\n", 1.25);
    CU_ASSERT_EQUAL(s.level, EM_LOG_INFO);
    CU_ASSERT_STRING_EQUAL(s.msg, "up in 1.2 s"); /* the caller's newline is the sink's to add */
    em_log(EM_LOG_PROGRESS, "\r50%%");
    CU_ASSERT_EQUAL(s.level, EM_LOG_PROGRESS);
    CU_ASSERT_STRING_EQUAL(s.msg, "\r50%");
    em_log(EM_LOG_ERROR, "%s", "");
    CU_ASSERT_EQUAL(s.calls, 4);
    CU_ASSERT_STRING_EQUAL(s.msg, "");
    /* a message past the line cap is cut, not overflowed */
    char *big = xmalloc(3 * EM_WARN_LINE_MAX);
    memset(big, 'a', 3 * EM_WARN_LINE_MAX - 1);
    big[3 * EM_WARN_LINE_MAX - 1] = '\0';
    em_warn("%s", big);
    CU_ASSERT_EQUAL(strlen(s.msg), EM_WARN_LINE_MAX - 1);
    free(big);
    CU_ASSERT_STRING_EQUAL(em_log_level_name(EM_LOG_WARNING), "warning");

    /* the default: stderr, one line each */
    em_warn_set(NULL, NULL);
    fflush(stderr);
    int saved = dup(2);
    char *path = xasprintf("%s/warn.txt", test_tmpdir());
    CU_ASSERT_PTR_NOT_NULL_FATAL(freopen(path, "w", stderr));
    em_warn("first %d", 1);
    em_info("second");
    em_log(EM_LOG_PROGRESS, "\rthird");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CU_ASSERT_EQUAL(s.calls, 5); /* the old sink is not called any more */
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char got[64] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    CU_ASSERT_EQUAL(n, strlen("first 1\nsecond\n\rthird"));
    CU_ASSERT_STRING_EQUAL(got, "first 1\nsecond\n\rthird");
    free(path);
}

/* The next line as a C string (for asserts), or NULL when there is none. */
static char *next_line(linebuf *l, int *got)
{
    const char *line;
    size_t n;
    *got = linebuf_next(l, &line, &n);
    return *got == LINEBUF_LINE ? strndup(line, n) : NULL;
}

static int feed(linebuf *l, int rfd, int wfd, const char *text)
{
    if (write(wfd, text, strlen(text)) != (ssize_t)strlen(text))
        return -1;
    em_err err = {0};
    return (int)linebuf_read(l, rfd, &err);
}

/* A line split across reads comes out whole once its newline is in; many lines from one read come
 * out one by one, and the unread bytes move to the front once, at the next read. */
static void test_linebuf_stream(void)
{
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    linebuf l;
    linebuf_init(&l, 64);
    int got;
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(got, LINEBUF_NONE);
    CU_ASSERT_EQUAL(feed(&l, sv[0], sv[1], "{\"a\":"), 5);
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(feed(&l, sv[0], sv[1], "1}\n{\"b\""), 7);
    char *s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "{\"a\":1}");
    free(s);
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(linebuf_pending(&l), 4);
    CU_ASSERT_EQUAL(feed(&l, sv[0], sv[1], ":2}\n\nthree\nfour\nfi"), 18);
    CU_ASSERT_EQUAL(l.start, 0); /* compacted before that read */
    const char *want[] = {"{\"b\":2}", "", "three", "four"};
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        s = next_line(&l, &got);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        CU_ASSERT_STRING_EQUAL(s, want[i]);
        free(s);
    }
    CU_ASSERT_NOT_EQUAL(l.start, 0); /* taking lines moved no bytes */
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(linebuf_pending(&l), 2);
    /* EOF without a newline: no line, the partial one is still there to see */
    close(sv[1]);
    em_err err = {0};
    CU_ASSERT_EQUAL(linebuf_read(&l, sv[0], &err), 0);
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(got, LINEBUF_NONE);
    CU_ASSERT_EQUAL(linebuf_pending(&l), 2);
    CU_ASSERT_EQUAL(memcmp(linebuf_unread(&l), "fi", 2), 0);
    linebuf_release(&l);
    close(sv[0]);
}

/* A line longer than the cap is refused, whether it arrives at once or byte by byte; exactly the
 * cap is fine. The buffer never grows past one line and one read. */
static void test_linebuf_too_long(void)
{
    int sv[2];
    CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    linebuf l;
    linebuf_init(&l, 8);
    int got;
    CU_ASSERT_EQUAL(feed(&l, sv[0], sv[1], "12345678\n"), 9);
    char *s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "12345678");
    free(s);
    for (int i = 0; i < 9; i++) {
        CU_ASSERT_EQUAL(feed(&l, sv[0], sv[1], "x"), 1);
        CU_ASSERT_PTR_NULL(next_line(&l, &got));
        CU_ASSERT_EQUAL(got, i < 8 ? LINEBUF_NONE : LINEBUF_TOO_LONG);
    }
    em_err err = {0};
    errno = EBADF;
    CU_ASSERT_EQUAL(linebuf_read(&l, sv[0], &err), -1);
    CU_ASSERT_EQUAL(errno, 0); /* the scanner refused, not the read */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "longer than 8 bytes"));
    linebuf_skip(&l, linebuf_pending(&l)); /* a caller may drop it and go on */
    CU_ASSERT_EQUAL(feed(&l, sv[0], sv[1], "ok\n"), 3);
    s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "ok");
    free(s);
    CU_ASSERT(l.cap <= 8 + 1 + (64u << 10));
    linebuf_release(&l);
    close(sv[0]);
    close(sv[1]);
}

/* A text in memory: lines, their offsets, a cut-off last line, a line over the cap. */
static void test_linebuf_text(void)
{
    const char *text = "one\ntwo\n\nthree";
    linebuf l;
    linebuf_init_text(&l, text, strlen(text), 5);
    int got;
    char *s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "one");
    free(s);
    CU_ASSERT_EQUAL(linebuf_offset(&l), 4);
    s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "two");
    free(s);
    s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "");
    free(s);
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(got, LINEBUF_NONE);
    CU_ASSERT_EQUAL(linebuf_pending(&l), 5); /* "three", no newline */
    char *p;
    size_t room;
    em_err err = {0};
    CU_ASSERT_EQUAL(linebuf_room(&l, &p, &room, &err), -1); /* the text is the caller's */
    linebuf_release(&l);
    CU_ASSERT_PTR_NULL(l.buf);
    const char *big = "short\nlonger than five\n";
    linebuf_init_text(&l, big, strlen(big), 5);
    s = next_line(&l, &got);
    CU_ASSERT_STRING_EQUAL(s, "short");
    free(s);
    CU_ASSERT_PTR_NULL(next_line(&l, &got));
    CU_ASSERT_EQUAL(got, LINEBUF_TOO_LONG);
    linebuf_release(&l);
}

static CU_TestInfo tests[] = {
    {"line scanner: split reads, many lines in one read, EOF without a newline", test_linebuf_stream},
    {"line scanner: a line over the cap", test_linebuf_too_long},
    {"line scanner: a text in memory", test_linebuf_text},
    {"the warning hook: levels, routing, the stderr default", test_warn_hook},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("kit", tests);
}

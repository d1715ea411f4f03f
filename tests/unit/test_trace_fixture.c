/* Shared fixture for the trace tests, and the tests of the fixture itself.
 * Other test_trace*.c files define TRACE_FIXTURE_ONLY and #include this file
 * (the Makefile builds each test file alone, so this is how they share code). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "envmgr/base/png.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "helpers/cunit_main.h"
#include "recorder/trace.h"

#define FIXTURE static __attribute__((unused))

#define SCREEN_W 64
#define SCREEN_H 40
#define TASK_SHA "1111111111111111111111111111111111111111111111111111111111111111"
#define IMAGE_SHA "2222222222222222222222222222222222222222222222222222222222222222"

/* A fresh directory path under the test's scratch dir (not created). */
FIXTURE char *fx_path(const char *name)
{
    static int counter;
    return xasprintf("%s/%s-%d", test_tmpdir(), name, ++counter);
}

/* An RGBX framebuffer with a pattern that depends on seed. */
FIXTURE uint8_t *fx_pixels(int seed)
{
    uint8_t *px = xmalloc((size_t)SCREEN_W * SCREEN_H * 4);
    for (int y = 0; y < SCREEN_H; y++)
        for (int x = 0; x < SCREEN_W; x++) {
            uint8_t *p = px + ((size_t)y * SCREEN_W + (size_t)x) * 4;
            p[0] = (uint8_t)(x * 4 + seed * 31);
            p[1] = (uint8_t)(y * 6 + seed * 17);
            p[2] = (uint8_t)((x ^ y) + seed);
            p[3] = 0xff;
        }
    return px;
}

FIXTURE json_t *fx_header_fields(void)
{
    return json_pack("{s:s, s:s, s:s, s:{s:i, s:i}, s:s, s:b, s:s}", "task_id", "demo-task", "task_sha256", TASK_SHA,
                     "image_manifest_sha256", IMAGE_SHA, "screen", "width", SCREEN_W, "height", SCREEN_H, "accel",
                     "tcg", "unsafe_open_network", 0, "agent", "unit-test");
}

/* A writer on dir with fx_header_fields(), or NULL (said on stderr). */
FIXTURE trace_writer *fx_open(const char *dir)
{
    em_err err = {0};
    trace_writer *w = NULL;
    json_t *h = fx_header_fields();
    if (trace_open(dir, h, &w, &err) < 0)
        fprintf(stderr, "trace_open: %s\n", err.msg);
    json_decref(h);
    return w;
}

FIXTURE int fx_add_frame(trace_writer *w, int seed, char sha[65])
{
    em_err err = {0};
    _cleanup_free_ uint8_t *px = fx_pixels(seed);
    int rc = trace_add_frame_rgb(w, px, SCREEN_W, SCREEN_H, SCREEN_W * 4, sha, &err);
    if (rc < 0)
        fprintf(stderr, "add frame: %s\n", err.msg);
    return rc;
}

FIXTURE int fx_append(trace_writer *w, json_t *line)
{
    em_err err = {0};
    int rc = trace_append(w, line, &err);
    if (rc < 0)
        fprintf(stderr, "append: %s\n", err.msg);
    json_decref(line);
    return rc;
}

/* Lines: header, 2 setups, nsteps steps, 1 egress, evaluation (if with_eval), trailer (if close).
 * Step i goes from frame seed i to frame seed i+1, so frames repeat across steps. */
FIXTURE trace_writer *fx_write_open(const char *dir, int nsteps, bool with_eval)
{
    em_err err = {0};
    trace_writer *w;
    json_t *h = fx_header_fields();
    int rc = trace_open(dir, h, &w, &err);
    json_decref(h);
    if (rc < 0) {
        fprintf(stderr, "trace_open: %s\n", err.msg);
        return NULL;
    }
    for (int i = 0; i < 2; i++)
        if (fx_append(w, json_pack("{s:s, s:{s:s, s:{s:[s]}}, s:f, s:b}", "type", "setup", "step", "type", "launch",
                                   "parameters", "command", "xterm", "duration_ms", 12.5 + i, "ok", 1)) < 0)
            goto fail;
    char before[65], after[65];
    if (nsteps > 0 && fx_add_frame(w, 0, before) < 0)
        goto fail;
    for (int i = 0; i < nsteps; i++) {
        if (fx_add_frame(w, i + 1, after) < 0)
            goto fail;
        json_t *action = i % 2 ? json_pack("{s:s, s:s}", "action_type", "TYPING", "text", "hello <script>alert(1)</script>")
                               : json_pack("{s:s, s:i, s:i}", "action_type", "CLICK", "x", 10 + i, "y", 20);
        if (fx_append(w, json_pack("{s:s, s:o, s:s, s:f, s:f, s:s, s:s}", "type", "step", "action", action, "source",
                                   "computer_13", "agent_ms", 100.0 + i, "action_ms", 5.0, "frame_before", before,
                                   "frame_after", after)) < 0)
            goto fail;
        memcpy(before, after, sizeof before);
    }
    if (fx_append(w, json_pack("{s:s, s:s, s:s}", "type", "egress", "host", "example.org", "verdict", "denied")) < 0)
        goto fail;
    if (with_eval &&
        fx_append(w, json_pack("{s:s, s:f, s:s, s:{}, s:s}", "type", "evaluation", "score", 1.0, "reason",
                               "file matches", "artifacts", "exit_cause", "done")) < 0)
        goto fail;
    return w;
fail:
    trace_abandon(w);
    return NULL;
}

FIXTURE int fx_close(trace_writer *w)
{
    em_err err = {0};
    if (trace_close(w, &err) < 0) {
        fprintf(stderr, "trace_close: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* A complete trace; 0 on success. */
FIXTURE int fx_write_trace(const char *dir, int nsteps)
{
    trace_writer *w = fx_write_open(dir, nsteps, true);
    return w ? fx_close(w) : -1;
}

/* A complete trace with 2 steps, then 2 postconfig lines as an episode writes them (OSWorld's
 * shape: a pkill that found nothing, tolerated, with hostile output; a sleep), then the evaluation. */
FIXTURE int fx_write_postconfig_trace(const char *dir)
{
    trace_writer *w = fx_write_open(dir, 2, false);
    if (!w)
        return -1;
    if (fx_append(w, json_pack("{s:s, s:{s:s, s:{s:[s, s]}}, s:f, s:b, s:s, s:{s:i, s:s}}", "type", "postconfig",
                               "step", "type", "execute", "parameters", "command", "pkill", "vlc", "duration_ms",
                               40.0, "ok", 1, "tolerated", "exit status 1 <b>\x1b[2J", "detail", "exit_code", 1,
                               "stderr", "none")) < 0 ||
        fx_append(w, json_pack("{s:s, s:{s:s, s:{s:i}}, s:f, s:b}", "type", "postconfig", "step", "type", "sleep",
                               "parameters", "seconds", 1, "duration_ms", 1000.0, "ok", 1)) < 0 ||
        fx_append(w, json_pack("{s:s, s:f, s:s, s:{}, s:s}", "type", "evaluation", "score", 1.0, "reason",
                               "config matches", "artifacts", "exit_cause", "done")) < 0) {
        trace_abandon(w);
        return -1;
    }
    return fx_close(w);
}

FIXTURE char *fx_read(const char *dir, const char *name, size_t *len)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    char *data = NULL;
    em_err err = {0};
    if (read_file_capped(path, (size_t)1 << 30, &data, len, &err) < 0)
        return NULL;
    return data;
}

FIXTURE int fx_write(const char *dir, const char *name, const char *data, size_t len)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    em_err err = {0};
    mkdir_p(dir, 0755, &err);
    return write_file_atomic(path, data, len, 0644, &err);
}

/* Offset of line k (1-based) in data, or -1. */
FIXTURE long fx_line_offset(const char *data, int k)
{
    const char *p = data;
    for (int i = 1; i < k; i++) {
        p = strchr(p, '\n');
        if (!p)
            return -1;
        p++;
    }
    return *p ? p - data : -1;
}

FIXTURE int fx_count_lines(const char *data)
{
    int n = 0;
    for (const char *p = data; *p; p++)
        n += *p == '\n';
    return n;
}

FIXTURE int fx_count_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Build a trace.jsonl from JSON texts (no "prev"), chaining them like the
 * writer does, so hand-made lines get past the hash checks. With trailer, a
 * correct trailer (no HMAC) is added. Lines that are not JSON are copied as they are. */
FIXTURE int fx_write_chained(const char *dir, const char *const *lines, int n, bool trailer)
{
    char prev[65] = "0000000000000000000000000000000000000000000000000000000000000000";
    size_t cap = 1 << 16, len = 0;
    char *out = xmalloc(cap);
    for (int i = 0; i <= n; i++) {
        char *s;
        if (i < n) {
            json_t *j = json_loads(lines[i], JSON_REJECT_DUPLICATES, NULL);
            if (j && json_is_object(j)) {
                json_object_set_new(j, "prev", json_string(prev));
                s = json_dumps(j, JSON_COMPACT);
            } else {
                s = xstrdup(lines[i]);
            }
            json_decref(j);
        } else if (trailer) {
            char sum[65];
            sha256_hex(out, len, sum);
            s = xasprintf("{\"type\":\"trailer\",\"lines\":%d,\"sha256\":\"%s\",\"complete\":true,\"prev\":\"%s\"}", n,
                          sum, prev);
        } else {
            break;
        }
        size_t sl = strlen(s);
        if (len + sl + 2 > cap) {
            while (len + sl + 2 > cap)
                cap *= 2;
            out = xrealloc(out, cap);
        }
        memcpy(out + len, s, sl);
        sha256_hex(s, sl, prev);
        len += sl;
        out[len++] = '\n';
        free(s);
    }
    em_err err = {0};
    _cleanup_free_ char *frames = xasprintf("%s/frames", dir);
    mkdir_p(frames, 0755, &err);
    int rc = fx_write(dir, "trace.jsonl", out, len);
    free(out);
    return rc;
}

/* A valid header line as JSON text (for fx_write_chained): of format 1 (the first envmgr's, still
 * read), and of format 2 (postconfig lines). */
#define FX_HEADER_FORMAT(f)                                                                                          \
    "{\"type\":\"header\",\"format\":" f ",\"envmgr_version\":\"0.1.0\",\"task_id\":\"t\",\"task_sha256\":\"" TASK_SHA \
    "\",\"image_manifest_sha256\":\"" IMAGE_SHA "\",\"screen\":{\"width\":64,\"height\":40},\"accel\":\"kvm\","     \
    "\"started\":\"2024-05-01T12:00:00.000Z\",\"unsafe_open_network\":false}"
#define FX_HEADER FX_HEADER_FORMAT("1")
#define FX_HEADER2 FX_HEADER_FORMAT("2")

FIXTURE bool fx_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle)) {
        fprintf(stderr, "\n    expected \"%s\" in: %s\n", needle, haystack);
        return false;
    }
    return true;
}

#ifndef TRACE_FIXTURE_ONLY

static void test_fixture_trace_reads_and_verifies(void)
{
    _cleanup_free_ char *dir = fx_path("fixture");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    em_err err = {0};
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    CU_ASSERT(trace_complete(t));
    CU_ASSERT_EQUAL(trace_n_steps(t), 3);
    CU_ASSERT_EQUAL(trace_n_setups(t), 2);
    CU_ASSERT_EQUAL(trace_n_lines(t), 1 + 2 + 3 + 1 + 1 + 1);
    trace_free(t);
    json_t *report;
    CU_ASSERT(trace_verify(dir, &report, &err) == 0);
    if (err.msg[0])
        fprintf(stderr, "%s\n", err.msg);
    json_decref(report);
}

/* The same framebuffer twice is one file; four distinct frames are four. */
static void test_frames_dedup(void)
{
    _cleanup_free_ char *dir = fx_path("dedup");
    em_err err = {0};
    trace_writer *w;
    json_t *h = fx_header_fields();
    CU_ASSERT_FATAL(trace_open(dir, h, &w, &err) == 0);
    json_decref(h);
    char a[65], b[65], c[65];
    CU_ASSERT(fx_add_frame(w, 7, a) == 0);
    CU_ASSERT(fx_add_frame(w, 7, b) == 0);
    CU_ASSERT(fx_add_frame(w, 8, c) == 0);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT(strcmp(a, c) != 0);
    _cleanup_free_ char *frames = xasprintf("%s/frames", dir);
    CU_ASSERT_EQUAL(fx_count_files(frames), 2);
    trace_abandon(w);

    /* Through a whole trace: 4 steps chain 5 distinct frames. */
    _cleanup_free_ char *dir2 = fx_path("dedup-trace");
    CU_ASSERT_FATAL(fx_write_trace(dir2, 4) == 0);
    _cleanup_free_ char *frames2 = xasprintf("%s/frames", dir2);
    CU_ASSERT_EQUAL(fx_count_files(frames2), 5);
}

/* Frames are real PNGs: libpng decodes them back to the pixels, and the name is the file's sha256. */
static void test_frame_is_real_png(void)
{
    _cleanup_free_ char *dir = fx_path("png");
    em_err err = {0};
    trace_writer *w;
    json_t *h = fx_header_fields();
    CU_ASSERT_FATAL(trace_open(dir, h, &w, &err) == 0);
    json_decref(h);
    char sha[65];
    CU_ASSERT_FATAL(fx_add_frame(w, 3, sha) == 0);
    _cleanup_free_ char *path = xasprintf("%s/frames/%s.png", dir, sha);
    char got[65];
    CU_ASSERT(sha256_file_hex(path, got, &err) == 0);
    CU_ASSERT_STRING_EQUAL(got, sha);
    _cleanup_free_ uint8_t *px = NULL;
    int pw, ph;
    CU_ASSERT_FATAL(png_decode_file(path, &px, &pw, &ph, &err) == 0);
    CU_ASSERT(pw == SCREEN_W && ph == SCREEN_H);
    _cleanup_free_ uint8_t *want = fx_pixels(3);
    bool same = true;
    for (size_t i = 0; i < (size_t)pw * (size_t)ph; i++)
        same &= memcmp(px + i * 4, want + i * 4, 3) == 0;
    CU_ASSERT(same);

    /* The same PNG through trace_add_frame_file keeps its name; other bytes are refused. */
    char sha2[65];
    CU_ASSERT(trace_add_frame_file(w, path, sha2, &err) == 0);
    CU_ASSERT_STRING_EQUAL(sha2, sha);
    CU_ASSERT(fx_write(dir, "not.png", "hello", 5) == 0);
    _cleanup_free_ char *bad = xasprintf("%s/not.png", dir);
    CU_ASSERT(trace_add_frame_file(w, bad, sha2, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "is not a PNG file"));
    /* A bad framebuffer is refused before libpng sees it. */
    CU_ASSERT(trace_add_frame_rgb(w, px, SCREEN_W, SCREEN_H, SCREEN_W * 3, sha2, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "bad framebuffer"));
    trace_abandon(w);
}

/* fx_write_chained's output is what the writer would write: it reads and verifies. */
static void test_chained_helper(void)
{
    _cleanup_free_ char *dir = fx_path("chained");
    const char *lines[] = {FX_HEADER, "{\"type\":\"egress\",\"host\":\"a\"}"};
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 2, true) == 0);
    em_err err = {0};
    json_t *report;
    CU_ASSERT(trace_verify(dir, &report, &err) == 0);
    if (err.msg[0])
        fprintf(stderr, "%s\n", err.msg);
    json_decref(report);
}

static CU_TestInfo tests[] = {
    {"fixture trace reads and verifies", test_fixture_trace_reads_and_verifies},
    {"frames dedup", test_frames_dedup},
    {"frames are real PNGs", test_frame_is_real_png},
    {"chained helper", test_chained_helper},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("ENVMGR_TRACE_KEY");
    return run_suite("trace_fixture", tests);
}

#endif

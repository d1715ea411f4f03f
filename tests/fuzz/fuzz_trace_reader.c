/* libFuzzer target: the input is a trace.jsonl. It is read, verified (with
 * and without an HMAC key), shown and exported to HTML, in a trace directory
 * whose frames/ holds one real frame, so inputs that name it get past the
 * frame checks and reach the exporter.
 *
 * A mutated line almost never keeps its place in the hash chain, so the
 * input is run a second time re-chained: every line that is a JSON object
 * gets the right "prev", and a trailer the right sha256 and HMAC (key
 * "fuzz"). That second run reaches the trailer, HMAC and frame checks.
 *
 * The seeds in tests/fuzz/corpus/fuzz_trace_reader/ name that frame; they
 * come from the real writer (see the comment at the end of this file). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "recorder/trace.h"

static char root[64];
static char *tdir, *out_dir, *trace_path;

/* The one frame: 2x2 mid-grey, PNG level 1, as the writer encodes it. */
static void make_frame(void)
{
    uint8_t px[2 * 2 * 4];
    memset(px, 0x80, sizeof px);
    em_err err = {0};
    char sha[65];
    /* Stored the way the writer stores frames: through a writer. */
    json_t *h = json_pack("{s:s, s:s, s:s, s:{s:i, s:i}, s:s, s:b}", "task_id", "fuzz", "task_sha256",
                          "1111111111111111111111111111111111111111111111111111111111111111", "image_manifest_sha256",
                          "2222222222222222222222222222222222222222222222222222222222222222", "screen", "width", 2,
                          "height", 2, "accel", "tcg", "unsafe_open_network", 0);
    trace_writer *w;
    if (trace_open(tdir, h, &w, &err) < 0 || trace_add_frame_rgb(w, px, 2, 2, 8, sha, &err) < 0) {
        fprintf(stderr, "fuzz setup: %s\n", err.msg);
        abort();
    }
    trace_abandon(w);
    json_decref(h);
}

static void cleanup(void)
{
    if (root[0])
        remove_tree(root, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* tmpfs when there is one: the exporter fsyncs what it writes. */
    snprintf(root, sizeof root, "%s/fuzz-trace-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(root))
        abort();
    atexit(cleanup);
    tdir = xasprintf("%s/trace", root);
    out_dir = xasprintf("%s/out", root);
    trace_path = xasprintf("%s/trace.jsonl", tdir);
    unsetenv("ENVMGR_TRACE_KEY");
    make_frame();
    return 0;
}

/* The input with every JSON-object line's "prev" (and a trailer's sha256
 * and hmac_sha256) made right; lines that are not objects are kept as they are. */
static char *rechain(const uint8_t *data, size_t size, size_t *out_len)
{
    char prev[65] = "0000000000000000000000000000000000000000000000000000000000000000";
    size_t cap = size * 2 + 1024, len = 0;
    char *out = xmalloc(cap);
    size_t off = 0;
    while (off < size) {
        const uint8_t *nl = memchr(data + off, '\n', size - off);
        size_t n = nl ? (size_t)(nl - (data + off)) : size - off;
        json_t *j = json_loadb((const char *)data + off, n, JSON_REJECT_DUPLICATES, NULL);
        char *line = NULL;
        if (json_is_object(j)) {
            json_object_set_new(j, "prev", json_string(prev));
            if (json_is_string(json_object_get(j, "type")) &&
                !strcmp(json_string_value(json_object_get(j, "type")), "trailer")) {
                char sum[65], mac[65];
                sha256_hex(out, len, sum);
                json_object_set_new(j, "sha256", json_string(sum));
                if (json_object_get(j, "hmac_sha256") && hmac_sha256_hex("fuzz", 4, out, len, mac, NULL) == 0)
                    json_object_set_new(j, "hmac_sha256", json_string(mac));
            }
            line = json_dumps(j, JSON_COMPACT);
        }
        json_decref(j);
        const char *src = line ? line : (const char *)data + off;
        size_t sl = line ? strlen(line) : n;
        if (len + sl + 1 > cap) {
            cap = (len + sl + 1) * 2;
            out = xrealloc(out, cap);
        }
        memcpy(out + len, src, sl);
        sha256_hex(out + len, sl, prev);
        len += sl;
        if (nl)
            out[len++] = '\n';
        free(line);
        off += n + (nl ? 1 : 0);
    }
    *out_len = len;
    return out;
}

static void run_one(const uint8_t *data, size_t size)
{
    FILE *f = fopen(trace_path, "w");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);

    em_err err = {0};
    trace *t = NULL;
    if (trace_read(tdir, &t, &err) == 0) {
        /* Touch what the accessors hand out. */
        for (size_t i = 0; i < trace_n_steps(t); i++) {
            char *s = trace_action_summary(json_object_get(trace_step(t, i), "action"), 40);
            free(s);
        }
        trace_free(t);
    }
    json_t *report = NULL;
    if (trace_verify(tdir, &report, &err) == 0)
        json_decref(report);
    setenv("ENVMGR_TRACE_KEY", "fuzz", 1);
    report = NULL;
    if (trace_verify(tdir, &report, &err) == 0)
        json_decref(report);
    unsetenv("ENVMGR_TRACE_KEY");

    FILE *null = fopen("/dev/null", "w");
    if (null) {
        trace_show(tdir, null, &err);
        fclose(null);
    }
    trace_export_html(tdir, out_dir, &err);
    remove_tree(out_dir, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_one(data, size);
    size_t len;
    char *chained = rechain(data, size, &len);
    if (len != size || memcmp(chained, data, len))
        run_one((const uint8_t *)chained, len);
    free(chained);
    return 0;
}

/* Seeds: written by the real writer with the frame above, e.g.
 *   ENVMGR_TRACE_KEY=fuzz  -> complete-hmac
 *   (unset)                -> complete, incomplete (abandoned), header-only
 * plus hand-made edge cases (a cut-off line, a line after the trailer; complete-postconfig: the
 * complete one in format 2 with postconfig lines after its steps, chained by hand) and
 * every crashing input found, kept as crash-* files. */

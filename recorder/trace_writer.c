/* Writing a trace: one line per event, each chained to the one before by its
 * sha256, each written with a single write() and fsync'd, so whatever
 * happens to the process the file holds whole lines only. A running sha256
 * (and HMAC, with a key) over every byte saves re-reading the file at close. */
#include <errno.h>
#include <fcntl.h>
#include <gcrypt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/base/png.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/util.h"
#include "frames.h"
#include "trace.h"
#include "trace_format.h"
#include "envmgr/base/fileio.h"

#ifndef ENVMGR_VERSION
#define ENVMGR_VERSION "unknown"
#endif

/* Room kept for the trailer when checking the file-size limit. */
#define TRAILER_RESERVE 1024

struct trace_writer {
    char *dir;
    int fd;
    bool failed;               /* a write went wrong: no more lines, no trailer */
    char prev[SHA256_HEX_LEN + 1]; /* sha256 of the last line written */
    gcry_md_hd_t sha;          /* over every byte written */
    gcry_md_hd_t hmac;         /* the same, keyed; NULL without ENVMGR_TRACE_KEY */
    size_t bytes;
    trace_schema schema;
    double started;            /* wall_time() at trace_open, for step "t" */
};

static void writer_free(trace_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->sha)
        gcry_md_close(w->sha);
    if (w->hmac)
        gcry_md_close(w->hmac);
    free(w->dir);
    free(w);
}

const char *trace_writer_dir(const trace_writer *w)
{
    return w->dir;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd); /* best effort: makes the new file's name durable */
        close(fd);
    }
}

/* Serialise, check the limits, write "line\n" in one write() and fsync. The
 * schema state is only advanced by the caller once this succeeded. */
static int emit(trace_writer *w, json_t *obj, bool is_trailer, em_err *err)
{
    _cleanup_free_ char *s = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!s)
        return em_fail(err, "trace: cannot serialise a line");
    size_t n = strlen(s);
    if (n > TRACE_MAX_LINE)
        return em_fail_input(err, "trace: a %s line of %zu bytes is longer than the limit of %zu",
                             json_string_value(json_object_get(obj, "type")), n, TRACE_MAX_LINE);
    size_t reserve = is_trailer ? 0 : TRAILER_RESERVE;
    if (w->bytes + n + 1 + reserve > TRACE_MAX_BYTES)
        return em_fail_input(err, "trace: the trace would grow past the limit of %zu bytes", TRACE_MAX_BYTES);
    if (!is_trailer && w->schema.lines + 2 > TRACE_MAX_LINES)
        return em_fail_input(err, "trace: the trace would grow past the limit of %d lines", TRACE_MAX_LINES);
    s[n] = '\n'; /* json_dumps never emits a newline: compact output escapes them in strings */
    int rc = write_full(w->fd, s, n + 1, err);
    if (rc == 0 && fdatasync(w->fd) < 0)
        rc = em_fail_errno(err, "fsync");
    if (rc < 0) {
        w->failed = true;
        /* Take back a partly written line so the file still ends on a newline. */
        if (ftruncate(w->fd, (off_t)w->bytes) < 0) {
            /* nothing more to do: the reader reports the cut-off line */
        }
        return em_prefix(err, "trace: write `%s/" TRACE_FILE "`: ", w->dir);
    }
    gcry_md_write(w->sha, s, n + 1);
    if (w->hmac)
        gcry_md_write(w->hmac, s, n + 1);
    sha256_hex(s, n, w->prev);
    w->bytes += n + 1;
    return 0;
}

/* Check obj as the next line (on a copy of the schema state): the format,
 * then that the frames a step names are stored. */
static int check_line(trace_writer *w, json_t *obj, trace_schema *next, trace_line_type *type, em_err *err)
{
    *next = w->schema;
    if (trace_schema_check(next, obj, type, err) < 0)
        return em_prefix(err, "trace: refusing to write: ");
    if (*type != TL_STEP)
        return 0;
    static const char *const fields[] = {"frame_before", "frame_after"};
    for (size_t f = 0; f < ARRAY_LEN(fields); f++) {
        const char *sha = json_string_value(json_object_get(obj, fields[f]));
        if (sha && !frames_exist(w->dir, sha))
            return em_fail_input(err, "trace: refusing to write: step.%s %s is not in `%s/" TRACE_FRAMES_DIR "`: "
                                      "add it with trace_add_frame_rgb or trace_add_frame_file first",
                                 fields[f], sha, w->dir);
    }
    const char *tree = json_string_value(json_object_get(obj, "a11y_tree"));
    if (tree && !blob_exist(w->dir, &BLOB_A11Y, tree))
        return em_fail_input(err, "trace: refusing to write: step.a11y_tree %s is not in `%s/" TRACE_A11Y_DIR "`: "
                                  "add it with trace_add_a11y first", tree, w->dir);
    return 0;
}

static int check_and_emit(trace_writer *w, json_t *obj, em_err *err)
{
    trace_schema next;
    trace_line_type type;
    if (check_line(w, obj, &next, &type, err) < 0 || emit(w, obj, type == TL_TRAILER, err) < 0)
        return -1;
    w->schema = next;
    return 0;
}

static const char *const header_reserved[] = {"type", "format", "envmgr_version", "started", "prev"};

/* The header line: the writer's fields, then the caller's, "prev" last. */
static json_t *build_header(json_t *fields, em_err *err)
{
    if (fields && !json_is_object(fields)) {
        em_fail_input(err, "trace: header fields must be a JSON object");
        return NULL;
    }
    char started[32];
    iso8601_now(started, sizeof started);
    json_t *h = json_object();
    json_object_set_new(h, "type", json_string("header"));
    json_object_set_new(h, "format", json_integer(TRACE_FORMAT));
    json_object_set_new(h, "envmgr_version", json_string(ENVMGR_VERSION));
    json_object_set_new(h, "started", json_string(started));
    const char *name;
    json_t *v;
    if (fields)
        json_object_foreach(fields, name, v) {
            for (size_t i = 0; i < ARRAY_LEN(header_reserved); i++)
                if (!strcmp(name, header_reserved[i])) {
                    json_decref(h);
                    em_fail_input(err, "trace: header field `%s` is set by the writer", name);
                    return NULL;
                }
            json_object_set(h, name, v);
        }
    json_object_set_new(h, "prev", json_string(TRACE_ZERO_HASH));
    trace_schema probe = {0};
    if (trace_schema_check(&probe, h, NULL, err) < 0) {
        json_decref(h);
        em_prefix(err, "trace: bad header fields: ");
        return NULL;
    }
    return h;
}

/* The digests, keyed by ENVMGR_TRACE_KEY as it is now. */
static int open_digests(trace_writer *w, em_err *err)
{
    char *key;
    size_t key_len;
    int has_key = trace_key_from_env(&key, &key_len, err);
    if (has_key < 0)
        return em_prefix(err, "trace: ");
    crypto_init();
    int rc = 0;
    if (gcry_md_open(&w->sha, GCRY_MD_SHA256, 0))
        rc = em_fail(err, "trace: cannot open a sha256 digest");
    else if (has_key && (gcry_md_open(&w->hmac, GCRY_MD_SHA256, GCRY_MD_FLAG_HMAC) ||
                         gcry_md_setkey(w->hmac, key, key_len)))
        rc = em_fail(err, "trace: cannot set up the HMAC");
    trace_key_free(key, key_len);
    return rc;
}

/* dir, dir/frames and a new dir/trace.jsonl (never an existing one). */
static int create_files(trace_writer *w, em_err *err)
{
    if (mkdir_p(w->dir, 0755, err) < 0)
        return em_prefix(err, "trace: ");
    _cleanup_free_ char *frames = xasprintf("%s/" TRACE_FRAMES_DIR, w->dir);
    if (mkdir(frames, 0755) < 0 && errno != EEXIST)
        return em_fail_errno(err, "trace: mkdir `%s`", frames);
    _cleanup_free_ char *path = xasprintf("%s/" TRACE_FILE, w->dir);
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (w->fd < 0 && errno == EEXIST)
        return em_fail_input(err, "trace: `%s` already holds a trace; refusing to overwrite it", w->dir);
    if (w->fd < 0)
        return em_fail_errno(err, "trace: create `%s`", path);
    return 0;
}

int trace_open(const char *dir, json_t *header_fields, trace_writer **out, em_err *err)
{
    *out = NULL;
    json_t *h = build_header(header_fields, err);
    if (!h)
        return -1;
    trace_writer *w = xcalloc(1, sizeof *w);
    w->fd = -1;
    w->dir = xstrdup(dir);
    w->started = wall_time();
    int rc = open_digests(w, err);
    if (rc == 0)
        rc = create_files(w, err);
    if (rc == 0 && (rc = check_and_emit(w, h, err)) < 0) {
        _cleanup_free_ char *path = xasprintf("%s/" TRACE_FILE, dir);
        unlink(path); /* a trace without a header is no trace */
    }
    json_decref(h);
    if (rc < 0) {
        writer_free(w);
        return -1;
    }
    fsync_dir(dir);
    *out = w;
    return 0;
}

int trace_add_frame_rgb(trace_writer *w, const uint8_t *rgbx, int width, int height, int stride,
                        char out_sha[65], em_err *err)
{
    if (!rgbx || width <= 0 || height <= 0 || width > 16384 || height > 16384 || stride < width * 4)
        return em_fail_input(err, "trace: frame: bad framebuffer (%dx%d, stride %d)", width, height, stride);
    png_buf png = {0};
    if (png_encode_rgbx(rgbx, width, height, (size_t)stride, 1, &png, err) < 0) {
        png_buf_free(&png);
        return em_prefix(err, "trace: frame: ");
    }
    int rc = frames_store_png(w->dir, png.data, png.len, out_sha, err);
    png_buf_free(&png);
    return rc < 0 ? em_prefix(err, "trace: ") : 0;
}

int trace_add_frame_file(trace_writer *w, const char *png_path, char out_sha[65], em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (read_file_flags(png_path, TRACE_MAX_FRAME_BYTES, 0, &data, &len, err) < 0)
        return em_prefix(err, "trace: frame: ");
    if (!png_signature_ok(data, len))
        return em_fail_input(err, "trace: frame: `%s` is not a PNG file", png_path);
    return frames_store_png(w->dir, data, len, out_sha, err) < 0 ? em_prefix(err, "trace: ") : 0;
}

int trace_add_a11y(trace_writer *w, const char *xml, size_t len, char out_sha[65], em_err *err)
{
    return blob_store(w->dir, &BLOB_A11Y, xml, len, out_sha, err) < 0 ? em_prefix(err, "trace: ") : 0;
}

static const char *const append_types[] = {"setup", "step", "postconfig", "egress", "evaluation"};

int trace_append(trace_writer *w, json_t *line, em_err *err)
{
    if (w->failed)
        return em_fail(err, "trace: `%s`: an earlier write failed; no more lines", w->dir);
    if (!json_is_object(line))
        return em_fail_input(err, "trace: a line must be a JSON object");
    const char *type = json_string_value(json_object_get(line, "type"));
    size_t i;
    for (i = 0; type && i < ARRAY_LEN(append_types); i++)
        if (!strcmp(type, append_types[i]))
            break;
    if (!type || i == ARRAY_LEN(append_types))
        return em_fail_input(err, "trace: a line's \"type\" must be setup, step, postconfig, egress or evaluation");
    if (json_object_get(line, "prev"))
        return em_fail_input(err, "trace: a %s line must not carry \"prev\" (the writer sets it)", type);

    /* "type" and "index" first for people reading the file, then the
     * caller's fields, then what the writer fills in, "prev" last. */
    bool step = !strcmp(type, "step"), setup = !strcmp(type, "setup"), post = !strcmp(type, "postconfig");
    json_t *obj = json_object();
    json_object_set_new(obj, "type", json_string(type));
    if (step || setup || post)
        json_object_set_new(obj, "index", json_integer((json_int_t)(step ? w->schema.steps
                                                                    : post ? w->schema.postconfig
                                                                           : w->schema.setups)));
    json_object_update(obj, line); /* a caller's "index" replaces ours in place: the schema checks it */
    if (step && !json_object_get(obj, "t")) {
        double t = round((wall_time() - w->started) * 1000) / 1000;
        json_object_set_new(obj, "t", json_real(t > 0 ? t : 0));
    }
    json_object_set_new(obj, "prev", json_string(w->prev));

    int rc = check_and_emit(w, obj, err);
    json_decref(obj);
    return rc;
}

static void hex(const unsigned char *d, char out[SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[SHA256_HEX_LEN] = '\0';
}

int trace_close(trace_writer *w, em_err *err)
{
    if (w->failed) {
        em_fail(err, "trace: `%s`: not closed because an earlier write failed; the trace stays incomplete", w->dir);
        writer_free(w);
        return -1;
    }
    char sum[SHA256_HEX_LEN + 1], mac[SHA256_HEX_LEN + 1];
    json_t *t = json_object();
    json_object_set_new(t, "type", json_string("trailer"));
    json_object_set_new(t, "lines", json_integer(w->schema.lines));
    hex(gcry_md_read(w->sha, GCRY_MD_SHA256), sum);
    json_object_set_new(t, "sha256", json_string(sum));
    if (w->hmac) {
        hex(gcry_md_read(w->hmac, GCRY_MD_SHA256), mac);
        json_object_set_new(t, "hmac_sha256", json_string(mac));
    }
    json_object_set_new(t, "complete", json_true());
    json_object_set_new(t, "prev", json_string(w->prev));
    int rc = check_and_emit(w, t, err);
    json_decref(t);
    if (rc == 0 && fsync(w->fd) < 0)
        rc = em_fail_errno(err, "trace: fsync `%s/" TRACE_FILE "`", w->dir);
    if (rc == 0)
        fsync_dir(w->dir);
    writer_free(w);
    return rc;
}

void trace_abandon(trace_writer *w)
{
    writer_free(w);
}

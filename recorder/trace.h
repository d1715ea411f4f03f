/* Episode traces: a directory holding `trace.jsonl` (one JSON object a line,
 * each chained to the previous line by its sha256) and `frames/<sha256>.png`
 * (content-addressed screenshots, so identical frames are stored once).
 * docs/trace-format.md is the specification; this header is the API.
 *
 * Every call that can fail takes an em_err and returns -1 with a message that
 * names the file and, for trace.jsonl, the 1-based line number. Traces read
 * from disk are untrusted: sizes are capped, every field is type-checked and
 * frame names must be 64 lowercase hex digits before they touch a path. */
#ifndef ENVMGR_RECORDER_TRACE_H
#define ENVMGR_RECORDER_TRACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "envmgr/base/err.h"

/* The format written; a reader takes TRACE_FORMAT_OLDEST up to it. 2 added postconfig lines. */
#define TRACE_FORMAT 2
#define TRACE_FORMAT_OLDEST 1
#define TRACE_FILE "trace.jsonl"
#define TRACE_FRAMES_DIR "frames"
#define TRACE_A11Y_DIR "a11y" /* accessibility trees of a11y_tree observations, <sha256>.xml */
/* The HMAC key: any bytes, 1 to TRACE_KEY_MAX of them. */
#define TRACE_KEY_ENV "ENVMGR_TRACE_KEY"
#define TRACE_KEY_MAX 4096

/* Limits for reading (the writer refuses to exceed them, so whatever it writes can be read back). */
#define TRACE_MAX_BYTES ((size_t)256 << 20) /* trace.jsonl */
#define TRACE_MAX_LINE ((size_t)1 << 20)    /* one line, without its newline */
#define TRACE_MAX_LINES 100000              /* header and trailer included */
#define TRACE_TASK_TEXT_MAX ((size_t)256 << 10) /* the task file carried in the header (replay's task) */
#define TRACE_MAX_FRAME_BYTES ((size_t)64 << 20)
#define TRACE_MAX_A11Y_BYTES ((size_t)16 << 20)

/* ---- writing ------------------------------------------------------------ */

typedef struct trace_writer trace_writer;

/* Create `dir` (0755, parents too) and dir/frames, and write the header line.
 * header_fields is borrowed and must hold task_id, task_sha256,
 * image_manifest_sha256, screen {width, height}, accel ("tcg"|"kvm") and
 * unsafe_open_network; any other fields are copied into the header as they
 * are. type, format, envmgr_version, started and prev are set here.
 * Refuses a dir that already holds a trace.jsonl. Reads ENVMGR_TRACE_KEY now:
 * the trailer's HMAC uses the key as it was when the trace was opened. */
int trace_open(const char *dir, json_t *header_fields, trace_writer **out, em_err *err);

/* Encode a 4-bytes-a-pixel RGBX framebuffer as PNG (compression level 1) and
 * store it as frames/<sha256 of the PNG bytes>.png unless it is already there.
 * out_sha receives the name to put in a step line's frame_before/frame_after. */
int trace_add_frame_rgb(trace_writer *w, const uint8_t *rgbx, int width, int height, int stride,
                        char out_sha[65], em_err *err);
/* Copy an existing PNG file in (content-addressed the same way). */
int trace_add_frame_file(trace_writer *w, const char *png_path, char out_sha[65], em_err *err);
/* An accessibility tree (OSWorld's XML, as observed) into dir/a11y/<sha256>.xml, content-addressed
 * like frames; a step names it in `a11y_tree`. At most TRACE_MAX_A11Y_BYTES. */
int trace_add_a11y(trace_writer *w, const char *xml, size_t len, char out_sha[65], em_err *err);

/* Append one line: a "setup", "step", "postconfig", "egress" or "evaluation"
 * object (borrowed; must not carry "prev"). The writer adds "prev", fills in a
 * missing "index" (setup, step, postconfig) and "t" (step: wall seconds since
 * trace_open), checks the line against the format (a step's frames must have
 * been added already) and writes it with one write() followed by fsync, so a
 * crash leaves every earlier line readable. After a failed write the writer
 * refuses further lines. */
int trace_append(trace_writer *w, json_t *line, em_err *err);

/* Write the trailer (sha256 of every byte before it; HMAC-SHA256 too when
 * ENVMGR_TRACE_KEY was set at trace_open) and free the writer, also on failure. */
int trace_close(trace_writer *w, em_err *err);
/* Free the writer without a trailer: the trace stays readable, marked incomplete. */
void trace_abandon(trace_writer *w);
/* Where the writer writes (borrowed). */
const char *trace_writer_dir(const trace_writer *w);

/* ---- reading ------------------------------------------------------------ */

typedef struct trace trace;

/* Parse dir/trace.jsonl with the limits above, checking every line's types,
 * the order of lines and that setup, step and postconfig indices count up from 0.
 * A trace without a trailer is returned with trace_complete() false.
 * Hashes are not checked here: that is trace_verify's job. */
int trace_read(const char *dir, trace **out, em_err *err);
void trace_free(trace *t);

/* Borrowed references, valid until trace_free. Lines keep every field,
 * "type" and "prev" included. */
const char *trace_dir(const trace *t);
json_t *trace_header(const trace *t);
size_t trace_n_setups(const trace *t);
json_t *trace_setup(const trace *t, size_t i);
size_t trace_n_steps(const trace *t);
json_t *trace_step(const trace *t, size_t i);
size_t trace_n_postconfig(const trace *t); /* the task's evaluator.postconfig steps, after the agent's */
json_t *trace_postconfig(const trace *t, size_t i);
size_t trace_n_egress(const trace *t);
json_t *trace_egress(const trace *t, size_t i);
json_t *trace_evaluation(const trace *t); /* NULL when the episode was not evaluated */
json_t *trace_trailer(const trace *t);    /* NULL when incomplete */
bool trace_complete(const trace *t);
size_t trace_n_lines(const trace *t); /* trailer included */

/* ---- checking, showing, exporting --------------------------------------- */

/* Check every prev link, the trailer's line count and sha256, its HMAC when
 * ENVMGR_TRACE_KEY is set, and that every frame a step names exists and
 * hashes to its name. 0 and a report object (new reference) when all holds;
 * -1 and a message naming the first bad line otherwise (*report NULL).
 * A trace with an HMAC cannot be verified without the key; an incomplete
 * trace never verifies. */
int trace_verify(const char *dir, json_t **report, em_err *err);

/* Human summary: task, image, accel, start, setup, agent and postconfig steps, score. */
int trace_show(const char *dir, FILE *out, em_err *err);

/* out_dir/index.html (self-contained: no scripts, no network) with every step
 * drawn on its frame, plus out_dir/frames/<sha256>.png and, for each tree
 * observed, out_dir/a11y/<sha256>.html (the tree as escaped text, under the
 * same policy: never the guest's XML itself). Frames are checked against
 * their names and for the PNG signature while copied. Nothing is written
 * outside out_dir. */
int trace_export_html(const char *dir, const char *out_dir, em_err *err);
/* out_dir/0000.png is the screen before step 0, out_dir/NNNN.png (N >= 1) the
 * screen after step N-1; a step without frame_after leaves a gap. */
int trace_export_frames(const char *dir, const char *out_dir, em_err *err);
/* The episode as an H.264 MP4 at out_file (ffmpeg): each frame from when it appeared to the next,
 * the last one a second; every frame checked (hash, libpng decode within png.h's caps) before
 * ffmpeg reads it. docs/trace-format.md, "Video". */
int trace_export_video(const char *dir, const char *out_file, em_err *err);

/* One-line summary of a computer_13 action ("CLICK left (640, 400)",
 * "TYPING \"hello\""). Control characters come out escaped (\n, \x1b), typed
 * text is cut at max_text bytes. Newly allocated; never NULL. */
char *trace_action_summary(json_t *action, size_t max_text);

#endif

/* envmgr suite export --osworld: a run's episodes as OSWorld's results tree (its lib_run_single:
 * traj.jsonl, step_<n>_<%Y%m%d@%H%M%S%f>.png, result.txt, recording.mp4), built from the traces.
 *
 * An OSWorld step is one action the agent returned (one env.step); an envmgr reply is the same unit
 * (the OSWorld adapter sends one action a reply), and a reply of pyautogui code that became several
 * input events is several trace step lines, of which the first carries the code as sent and the
 * model's response. Traces written before those fields existed give one traj line per step line.
 * results.jsonl may come from elsewhere, so the names it gives are checked before they name files. */
#include "envmgr/suite/export_osworld.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/suite/results_log.h"
#include "recorder/frames.h"
#include "recorder/trace.h"

static const char *jstr(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* a task id or domain as one folder name */
static int folder_name_ok(const char *what, const char *s, em_err *err)
{
    if (!s || !*s || !strcmp(s, ".") || !strcmp(s, "..") || strlen(s) > 255)
        return em_fail(err, "%s: `%s` cannot name a folder", what, s ? s : "(missing)");
    for (const char *p = s; *p; p++)
        if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
            return em_fail(err, "%s: `%s` cannot name a folder (`/` or a control character)", what, s);
    return 0;
}

/* the trace's start (header "started", ISO 8601 UTC) in seconds since the epoch */
static double started_at(const trace *t)
{
    const char *s = jstr(trace_header(t), "started");
    struct tm tm = {0};
    double sec = 0;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%lf", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double)timegm(&tm) + sec;
}

/* OSWorld's action_timestamp: datetime.now().strftime("%Y%m%d@%H%M%S%f") */
static void stamp(double at, char out[48])
{
    time_t whole = (time_t)floor(at);
    long us = lround((at - (double)whole) * 1e6);
    if (us >= 1000000) {
        whole++;
        us -= 1000000;
    }
    struct tm tm;
    gmtime_r(&whole, &tm);
    char head[24];
    strftime(head, sizeof head, "%Y%m%d@%H%M%S", &tm);
    snprintf(out, 48, "%s%06ld", head, us);
}

/* Python's str(float), which OSWorld writes to result.txt: the shortest digits that read back */
static void py_float(double v, char out[40])
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, 40, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    if (!strpbrk(out, ".eninf"))
        strcat(out, ".0");
}

/* Python's json.dumps writes \u escapes in lower case, jansson in upper case */
static void lower_escapes(char *s)
{
    for (; *s; s++)
        if (*s == '\\' && s[1]) {
            if (s[1] == 'u')
                for (int i = 2; i < 6 && s[i]; i++)
                    s[i] = (char)tolower((unsigned char)s[i]);
            s++;
        }
}

static bool starts_reply(const trace *t, size_t i, bool grouped)
{
    json_t *s = trace_step(t, i);
    return !grouped || i == 0 || json_object_get(s, "pyautogui") || json_object_get(s, "response") ||
           strcmp(jstr(s, "source") ? jstr(s, "source") : "", "pyautogui") != 0;
}

/* one traj.jsonl line and its png for the reply of step lines [a, b) */
static int export_reply(const trace *t, size_t a, size_t b, int n, double t0, FILE *traj, const char *dir,
                        em_err *err)
{
    json_t *first = trace_step(t, a), *last = trace_step(t, b - 1);
    json_t *action = json_object_get(first, "pyautogui");
    json_t *act = json_object_get(last, "action");
    const char *type = jstr(act, "action_type");
    if (!action) /* a computer_13 reply, or an older trace's step */
        action = json_object_get(first, "action");
    bool done = type && (!strcmp(type, "DONE") || !strcmp(type, "FAIL"));
    json_t *info = json_object();
    if (done)
        json_object_set_new(info, !strcmp(type, "DONE") ? "done" : "fail", json_true());
    for (size_t i = a; i < b; i++) /* envmgr's word on a refused reply or code that failed in the guest */
        if (jstr(trace_step(t, i), "error"))
            json_object_set(info, "error", json_object_get(trace_step(t, i), "error"));
    char ts[48];
    stamp(t0 + json_number_value(json_object_get(last, "t")), ts);
    _cleanup_free_ char *png = xasprintf("step_%d_%s.png", n, ts);
    _cleanup_free_ char *png_path = xasprintf("%s/%s", dir, png);
    const char *frame = jstr(last, "frame_after") ? jstr(last, "frame_after") : jstr(last, "frame_before");
    json_t *line = json_pack("{s:i, s:s, s:O, s:s, s:i, s:b, s:o, s:s}", "step_num", n, "action_timestamp", ts, "action",
                             action, "response", jstr(first, "response") ? jstr(first, "response") : "", "reward", 0,
                             "done", done, "info", info, "screenshot_file", png);
    int rc = frame ? frames_copy_to(trace_dir(t), frame, png_path, err) : 0;
    if (rc == 0 && line) {
        char *s = json_dumps(line, JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
        if (s)
            lower_escapes(s);
        if (!s || fprintf(traj, "%s\n", s) < 0)
            rc = em_fail(err, "write traj.jsonl in `%s`: %s", dir, strerror(errno));
        free(s);
    }
    json_decref(line);
    return rc;
}

static int export_traj(const trace *t, const char *dir, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/traj.jsonl", dir);
    FILE *f = fopen(path, "wx");
    if (!f)
        return em_fail(err, "create `%s`: %s", path, strerror(errno));
    size_t n = trace_n_steps(t);
    bool grouped = false;
    for (size_t i = 0; i < n; i++)
        grouped = grouped || json_object_get(trace_step(t, i), "pyautogui") || json_object_get(trace_step(t, i), "response");
    double t0 = started_at(t);
    int rc = 0, k = 0;
    for (size_t a = 0; rc == 0 && a < n;) {
        size_t b = a + 1;
        while (b < n && !starts_reply(t, b, grouped))
            b++;
        rc = export_reply(t, a, b, ++k, t0, f, dir, err);
        a = b;
    }
    if (fclose(f) != 0 && rc == 0)
        rc = em_fail(err, "write `%s`: %s", path, strerror(errno));
    return rc;
}

/* 0 exported, 1 skipped (no trace: the episode never ran, or only its env_error attempts did) */
static int export_episode(const char *run_dir, json_t *line, const char *out_dir, em_err *err)
{
    const char *id = jstr(line, "task_id"), *domain = jstr(line, "domain"), *rel = jstr(line, "trace");
    const char *cause = jstr(line, "exit_cause") ? jstr(line, "exit_cause") : "";
    if (!rel || !strcmp(cause, "env_error") || !strcmp(cause, "unsupported") || !strcmp(cause, "task_error"))
        return 1;
    if (folder_name_ok("task_id", id, err) < 0 || folder_name_ok("domain", domain, err) < 0)
        return -1;
    _cleanup_free_ char *trace_abs = NULL;
    struct stat st;
    if (path_inside(run_dir, rel, false, &trace_abs, err) < 0)
        return em_prefix(err, "trace of `%s`: ", id);
    if (stat(trace_abs, &st) < 0 && errno == ENOENT)
        return 1;
    free(trace_abs);
    trace_abs = NULL;
    if (path_inside(run_dir, rel, true, &trace_abs, err) < 0)
        return em_prefix(err, "trace of `%s`: ", id);
    json_int_t rep = json_integer_value(json_object_get(line, "repeat"));
    bool reps = rep > 0 || strstr(rel, "/rep-"); /* --repeat: a folder per repeat below the task's */
    _cleanup_free_ char *parent = reps ? xasprintf("%s/%s/%s", out_dir, domain, id) : xasprintf("%s/%s", out_dir, domain);
    _cleanup_free_ char *dir = reps ? xasprintf("%s/rep-%lld", parent, (long long)rep) : xasprintf("%s/%s", parent, id);
    if (mkdir_p(parent, 0755, err) < 0)
        return -1;
    if (mkdir(dir, 0755) < 0)
        return em_fail(err, "create `%s`: %s (export into a new folder)", dir, strerror(errno));
    trace *t;
    if (trace_read(trace_abs, &t, err) < 0)
        return em_prefix(err, "episode `%s`: ", id);
    int rc = export_traj(t, dir, err);
    trace_free(t);
    if (rc == 0 && !strcmp(jstr(line, "status") ? jstr(line, "status") : "scored", "scored")) {
        char score[48];
        py_float(json_number_value(json_object_get(line, "score")), score);
        strcat(score, "\n");
        _cleanup_free_ char *res = xasprintf("%s/result.txt", dir);
        rc = write_file_atomic(res, score, strlen(score), 0644, err);
    }
    _cleanup_free_ char *mp4 = xasprintf("%s/recording.mp4", dir);
    if (rc == 0)
        rc = trace_export_video(trace_abs, mp4, err);
    return rc < 0 ? em_prefix(err, "episode `%s`: ", id) : 0;
}

int export_osworld(const char *run_dir, const char *out_dir, export_osworld_info *info, em_err *err)
{
    memset(info, 0, sizeof *info);
    _cleanup_free_ char *results = xasprintf("%s/results.jsonl", run_dir);
    struct stat st;
    if (stat(results, &st) < 0)
        return em_fail(err, "`%s`: %s (not a suite run's folder?)", results, strerror(errno));
    json_t *lines;
    size_t skipped;
    if (results_read(results, &lines, &skipped, err) < 0)
        return -1;
    json_t *final = results_final(lines);
    int rc = mkdir_p(out_dir, 0755, err);
    (void)skipped; /* partial lines: results_read skipped them, as every reader does */
    const char *key;
    json_t *line;
    json_object_foreach(final, key, line)
    {
        if (rc < 0)
            break;
        rc = export_episode(run_dir, line, out_dir, err);
        if (rc == 1)
            info->skipped++;
        else if (rc == 0)
            info->episodes++;
    }
    json_decref(final);
    json_decref(lines);
    return rc < 0 ? -1 : 0;
}

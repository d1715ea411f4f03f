/* envmgr benchmark: prints figures, never pass/fail.
 *   envbench [--resets N] [--shots N] [--cold] [--image NAME]
 * Measures on one env (through the library, as the episode runner and the
 * HTTP API use it): reset p50/p99, screenshot p50/p99 (envmgr's live VNC
 * path vs QMP screendump of the same env), new env from the golden state,
 * memory (PSS) and CPU of an idle env; with --cold, a cold boot to a ready
 * desktop and the golden state creation in a scratch cache. --image: another image than the
 * small desktop (bench/apps_bench.sh measures the apps image with it). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/env/env.h"
#include "envmgr/vm/accel.h"
#include "envmgr/state/golden.h"
#include "envmgr/vm/manifest.h"
#include "envmgr/base/paths.h"
#include "envmgr/vm/qmp.h"
#include "envmgr/vm/runas.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/vm.h"
#include "recorder/trace.h"

#define SHOT_GAP_MS 100 /* between timed screenshots */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static char accel_label[8] = "?";

static void line(const char *what, const char *value)
{
    printf("%-44s %-28s [%s]\n", what, value, accel_label);
    fflush(stdout);
}

static long pss_kib(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    FILE *f = fopen(path, "re");
    long v = -1;
    if (!f)
        return -1;
    while (fgets(buf, sizeof buf, f))
        if (sscanf(buf, "Pss: %ld kB", &v) == 1)
            break;
    fclose(f);
    return v;
}

static double cpu_seconds(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int die(const em_err *err)
{
    fprintf(stderr, "envbench: %s\n", err->msg);
    return 1;
}

/* A cold boot to a ready desktop and the golden state saved, in the scratch cache dir (made here,
 * set as ENVMGR_CACHE_DIR for the rest of the run); the figures come back as text. */
static int cold_golden(const char *image, const char *accel_req, char *dir, char *boot, char *save, size_t len,
                       em_err *err)
{
    if (!mkdtemp(dir))
        return em_fail_errno(err, "mkdtemp `%s`", dir);
    setenv("ENVMGR_CACHE_DIR", dir, 1);
    _cleanup_free_ char *idir = paths_image_dir(image);
    manifest *m = NULL;
    golden *g = NULL;
    const char *accel = NULL;
    double s = now_ms();
    int rc = manifest_load(idir, &m, err);
    if (rc == 0)
        rc = accel_choose(accel_req, m, &accel, err);
    if (rc == 0)
        rc = golden_ensure(m, accel, &g, err);
    if (rc == 0) {
        snprintf(boot, len, "%.1f s", json_real_value(json_object_get(g->meta, "boot_to_ready_s")));
        snprintf(save, len, "%.2f s (total with boot %.1f s)", json_real_value(json_object_get(g->meta, "save_s")),
                 (now_ms() - s) / 1000);
    }
    golden_free(g);
    manifest_free(m);
    if (rc < 0)
        remove_tree(dir, NULL);
    return rc;
}

int main(int argc, char **argv)
{
    int resets = 20, shots = 50, cold = 0;
    const char *image = "desktop";
    static const struct option opts[] = {{"resets", required_argument, 0, 'r'},
                                         {"shots", required_argument, 0, 's'},
                                         {"cold", no_argument, 0, 'c'},
                                         {"image", required_argument, 0, 'i'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'r')
            resets = atoi(optarg);
        else if (c == 's')
            shots = atoi(optarg);
        else if (c == 'c')
            cold = 1;
        else if (c == 'i')
            image = optarg;
        else
            return 2;
    }
    if (resets < 1 || shots < 1)
        return 2;
    install_interrupt_handlers();
    em_err err = {0};
    char name[64];
    snprintf(name, sizeof name, "bench-%d", (int)getpid());
    env_up_opts o = {.name = name, .image = image, .accel = getenv("ENVMGR_ACCEL") ? getenv("ENVMGR_ACCEL") : "auto"};
    /* --cold first, before anything reads the cache root (envmgr latches it once per process): the
     * whole run then uses a scratch cache, whose golden state this boot builds. */
    char scratch[] = "/tmp/envbench-cache-XXXXXX", cold_boot[64] = "", cold_save[64] = "";
    if (cold && cold_golden(image, o.accel, scratch, cold_boot, cold_save, sizeof cold_boot, &err) < 0)
        return die(&err);
    env *e;
    env_timings t;
    double t0 = now_ms();
    if (env_up(&o, &e, &t, &err) < 0) {
        if (cold)
            remove_tree(scratch, NULL);
        return die(&err);
    }
    snprintf(accel_label, sizeof accel_label, "%s", env_accel(e)); /* env_close frees the original */
    char v[128];
    snprintf(v, sizeof v, "%.0f ms", now_ms() - t0 - t.golden_ms);
    printf("image %s (%dx%d)\n", image, env_width(e), env_height(e));
    line("new env from the golden state, ready", v);
    int rc = 0;

    /* reset */
    double *r = calloc((size_t)resets, sizeof *r), *rs = calloc((size_t)resets, sizeof *rs);
    double *rstop = calloc((size_t)resets, sizeof *rstop), *rstart = calloc((size_t)resets, sizeof *rstart);
    for (int i = 0; i < resets && rc == 0; i++) {
        double s = now_ms();
        const uint8_t *px;
        rc = env_reset(e, &t, &err);
        r[i] = now_ms() - s;
        rstop[i] = t.stop_ms;
        rstart[i] = t.restore_ms;
        if (rc == 0)
            rc = env_frame(e, &px, &err); /* the clean screen is really there */
        rs[i] = now_ms() - s;
    }
    if (rc == 0) {
        snprintf(v, sizeof v, "p50 %.0f ms, p99 %.0f ms", pct(r, resets, 50), pct(r, resets, 99));
        char what[64];
        snprintf(what, sizeof what, "reset (n=%d, until the guest runs)", resets);
        line(what, v);
        /* where a reset's tail goes: the old QEMU's end, or the new one's start and restore */
        snprintf(v, sizeof v, "p50 %.0f/%.0f ms, p99 %.0f/%.0f", pct(rstop, resets, 50), pct(rstart, resets, 50),
                 pct(rstop, resets, 99), pct(rstart, resets, 99));
        line("  of which stop / start and restore", v);
        snprintf(v, sizeof v, "p50 %.0f ms, p99 %.0f ms", pct(rs, resets, 50), pct(rs, resets, 99));
        line("reset + first fresh frame over VNC", v);
    }
    /* The guest agent answers later (TCG retranslates the guest's code after a restore). */
    int na = resets < 5 ? resets : 5;
    for (int i = 0; i < na && rc == 0; i++) {
        guest *g;
        rc = env_reset(e, &t, &err);
        double s = now_ms();
        if (rc == 0)
            rc = env_guest(e, &g, &err);
        r[i] = now_ms() - s;
    }
    if (rc == 0) {
        snprintf(v, sizeof v, "p50 %.0f ms (n=%d)", pct(r, na, 50), na);
        line("  guest agent answers + clock set, after reset", v);
    }
    free(r);
    free(rs);
    free(rstop);
    free(rstart);

    /* screenshots: envmgr (live VNC, fresh full frame, PNG) vs QMP screendump */
    double *s1 = calloc((size_t)shots, sizeof *s1), *s2 = calloc((size_t)shots, sizeof *s2);
    const png_buf *png;
    if (rc == 0)
        rc = env_screenshot(e, &png, &err); /* connect once: the API and runner keep the session */
    /* One shot every 100 ms, as an agent loop takes them. Back to back, each shot also waits for
     * QEMU's next display refresh (every 30 ms): no fresher frame exists before it. */
    for (int i = 0; i < shots && rc == 0; i++) {
        sleep_ms(SHOT_GAP_MS);
        double s = now_ms();
        rc = env_screenshot(e, &png, &err);
        s1[i] = now_ms() - s;
    }
    double *s4 = calloc((size_t)shots, sizeof *s4);
    for (int i = 0; i < shots && rc == 0; i++) {
        double s = now_ms();
        rc = env_screenshot(e, &png, &err);
        s4[i] = now_ms() - s;
    }
    /* The same work without the unchanged-frame reuse: a fresh frame and a full encode. */
    double *s3 = calloc((size_t)shots, sizeof *s3);
    for (int i = 0; i < shots && rc == 0; i++) {
        const uint8_t *px;
        png_buf b = {0};
        sleep_ms(SHOT_GAP_MS);
        double s = now_ms();
        rc = env_frame(e, &px, &err);
        if (rc == 0)
            rc = png_encode_rgbx(px, env_width(e), env_height(e), (size_t)env_width(e) * 4, 1, &b, &err);
        s3[i] = now_ms() - s;
        png_buf_free(&b);
    }
    qmp *q = NULL;
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, env_dir(e));
    /* QEMU writes the dump itself: as the env's own user (runas), only into a folder that user owns */
    char ddir[] = "/tmp/envbench-dump-XXXXXX";
    vm_runas ru = {0};
    if (rc == 0 && !mkdtemp(ddir))
        rc = em_fail(&err, "screendump folder %s: %s", ddir, strerror(errno));
    if (rc == 0)
        rc = vm_runas_read(env_dir(e), &ru, &err);
    if (rc == 0 && ru.drop && chown(ddir, ru.uid, ru.gid) < 0)
        rc = em_fail(&err, "screendump folder %s: chown: %s", ddir, strerror(errno));
    _cleanup_free_ char *dump = xasprintf("%s/bench-screendump.png", ddir);
    if (rc == 0)
        rc = qmp_open(sock, 5000, &q, &err);
    for (int i = 0; i < shots && rc == 0; i++) {
        json_t *a = json_pack("{s:s, s:s}", "filename", dump, "format", "png");
        double s = now_ms();
        rc = qmp_execute(q, "screendump", a, 10000, NULL, &err);
        s2[i] = now_ms() - s;
        json_decref(a);
    }
    qmp_close(q);
    unlink(dump);
    rmdir(ddir);
    if (rc == 0) {
        double p1 = pct(s1, shots, 50), p2 = pct(s2, shots, 50);
        snprintf(v, sizeof v, "p50 %.1f ms, p99 %.1f ms", p1, pct(s1, shots, 99));
        char what[64];
        snprintf(what, sizeof what, "screenshot envmgr (%dx%d PNG, fresh frame)", env_width(e), env_height(e));
        line(what, v);
        snprintf(v, sizeof v, "p50 %.1f ms, p99 %.1f ms", pct(s4, shots, 50), pct(s4, shots, 99));
        line("  same, back to back (QEMU refreshes every 30 ms)", v);
        snprintf(v, sizeof v, "p50 %.1f ms, p99 %.1f ms", pct(s3, shots, 50), pct(s3, shots, 99));
        line("  same, always re-encoding (no frame reuse)", v);
        snprintf(v, sizeof v, "p50 %.1f ms, p99 %.1f ms", p2, pct(s2, shots, 99));
        line("screenshot QMP screendump (PNG, same env)", v);
        snprintf(v, sizeof v, "%.1fx", p2 / p1);
        line("  envmgr speed-up over screendump (p50)", v);
    }
    free(s1);
    free(s2);
    free(s3);
    free(s4);

    /* recording overhead: a real frame per step (the pointer moves, so each frame differs) */
    if (rc == 0) {
        _cleanup_free_ char *tdir = xasprintf("%s/bench-trace", env_dir(e));
        json_t *hdr = json_pack("{s:s, s:s, s:s, s:{s:i, s:i}, s:s, s:b}", "task_id", "bench", "task_sha256",
                                "1111111111111111111111111111111111111111111111111111111111111111",
                                "image_manifest_sha256", env_image_sha256(e), "screen", "width", env_width(e),
                                "height", env_height(e), "accel", accel_label, "unsafe_open_network", 0);
        trace_writer *tw = NULL;
        rc = trace_open(tdir, hdr, &tw, &err);
        json_decref(hdr);
        int n = shots < 20 ? shots : 20;
        double *rec = calloc((size_t)n, sizeof *rec);
        for (int i = 0; i < n && rc == 0; i++) {
            action a = {.type = ACT_MOVE_TO, .has_xy = true, .x = 100 + 20 * i, .y = 300};
            const uint8_t *px;
            char sha[65];
            rc = env_act(e, &a, &err);
            if (rc == 0)
                rc = env_frame(e, &px, &err);
            double s = now_ms();
            if (rc == 0)
                rc = trace_add_frame_rgb(tw, px, env_width(e), env_height(e), env_width(e) * 4, sha, &err);
            if (rc == 0) {
                json_t *line = json_pack("{s:s, s:{s:s, s:i, s:i}, s:s, s:f, s:f, s:s, s:s}", "type", "step", "action",
                                         "action_type", "MOVE_TO", "x", a.x, "y", a.y, "source", "computer_13",
                                         "agent_ms", 0.0, "action_ms", 0.0, "frame_before", sha, "frame_after", sha);
                rc = trace_append(tw, line, &err);
                json_decref(line);
            }
            rec[i] = now_ms() - s;
        }
        if (tw && rc == 0)
            rc = trace_close(tw, &err);
        else if (tw)
            trace_abandon(tw);
        if (rc == 0) {
            snprintf(v, sizeof v, "p50 %.1f ms, p99 %.1f ms", pct(rec, n, 50), pct(rec, n, 99));
            line("recording overhead per step (PNG+fsync)", v);
        }
        free(rec);
        remove_tree(tdir, NULL);
    }

    /* idle env: PSS and CPU over 10 s */
    pid_t pid;
    if (rc == 0 && vm_read_pid(env_dir(e), &pid, &err) == 0) {
        env_close(e); /* no client connected while idle */
        e = NULL;
        sleep_ms(2000);
        double c0 = cpu_seconds(pid), w0 = now_ms();
        sleep_ms(10000);
        double c1 = cpu_seconds(pid), w1 = now_ms();
        snprintf(v, sizeof v, "%.1f%% of one core", 100.0 * (c1 - c0) / ((w1 - w0) / 1000));
        line("idle env CPU (10 s)", v);
        snprintf(v, sizeof v, "%.0f MiB", pss_kib(pid) / 1024.0);
        line("idle env memory (PSS)", v);
    }
    if (e)
        env_close(e);
    em_err derr = {0};
    env_down(name, &derr);

    if (cold) {
        if (rc == 0) {
            line("cold boot to a ready desktop", cold_boot);
            line("golden state save", cold_save);
        }
        remove_tree(scratch, NULL);
    }
    return rc < 0 ? die(&err) : 0;
}

/* trace_show, trace_export_html, trace_export_frames and the action summary:
 * everything from the trace is escaped, nothing is written outside out_dir. */
#define TRACE_FIXTURE_ONLY
#include "test_trace_fixture.c"

#include <ctype.h>
#include <dirent.h>
#include <unistd.h>

static char *show(const char *dir, em_err *err, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    *rc = trace_show(dir, f, err);
    fclose(f);
    return buf;
}

static void test_show(void)
{
    _cleanup_free_ char *dir = fx_path("show");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    em_err err = {0};
    int rc;
    _cleanup_free_ char *out = show(dir, &err, &rc);
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT(fx_contains(out, "status:   complete"));
    CU_ASSERT(fx_contains(out, "task:     demo-task (sha256 " TASK_SHA ")"));
    CU_ASSERT(fx_contains(out, "image:    manifest sha256 " IMAGE_SHA));
    CU_ASSERT(fx_contains(out, "accel:    tcg"));
    CU_ASSERT(fx_contains(out, "screen:   64x40"));
    CU_ASSERT(fx_contains(out, "started:  20"));
    CU_ASSERT(fx_contains(out, "setup:    2 steps, 0 failed"));
    CU_ASSERT(fx_contains(out, "steps:    3"));
    CU_ASSERT(fx_contains(out, "  #0    CLICK (10, 20) "));
    CU_ASSERT(fx_contains(out, "  #1    TYPING \"hello <script>alert(1)</script>\" agent     101 ms  action      5 ms"));
    CU_ASSERT(fx_contains(out, "score:    1 (done)"));
    CU_ASSERT(fx_contains(out, "reason:   file matches"));

    /* Incomplete, with hostile text: shown, marked, and no raw control characters reach the terminal. */
    _cleanup_free_ char *dir2 = fx_path("show-evil");
    const char *lines[] = {
        FX_HEADER,
        "{\"type\":\"setup\",\"index\":0,\"step\":{\"type\":\"exec\\u001b[2J\"},\"duration_ms\":3,\"ok\":false,"
        "\"error\":\"boom\\nline2\\u001b]0;title\\u0007\"}",
        "{\"type\":\"step\",\"index\":0,\"action\":{\"action_type\":\"TYPING\",\"text\":\"rm -rf /\\u001b[31m\\u202e\\n\"},"
        "\"source\":\"pyautogui\",\"agent_ms\":1,\"action_ms\":2,\"t\":0.5,\"frame_before\":\"" TASK_SHA "\","
        "\"error\":\"\\u009b31m\"}",
    };
    CU_ASSERT_FATAL(fx_write_chained(dir2, lines, 3, false) == 0);
    _cleanup_free_ char *out2 = show(dir2, &err, &rc);
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT(fx_contains(out2, "status:   INCOMPLETE"));
    CU_ASSERT(fx_contains(out2, "setup:    1 step, 1 failed"));
    CU_ASSERT(fx_contains(out2, "FAIL"));
    CU_ASSERT(fx_contains(out2, "exec\\x1b[2J"));
    CU_ASSERT(fx_contains(out2, "boom\\nline2\\x1b]0;title\\x07"));
    CU_ASSERT(fx_contains(out2, "TYPING \"rm -rf /\\x1b[31m\\u202e\\n\""));
    CU_ASSERT(fx_contains(out2, "error: \\u009b31m"));
    CU_ASSERT(fx_contains(out2, "score:    none (not evaluated)"));
    bool clean = true;
    for (const unsigned char *p = (const unsigned char *)out2; *p; p++)
        clean &= *p >= 0x20 || *p == '\n';
    CU_ASSERT(clean);
    CU_ASSERT(strstr(out2, "\xc2\x9b") == NULL && strstr(out2, "\xe2\x80\xae") == NULL);

    /* Postconfig lines after the steps, a tolerated one with its reason, escaped. */
    _cleanup_free_ char *dirp = fx_path("show-postconfig");
    CU_ASSERT_FATAL(fx_write_postconfig_trace(dirp) == 0);
    _cleanup_free_ char *outp = show(dirp, &err, &rc);
    CU_ASSERT_FATAL(rc == 0);
    CU_ASSERT(fx_contains(outp, "postconfig: 2 steps, 0 failed\n"));
    CU_ASSERT(fx_contains(outp, "  #0    ok          40 ms  execute  tolerated: exit status 1 <b>\\x1b[2J\n"));
    CU_ASSERT(fx_contains(outp, "  #1    ok        1000 ms  sleep\n"));
    char *steps = strstr(outp, "steps:    2"), *post = strstr(outp, "postconfig:"), *score = strstr(outp, "score:");
    CU_ASSERT(steps && post && score && steps < post && post < score); /* in the order they ran */
    CU_ASSERT(strstr(out, "postconfig:") == NULL); /* a trace without them has no such section */

    /* A broken trace: an error, nothing printed. */
    _cleanup_free_ char *dir3 = fx_path("show-missing");
    _cleanup_free_ char *out3 = show(dir3, &err, &rc);
    CU_ASSERT(rc < 0);
    CU_ASSERT(out3 == NULL || out3[0] == '\0');
}

static bool case_insensitive_has(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (!strncasecmp(p, needle, n))
            return true;
    return false;
}

/* Every src="frames/..." in the page names a file that was copied next to it. */
static int check_img_sources(const char *out_dir, const char *page)
{
    int n = 0;
    for (const char *p = strstr(page, "src=\""); p; p = strstr(p + 1, "src=\"")) {
        const char *s = p + 5, *e = strchr(s, '"');
        _cleanup_free_ char *rel = xasprintf("%.*s", (int)(e - s), s);
        CU_ASSERT(strncmp(rel, "frames/", 7) == 0 && strlen(rel) == 7 + 64 + 4);
        _cleanup_free_ char *path = xasprintf("%s/%s", out_dir, rel);
        struct stat st;
        CU_ASSERT(stat(path, &st) == 0 && S_ISREG(st.st_mode));
        n++;
    }
    return n;
}

static void test_export_html(void)
{
    _cleanup_free_ char *dir = fx_path("html");
    CU_ASSERT_FATAL(fx_write_trace(dir, 4) == 0);
    _cleanup_free_ char *parent = fx_path("html-out");
    CU_ASSERT_FATAL(mkdir(parent, 0755) == 0);
    _cleanup_free_ char *out = xasprintf("%s/site", parent);
    em_err err = {0};
    CU_ASSERT_FATAL(trace_export_html(dir, out, &err) == 0);
    size_t len;
    _cleanup_free_ char *page = fx_read(out, "index.html", &len);
    CU_ASSERT_FATAL(page != NULL);
    CU_ASSERT(strncmp(page, "<!DOCTYPE html>", 15) == 0);
    for (int i = 0; i < 4; i++) {
        char id[64];
        snprintf(id, sizeof id, "<article class=\"step\" id=\"step-%d\"><h2>Step %d: ", i, i);
        CU_ASSERT(fx_contains(page, id));
    }
    CU_ASSERT(strstr(page, "id=\"step-4\"") == NULL);
    CU_ASSERT(fx_contains(page, "TYPING &quot;hello &lt;script&gt;alert(1)&lt;/script&gt;&quot;"));
    CU_ASSERT(!case_insensitive_has(page, "<script"));
    CU_ASSERT(fx_contains(page, "Content-Security-Policy"));
    CU_ASSERT(!case_insensitive_has(page, "http://") && !case_insensitive_has(page, "https://"));
    CU_ASSERT(fx_contains(page, "<tr><th>score</th><td>1</td></tr>"));
    CU_ASSERT(fx_contains(page, "file matches"));
    CU_ASSERT(fx_contains(page, "agent 101 ms &middot; action 5 ms"));
    /* The click of step 0 at (10, 20) is drawn on its frame. */
    CU_ASSERT(fx_contains(page, "<circle cx=\"10.0\" cy=\"20.0\""));
    /* Frames: 5 distinct, 8 references. */
    _cleanup_free_ char *frames = xasprintf("%s/frames", out);
    CU_ASSERT_EQUAL(fx_count_files(frames), 5);
    CU_ASSERT_EQUAL(check_img_sources(out, page), 8);
    /* Nothing else was written next to out_dir. */
    CU_ASSERT_EQUAL(fx_count_files(parent), 1);
    CU_ASSERT_EQUAL(fx_count_files(out), 2);
    /* Exporting again over the same directory works (files are replaced). */
    CU_ASSERT(trace_export_html(dir, out, &err) == 0);
    CU_ASSERT(strstr(page, "id=\"postconfig\"") == NULL); /* none in this trace: no section */

    /* Postconfig steps: their own section after the agent's steps, a tolerated step marked, escaped. */
    _cleanup_free_ char *pdir = fx_path("html-postconfig"), *pout = fx_path("html-postconfig-out");
    CU_ASSERT_FATAL(fx_write_postconfig_trace(pdir) == 0);
    CU_ASSERT_FATAL(trace_export_html(pdir, pout, &err) == 0);
    _cleanup_free_ char *ppage = fx_read(pout, "index.html", &len);
    CU_ASSERT_FATAL(ppage != NULL);
    CU_ASSERT(fx_contains(ppage, "<section id=\"postconfig\"><h2>Postconfig (2 steps)</h2>"));
    CU_ASSERT(fx_contains(ppage, "<td class=\"status-bad\">tolerated</td><td>40</td>"));
    CU_ASSERT(fx_contains(ppage, "exit status 1 &lt;b&gt;"));
    CU_ASSERT(!case_insensitive_has(ppage, "<b>"));
    char *steps = strstr(ppage, "id=\"steps\""), *post = strstr(ppage, "id=\"postconfig\""),
         *egress = strstr(ppage, "id=\"egress\"");
    CU_ASSERT(steps && post && egress && steps < post && post < egress);
}

/* Hand-made trace with markup in every string the page shows. */
static void test_export_html_hostile(void)
{
    _cleanup_free_ char *dir = fx_path("html-evil");
    em_err err = {0};
    trace_writer *w;
    json_t *h = fx_header_fields();
    json_object_set_new(h, "task_id", json_string("<script>alert('task')</script>"));
    CU_ASSERT_FATAL(trace_open(dir, h, &w, &err) == 0);
    json_decref(h);
    char a[65], b[65];
    CU_ASSERT_FATAL(fx_add_frame(w, 1, a) == 0 && fx_add_frame(w, 2, b) == 0);
    CU_ASSERT(fx_append(w, json_pack("{s:s, s:{s:s}, s:i, s:b, s:s}", "type", "setup", "step", "type",
                                     "</pre><script>x()</script>", "duration_ms", 1, "ok", 0, "error",
                                     "<img src=x onerror=alert(1)>")) == 0);
    CU_ASSERT(fx_append(w, json_pack("{s:s, s:{s:s, s:s, s:i, s:i}, s:s, s:i, s:i, s:s, s:s}", "type", "step",
                                     "action", "action_type", "CLICK", "button", "<b>left\"'", "x", 100000, "y", -5, "source", "pyautogui",
                                     "agent_ms", 1, "action_ms", 1, "frame_before", a, "frame_after", b)) == 0);
    CU_ASSERT(fx_append(w, json_pack("{s:s, s:{s:s, s:[s, s]}, s:s, s:i, s:i, s:s, s:s}", "type", "step", "action",
                                     "action_type", "HOTKEY", "keys", "ctrl", "<svg onload=alert(1)>", "source",
                                     "computer_13", "agent_ms", 1, "action_ms", 1, "frame_before", b, "frame_after",
                                     a)) == 0);
    CU_ASSERT(fx_append(w, json_pack("{s:s, s:s}", "type", "egress", "url", "javascript:alert(1)//</pre>")) == 0);
    CU_ASSERT(fx_append(w, json_pack("{s:s, s:f, s:s, s:{s:s}, s:s}", "type", "evaluation", "score", 0.5, "reason",
                                     "</td><script>r()</script>", "artifacts", "<i>name", a, "exit_cause", "fail")) == 0);
    CU_ASSERT_FATAL(trace_close(w, &err) == 0);

    _cleanup_free_ char *out = fx_path("html-evil-out");
    CU_ASSERT_FATAL(trace_export_html(dir, out, &err) == 0);
    size_t len;
    _cleanup_free_ char *page = fx_read(out, "index.html", &len);
    CU_ASSERT_FATAL(page != NULL);
    CU_ASSERT(!case_insensitive_has(page, "<script"));
    CU_ASSERT(!case_insensitive_has(page, "<img src=x"));
    CU_ASSERT(!case_insensitive_has(page, "<svg onload"));
    CU_ASSERT(!case_insensitive_has(page, "<b>"));
    CU_ASSERT(!case_insensitive_has(page, "<i>"));
    CU_ASSERT(fx_contains(page, "&lt;script&gt;alert(&#39;task&#39;)&lt;/script&gt;"));
    CU_ASSERT(fx_contains(page, "CLICK &lt;b&gt;left&quot;&#39; (100000, -5)"));
    CU_ASSERT(fx_contains(page, "HOTKEY ctrl+&lt;svg onload=alert(1)&gt;"));
    /* Off-screen coordinates are clamped into the picture. */
    CU_ASSERT(fx_contains(page, "cx=\"64.0\" cy=\"0.0\""));
    /* Every attribute value is quoted and nothing from the trace sits between < and > unescaped:
     * the only tags are the ones this exporter writes. */
    static const char *const allowed[] = {"!DOCTYPE", "html", "head", "meta", "title", "style", "body", "h1", "h2",
                                          "table", "tr", "th", "td", "code", "section", "p", "pre", "article",
                                          "span", "div", "figure", "img", "svg", "circle", "line", "text",
                                          "figcaption", "details", "summary"};
    int unknown = 0;
    for (const char *p = strchr(page, '<'); p; p = strchr(p + 1, '<')) {
        const char *name = p + 1 + (p[1] == '/');
        size_t n = 0;
        while (name[n] && (isalnum((unsigned char)name[n]) || name[n] == '!'))
            n++;
        bool ok = false;
        for (size_t i = 0; i < ARRAY_LEN(allowed); i++)
            ok |= strlen(allowed[i]) == n && !strncmp(name, allowed[i], n);
        if (!ok && unknown++ < 3)
            fprintf(stderr, "\n    unexpected tag: %.30s", p);
    }
    CU_ASSERT_EQUAL(unknown, 0);
}

static void test_export_html_bad_frame(void)
{
    _cleanup_free_ char *dir = fx_path("html-badframe");
    CU_ASSERT_FATAL(fx_write_trace(dir, 1) == 0);
    trace *t;
    em_err err = {0};
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    _cleanup_free_ char *name =
        xasprintf("frames/%s.png", json_string_value(json_object_get(trace_step(t, 0), "frame_after")));
    trace_free(t);
    CU_ASSERT(fx_write(dir, name, "not the frame", 13) == 0);
    _cleanup_free_ char *out = fx_path("html-badframe-out");
    CU_ASSERT(trace_export_html(dir, out, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "step 0: "));
    CU_ASSERT(fx_contains(err.msg, "content does not match its name"));
    struct stat st;
    _cleanup_free_ char *index = xasprintf("%s/index.html", out);
    CU_ASSERT(stat(index, &st) < 0); /* no page for a trace that does not check out */
}

/* A tree is XML the guest chose: an XHTML one with a <script> ran when the export linked it raw
 * (a11y/<sha>.xml). It is exported as text in a page of its own under the same policy. */
static void test_export_html_a11y_markup(void)
{
    static const char xhtml[] = "<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><body>"
                                "<script>fetch('http://127.0.0.1:9/')</script><img src=\"http://127.0.0.1:9/i\"/>"
                                "</body></html>";
    _cleanup_free_ char *dir = fx_path("html-a11y");
    em_err err = {0};
    trace_writer *w = fx_open(dir);
    CU_ASSERT_FATAL(w != NULL);
    char a[65], b[65], tree[65];
    CU_ASSERT_FATAL(fx_add_frame(w, 1, a) == 0 && fx_add_frame(w, 2, b) == 0);
    CU_ASSERT_FATAL(trace_add_a11y(w, xhtml, strlen(xhtml), tree, &err) == 0);
    for (int i = 0; i < 2; i++) /* the same tree twice: one page */
        CU_ASSERT(fx_append(w, json_pack("{s:s, s:{s:s}, s:s, s:i, s:i, s:s, s:s, s:s}", "type", "step", "action",
                                         "action_type", "WAIT", "source", "computer_13", "agent_ms", 1, "action_ms", 1,
                                         "frame_before", a, "frame_after", b, "a11y_tree", tree)) == 0);
    CU_ASSERT_FATAL(trace_close(w, &err) == 0);

    _cleanup_free_ char *out = fx_path("html-a11y-out");
    CU_ASSERT_FATAL(trace_export_html(dir, out, &err) == 0);
    _cleanup_free_ char *a11y = xasprintf("%s/a11y", out), *name = xasprintf("a11y/%s.html", tree);
    CU_ASSERT_EQUAL(fx_count_files(a11y), 1); /* the page, and no .xml a browser would render */
    size_t len;
    _cleanup_free_ char *page = fx_read(out, name, &len), *index = fx_read(out, "index.html", &len);
    CU_ASSERT_FATAL(page != NULL && index != NULL);
    CU_ASSERT(strncmp(page, "<!DOCTYPE html>", 15) == 0);
    CU_ASSERT(fx_contains(page, "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'"));
    CU_ASSERT(!case_insensitive_has(page, "<script") && !case_insensitive_has(page, "<img"));
    CU_ASSERT(fx_contains(page, "&lt;script&gt;fetch(&#39;http://127.0.0.1:9/&#39;)&lt;/script&gt;"));
    _cleanup_free_ char *link = xasprintf("<a href=\"%s\">", name);
    CU_ASSERT(fx_contains(index, link));
    CU_ASSERT(!case_insensitive_has(index, ".xml\""));
    CU_ASSERT(!case_insensitive_has(index, "<script"));
}

/* A frame is copied out as .png as it is: bytes that hash to their name but are no PNG (markup
 * with a script) are refused, by the export and by verify. */
static void test_export_html_frame_not_png(void)
{
    static const char fake[] = "<html><script>fetch('http://127.0.0.1:9/')</script></html>";
    char sha[65];
    sha256_hex(fake, strlen(fake), sha);
    _cleanup_free_ char *dir = fx_path("html-notpng");
    _cleanup_free_ char *step = xasprintf("{\"type\":\"step\",\"index\":0,\"action\":{\"action_type\":\"WAIT\"},"
                                          "\"source\":\"computer_13\",\"agent_ms\":1,\"action_ms\":2,\"t\":0.5,"
                                          "\"frame_before\":\"%s\",\"frame_after\":\"%s\"}", sha, sha);
    const char *lines[] = {FX_HEADER, step};
    CU_ASSERT_FATAL(fx_write_chained(dir, lines, 2, true) == 0);
    _cleanup_free_ char *name = xasprintf("frames/%s.png", sha);
    CU_ASSERT_FATAL(fx_write(dir, name, fake, strlen(fake)) == 0);
    em_err err = {0};
    _cleanup_free_ char *out = fx_path("html-notpng-out");
    CU_ASSERT(trace_export_html(dir, out, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "not a PNG file (a frame must be one)"));
    CU_ASSERT(strchr(err.msg, '\n') == NULL);
    _cleanup_free_ char *copied = xasprintf("%s/%s", out, name);
    struct stat st;
    CU_ASSERT(stat(copied, &st) < 0);
    _cleanup_free_ char *fout = fx_path("frames-notpng-out");
    CU_ASSERT(trace_export_frames(dir, fout, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "not a PNG file"));
    json_t *report = NULL;
    CU_ASSERT(trace_verify(dir, &report, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "not a PNG file"));
}

static void test_export_frames(void)
{
    _cleanup_free_ char *dir = fx_path("frames-src");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    _cleanup_free_ char *out = fx_path("frames-out");
    em_err err = {0};
    CU_ASSERT_FATAL(trace_export_frames(dir, out, &err) == 0);
    CU_ASSERT_EQUAL(fx_count_files(out), 4);
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "%04d.png", i);
        _cleanup_free_ char *path = xasprintf("%s/%s", out, name);
        char sha[65];
        CU_ASSERT_FATAL(sha256_file_hex(path, sha, &err) == 0);
        const char *want = i == 0 ? json_string_value(json_object_get(trace_step(t, 0), "frame_before"))
                                  : json_string_value(json_object_get(trace_step(t, (size_t)i - 1), "frame_after"));
        CU_ASSERT_STRING_EQUAL(sha, want);
        _cleanup_free_ uint8_t *px = NULL;
        int w, h;
        CU_ASSERT(png_decode_file(path, &px, &w, &h, &err) == 0);
    }
    trace_free(t);
}

/* The folder holds no .envmgr-video-* temp folder (a failed or finished export removes it). */
static bool no_video_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool clean = true;
    while (d && (e = readdir(d)))
        clean &= strncmp(e->d_name, ".envmgr-video-", 14) != 0;
    if (d)
        closedir(d);
    return clean;
}

static void test_export_video(void)
{
    _cleanup_free_ char *dir = fx_path("video-src"), *outdir = fx_path("video-out");
    CU_ASSERT_FATAL(fx_write_trace(dir, 3) == 0);
    em_err err = {0};
    CU_ASSERT_FATAL(mkdir_p(outdir, 0755, &err) == 0);
    _cleanup_free_ char *mp4 = xasprintf("%s/recording.mp4", outdir), *probe = xasprintf("%s/probe.txt", outdir);
    if (trace_export_video(dir, mp4, &err) < 0)
        fprintf(stderr, "\n    %s", err.msg);
    CU_ASSERT_FATAL(err.msg[0] == '\0');
    char head[12] = {0};
    FILE *f = fopen(mp4, "rb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT(fread(head, 1, sizeof head, f) == sizeof head);
    fclose(f);
    CU_ASSERT(memcmp(head + 4, "ftyp", 4) == 0); /* an MP4 */
    /* ffprobe reads what a player reads: H.264, the screen's size, every distinct frame */
    _cleanup_free_ char *cmd = xasprintf("ffprobe -v error -count_frames -select_streams v:0 -show_entries "
                                         "stream=codec_name,width,height,nb_read_frames -of csv=p=0 '%s' > '%s'",
                                         mp4, probe);
    CU_ASSERT_FATAL(system(cmd) == 0);
    char *text = NULL;
    size_t len;
    CU_ASSERT_FATAL(read_file_capped(probe, 4096, &text, &len, &err) == 0);
    int w = 0, h = 0, n = 0;
    char codec[16] = "";
    CU_ASSERT(sscanf(text, "%15[^,],%d,%d,%d", codec, &w, &h, &n) == 4);
    CU_ASSERT_STRING_EQUAL(codec, "h264");
    CU_ASSERT(w == 64 && h == 40);
    CU_ASSERT(n >= 2);
    free(text);
    CU_ASSERT(no_video_tmp(outdir));

    /* A frame whose bytes are not its name: no video, nothing left behind. */
    trace *t;
    CU_ASSERT_FATAL(trace_read(dir, &t, &err) == 0);
    _cleanup_free_ char *name =
        xasprintf("frames/%s.png", json_string_value(json_object_get(trace_step(t, 1), "frame_after")));
    trace_free(t);
    CU_ASSERT(fx_write(dir, name, "not the frame", 13) == 0);
    _cleanup_free_ char *bad = xasprintf("%s/bad.mp4", outdir);
    CU_ASSERT(trace_export_video(dir, bad, &err) < 0);
    CU_ASSERT(fx_contains(err.msg, "content does not match its name"));
    CU_ASSERT(access(bad, F_OK) < 0);
    CU_ASSERT(no_video_tmp(outdir));
}

static void test_action_summary(void)
{
    static const struct {
        const char *json, *want;
        size_t max;
    } cases[] = {
        {"{\"action_type\":\"CLICK\",\"button\":\"right\",\"x\":5,\"y\":6,\"num_clicks\":2}", "CLICK right (5, 6) x2", 80},
        {"{\"action_type\":\"MOVE_TO\",\"x\":1.5,\"y\":2}", "MOVE_TO (1.5, 2)", 80},
        {"{\"action_type\":\"DRAG_TO\",\"x\":7,\"y\":8}", "DRAG_TO (7, 8)", 80},
        {"{\"action_type\":\"SCROLL\",\"dy\":-3}", "SCROLL dx=0 dy=-3", 80},
        {"{\"action_type\":\"TYPING\",\"text\":\"abc\\tdef\"}", "TYPING \"abc\\tdef\"", 80},
        {"{\"action_type\":\"TYPING\",\"text\":\"abcdefghij\"}", "TYPING \"abcd...\"", 4},
        {"{\"action_type\":\"TYPING\",\"text\":\"h\\u00e9llo\"}", "TYPING \"h...\"", 2}, /* not cut inside é */
        {"{\"action_type\":\"PRESS\",\"key\":\"enter\"}", "PRESS enter", 80},
        {"{\"action_type\":\"HOTKEY\",\"keys\":[\"ctrl\",\"alt\",\"t\"]}", "HOTKEY ctrl+alt+t", 80},
        {"{\"action_type\":\"WAIT\",\"seconds\":1.5}", "WAIT 1.5 s", 80},
        {"{\"action_type\":\"DONE\"}", "DONE", 80},
        {"{\"action_type\":\"NEW_THING\",\"x\":1,\"y\":1}", "NEW_THING (1, 1)", 80},
        {"{\"x\":1}", "(no action_type)", 80},
        {"{\"action_type\":\"PRESS\",\"key\":5}", "PRESS ?", 80},
    };
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        json_t *a = json_loads(cases[i].json, 0, NULL);
        CU_ASSERT_FATAL(a != NULL);
        _cleanup_free_ char *s = trace_action_summary(a, cases[i].max);
        if (strcmp(s, cases[i].want))
            fprintf(stderr, "\n    summary of %s: got \"%s\", want \"%s\"", cases[i].json, s, cases[i].want);
        CU_ASSERT_STRING_EQUAL(s, cases[i].want);
        json_decref(a);
    }
    _cleanup_free_ char *s = trace_action_summary(NULL, 10);
    CU_ASSERT_STRING_EQUAL(s, "(no action_type)");
}

static CU_TestInfo tests[] = {
    {"show", test_show},
    {"export html", test_export_html},
    {"export html escapes hostile text", test_export_html_hostile},
    {"export html refuses a changed frame", test_export_html_bad_frame},
    {"export html shows a tree as text, never its markup", test_export_html_a11y_markup},
    {"exports refuse a frame that is no PNG", test_export_html_frame_not_png},
    {"export frames", test_export_frames},
    {"export video", test_export_video},
    {"action summary", test_action_summary},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    unsetenv("ENVMGR_TRACE_KEY");
    return run_suite("trace_export", tests);
}

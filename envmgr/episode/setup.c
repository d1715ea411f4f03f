#include "envmgr/episode/settle.h"
#include "envmgr/episode/setup.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/utf8.h"
#include "envmgr/base/png.h"
#include "envmgr/base/util.h"
#include "envmgr/env/guest_ops.h"
#include "envmgr/net/assets.h"
#include "evaluator/getters.h"

#define SETUP_OUTPUT_CAP (64u << 10)
#define TRACE_EXCERPT 2048             /* bytes of each output stream kept in the trace */
#define FILE_UPLOAD_MAX ((uint64_t)2 << 30)
#define UNTIL_PAUSE_MS 300.0           /* OSWorld's pause between `until` tries */
#define HELPER_TIMEOUT_S 60.0
#define BROWSER_DEBUG_PORT "9222"      /* where OSWorld's images run Chrome's remote debugging */

/* The step's facts for the trace: exit status and the (capped) output. */
static json_t *exec_detail(const guest_exec_result *r)
{
    json_t *d = json_pack("{s:i}", "exit_code", r->exit_code);
    if (r->timed_out)
        json_object_set_new(d, "timed_out", json_true());
    if (r->out_len)
        json_object_set_new(d, "stdout", getter_text_json(r->out, r->out_len > TRACE_EXCERPT ? TRACE_EXCERPT : r->out_len));
    if (r->err_len)
        json_object_set_new(d, "stderr", getter_text_json(r->err, r->err_len > TRACE_EXCERPT ? TRACE_EXCERPT : r->err_len));
    if (r->truncated || r->out_len > TRACE_EXCERPT || r->err_len > TRACE_EXCERPT)
        json_object_set_new(d, "output_cut", json_true());
    return d;
}

/* OSWorld goes on after a step that failed in the guest; envmgr does too, but says so. */
static void tolerate(json_t *detail, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tolerate(json_t *detail, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_object_set_new(detail, "tolerated", json_string(buf));
}

static int setup_failed(em_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The arguments may point into err->msg (a cause being wrapped): format aside, then copy. */
static int setup_failed(em_err *err, const char *fmt, ...)
{
    char buf[EM_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(err->msg, buf, sizeof buf);
    err->code = EM_EXIT_FAIL;
    return SETUP_FAILED;
}

/* Run as the desktop user; *r holds the result (free it). */
static int run_user(env *e, const char *const *argv, int detach, double timeout_s, guest_exec_result *r, em_err *err)
{
    return guest_ops_run(e, argv, 1, detach, timeout_s, SETUP_OUTPUT_CAP, r, err);
}

/* Run, record the facts, and flag a non-zero exit (why_fmt names the step's own meaning). */
static int run_flagged(env *e, const char *const *argv, int detach, double timeout_s, const char *what,
                       json_t **detail, em_err *err)
{
    guest_exec_result r;
    if (run_user(e, argv, detach, timeout_s, &r, err) < 0)
        return -1;
    *detail = exec_detail(&r);
    if (r.timed_out)
        tolerate(*detail, "%s did not finish within %.0f s", what, timeout_s);
    else if (r.exit_code == 127) /* the shell's "not found": the image lacks it, whatever the agent does */
        tolerate(*detail, "%s `%.200s`: not found on the image (exit status 127)", what, argv[0]);
    else if (r.exit_code != 0)
        tolerate(*detail, "%s failed (exit status %d)", what, r.exit_code);
    guest_exec_result_free(&r);
    return 0;
}

static bool until_met(json_t *until, const guest_exec_result *r)
{
    json_t *rc = json_object_get(until, "returncode");
    const char *out = json_string_value(json_object_get(until, "stdout"));
    const char *errs = json_string_value(json_object_get(until, "stderr"));
    return (rc && json_integer_value(rc) == r->exit_code) || (out && r->out && strstr(r->out, out)) ||
           (errs && r->err && strstr(r->err, errs));
}

static int save_output(const char *cache_dir, const char *name, const char *data, size_t len, em_err *err)
{
    if (!name)
        return 0;
    if (!cache_dir)
        return em_fail(err, "no episode cache to save `%s` in", name);
    _cleanup_free_ char *safe = getter_safe_name(name), *p = xasprintf("%s/%s", cache_dir, safe);
    if (mkdir_p(cache_dir, 0755, err) < 0)
        return -1;
    return write_file_atomic(p, data ? data : "", len, 0644, err);
}

/* execute / command: OSWorld's semantics (as the desktop user; output saved for cache_file;
 * `until` retried; a failure tolerated and flagged) and envmgr's `check`. */
static int run_execute(env *e, const task_step *s, const char *cache_dir, json_t **detail, em_err *err)
{
    double deadline = now_ms() + s->timeout_s * 1000;
    int tries = 0;
    guest_exec_result r = {0};
    for (;;) {
        guest_exec_result_free(&r);
        double left = (deadline - now_ms()) / 1000;
        if (run_user(e, (const char *const *)s->argv, 0, left > 1 ? left : 1, &r, err) < 0)
            return -1;
        tries++;
        if (!s->until || until_met(s->until, &r) || now_ms() + UNTIL_PAUSE_MS >= deadline)
            break;
        sleep_ms(UNTIL_PAUSE_MS);
        if (check_interrupt(err) < 0) {
            guest_exec_result_free(&r);
            return -1;
        }
    }
    *detail = exec_detail(&r);
    if (tries > 1)
        json_object_set_new(*detail, "tries", json_integer(tries));
    int rc = 0;
    if (save_output(cache_dir, s->stdout_name, r.out, r.out_len, err) < 0 ||
        save_output(cache_dir, s->stderr_name, r.err, r.err_len, err) < 0)
        rc = -1;
    else if (s->until && !until_met(s->until, &r))
        tolerate(*detail, "`until` never matched in %d tries within %.0f s", tries, s->timeout_s);
    else if (r.timed_out && s->check)
        rc = setup_failed(err, "the command did not finish within %.0f s (check: true)", s->timeout_s);
    else if (r.exit_code != 0 && s->check)
        rc = setup_failed(err, "the command exited with status %d (check: true)", r.exit_code);
    else if (r.timed_out)
        tolerate(*detail, "did not finish within %.0f s", s->timeout_s);
    else if (r.exit_code == 127)
        tolerate(*detail, "a program it runs is not on the image (exit status 127)");
    else if (r.exit_code != 0)
        tolerate(*detail, "exit status %d", r.exit_code);
    guest_exec_result_free(&r);
    return rc;
}

/* execute_with_verification: the command, then its check polled until max_wait_time. */
static int run_verified(env *e, const task_step *s, json_t **detail, em_err *err)
{
    guest_exec_result r;
    if (run_user(e, (const char *const *)s->argv, 0, s->timeout_s, &r, err) < 0)
        return -1;
    *detail = exec_detail(&r);
    guest_exec_result_free(&r);
    const char *win = json_string_value(json_object_get(s->verification, "window_exists"));
    const char *cmd = json_string_value(json_object_get(s->verification, "command_success"));
    if (!win && !cmd)
        return 0;
    double deadline = now_ms() + s->seconds * 1000;
    int checks = 0;
    for (;;) {
        bool ok = true;
        checks++;
        if (win) {
            const char *argv[] = {"sh", "-c", "wmctrl -l | cut -d' ' -f5- | grep -qiF -- \"$1\"", "sh", win, NULL};
            if (run_user(e, argv, 0, 30, &r, err) < 0)
                return -1;
            ok = r.exit_code == 0;
            guest_exec_result_free(&r);
        }
        if (ok && cmd) {
            const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
            if (run_user(e, argv, 0, 30, &r, err) < 0)
                return -1;
            ok = r.exit_code == 0;
            guest_exec_result_free(&r);
        }
        if (ok) {
            json_object_set_new(*detail, "verification", json_pack("{s:b, s:i}", "passed", 1, "checks", checks));
            return 0;
        }
        if (now_ms() + s->check_interval_s * 1000 > deadline)
            break;
        sleep_ms(s->check_interval_s * 1000);
        if (check_interrupt(err) < 0)
            return -1;
    }
    json_object_set_new(*detail, "verification", json_pack("{s:b, s:i}", "passed", 0, "checks", checks));
    return setup_failed(err, "verification did not pass within %.0f s (%s%s%s%s%s)", s->seconds,
                        win ? "window_exists `" : "", win ? win : "", win ? "`" : "", cmd ? (win ? ", " : "") : "",
                        cmd ? "command_success" : "");
}

/* A download's URL through the host's asset cache (pinned by the suite's lock file). */
static int asset_source(const task *t, const task_file *f, double deadline_ms, char **host, json_t *item,
                        em_err *err)
{
    asset_lock *lock = NULL;
    asset_info ai;
    if (asset_lock_for_task(t->dir, &lock, err) < 0)
        return -1;
    int rc = asset_get(f->url, lock, deadline_ms, &ai, err);
    asset_lock_free(lock);
    if (rc < 0)
        return -1;
    json_object_set_new(item, "url", json_string(f->url));
    json_object_set_new(item, "sha256", json_string(ai.sha256));
    json_object_set_new(item, "cached", json_boolean(!ai.fetched));
    json_object_set_new(item, "pinned", json_boolean(ai.pinned));
    *host = ai.path;
    return 0;
}

static int upload(env *e, const task *t, const task_step *s, double deadline_ms, json_t **detail, em_err *err)
{
    guest *g;
    if (env_guest(e, &g, err) < 0)
        return -1;
    json_t *done = json_array();
    *detail = json_pack("{s:o}", "files", done);
    for (size_t i = 0; i < s->nfiles; i++) {
        _cleanup_free_ char *real = NULL, *dst = getter_guest_path(s->files[i].guest_path);
        json_t *item = json_pack("{s:s}", "path", dst);
        json_array_append_new(done, item);
        if (s->files[i].url) {
            if (asset_source(t, &s->files[i], deadline_ms, &real, item, err) < 0)
                return setup_failed(err, "files[%zu]: %s", i, err->msg);
        } else if (task_file_path(t->dir, s->files[i].host_path, true, &real, err) < 0) {
            return em_prefix(err, "files[%zu]: ", i);
        }
        const char *mkdir_argv[] = {"sh", "-c", "mkdir -p \"$(dirname \"$1\")\"", "sh", dst, NULL};
        guest_exec_result r;
        if (guest_ops_run(e, mkdir_argv, 0, 0, 30, 4096, &r, err) < 0)
            return -1;
        guest_exec_result_free(&r);
        double t0 = now_ms();
        if (guest_file_upload(g, dst, real, FILE_UPLOAD_MAX, err) < 0)
            return em_prefix(err, "files[%zu]: ", i);
        json_object_set_new(item, "upload_ms", json_real(now_ms() - t0));
        /* The desktop user owns what a task gives it, as on OSWorld's VM. */
        if (!strncmp(dst, "/home/" GUEST_DESKTOP_USER "/", strlen("/home/" GUEST_DESKTOP_USER "/")) ||
            !strncmp(dst, "/tmp/", 5)) {
            const char *chown_argv[] = {"chown", GUEST_DESKTOP_USER ":" GUEST_DESKTOP_USER, dst, NULL};
            if (guest_ops_run(e, chown_argv, 0, 0, 30, 4096, &r, err) < 0)
                return -1;
            guest_exec_result_free(&r);
        }
    }
    return 0;
}

/* A step OSWorld's server does itself, on an osworld image: body POSTed to its endpoint. As
 * OSWorld's SetupController: launch, activate_window, close_window and change_wallpaper go on after
 * a refusal (logged: tolerated here), open_file fails the setup. Takes body. */
static int server_step(env *e, const char *endpoint, json_t *body, double timeout_s, bool must, json_t **detail,
                       em_err *err)
{
    long status = 0;
    char *reply = NULL;
    int rc = guest_ops_server_step(e, endpoint, body, timeout_s, &status, &reply, err);
    json_decref(body);
    if (rc < 0)
        return -1;
    *detail = json_pack("{s:s, s:I, s:s}", "server", endpoint, "status", (json_int_t)status, "reply", reply);
    if (status != 200 && must)
        rc = setup_failed(err, "OSWorld's server %s answered %ld: %.200s", endpoint, status, reply);
    else if (status != 200)
        tolerate(*detail, "OSWorld's server %s answered %ld", endpoint, status);
    free(reply);
    return rc;
}

static int window_step(env *e, const task_step *s, json_t **detail, em_err *err)
{
    if (guest_ops_osworld(e))
        return server_step(e, s->type == STEP_CLOSE_WINDOW ? "/setup/close_window" : "/setup/activate_window",
                           json_pack("{s:s, s:b, s:b}", "window_name", s->window_name, "strict", s->strict,
                                     "by_class", s->by_class),
                           30, false, detail, err);
    /* wmctrl: -a activates, -c closes gracefully; -F exact title, -x by WM_CLASS. */
    const char *argv[8];
    size_t k = 0;
    argv[k++] = "wmctrl";
    if (s->strict)
        argv[k++] = "-F";
    if (s->by_class)
        argv[k++] = "-x";
    argv[k++] = s->type == STEP_CLOSE_WINDOW ? "-c" : "-a";
    argv[k++] = s->window_name;
    argv[k] = NULL;
    char what[160];
    snprintf(what, sizeof what, "window `%.100s`", s->window_name);
    return run_flagged(e, argv, 0, 30, what, detail, err);
}

/* The guest's browser: an image helper (envmgr-browser) when it ships one, else the first of
 * Chrome's and Chromium's commands; an image without any is a run-time error naming the app. */
#define FIND_BROWSER                                                                                                 \
    "b=; for c in envmgr-browser google-chrome google-chrome-stable chromium chromium-browser; do "                  \
    "command -v \"$c\" >/dev/null 2>&1 && { b=$c; break; }; done; "                                                  \
    "[ -n \"$b\" ] || { echo 'no browser: the image has neither google-chrome nor chromium' >&2; exit 127; }; "

static int need_browser(const char *step, const guest_exec_result *r, em_err *err)
{
    if (r->exit_code == 127)
        return setup_failed(err, "%s needs a browser (Chrome or Chromium) and this image has none", step);
    return 0;
}

static int chrome_open(env *e, const task_step *s, json_t **detail, em_err *err)
{
    const char **argv = xcalloc(s->nurls + 6, sizeof *argv);
    size_t k = 0;
    argv[k++] = "sh";
    argv[k++] = "-c";
    argv[k++] = FIND_BROWSER
        "if [ \"$b\" = envmgr-browser ]; then exec envmgr-browser open \"$@\"; fi; "
        "setsid -f \"$b\" --remote-debugging-port=" BROWSER_DEBUG_PORT " --no-first-run \"$@\" </dev/null "
        ">/dev/null 2>&1";
    argv[k++] = "sh";
    for (size_t i = 0; i < s->nurls; i++)
        argv[k++] = s->urls[i];
    guest_exec_result r;
    int rc = run_user(e, argv, 0, 60, &r, err);
    free(argv);
    if (rc < 0)
        return -1;
    *detail = exec_detail(&r);
    rc = need_browser("chrome_open_tabs", &r, err);
    if (rc == 0 && r.exit_code != 0)
        tolerate(*detail, "the browser did not start (exit status %d)", r.exit_code);
    guest_exec_result_free(&r);
    return rc;
}

/* Close the tabs showing these URLs through the browser's remote debugging endpoint. URLs
 * compare without scheme, `www.` and a trailing slash (as OSWorld's compare_urls). */
static const char close_tabs_py[] =
    "import json, sys, urllib.request\n"
    "def norm(u):\n"
    "    u = u.split('://', 1)[-1].lower()\n"
    "    u = u[4:] if u.startswith('www.') else u\n"
    "    return u.rstrip('/')\n"
    "base = 'http://127.0.0.1:" BROWSER_DEBUG_PORT "/json'\n"
    "try:\n"
    "    tabs = json.load(urllib.request.urlopen(base, timeout=10))\n"
    "except OSError as e:\n"
    "    sys.exit('no browser answers on port " BROWSER_DEBUG_PORT " (chrome_open_tabs starts one): %s' % e)\n"
    "closed = 0\n"
    "for want in sys.argv[1:]:\n"
    "    for t in tabs:\n"
    "        if t.get('type') == 'page' and norm(t.get('url', '')) == norm(want):\n"
    "            urllib.request.urlopen(base + '/close/' + t['id'], timeout=10).read()\n"
    "            tabs.remove(t)\n"
    "            closed += 1\n"
    "            break\n"
    "print(closed)\n";

static int chrome_close(env *e, const task_step *s, json_t **detail, em_err *err)
{
    const char **argv = xcalloc(s->nurls + 8, sizeof *argv);
    size_t k = 0;
    argv[k++] = "sh";
    argv[k++] = "-c";
    argv[k++] = FIND_BROWSER "exec python3 -c \"$0\" \"$@\"";
    argv[k++] = close_tabs_py;
    for (size_t i = 0; i < s->nurls; i++)
        argv[k++] = s->urls[i];
    guest_exec_result r;
    int rc = run_user(e, argv, 0, HELPER_TIMEOUT_S, &r, err);
    free(argv);
    if (rc < 0)
        return -1;
    *detail = exec_detail(&r);
    rc = need_browser("chrome_close_tabs", &r, err);
    if (rc == 0 && r.exit_code != 0)
        tolerate(*detail, "closing tabs failed (exit status %d)", r.exit_code);
    guest_exec_result_free(&r);
    return rc;
}

/* Chrome's History database: rows for the given visits, timed from the guest's clock
 * (microseconds since 1601, as Chrome counts). */
static const char history_py[] =
    "import json, os, sqlite3, sys, time\n"
    "home = os.path.expanduser('~')\n"
    "paths = [os.path.join(home, p, 'Default', 'History') for p in ('.config/google-chrome', '.config/chromium')]\n"
    "db = next((p for p in paths if os.path.exists(p)), None)\n"
    "if db is None:\n"
    "    print('no browser profile: neither Chrome nor Chromium has a History database here', file=sys.stderr)\n"
    "    sys.exit(127)\n"
    "con = sqlite3.connect(db)\n"
    "for h in json.loads(sys.argv[1]):\n"
    "    t = int((time.time() - h.get('visit_time_from_now_in_seconds', 0) + 11644473600) * 1000000)\n"
    "    cur = con.execute('INSERT INTO urls (url, title, visit_count, typed_count, last_visit_time, hidden) '\n"
    "                      'VALUES (?, ?, 1, 0, ?, 0)', (h['url'], h.get('title', ''), t))\n"
    "    con.execute('INSERT INTO visits (url, visit_time, from_visit, transition, segment_id, visit_duration) '\n"
    "                'VALUES (?, ?, 0, 805306368, 0, 0)', (cur.lastrowid, t))\n"
    "con.commit()\n";

static int browse_history(env *e, const task_step *s, json_t **detail, em_err *err)
{
    _cleanup_free_ char *hist = json_dumps(s->history, JSON_COMPACT);
    const char *argv[] = {"python3", "-c", history_py, hist ? hist : "[]", NULL};
    guest_exec_result r;
    if (run_user(e, argv, 0, HELPER_TIMEOUT_S, &r, err) < 0)
        return -1;
    *detail = exec_detail(&r);
    int rc = 0;
    if (r.exit_code == 127)
        rc = setup_failed(err, "update_browse_history needs a browser profile (Chrome or Chromium) and this image "
                               "has none");
    else if (r.exit_code != 0)
        tolerate(*detail, "adding the history failed (exit status %d)", r.exit_code);
    guest_exec_result_free(&r);
    return rc;
}

static int change_wallpaper(env *e, const task_step *s, json_t **detail, em_err *err)
{
    _cleanup_free_ char *path = getter_guest_path(s->path);
    if (guest_ops_osworld(e))
        return server_step(e, "/setup/change_wallpaper", json_pack("{s:s}", "path", path), 30, false, detail, err);
    const char *argv[] = {"sh", "-c",
                          "command -v xfconf-query >/dev/null || { echo 'no xfconf-query (the xfce desktop)' >&2; "
                          "exit 127; }; n=0; for p in $(xfconf-query -c xfce4-desktop -l | grep '/last-image$'); do "
                          "xfconf-query -c xfce4-desktop -p \"$p\" -s \"$1\" && n=$((n+1)); done; [ $n -gt 0 ]",
                          "sh", path, NULL};
    return run_flagged(e, argv, 0, 30, "setting the wallpaper", detail, err);
}

/* Applications whose window OSWorld's setups take to be up (on KVM, seconds) when their next step
 * sends it keys: ef9d12bd launches Impress, then presses its menu keys 10 s later. Under TCG the
 * window may come much later and the keys go nowhere, so a launch of one of these waits (at most
 * LAUNCH_WINDOW_WAIT_S) for a new top-level window. A launch of anything else (socat, pkill, a
 * server: 95 of OSWorld's launches show no window) returns at once, as OSWorld's does. */
static const char *const gui_programs[] = {
    "libreoffice", "soffice",  "localc",   "lowriter",       "loimpress", "gimp",  "vlc",
    "google-chrome", "google-chrome-stable", "chromium", "thunderbird", "gedit", "nautilus",
    "totem",       "gnome-terminal", "code", "evince", "eog", "thunar", "mousepad", "xterm"};
#define LAUNCH_WINDOW_WAIT_S 90
#define LAUNCH_WINDOW_WAIT "90" /* the same, for the guest's loop and the trace */

/* The program a launch starts: its first word, or a shell command's first word, without its path. */
static bool launches_gui(const task_step *s)
{
    if (!s->argv || !s->argv[0])
        return false;
    const char *prog = s->argv[0];
    char first[128] = "";
    if (!strcmp(prog, "/bin/sh") && s->argc >= 3 && !strcmp(s->argv[1], "-c")) { /* a shell command */
        sscanf(s->argv[2], " %127[^ \t;&|]", first);
        prog = first;
    }
    const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    for (size_t i = 0; i < ARRAY_LEN(gui_programs); i++)
        if (!strcmp(base, gui_programs[i]))
            return true;
    return false;
}

/* The top-level windows the window manager lists, splash screens left out: LibreOffice's and GIMP's
 * splash maps seconds before the application's window (under TCG), and waiting for it let
 * ef9d12bd's menu keys go out before Impress was up. A sh expression that prints the count. */
#define COUNT_WINDOWS                                                                                      \
    "$(n=0; for w in $(wmctrl -l | cut -d' ' -f1); do "                                                   \
    "xprop -id \"$w\" _NET_WM_WINDOW_TYPE 2>/dev/null | grep -q _SPLASH || n=$((n+1)); done; echo $n)"

/* The number of top-level windows the window manager lists, splash screens left out (-1: unknown). */
static long window_count(env *e, em_err *err)
{
    const char *argv[] = {"sh", "-c", "echo " COUNT_WINDOWS, NULL};
    guest_exec_result r;
    if (run_user(e, argv, 0, 20, &r, err) < 0)
        return -2;
    long n = r.exit_code == 0 && r.out ? strtol(r.out, NULL, 10) : -1;
    guest_exec_result_free(&r);
    return n;
}

static int launch(env *e, const task_step *s, json_t **detail, em_err *err)
{
    if (guest_ops_osworld(e)) { /* started by the server as its user; OSWorld waits for no window */
        json_t *cmd = json_array();
        for (int i = 0; s->argv && s->argv[i]; i++)
            json_array_append_new(cmd, json_string(s->argv[i]));
        return server_step(e, "/setup/launch", json_pack("{s:o, s:b}", "command", cmd, "shell", 0), 30, false,
                           detail, err);
    }
    long before = launches_gui(s) ? window_count(e, err) : -1;
    if (before == -2)
        return -1;
    if (run_flagged(e, (const char *const *)s->argv, 1, 30, "launching", detail, err) < 0)
        return -1;
    if (before < 0 || json_object_get(*detail, "tolerated"))
        return 0;
    char n[32];
    snprintf(n, sizeof n, "%ld", before);
    const char *argv[] = {"sh", "-c",
                          "i=0; while [ $i -lt $(($2 * 2)) ]; do [ \"" COUNT_WINDOWS "\" -gt \"$1\" ] && exit 0; "
                          "sleep 0.5; i=$((i+1)); done; exit 1",
                          "sh", n, LAUNCH_WINDOW_WAIT, NULL};
    double t0 = now_ms();
    guest_exec_result r;
    if (run_user(e, argv, 0, LAUNCH_WINDOW_WAIT_S + 10, &r, err) < 0)
        return -1;
    json_object_set_new(*detail, "window", r.exit_code == 0 ? json_real((now_ms() - t0) / 1000.0)
                                                            : json_string("none within " LAUNCH_WINDOW_WAIT " s"));
    guest_exec_result_free(&r);
    return 0;
}

/* act: the actions run over VNC, as an agent's would, with the screen settling after each. */
static int act(env *e, const task_step *s, json_t **detail, em_err *err)
{
    size_t i, n = 0;
    json_t *a;
    json_array_foreach(s->actions, i, a)
    {
        action parsed;
        if (action_parse(a, env_width(e), env_height(e), &parsed, err) < 0)
            return setup_failed(err, "action_seq[%zu]: %s", i, err->msg);
        int rc = action_is_terminal(&parsed) ? 0 : env_act(e, &parsed, err);
        action_free(&parsed);
        if (rc < 0)
            return em_prefix(err, "action_seq[%zu]: ", i);
        n++;
        if (screen_settle(e, 200, 2000, false, NULL, err) < 0)
            return -1;
    }
    *detail = json_pack("{s:I}", "actions", (json_int_t)n);
    return 0;
}

int setup_run_step(env *e, const task *t, const task_step *s, const char *cache_dir, double deadline_ms,
                   json_t **detail, em_err *err)
{
    *detail = NULL;
    switch (s->type) {
    case STEP_EXECUTE:
    case STEP_COMMAND:
        return run_execute(e, s, cache_dir, detail, err);
    case STEP_EXECUTE_WITH_VERIFICATION:
        return run_verified(e, s, detail, err);
    case STEP_LAUNCH:
        return launch(e, s, detail, err);
    case STEP_OPEN: {
        _cleanup_free_ char *path = getter_guest_path(s->path);
        if (guest_ops_osworld(e)) /* the server waits for the file's window itself (OSWorld: 1810 s) */
            return server_step(e, "/setup/open_file", json_pack("{s:s}", "path", path), 1810, true, detail, err);
        const char *argv[] = {"sh", "-c",
                              "[ -e \"$1\" ] || { echo \"no such file: $1\" >&2; exit 2; }; "
                              "exec setsid -f exo-open \"$1\" </dev/null >/dev/null 2>&1",
                              "sh", path, NULL};
        char what[300];
        snprintf(what, sizeof what, "opening `%.200s`", path);
        return run_flagged(e, argv, 0, 30, what, detail, err);
    }
    case STEP_UPLOAD_FILE:
    case STEP_DOWNLOAD:
        return upload(e, t, s, deadline_ms, detail, err);
    case STEP_SLEEP:
        sleep_ms(s->seconds * 1000);
        return check_interrupt(err);
    case STEP_ACTIVATE_WINDOW:
    case STEP_CLOSE_WINDOW:
        return window_step(e, s, detail, err);
    case STEP_WAIT_SCREEN:
        return setup_wait_screen(e, t, s, err);
    case STEP_CHROME_OPEN_TABS:
        return chrome_open(e, s, detail, err);
    case STEP_CHROME_CLOSE_TABS:
        return chrome_close(e, s, detail, err);
    case STEP_CHANGE_WALLPAPER:
        return change_wallpaper(e, s, detail, err);
    case STEP_TIDY_DESKTOP: {
        const char *argv[] = {"wmctrl", "-k", "on", NULL};
        return run_flagged(e, argv, 0, 30, "showing the desktop", detail, err);
    }
    case STEP_UPDATE_BROWSE_HISTORY:
        return browse_history(e, s, detail, err);
    case STEP_PROXY: {
        netpolicy p;
        if (env_network(e, &p, err) < 0)
            return -1;
        *detail = json_pack("{s:o}", "network", netpolicy_to_json(&p));
        tolerate(*detail, "OSWorld's proxy: envmgr does not proxy the guest; the task's network policy (mode %s) "
                          "applies",
                 netpolicy_mode_name(p.mode));
        return 0;
    }
    case STEP_ACT:
        return act(e, s, detail, err);
    }
    return em_fail(err, "unknown step type");
}

/* Fraction of pixels in the region whose colour differs from the reference. */
static double region_diff(const uint8_t *px, int w, const uint8_t *ref, int rw, const int region[4])
{
    size_t differ = 0, total = (size_t)region[2] * region[3];
    for (int y = 0; y < region[3]; y++)
        for (int x = 0; x < region[2]; x++) {
            const uint8_t *a = px + ((size_t)(region[1] + y) * w + region[0] + x) * 4;
            const uint8_t *b = ref + ((size_t)(region[1] + y) * rw + region[0] + x) * 4;
            if (memcmp(a, b, 3))
                differ++;
        }
    return total ? (double)differ / (double)total : 0;
}

int setup_wait_screen(env *e, const task *t, const task_step *s, em_err *err)
{
    vnc_session *v;
    if (env_vnc(e, &v, err) < 0)
        return -1;
    int w = env_width(e), h = env_height(e);
    _cleanup_free_ uint8_t *ref = NULL;
    int rw = 0, rh = 0, region[4] = {0, 0, w, h};
    if (s->has_region)
        memcpy(region, s->region, sizeof region);
    if (region[0] < 0 || region[1] < 0 || region[2] <= 0 || region[3] <= 0 || region[0] + region[2] > w ||
        region[1] + region[3] > h)
        return em_fail_input(err, "region: outside the %dx%d screen", w, h);
    if (s->reference) {
        _cleanup_free_ char *real = NULL;
        if (task_file_path(t->dir, s->reference, true, &real, err) < 0 ||
            png_decode_file(real, &ref, &rw, &rh, err) < 0)
            return em_prefix(err, "reference: ");
        if (rw != w || rh != h)
            return em_fail_input(err, "reference: %dx%d, the screen is %dx%d", rw, rh, w, h);
    }
    double deadline = now_ms() + s->timeout_s * 1000, stable_since = now_ms();
    uint64_t last = 0;
    for (;;) {
        const uint8_t *px;
        if (env_frame(e, &px, err) < 0 || check_interrupt(err) < 0)
            return -1;
        if (ref) {
            if (region_diff(px, w, ref, rw, region) <= s->tolerance)
                return 0;
        } else {
            uint64_t hsh = vnc_frame_hash(v);
            if (hsh != last) {
                last = hsh;
                stable_since = now_ms();
            } else if (now_ms() - stable_since >= s->stable_ms) {
                return 0;
            }
        }
        if (now_ms() > deadline)
            return em_fail(err, "the screen %s within %.0f s", ref ? "never matched the reference" : "never settled",
                           s->timeout_s);
        sleep_ms(100);
    }
}

/* OSWorld's getters of the desktop apps (accessibility tree, terminal, wallpaper, VLC, GIMP, VS
 * Code, desktop shortcuts), read through the guest agent: the guest toolbelt (`envmgr-guest`,
 * vm-images/toolbelt) or plain guest files. Nothing of the guest is reached over a host port. */
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/util.h"
#include "evaluator/getter_call.h"
#include "evaluator/getter_parse.h"
#include "evaluator/getters.h"

#define SHORTCUTS_MAX 200
#define SHORTCUT_CAP (1u << 20)
#define MAX_BYTES_ARG "16777216" /* TOOLBELT_ANSWER_CAP */

json_t *getter_text_artifact(const char *s)
{
    return json_pack("{s:s, s:o}", "type", "text", "value", getter_text_json(s, strlen(s)));
}

json_t *getter_json_artifact(json_t *v)
{
    return json_pack("{s:s, s:o}", "type", "json", "value", v ? v : json_null());
}

int toolbelt_run(const getter_call *gc, const char *type, const char *const *args, json_t **answer, em_err *err)
{
    return toolbelt_run_for(gc, type, args, TOOLBELT_TIMEOUT_S, answer, err);
}

int toolbelt_run_for(const getter_call *gc, const char *type, const char *const *args, double timeout_s,
                     json_t **answer, em_err *err)
{
    const char *argv[24] = {"/bin/sh", "-c",
                            "command -v envmgr-guest >/dev/null 2>&1 || exit 127; exec envmgr-guest \"$@\"", "sh",
                            "--max-bytes", MAX_BYTES_ARG};
    size_t k = 6;
    for (size_t i = 0; args[i] && k < ARRAY_LEN(argv) - 1; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    *answer = NULL;
    if (getter_exec(gc->ops, type, argv, 0, timeout_s, TOOLBELT_ANSWER_CAP + 4096, &out, &len, &code, err) < 0)
        return -1;
    return toolbelt_answer(type, out, len, code, answer, err);
}

int toolbelt_text(const char *type, json_t *answer, const char *key, json_t **art, em_err *err)
{
    const char *v = json_string_value(json_object_get(answer, key));
    if (!v)
        return em_fail(err, "%s: envmgr-guest's answer has no `%s`", type, key);
    *art = getter_text_artifact(v);
    return 0;
}

static int check_a11y_tree(json_t *spec, em_err *err) { return getter_check_flag(spec, "showing", err); }

/* envmgr's own `showing` (the observations set it): only the nodes that are showing, as OSWorld's
 * agents keep them, at a tenth of the calls for a LibreOffice window. */
/* A getter OSWorld's server answers itself (guest interface osworld): its reply's body, or one line
 * with its status and what it said. */
#define SERVER_GETTER_CAP (32u << 20)

int getter_server_get(const getter_call *gc, const char *type, const char *path, json_t *body, char **data,
                      size_t *len, em_err *err)
{
    long status = 0;
    if (gc->ops->server(gc->ops->ctx, path, body, SERVER_GETTER_CAP, &status, data, len, err) < 0)
        return em_prefix(err, "%s: ", type);
    if (status == 200)
        return 0;
    char ex[201];
    size_t k = 0;
    for (size_t i = 0; i < *len && k < 200; i++)
        ex[k++] = (*data)[i] >= 0x20 && (*data)[i] < 0x7f ? (*data)[i] : ' ';
    while (k > 0 && ex[k - 1] == ' ')
        k--;
    ex[k] = '\0';
    free(*data);
    *data = NULL;
    return em_fail(err, "%s: OSWorld's server %s answered %ld%s%s", type, path, status, k ? ": " : "", ex);
}

static int server_a11y_tree(const getter_call *gc, json_t **art, em_err *err)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (getter_server_get(gc, "accessibility_tree", "/accessibility", NULL, &data, &len, err) < 0)
        return -1;
    json_auto_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_string(json_object_get(j, "AT")))
        return em_fail(err, "accessibility_tree: OSWorld's server /accessibility answered no {\"AT\": string}");
    return toolbelt_text("accessibility_tree", j, "AT", art, err);
}

static int run_a11y_tree(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    if (gc->ops->server) /* its server's whole tree (`showing` is envmgr's own) */
        return server_a11y_tree(gc, art, err);
    const char *args[] = {"a11y-tree", getter_flag_true(json_object_get(spec, "showing")) ? "--showing" : NULL, NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "accessibility_tree", args, &a, err) < 0)
        return -1;
    return toolbelt_text("accessibility_tree", a, "AT", art, err);
}

static int run_terminal_output(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *args[] = {"terminal-output", NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "vm_terminal_output", args, &a, err) < 0)
        return -1;
    if (json_is_null(json_object_get(a, "output")))
        return em_fail(err, "vm_terminal_output: the active window (%.100s) has no focused terminal",
                       json_string_value(json_object_get(a, "application")) ?: "none");
    return toolbelt_text("vm_terminal_output", a, "output", art, err);
}

static int check_dest(json_t *spec, em_err *err) { return getter_check_string(spec, "dest", true, err); }

static int run_wallpaper(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    if (gc->ops->server) { /* the server sends the wallpaper's file */
        _cleanup_free_ char *data = NULL;
        size_t len;
        json_auto_t *body = json_object();
        if (getter_server_get(gc, "vm_wallpaper", "/wallpaper", body, &data, &len, err) < 0)
            return -1;
        return getter_save_bytes(gc, "vm_wallpaper", json_string_value(json_object_get(spec, "dest")), data, len, art,
                                 err);
    }
    const char *args[] = {"wallpaper", NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "vm_wallpaper", args, &a, err) < 0)
        return -1;
    const char *path = json_string_value(json_object_get(a, "path"));
    if (!path || !*path || !json_is_true(json_object_get(a, "exists")))
        return em_fail(err, "vm_wallpaper: the desktop has no background image file (%.200s)", path ?: "a colour");
    if (getter_fetch_vm_file(gc, path, json_string_value(json_object_get(spec, "dest")), false, art, err) < 0)
        return em_prefix(err, "vm_wallpaper: ");
    return 0;
}

static int run_vlc_playing(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *args[] = {"vlc-status", NULL};
    json_auto_t *a = NULL;
    if (toolbelt_run(gc, "vlc_playing_info", args, &a, err) < 0)
        return -1;
    const char *xml = json_string_value(json_object_get(a, "status_xml"));
    if (!xml)
        return em_fail(err, "vlc_playing_info: envmgr-guest's answer has no `status_xml`");
    return getter_save_bytes(gc, "vlc_playing_info", json_string_value(json_object_get(spec, "dest")), xml,
                             strlen(xml), art, err);
}

/* A file of the desktop user's home, as OSWorld's getters read the app's config files. */
static int run_home_file(const getter_call *gc, const char *type, const char *rel, json_t *spec, json_t **art,
                         em_err *err)
{
    _cleanup_free_ char *path = xasprintf("~/%s", rel);
    if (getter_fetch_vm_file(gc, path, json_string_value(json_object_get(spec, "dest")), false, art, err) < 0)
        return em_prefix(err, "%s: ", type);
    return 0;
}

static int run_vlc_config(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    return run_home_file(gc, "vlc_config", ".config/vlc/vlcrc", spec, art, err);
}

static int check_gimp(json_t *spec, em_err *err)
{
    if (check_dest(spec, err) < 0 || getter_check_string(spec, "file_name", true, err) < 0)
        return -1;
    const char *f = json_string_value(json_object_get(spec, "file_name"));
    if (strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, ".."))
        return em_fail_input(err, "file_name: `%.100s`: a file name inside ~/.config/GIMP/2.10", f);
    return 0;
}

static int run_gimp_config(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    _cleanup_free_ char *rel =
        xasprintf(".config/GIMP/2.10/%s", json_string_value(json_object_get(spec, "file_name")));
    return run_home_file(gc, "gimp_config_file", rel, spec, art, err);
}

/* OSWorld's video types (the MIME subtypes its default_video_player asks about). */
static const char *const video_types[] = {
    "3gp", "3gpp", "3gpp2", "avi", "divx", "dv", "fli", "flv", "mp2t", "mp4", "mp4v-es", "mpeg", "mpeg-system",
    "msvideo", "ogg", "quicktime", "vnd.divx", "vnd.mpegurl", "vnd.rn-realvideo", "webm", "x-anim", "x-avi",
    "x-flc", "x-fli", "x-flv", "x-m4v", "x-matroska", "x-mpeg", "x-mpeg-system", "x-mpeg2", "x-ms-asf",
    "x-ms-asf-plugin", "x-ms-asx", "x-ms-wm", "x-ms-wmv", "x-ms-wmx", "x-ms-wvx", "x-msvideo", "x-nsv", "x-ogm",
    "x-ogm+ogg", "x-theora", "x-theora+ogg"};

/* The .desktop file named most often as the default for OSWorld's video types ("unknown" when
 * none is). GIO answers in well under a second a type; xdg-mime, a shell script, took minutes for
 * the list under TCG, so it is only the fallback on an image without gio. */
static int run_video_player(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *argv[8 + ARRAY_LEN(video_types)] = {
        "/bin/sh", "-c",
        "for t; do if command -v gio >/dev/null; then gio mime \"video/$t\" 2>/dev/null | sed -n '1s/.*: //p'; "
        "else xdg-mime query default \"video/$t\"; fi; done",
        "sh"};
    size_t k = 4;
    for (size_t i = 0; i < ARRAY_LEN(video_types); i++)
        argv[k++] = video_types[i];
    argv[k] = NULL;
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (getter_exec(gc->ops, "default_video_player", argv, 0, 180, 1u << 16, &out, &len, &code, err) < 0)
        return -1;
    if (code < 0)
        return em_fail(err, "default_video_player: the MIME queries did not finish in time");
    /* count each answer; ties go to the first seen, as Python's Counter.most_common */
    json_t *counts = json_object();
    const char *best = NULL;
    json_int_t best_n = 0;
    for (char *line = out, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (!*line)
            continue;
        json_t *c = json_object_get(counts, line);
        json_int_t n = (c ? json_integer_value(c) : 0) + 1;
        json_object_set_new(counts, line, json_integer(n));
        if (n > best_n) {
            best_n = n;
            best = json_object_iter_key(json_object_iter_at(counts, line));
        }
    }
    *art = getter_text_artifact(best ? best : "unknown");
    json_decref(counts);
    return 0;
}

static int run_vscode(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *argv[] = {"/bin/sh", "-c", "command -v code", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (getter_exec(gc->ops, "vscode_config", argv, 0, 30, 4096, &out, &len, &code, err) < 0)
        return -1;
    if (code != 0)
        return em_fail(err, "vscode_config: needs VS Code, which this image does not have (no `code` command)");
    return em_fail(err, "vscode_config: running a VS Code command through its palette is not implemented");
}

/* OSWorld's shortcuts_on_desktop: {file name: text} of every *.desktop file in ~/Desktop. */
static int run_shortcuts(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *argv[] = {"find", EM_GUEST_HOME "/Desktop", "-maxdepth", "1", "-type", "f", "-name", "*.desktop",
                          "-printf", "%f\\0", NULL};
    _cleanup_free_ char *out = NULL;
    size_t len;
    int code;
    if (getter_exec(gc->ops, "shortcuts_on_desktop", argv, 0, 30, 1u << 20, &out, &len, &code, err) < 0)
        return -1;
    if (!gc->ops->read_file)
        return em_fail(err, "shortcuts_on_desktop: no env to read files in");
    json_t *v = json_object();
    size_t n = 0;
    for (size_t i = 0; i < len && n < SHORTCUTS_MAX; n++) {
        const char *name = out + i, *end = memchr(name, '\0', len - i);
        size_t l = end ? (size_t)(end - name) : len - i;
        i += l + 1;
        _cleanup_free_ char *nm = xasprintf("%.*s", (int)l, name);
        _cleanup_free_ char *path = xasprintf(EM_GUEST_HOME "/Desktop/%s", nm), *data = NULL;
        size_t dl;
        if (strchr(nm, '/') || gc->ops->read_file(gc->ops->ctx, path, SHORTCUT_CAP, &data, &dl, err) < 0)
            continue; /* gone or too large since find saw it */
        json_t *key = getter_text_json(nm, l);
        json_object_set_new(v, json_string_value(key), getter_text_json(data, dl));
        json_decref(key);
    }
    em_err_clear(err);
    *art = getter_json_artifact(v);
    return 0;
}

static const getter_def defs[] = {
    {"accessibility_tree", check_a11y_tree, run_a11y_tree, false,
     "the desktop's AT-SPI tree in OSWorld's XML (`envmgr-guest a11y-tree`: bulk reads, capped at 10000 nodes, "
     "8 MiB, 20 s); text. `showing: true` (envmgr's): only the nodes that are showing"},
    {"vm_terminal_output", getter_check_nothing, run_terminal_output, false,
     "the focused terminal's text (gnome-terminal, read through AT-SPI); an error when no terminal is focused"},
    {"vm_wallpaper", check_dest, run_wallpaper, true,
     "the desktop's background image file (xfconf), copied under `dest`; an error for a plain colour"},
    {"vlc_playing_info", check_dest, run_vlc_playing, true,
     "status.xml of VLC's HTTP interface, asked inside the guest (127.0.0.1:8080), saved under `dest`"},
    {"vlc_config", check_dest, run_vlc_config, true, "~/.config/vlc/vlcrc under `dest`"},
    {"gimp_config_file", check_gimp, run_gimp_config, true, "~/.config/GIMP/2.10/`file_name` under `dest`"},
    {"default_video_player", getter_check_nothing, run_video_player, false,
     "the .desktop file named most often as the default for OSWorld's video types (gio mime; xdg-mime without "
     "gio), without OSWorld's trailing newline"},
    {"vscode_config", getter_check_nothing, run_vscode, false,
     "no envmgr image has VS Code: a run-time error naming it"},
    {"shortcuts_on_desktop", getter_check_nothing, run_shortcuts, false,
     "{file name: text} of the *.desktop files in ~/Desktop"},
};

const getter_def *getter_app_defs(size_t *n)
{
    *n = ARRAY_LEN(defs);
    return defs;
}

#include "envmgr/action/computer_use.h"

#include <ctype.h>
#include <math.h>
#include <string.h>
#include <strings.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/json_type.h"
#include "envmgr/base/util.h"
#include "envmgr/vm/keys.h"

#define DISPLAY_SHRINK_MAX 4 /* a display smaller than a quarter of the screen's side loses clicks' precision */
#define DISPLAY_GROW_MAX 2   /* a model's image processor may round a side up (UI-TARS-1.5: to a multiple of 28) */

int cu_geometry_make(int sw, int sh, json_t *display, const char *field, cu_geometry *g, em_err *err)
{
    *g = (cu_geometry){sw, sh, sw, sh};
    if (!display || json_is_null(display))
        return 0;
    json_t *jw = json_array_get(display, 0), *jh = json_array_get(display, 1);
    if (!json_is_array(display) || json_array_size(display) != 2 || !json_is_integer(jw) || !json_is_integer(jh))
        return em_fail_input(err, "%s: expected [width, height] in whole pixels", field);
    json_int_t w = json_integer_value(jw), h = json_integer_value(jh);
    if (w > (json_int_t)sw * DISPLAY_GROW_MAX || h > (json_int_t)sh * DISPLAY_GROW_MAX || w * DISPLAY_SHRINK_MAX < sw ||
        h * DISPLAY_SHRINK_MAX < sh)
        return em_fail_input(err, "%s: [%lld, %lld] must be between a quarter and twice the screen's size (%dx%d)",
                             field, (long long)w, (long long)h, sw, sh);
    g->display_w = (int)w;
    g->display_h = (int)h;
    return 0;
}

int cu_point(const cu_geometry *g, double x, double y, const char *field, int *sx, int *sy, em_err *err)
{
    if (!isfinite(x) || !isfinite(y) || x < 0 || y < 0 || x >= g->display_w || y >= g->display_h)
        return em_fail_input(err, "%s: [%g, %g] is off the display (%dx%d)", field, x, y, g->display_w, g->display_h);
    /* The centre of the display pixel, mapped to the screen pixel under it. */
    *sx = (int)floor((floor(x) + 0.5) * g->screen_w / g->display_w);
    *sy = (int)floor((floor(y) + 0.5) * g->screen_h / g->display_h);
    return 0;
}

void cu_point_to_display(const cu_geometry *g, int sx, int sy, int *dx, int *dy)
{
    *dx = (int)floor((sx + 0.5) * g->display_w / g->screen_w);
    *dy = (int)floor((sy + 0.5) * g->display_h / g->screen_h);
}

/* Vendor spellings that differ from envmgr's names (case-insensitive; '_' and '-' ignored). */
static const struct {
    const char *vendor, *name;
} aliases[] = {
    {"arrowup", "up"},         {"arrowdown", "down"},        {"arrowleft", "left"},   {"arrowright", "right"},
    {"pageup", "pageup"},      {"prior", "pageup"},          {"pagedown", "pagedown"}, {"next", "pagedown"},
    {"controll", "ctrl"},      {"controlr", "ctrlright"},    {"shiftl", "shift"},     {"shiftr", "shiftright"},
    {"altl", "alt"},           {"altr", "altright"},         {"superl", "win"},       {"superr", "winright"},
    {"metal", "win"},          {"metar", "winright"},        {"cmd", "win"},          {"os", "win"},
    {"windows", "win"},        {"escape", "esc"},            {"kpenter", "enter"},    {"backspace", "backspace"},
    {"browserback", "browserback"}, {"xf86back", "browserback"}, {"browserforward", "browserforward"},
    {"xf86forward", "browserforward"}, {"minus", "-"},       {"plus", "+"},           {"equal", "="},
    {"comma", ","},            {"period", "."},              {"slash", "/"},          {"backslash", "\\"},
    {"semicolon", ";"},        {"apostrophe", "'"},          {"quotedbl", "\""},      {"grave", "`"},
    {"bracketleft", "["},      {"bracketright", "]"},        {"braceleft", "{"},      {"braceright", "}"},
    {"exclam", "!"},           {"at", "@"},                  {"numbersign", "#"},     {"dollar", "$"},
    {"percent", "%"},          {"asciicircum", "^"},         {"ampersand", "&"},      {"asterisk", "*"},
    {"parenleft", "("},        {"parenright", ")"},          {"underscore", "_"},     {"colon", ":"},
    {"less", "<"},             {"greater", ">"},             {"question", "?"},       {"bar", "|"},
    {"asciitilde", "~"},
};

int cu_key_name(const char *vendor, const char *field, char *out, size_t outlen, em_err *err)
{
    size_t len = strlen(vendor);
    if (len == 0 || len > 31)
        return em_fail_input(err, "%s: `%.32s` is not a key name", field, vendor);
    char folded[32];
    size_t n = 0;
    if (len == 1) { /* one character keeps its case: "A" is shift+a */
        folded[n++] = vendor[0];
    } else {
        for (size_t i = 0; i < len; i++)
            if (vendor[i] != '_' && vendor[i] != '-')
                folded[n++] = (char)tolower((unsigned char)vendor[i]);
        if (!strncmp(folded, "kp", 2) && n == 3 && isdigit((unsigned char)folded[2])) { /* xdotool's KP_0 */
            folded[0] = 'n', folded[1] = 'u', folded[2] = 'm', folded[3] = vendor[len - 1], n = 4;
        }
    }
    folded[n] = '\0';
    const char *name = folded;
    for (size_t i = 0; i < ARRAY_LEN(aliases); i++)
        if (n > 1 && !strcmp(aliases[i].vendor, folded))
            name = aliases[i].name;
    key_code k;
    if (key_lookup(name, &k) < 0)
        return em_fail_input(err, "%s: unknown key `%.32s`", field, vendor);
    if (strlen(name) >= outlen)
        return em_fail_input(err, "%s: key name too long", field);
    strcpy(out, name);
    return 0;
}

void cu_result_init(cu_result *r)
{
    *r = (cu_result){.actions = json_array(), .answer = CU_ANSWER_SCREENSHOT};
}

void cu_result_clear(cu_result *r)
{
    json_decref(r->actions);
    r->actions = NULL;
}

int cu_add(cu_result *r, json_t *one, em_err *err)
{
    if (!one)
        return em_fail(err, "out of memory building an action");
    if (json_array_size(r->actions) >= CU_ACTIONS_MAX) {
        json_decref(one);
        return em_fail_input(err, "the reply expands to more than %d actions", CU_ACTIONS_MAX);
    }
    json_array_append_new(r->actions, one);
    return 0;
}

int cu_add_move(cu_result *r, int x, int y, em_err *err)
{
    return cu_add(r, json_pack("{s:s, s:i, s:i}", "action_type", "MOVE_TO", "x", x, "y", y), err);
}

int cu_add_keys(cu_result *r, const char *type, char keys[][32], size_t n, bool reverse, em_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (cu_add(r, json_pack("{s:s, s:s}", "action_type", type, "key", keys[reverse ? n - 1 - i : i]), err) < 0)
            return -1;
    return 0;
}

int cu_add_combo(cu_result *r, char keys[][32], size_t n, em_err *err)
{
    if (n == 1)
        return cu_add(r, json_pack("{s:s, s:s}", "action_type", "PRESS", "key", keys[0]), err);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_string(keys[i]));
    return cu_add(r, json_pack("{s:s, s:o}", "action_type", "HOTKEY", "keys", list), err);
}

int cu_add_wait(cu_result *r, double seconds, em_err *err)
{
    do {
        double s = seconds > ACTION_WAIT_MAX_S ? ACTION_WAIT_MAX_S : seconds;
        if (cu_add(r, json_pack("{s:s, s:f}", "action_type", "WAIT", "seconds", s), err) < 0)
            return -1;
        seconds -= s;
    } while (seconds > 0);
    return 0;
}

int cu_add_text(cu_result *r, const char *text, const char *field, em_err *err)
{
    size_t len = strlen(text);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        key_code k;
        if (key_for_char(c, &k) < 0)
            return em_fail_input(err, "%s: byte %zu (0x%02x) cannot be typed on a US keyboard (printable ASCII, \\n, \\t)",
                                 field, i, c);
    }
    for (size_t off = 0; off < len; off += ACTION_TEXT_MAX) {
        size_t n = len - off < ACTION_TEXT_MAX ? len - off : ACTION_TEXT_MAX;
        if (cu_add(r, json_pack("{s:s, s:s%}", "action_type", "TYPING", "text", text + off, n), err) < 0)
            return -1;
    }
    return 0;
}

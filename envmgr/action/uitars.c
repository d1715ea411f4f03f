/* UI-TARS action text -> computer_13 actions. A hand-written scanner over the grammar the format's
 * writers produce; nothing is evaluated and nothing recurses:
 *
 *   answer := [prose] "Action:" calls | calls        prose (Thought:, Reflection:) is skipped
 *   calls  := call (NEWLINE+ ["Action:"] call)*      "```" lines and "# ..." after a call are skipped
 *   call   := NAME '(' [arg (',' arg)* [',']] ')'
 *   arg    := NAME '=' STRING                        STRING: '...' or "...", on one line
 *
 * Strings differ from Python's in one way, on purpose: the reference parsers (UI-TARS's
 * action_parser.py, OSWorld's UI-TARS agents) take type(content='...') up to its last quote because
 * models leave apostrophes unescaped, so here a quote closes a string only where an argument can end
 * (before ',' or ')'); "it's" stays whole without any wider guessing. A string ends on its line (the
 * prompts ask for \n, and UI-TARS's parser takes no raw line break in type()), so a lost closing quote
 * cannot carry the next action into the typed text; only finished()'s content, which is dropped, may
 * span lines. */
#include "envmgr/action/uitars.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/util.h"

#define NAME_MAX_LEN 24  /* action and argument names */
#define ARGS_MAX 8
#define EXCERPT_MAX 40   /* characters of the model's text quoted in a message */
#define NUMBER_MAX_LEN 31
#define KEY_NAME_MAX 32  /* cu_key_name's names */
#define RELATIVE_SCALE 1000.0

/* Qwen2.5-VL's image processor (smart_resize), whose output UI-TARS-1.5's absolute coordinates
 * refer to: the defaults of UI-TARS's action_parser.py. */
#define QWEN_FACTOR 28.0
#define QWEN_MIN_PIXELS (100.0 * 28 * 28)
#define QWEN_MAX_PIXELS (16384.0 * 28 * 28)
#define QWEN_MAX_RATIO 200.0

typedef struct parser {
    const char *src;
    size_t len, pos;
    size_t line_pos; /* line_at's cache: line_no is the line of byte line_pos */
    int line_no;
    const cu_geometry *g;
    uitars_coords coords;
    int img_w, img_h; /* the model's coordinate space (ABSOLUTE) */
    cu_result *r;
    em_err *err;
    const char *ended_by; /* finished() or call_user() seen: nothing may follow */
} parser;

typedef struct uarg {
    const char *name;                /* canonical parameter name */
    char written[NAME_MAX_LEN + 1];  /* as the model wrote it, for messages */
    char *val;                       /* decoded, NUL-terminated */
    size_t len;
} uarg;

struct verb;

typedef struct call {
    const struct verb *verb;
    int line;
    uarg args[ARGS_MAX];
    size_t nargs;
} call;

typedef int (*verb_fn)(parser *p, call *c);

typedef struct verb {
    const char *name;
    const char *params; /* " a b ": the canonical names it takes */
    verb_fn fn;
    bool multiline;     /* its strings may span lines */
} verb;

/* ---- positions and messages ---- */

static int line_at(parser *p, size_t pos)
{
    if (pos < p->line_pos) {
        p->line_pos = 0;
        p->line_no = 1;
    }
    for (; p->line_pos < pos && p->line_pos < p->len; p->line_pos++)
        if (p->src[p->line_pos] == '\n')
            p->line_no++;
    return p->line_no;
}

/* At most EXCERPT_MAX bytes of s, as one printable ASCII line (messages are one line and valid UTF-8). */
static void excerpt(const char *s, size_t n, char out[EXCERPT_MAX + 4])
{
    size_t k = 0;
    for (; k < n && k < EXCERPT_MAX; k++) {
        unsigned char c = (unsigned char)s[k];
        out[k] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    if (k < n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

/* The rest of the current line, for "got `...`". */
static void excerpt_here(const parser *p, char out[EXCERPT_MAX + 4])
{
    if (p->pos >= p->len) {
        strcpy(out, "the end of the answer");
        return;
    }
    size_t n = 0;
    while (p->pos + n < p->len && p->src[p->pos + n] != '\n')
        n++;
    excerpt(p->src + p->pos, n, out);
}

static int fail(parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *p, int line, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return em_fail_input(p->err, "uitars: line %d: %s", line, msg);
}

/* A field name for the cu_* helpers, whose messages start with it. */
static void field_name(const call *c, const char *param, char *out, size_t n)
{
    snprintf(out, n, "uitars: line %d: %s: %s", c->line, c->verb->name, param);
}

/* ---- scanning ---- */

static int peekc(const parser *p, size_t off)
{
    return p->pos + off < p->len ? (unsigned char)p->src[p->pos + off] : -1;
}

static void skip_inline(parser *p)
{
    while (p->pos < p->len && (p->src[p->pos] == ' ' || p->src[p->pos] == '\t' || p->src[p->pos] == '\r'))
        p->pos++;
}

static void skip_space(parser *p)
{
    while (p->pos < p->len && isspace((unsigned char)p->src[p->pos]))
        p->pos++;
}

static bool starts(const parser *p, size_t i, const char *s)
{
    size_t n = strlen(s);
    return i <= p->len && p->len - i >= n && !memcmp(p->src + i, s, n);
}

/* "Action:" or, as UI-TARS-desktop also takes, with a full-width colon. */
static size_t marker_at(const parser *p, size_t i)
{
    if (starts(p, i, "Action:"))
        return 7;
    return starts(p, i, "Action\xef\xbc\x9a") ? 9 : 0;
}

static size_t ident_len(const parser *p, size_t i)
{
    size_t n = 0;
    if (i < p->len && (isalpha((unsigned char)p->src[i]) || p->src[i] == '_'))
        for (n = 1; i + n < p->len && (isalnum((unsigned char)p->src[i + n]) || p->src[i + n] == '_'); n++)
            ;
    return n;
}

/* The answer's action part: after the first line that starts with the marker, else the whole text
 * (the caller passed only the calls). */
static int find_actions(parser *p)
{
    for (size_t i = 0; i < p->len;) {
        size_t j = i;
        while (j < p->len && (p->src[j] == ' ' || p->src[j] == '\t'))
            j++;
        if (marker_at(p, j)) {
            p->pos = j;
            return 0;
        }
        const char *nl = memchr(p->src + j, '\n', p->len - j);
        if (!nl)
            break;
        i = (size_t)(nl - p->src) + 1;
    }
    skip_space(p);
    if (starts(p, p->pos, "Thought:") || starts(p, p->pos, "Reflection:") || starts(p, p->pos, "Action_Summary:"))
        return em_fail_input(p->err, "uitars: the answer has no `Action:` line after its thought");
    p->pos = 0;
    return 0;
}

/* ---- strings ---- */

/* Whether a quote at i ends the string: an argument can end there. */
static bool quote_closes(const parser *p, size_t i)
{
    while (i < p->len && isspace((unsigned char)p->src[i]))
        i++;
    return i < p->len && (p->src[i] == ',' || p->src[i] == ')');
}

/* One backslash escape at p->pos (the backslash); appends to buf. The format asks models for \n, \'
 * and \" "in normal python string format"; other escapes Python would turn into other characters are
 * refused rather than typed wrongly, and a backslash before anything else stays, as in Python. */
static int lex_escape(parser *p, const call *c, const char *param, char *buf, size_t *n)
{
    int e = peekc(p, 1);
    p->pos += 2;
    switch (e) {
    case 'n': buf[(*n)++] = '\n'; return 0;
    case 't': buf[(*n)++] = '\t'; return 0;
    case 'r': buf[(*n)++] = '\r'; return 0;
    case '\\': buf[(*n)++] = '\\'; return 0;
    case '\'': buf[(*n)++] = '\''; return 0;
    case '"': buf[(*n)++] = '"'; return 0;
    case '\n': return 0; /* a continued line */
    case '\r':
        if (peekc(p, 0) == '\n') /* ... in a CRLF answer */
            p->pos++;
        return 0;
    default:
        if (e > 0 && strchr("abfvxuUN01234567", e))
            return fail(p, line_at(p, p->pos - 2),
                        "%s: %s: unsupported escape `\\%c` (the format's: \\n \\t \\' \\\" \\\\)", c->verb->name,
                        param, e);
        buf[(*n)++] = '\\';
        buf[(*n)++] = (char)e;
        return 0;
    }
}

/* The quoted value at p->pos (its opening quote). Decoding never lengthens the text, so one buffer of
 * the remaining length holds it. */
static int lex_string(parser *p, const call *c, uarg *a)
{
    char q = p->src[p->pos];
    int line0 = line_at(p, p->pos);
    p->pos++;
    char *buf = xmalloc(p->len - p->pos + 1);
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len || (p->src[p->pos] == '\\' && p->pos + 1 >= p->len)) {
            free(buf);
            return fail(p, line0, "%s: %s: unterminated string (no closing %c)", c->verb->name, a->written, q);
        }
        char ch = p->src[p->pos];
        if (ch == q && quote_closes(p, p->pos + 1)) {
            p->pos++;
            break;
        }
        if (ch == '\\') {
            if (lex_escape(p, c, a->written, buf, &n) < 0) {
                free(buf);
                return -1;
            }
            continue;
        }
        if (ch == '\n' && !c->verb->multiline) {
            free(buf);
            return fail(p, line0, "%s: %s: unterminated string (no closing %c on its line; write a line break as \\n)",
                        c->verb->name, a->written, q);
        }
        if (ch != '\r') /* CRLF answers: the line break is the LF */
            buf[n++] = ch;
        p->pos++;
    }
    buf[n] = '\0';
    a->val = buf;
    a->len = n;
    return 0;
}

/* ---- calls ---- */

/* The parameters any action takes; a verb lists its own in verb.params. */
static const char *const param_names[] = {"start_box", "end_box", "direction", "key", "content"};

static const struct {
    const char *written, *name;
} aliases[] = {
    /* UI-TARS-1.5 writes point=, start_point=, end_point=; the parsers read them as boxes */
    {"point", "start_box"}, {"start_point", "start_box"}, {"end_point", "end_box"},
    /* the reference parser's fallbacks for hotkey and press */
    {"hotkey", "key"}, {"press", "key"},
};

/* The canonical name (a param_names entry) of an argument the verb takes, or NULL. */
static const char *canonical(const verb *v, const char *written)
{
    const char *name = written;
    for (size_t i = 0; i < ARRAY_LEN(aliases); i++)
        if (!strcmp(aliases[i].written, written))
            name = aliases[i].name;
    for (size_t i = 0; i < ARRAY_LEN(param_names); i++) {
        char spaced[NAME_MAX_LEN + 3];
        snprintf(spaced, sizeof spaced, " %s ", param_names[i]);
        if (!strcmp(param_names[i], name) && strstr(v->params, spaced))
            return param_names[i];
    }
    return NULL;
}

static int fail_params(parser *p, const call *c, int line, const char *written)
{
    if (!strcmp(c->verb->params, " "))
        return fail(p, line, "%s: takes no arguments, got `%s`", c->verb->name, written);
    return fail(p, line, "%s: unexpected argument `%s` (takes:%.*s)", c->verb->name, written,
                (int)strlen(c->verb->params) - 1, c->verb->params);
}

static int parse_arg(parser *p, call *c)
{
    int line = line_at(p, p->pos);
    size_t n = ident_len(p, p->pos);
    char got[EXCERPT_MAX + 4];
    if (n == 0) {
        excerpt_here(p, got);
        return fail(p, line, "%s: expected name='value' (e.g. start_box='(x,y)'), got `%s`", c->verb->name, got);
    }
    if (n > NAME_MAX_LEN) {
        excerpt(p->src + p->pos, n, got);
        return fail_params(p, c, line, got);
    }
    uarg *a = &c->args[c->nargs];
    memset(a, 0, sizeof *a);
    memcpy(a->written, p->src + p->pos, n);
    if (!(a->name = canonical(c->verb, a->written)))
        return fail_params(p, c, line, a->written);
    for (size_t i = 0; i < c->nargs; i++)
        if (c->args[i].name == a->name)
            return fail(p, line, "%s: %s is given twice (as %s and %s)", c->verb->name, a->name, c->args[i].written,
                        a->written);
    p->pos += n;
    skip_space(p);
    if (peekc(p, 0) != '=') {
        excerpt_here(p, got);
        return fail(p, line, "%s: expected `=` after `%s`, got `%s`", c->verb->name, a->written, got);
    }
    p->pos++;
    skip_space(p);
    if (peekc(p, 0) != '\'' && peekc(p, 0) != '"') {
        excerpt_here(p, got);
        return fail(p, line_at(p, p->pos), "%s: %s: expected a quoted value, got `%s`", c->verb->name, a->written, got);
    }
    if (lex_string(p, c, a) < 0)
        return -1;
    c->nargs++;
    return 0;
}

/* After a call's ')': the rest of its line is empty or a comment. */
static int end_of_call(parser *p, const call *c)
{
    skip_inline(p);
    if (peekc(p, 0) == '#')
        while (p->pos < p->len && p->src[p->pos] != '\n')
            p->pos++;
    if (p->pos >= p->len || p->src[p->pos] == '\n')
        return 0;
    char got[EXCERPT_MAX + 4];
    excerpt_here(p, got);
    return fail(p, line_at(p, p->pos), "%s: expected a new line after `)`, got `%s`", c->verb->name, got);
}

static int parse_args(parser *p, call *c)
{
    for (;;) {
        skip_space(p);
        if (peekc(p, 0) == ')')
            break;
        if (c->nargs == ARGS_MAX)
            return fail(p, c->line, "%s: more than %d arguments", c->verb->name, ARGS_MAX);
        if (parse_arg(p, c) < 0)
            return -1;
        skip_space(p);
        if (peekc(p, 0) != ',') /* lex_string closes a string only before ',' or ')' */
            break;
        p->pos++;
    }
    if (peekc(p, 0) != ')')
        return fail(p, line_at(p, p->pos), "%s: expected `)`", c->verb->name);
    p->pos++;
    return end_of_call(p, c);
}

/* ---- coordinates ---- */

static void trim(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s))
        (*s)++, (*n)--;
    while (*n && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

/* Drop the tags a point may be wrapped in: Qwen-VL's box tokens, UI-TARS-1.5's <point>, <bbox>. */
static void strip_tags(const char **s, size_t *n)
{
    static const char *const tags[][2] = {
        {"<|box_start|>", "<|box_end|>"}, {"<point>", "</point>"}, {"<bbox>", "</bbox>"}};
    trim(s, n);
    for (size_t i = 0; i < ARRAY_LEN(tags); i++) {
        size_t a = strlen(tags[i][0]), b = strlen(tags[i][1]);
        if (*n >= a + b && !memcmp(*s, tags[i][0], a) && !memcmp(*s + *n - b, tags[i][1], b)) {
            *s += a;
            *n -= a + b;
            trim(s, n);
        }
    }
}

static int read_number(const char *s, size_t n, size_t *i, double *out)
{
    size_t start = *i;
    if (*i < n && (s[*i] == '-' || s[*i] == '+'))
        (*i)++;
    while (*i < n && (isdigit((unsigned char)s[*i]) || s[*i] == '.'))
        (*i)++;
    size_t len = *i - start;
    if (len == 0 || len > NUMBER_MAX_LEN)
        return -1;
    char buf[NUMBER_MAX_LEN + 1], *end;
    memcpy(buf, s + start, len);
    buf[len] = '\0';
    *out = strtod(buf, &end);
    return *end == '\0' && isfinite(*out) ? 0 : -1;
}

/* "(x,y)", "[x1, y1, x2, y2]", "(x1,y1),(x2,y2)", "x y": 2 or 4 numbers, one level of brackets. */
static int read_numbers(const char *s, size_t n, double v[4], size_t *count)
{
    char open = 0;
    *count = 0;
    for (size_t i = 0; i < n;) {
        char ch = s[i];
        if (ch == ',' || isspace((unsigned char)ch)) {
            i++;
        } else if (ch == '(' || ch == '[') {
            if (open)
                return -1;
            open = ch;
            i++;
        } else if (ch == ')' || ch == ']') {
            if (open != (ch == ')' ? '(' : '['))
                return -1;
            open = 0;
            i++;
        } else if (*count == 4 || read_number(s, n, &i, &v[(*count)++]) < 0) {
            return -1;
        }
    }
    return !open && (*count == 2 || *count == 4) ? 0 : -1;
}

static void describe_space(const parser *p, char *out, size_t n)
{
    const cu_geometry *g = p->g;
    if (p->coords == UITARS_COORDS_RELATIVE_1000)
        snprintf(out, n, "coordinates are 0..1000");
    else if (p->img_w == g->display_w && p->img_h == g->display_h)
        snprintf(out, n, "%dx%d", g->display_w, g->display_h);
    else
        snprintf(out, n, "%dx%d, which the model sees as %dx%d", g->display_w, g->display_h, p->img_w, p->img_h);
}

/* A point in the model's space -> display pixels -> screen pixels. */
static int to_screen(parser *p, const call *c, const uarg *a, const char *shown, double x, double y, int *sx, int *sy)
{
    const cu_geometry *g = p->g;
    double dx, dy;
    bool inside;
    if (p->coords == UITARS_COORDS_RELATIVE_1000) {
        inside = x >= 0 && x <= RELATIVE_SCALE && y >= 0 && y <= RELATIVE_SCALE;
        /* 1000 is the far edge: its last pixel */
        dx = fmin(x * g->display_w / RELATIVE_SCALE, g->display_w - 1);
        dy = fmin(y * g->display_h / RELATIVE_SCALE, g->display_h - 1);
    } else {
        inside = x >= 0 && x < p->img_w && y >= 0 && y < p->img_h;
        dx = x * g->display_w / p->img_w;
        dy = y * g->display_h / p->img_h;
    }
    if (!inside) {
        char space[120];
        describe_space(p, space, sizeof space);
        return fail(p, c->line, "%s: %s `%s` is off the display (%s)", c->verb->name, a->written, shown, space);
    }
    char field[96];
    field_name(c, a->written, field, sizeof field);
    return cu_point(g, dx, dy, field, sx, sy, p->err);
}

static uarg *find_arg(call *c, const char *name)
{
    for (size_t i = 0; i < c->nargs; i++)
        if (!strcmp(c->args[i].name, name))
            return &c->args[i];
    return NULL;
}

/* The point of a start_box or end_box (a box's centre), in screen pixels; *has is false when the
 * argument is absent or empty and not required. */
static int get_point(parser *p, call *c, const char *name, bool required, bool *has, int *sx, int *sy)
{
    const uarg *a = find_arg(c, name);
    const char *s = a ? a->val : NULL;
    size_t n = a ? a->len : 0;
    *has = false;
    strip_tags(&s, &n);
    if (n == 0)
        return required ? fail(p, c->line, "%s: %s: missing", c->verb->name, a ? a->written : name) : 0;
    char shown[EXCERPT_MAX + 4];
    excerpt(s, n, shown);
    double v[4];
    size_t count;
    if (read_numbers(s, n, v, &count) < 0)
        return fail(p, c->line,
                    "%s: %s: `%s` is not a point (expected '(x,y)', '[x1,y1,x2,y2]' or '<point>x y</point>')",
                    c->verb->name, a->written, shown);
    double x = count == 4 ? (v[0] + v[2]) / 2 : v[0], y = count == 4 ? (v[1] + v[3]) / 2 : v[1];
    if (to_screen(p, c, a, shown, x, y, sx, sy) < 0)
        return -1;
    *has = true;
    return 0;
}

/* ---- keys ---- */

static int add_key(parser *p, const call *c, const uarg *a, const char *s, size_t n, char keys[][KEY_NAME_MAX],
                   size_t *nkeys)
{
    char shown[EXCERPT_MAX + 4];
    excerpt(s, n, shown);
    if (*nkeys == ACTION_HOTKEY_MAX)
        return fail(p, c->line, "%s: %s: more than %d keys", c->verb->name, a->written, ACTION_HOTKEY_MAX);
    bool printable = n > 0 && n < KEY_NAME_MAX;
    for (size_t i = 0; i < n && printable; i++)
        printable = s[i] > 0x20 && s[i] < 0x7f;
    if (!printable)
        return fail(p, c->line, "%s: %s: `%s` is not a key name", c->verb->name, a->written, shown);
    char name[KEY_NAME_MAX], field[96];
    memcpy(name, s, n);
    name[n] = '\0';
    field_name(c, a->written, field, sizeof field);
    if (cu_key_name(name, field, keys[*nkeys], KEY_NAME_MAX, p->err) < 0)
        return -1;
    (*nkeys)++;
    return 0;
}

/* One space-separated name of key='...'; "ctrl+t" is split at '+' too, as UI-TARS-desktop does,
 * while "+" alone is the plus key. */
static int add_key_token(parser *p, const call *c, const uarg *a, const char *s, size_t n,
                         char keys[][KEY_NAME_MAX], size_t *nkeys)
{
    if (n == 1 || !memchr(s, '+', n))
        return add_key(p, c, a, s, n, keys, nkeys);
    for (size_t k = 0;;) {
        size_t e = k;
        while (e < n && s[e] != '+')
            e++;
        if (e == k) {
            char shown[EXCERPT_MAX + 4];
            excerpt(s, n, shown);
            return fail(p, c->line, "%s: %s: `%s` is not a key combination (keys are separated by spaces)",
                        c->verb->name, a->written, shown);
        }
        if (add_key(p, c, a, s + k, e - k, keys, nkeys) < 0)
            return -1;
        if (e == n)
            return 0;
        k = e + 1;
    }
}

/* key='ctrl shift t': the format separates keys with spaces. */
static int get_keys(parser *p, call *c, char keys[][KEY_NAME_MAX], size_t *nkeys)
{
    const uarg *a = find_arg(c, "key");
    *nkeys = 0;
    if (!a)
        return fail(p, c->line, "%s: key: missing", c->verb->name);
    for (size_t i = 0; i < a->len;) {
        if (isspace((unsigned char)a->val[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < a->len && !isspace((unsigned char)a->val[j]))
            j++;
        if (add_key_token(p, c, a, a->val + i, j - i, keys, nkeys) < 0)
            return -1;
        i = j;
    }
    if (*nkeys == 0)
        return fail(p, c->line, "%s: %s: no key given", c->verb->name, a->written);
    return 0;
}

/* ---- the actions ---- */

static int add_xy(parser *p, const char *type, int x, int y)
{
    return cu_add(p->r, json_pack("{s:s, s:i, s:i}", "action_type", type, "x", x, "y", y), p->err);
}

static int do_click(parser *p, call *c)
{
    bool has;
    int x, y;
    if (get_point(p, c, "start_box", true, &has, &x, &y) < 0)
        return -1;
    return cu_add(p->r,
                  json_pack("{s:s, s:i, s:i, s:s, s:i}", "action_type", "CLICK", "x", x, "y", y, "button", "left",
                            "num_clicks", 1),
                  p->err);
}

static int point_action(parser *p, call *c, const char *type)
{
    bool has;
    int x, y;
    if (get_point(p, c, "start_box", true, &has, &x, &y) < 0)
        return -1;
    return add_xy(p, type, x, y);
}

static int do_double(parser *p, call *c)
{
    return point_action(p, c, "DOUBLE_CLICK");
}

static int do_right(parser *p, call *c)
{
    return point_action(p, c, "RIGHT_CLICK");
}

static int do_hover(parser *p, call *c)
{
    return point_action(p, c, "MOVE_TO");
}

/* MOVE_TO the start, then DRAG_TO the end: DRAG_TO presses, moves in steps and releases, which is what
 * the reference executors do (pyautogui's moveTo + dragTo, nut-js's mouse.drag); a MOUSE_DOWN,
 * MOVE_TO, MOUSE_UP sequence jumps in one motion event, and toolkits start a drag only after the
 * pointer has moved while pressed. */
static int do_drag(parser *p, call *c)
{
    bool has;
    int x0, y0, x1, y1;
    if (get_point(p, c, "start_box", true, &has, &x0, &y0) < 0 || get_point(p, c, "end_box", true, &has, &x1, &y1) < 0)
        return -1;
    if (cu_add_move(p->r, x0, y0, p->err) < 0)
        return -1;
    return add_xy(p, "DRAG_TO", x1, y1);
}

static int do_scroll(parser *p, call *c)
{
    const uarg *d = find_arg(c, "direction");
    if (!d || d->len == 0)
        return fail(p, c->line, "scroll: direction: missing");
    const char *s = d->val;
    size_t n = d->len;
    trim(&s, &n);
    static const struct {
        const char *name;
        int dx, dy;
    } dirs[] = {{"up", 0, UITARS_SCROLL_NOTCHES}, {"down", 0, -UITARS_SCROLL_NOTCHES},
                {"left", -UITARS_SCROLL_NOTCHES, 0}, {"right", UITARS_SCROLL_NOTCHES, 0}};
    size_t i = 0;
    while (i < ARRAY_LEN(dirs) && !(strlen(dirs[i].name) == n && !strncasecmp(s, dirs[i].name, n)))
        i++;
    if (i == ARRAY_LEN(dirs)) {
        char shown[EXCERPT_MAX + 4];
        excerpt(d->val, d->len, shown);
        return fail(p, c->line, "scroll: %s: `%s` is not up, down, left or right", d->written, shown);
    }
    bool has;
    int x, y;
    if (get_point(p, c, "start_box", false, &has, &x, &y) < 0 || (has && cu_add_move(p->r, x, y, p->err) < 0))
        return -1;
    return cu_add(p->r, json_pack("{s:s, s:i, s:i}", "action_type", "SCROLL", "dx", dirs[i].dx, "dy", dirs[i].dy),
                  p->err);
}

static int do_hotkey(parser *p, call *c)
{
    char keys[ACTION_HOTKEY_MAX][KEY_NAME_MAX];
    size_t n;
    if (get_keys(p, c, keys, &n) < 0)
        return -1;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_string(keys[i]));
    return cu_add(p->r, json_pack("{s:s, s:o}", "action_type", "HOTKEY", "keys", list), p->err);
}

static int key_action(parser *p, call *c, const char *type)
{
    char keys[ACTION_HOTKEY_MAX][KEY_NAME_MAX];
    size_t n;
    if (get_keys(p, c, keys, &n) < 0)
        return -1;
    return cu_add_keys(p->r, type, keys, n, false, p->err);
}

/* press: a tap, as OSWorld's UI-TARS agent runs it (pyautogui.press). UI-TARS's own parser and
 * desktop operator hold the key instead; a held key nothing releases would leak into later steps. */
static int do_press(parser *p, call *c)
{
    return key_action(p, c, "PRESS");
}

static int do_keydown(parser *p, call *c)
{
    return key_action(p, c, "KEY_DOWN");
}

static int do_keyup(parser *p, call *c)
{
    return key_action(p, c, "KEY_UP");
}

/* A trailing newline, or the two characters \ n a model double-escaped, means "then press Enter"
 * (the prompts: 'use "\n" at the end of content' to submit); both reference executors strip it and
 * press Enter after typing. */
static int do_type(parser *p, call *c)
{
    uarg *a = find_arg(c, "content");
    if (!a)
        return fail(p, c->line, "type: content: missing");
    bool enter = false;
    if (a->len >= 1 && a->val[a->len - 1] == '\n') {
        a->len--;
        enter = true;
    } else if (a->len >= 2 && a->val[a->len - 2] == '\\' && a->val[a->len - 1] == 'n') {
        a->len -= 2;
        enter = true;
    }
    a->val[a->len] = '\0';
    char field[96];
    field_name(c, a->written, field, sizeof field);
    if (a->len > 0 && cu_add_text(p->r, a->val, field, p->err) < 0)
        return -1;
    return enter ? cu_add(p->r, json_pack("{s:s, s:s}", "action_type", "PRESS", "key", "enter"), p->err) : 0;
}

static int do_wait(parser *p, call *c)
{
    return cu_add_wait(p->r, UITARS_WAIT_S, p->err);
}

static int end_episode(parser *p, call *c, const char *type)
{
    if (cu_add(p->r, json_pack("{s:s}", "action_type", type), p->err) < 0)
        return -1;
    p->r->terminal = true;
    p->ended_by = c->verb->name;
    return 0;
}

/* finished(content=...): the content is the model's closing note; computer_13's DONE carries none. */
static int do_finished(parser *p, call *c)
{
    return end_episode(p, c, "DONE");
}

static int do_call_user(parser *p, call *c)
{
    return end_episode(p, c, "FAIL");
}

static const verb verbs[] = {
    {"click", " start_box ", do_click, false},
    {"left_single", " start_box ", do_click, false},
    {"left_double", " start_box ", do_double, false},
    {"right_single", " start_box ", do_right, false},
    {"hover", " start_box ", do_hover, false},
    {"drag", " start_box end_box ", do_drag, false},
    {"select", " start_box end_box ", do_drag, false},
    {"scroll", " start_box direction ", do_scroll, false},
    {"hotkey", " key ", do_hotkey, false},
    {"press", " key ", do_press, false},
    {"keydown", " key ", do_keydown, false},
    {"keyup", " key ", do_keyup, false},
    {"release", " key ", do_keyup, false},
    {"type", " content ", do_type, false},
    {"wait", " ", do_wait, false},
    {"finished", " content ", do_finished, true},
    {"call_user", " ", do_call_user, false},
    {"error_env", " ", do_call_user, false},
};

static int fail_unknown(parser *p, int line, const char *name)
{
    char known[400];
    size_t n = 0;
    known[0] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(verbs) && n < sizeof known; i++)
        n += (size_t)snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", verbs[i].name);
    return fail(p, line, "unknown action `%s` (known: %s)", name, known);
}

static int parse_call(parser *p, call *c)
{
    c->line = line_at(p, p->pos);
    size_t n = ident_len(p, p->pos);
    char name[EXCERPT_MAX + 4];
    if (n == 0) {
        excerpt_here(p, name);
        return fail(p, c->line, "expected an action such as click(start_box='(x,y)'), got `%s`", name);
    }
    excerpt(p->src + p->pos, n, name);
    for (size_t i = 0; i < ARRAY_LEN(verbs) && !c->verb; i++)
        if (strlen(verbs[i].name) == n && !memcmp(verbs[i].name, p->src + p->pos, n))
            c->verb = &verbs[i];
    if (!c->verb)
        return fail_unknown(p, c->line, name);
    p->pos += n;
    skip_inline(p);
    if (peekc(p, 0) != '(')
        return fail(p, c->line, "%s: expected `(` after the action's name", c->verb->name);
    p->pos++;
    return parse_args(p, c);
}

static int run_call(parser *p)
{
    call c = {0};
    int rc = parse_call(p, &c);
    if (rc == 0 && p->ended_by)
        rc = fail(p, c.line, "%s: comes after %s(), which ends the episode", c.verb->name, p->ended_by);
    if (rc == 0 && (rc = c.verb->fn(p, &c)) < 0 && strncmp(p->err->msg, "uitars: ", 8))
        em_prefix(p->err, "uitars: line %d: %s: ", c.line, c.verb->name); /* cu_add's "more than N actions" */
    for (size_t i = 0; i < c.nargs; i++)
        free(c.args[i].val);
    return rc;
}

/* A ``` line (the prompts show the output format fenced): skipped. */
static bool skip_fence(parser *p)
{
    if (!starts(p, p->pos, "```"))
        return false;
    p->pos += 3;
    p->pos += ident_len(p, p->pos);
    skip_inline(p);
    return true;
}

static int parse_answer(parser *p)
{
    size_t ncalls = 0;
    for (;;) {
        skip_space(p);
        if (p->pos >= p->len)
            break;
        size_t m = marker_at(p, p->pos);
        if (m) {
            p->pos += m;
            continue;
        }
        if (skip_fence(p)) {
            if (p->pos < p->len && p->src[p->pos] != '\n') {
                char got[EXCERPT_MAX + 4];
                excerpt_here(p, got);
                return fail(p, line_at(p, p->pos), "expected a new line after ```, got `%s`", got);
            }
            continue;
        }
        if (run_call(p) < 0)
            return -1;
        ncalls++;
    }
    if (ncalls == 0)
        return em_fail_input(p->err,
                             "uitars: no action in the answer (expected e.g. `Action: click(start_box='(x,y)')`)");
    return 0;
}

/* Qwen2.5-VL's smart_resize of a w x h image: the size the model's coordinates refer to. Python's
 * round() rounds halves to even, as nearbyint does in the default rounding mode. */
static int smart_resize(int w, int h, int *ow, int *oh)
{
    if (w <= 0 || h <= 0 || fmax(w, h) / fmin(w, h) > QWEN_MAX_RATIO)
        return -1;
    double hb = fmax(QWEN_FACTOR, nearbyint(h / QWEN_FACTOR) * QWEN_FACTOR);
    double wb = fmax(QWEN_FACTOR, nearbyint(w / QWEN_FACTOR) * QWEN_FACTOR);
    if (hb * wb > QWEN_MAX_PIXELS) {
        double beta = sqrt((double)h * w / QWEN_MAX_PIXELS);
        hb = floor(h / beta / QWEN_FACTOR) * QWEN_FACTOR;
        wb = floor(w / beta / QWEN_FACTOR) * QWEN_FACTOR;
    } else if (hb * wb < QWEN_MIN_PIXELS) {
        double beta = sqrt(QWEN_MIN_PIXELS / ((double)h * w));
        hb = ceil(h * beta / QWEN_FACTOR) * QWEN_FACTOR;
        wb = ceil(w * beta / QWEN_FACTOR) * QWEN_FACTOR;
    }
    if (hb < 1 || wb < 1)
        return -1;
    *ow = (int)wb;
    *oh = (int)hb;
    return 0;
}

static int check_inputs(const char *text, const cu_geometry *g, cu_result *r, em_err *err)
{
    if (!r || !r->actions)
        return em_fail(err, "uitars: no result to fill");
    if (!g || g->display_w <= 0 || g->display_h <= 0 || g->screen_w <= 0 || g->screen_h <= 0)
        return em_fail(err, "uitars: no screen geometry");
    if (!text)
        return em_fail_input(err, "uitars: no answer");
    size_t len = strlen(text);
    if (len > UITARS_TEXT_MAX)
        return em_fail_input(err, "uitars: the answer is %zu bytes, more than the limit of %d", len, UITARS_TEXT_MAX);
    return 0;
}

int uitars_actions(const char *text, const cu_geometry *g, uitars_coords coords, cu_result *r, em_err *err)
{
    if (check_inputs(text, g, r, err) < 0)
        return -1;
    parser p = {.src = text, .len = strlen(text), .line_no = 1, .g = g, .coords = coords, .r = r, .err = err,
                .img_w = g->display_w, .img_h = g->display_h};
    if (coords == UITARS_COORDS_ABSOLUTE && smart_resize(g->display_w, g->display_h, &p.img_w, &p.img_h) < 0)
        return em_fail_input(err, "uitars: the %dx%d display is too narrow for the model's image processor",
                             g->display_w, g->display_h);
    size_t had = json_array_size(r->actions);
    bool was_terminal = r->terminal;
    if (find_actions(&p) == 0 && parse_answer(&p) == 0)
        return 0;
    /* all or nothing: a half-translated answer must not run */
    while (json_array_size(r->actions) > had)
        json_array_remove(r->actions, json_array_size(r->actions) - 1);
    r->terminal = was_terminal;
    return -1;
}

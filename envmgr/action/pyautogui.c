/* pyautogui subset → computer_13 actions. A small lexer and a recursive
 * descent parser over exactly the grammar we accept:
 *
 *   code      := stmt (SEP stmt)*            SEP is a newline or ';'
 *   stmt      := ε | 'import' mod (',' mod)* | obj '.' NAME '(' args ')'
 *   args      := [arg (',' arg)* [',']]      arg := [NAME '='] value
 *   value     := scalar | '[' scalars ']' | '(' scalars ')'
 *   scalar    := ['-'|'+'] NUMBER | STRING+ | True | False | None
 *
 * Anything else is refused with the statement quoted. Newlines inside
 * brackets join lines, as in Python. Semantics follow pyautogui: key
 * names longer than one character are lower-cased, scroll clicks > 0 go
 * up (vertical) or right (hscroll). */
#include "envmgr/action/pyautogui.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/action/actions.h"
#include "envmgr/base/util.h"

/* The limits actions.c enforces (actions.h): long text, long waits and big scrolls are split into
 * several actions instead of being refused. */
#define TEXT_CHUNK ACTION_TEXT_MAX
#define WAIT_CHUNK_S ACTION_WAIT_MAX_S
#define SCROLL_CHUNK ACTION_SCROLL_MAX
#define COORD_MAX 1e6
#define LIST_MAX 1000
#define ARGS_MAX 16
#define REPEAT_MAX 1000 /* clicks=, presses=, scroll clicks */

typedef enum { TK_END, TK_SEP, TK_NAME, TK_NUM, TK_STR, TK_OP } tk_kind;

typedef struct token {
    tk_kind kind;
    size_t start, end; /* byte offsets in the source */
    int line;
    char op;           /* TK_OP */
    bool is_int;       /* TK_NUM */
    long long ival;
    double num;
    char *str;         /* TK_STR: decoded bytes, owned here until taken */
    size_t slen;
} token;

typedef enum { V_NUM, V_STR, V_BOOL, V_NONE, V_LIST, V_TUPLE } vkind;

typedef struct value {
    vkind kind;
    bool is_int;
    long long ival;
    double num;
    bool b;
    char *s;
    size_t slen;
    struct value *items; /* V_LIST, V_TUPLE: scalars only */
    size_t n;
} value;

typedef struct arg {
    char *kw; /* NULL for a positional argument */
    value v;
} arg;

typedef struct parser {
    const char *src;
    size_t len, pos;
    int line;
    int depth;         /* open ( and [: newlines inside are whitespace */
    token tok;
    size_t stmt_start; /* for the excerpt in error messages */
    int stmt_line;
    bool at_stmt;      /* the next token starts a statement */
    json_t *out;
    em_err *err;
} parser;

/* ---- errors ---- */

static int fail_syntax(parser *p)
{
    char ex[84];
    size_t n = 0, i = p->stmt_start;
    for (; i < p->len && p->src[i] != '\n' && n < 80; i++) {
        unsigned char c = (unsigned char)p->src[i];
        if (c != '\r')
            ex[n++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    bool cut = i < p->len && p->src[i] != '\n';
    while (n > 0 && ex[n - 1] == ' ')
        n--;
    ex[n] = '\0';
    return em_fail_input(p->err, "pyautogui: line %d: `%s%s` is not in the supported subset", p->stmt_line, ex,
                         cut ? "..." : "");
}

static int fail_at(parser *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(parser *p, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return em_fail_input(p->err, "pyautogui: line %d: %s", line, msg);
}

/* ---- lexer ---- */

static bool is_name_start(int c)
{
    return isalpha(c) || c == '_';
}

static bool is_name_char(int c)
{
    return isalnum(c) || c == '_';
}

static int peekc(const parser *p, size_t off)
{
    return p->pos + off < p->len ? (unsigned char)p->src[p->pos + off] : -1;
}

static void skip_space(parser *p)
{
    for (;;) {
        int c = peekc(p, 0);
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->src[p->pos] != '\n')
                p->pos++;
        } else if (c == '\\' && peekc(p, 1) == '\n') { /* explicit line joining */
            p->pos += 2;
            p->line++;
        } else if (c == '\\' && peekc(p, 1) == '\r' && peekc(p, 2) == '\n') {
            p->pos += 3;
            p->line++;
        } else if (c == '\n' && p->depth > 0) {
            p->pos++;
            p->line++;
        } else {
            return;
        }
    }
}

static void put_utf8(char *buf, size_t *n, unsigned cp)
{
    if (cp < 0x80) {
        buf[(*n)++] = (char)cp;
    } else {
        buf[(*n)++] = (char)(0xc0 | (cp >> 6));
        buf[(*n)++] = (char)(0x80 | (cp & 0x3f));
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string literal starting at p->pos (the opening quote). Decoded bytes
 * never outnumber source bytes (\xNN gives at most 2), so one buffer of
 * the remaining length suffices. */
static int lex_string(parser *p, bool raw)
{
    char q = p->src[p->pos];
    bool triple = peekc(p, 1) == q && peekc(p, 2) == q;
    int line0 = p->line;
    p->pos += triple ? 3 : 1;
    char *buf = xmalloc(p->len - p->pos + 1);
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len) {
            free(buf);
            return fail_at(p, line0, "unterminated string");
        }
        char c = p->src[p->pos];
        if (c == q && (!triple || (peekc(p, 1) == q && peekc(p, 2) == q))) {
            p->pos += triple ? 3 : 1;
            break;
        }
        if (c == '\n') {
            if (!triple) {
                free(buf);
                return fail_at(p, line0, "unterminated string");
            }
            p->line++;
            buf[n++] = c;
            p->pos++;
            continue;
        }
        if (c != '\\') {
            buf[n++] = c;
            p->pos++;
            continue;
        }
        int e = peekc(p, 1);
        if (e < 0) {
            free(buf);
            return fail_at(p, line0, "unterminated string");
        }
        if (raw) { /* r'..': the backslash stays, and it only protects the next character */
            buf[n++] = '\\';
            buf[n++] = (char)e;
            if (e == '\n')
                p->line++;
            p->pos += 2;
            continue;
        }
        p->pos += 2;
        switch (e) {
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case '\\': buf[n++] = '\\'; break;
        case '\'': buf[n++] = '\''; break;
        case '"': buf[n++] = '"'; break;
        case '\n': p->line++; break; /* backslash-newline continues the string */
        case 'x': {
            int h = hexval(peekc(p, 0)), l = hexval(peekc(p, 1));
            if (h < 0 || l < 0) {
                free(buf);
                return fail_at(p, p->line, "\\x must be followed by two hex digits");
            }
            unsigned cp = (unsigned)(h * 16 + l);
            if (cp == 0) {
                free(buf);
                return fail_at(p, p->line, "NUL characters (\\x00) are not supported in strings");
            }
            put_utf8(buf, &n, cp);
            p->pos += 2;
            break;
        }
        default:
            free(buf);
            if (e > 0x20 && e < 0x7f)
                return fail_at(p, p->line,
                               "unsupported escape `\\%c` in a string (supported: \\n \\t \\r \\\\ \\' \\\" \\xNN)",
                               e);
            return fail_at(p, p->line,
                           "unsupported escape `\\` + byte 0x%02x in a string (supported: \\n \\t \\r \\\\ \\' \\\" "
                           "\\xNN)",
                           e);
        }
    }
    buf[n] = '\0';
    p->tok.kind = TK_STR;
    p->tok.str = buf;
    p->tok.slen = n;
    return 0;
}

static int lex_number(parser *p)
{
    size_t s = p->pos;
    bool is_float = false;
    while (p->pos < p->len && isdigit((unsigned char)p->src[p->pos]))
        p->pos++;
    if (peekc(p, 0) == '.') {
        is_float = true;
        p->pos++;
        while (p->pos < p->len && isdigit((unsigned char)p->src[p->pos]))
            p->pos++;
    }
    if (peekc(p, 0) == 'e' || peekc(p, 0) == 'E') {
        size_t save = p->pos++;
        if (peekc(p, 0) == '+' || peekc(p, 0) == '-')
            p->pos++;
        if (peekc(p, 0) >= 0 && isdigit(peekc(p, 0))) {
            is_float = true;
            while (p->pos < p->len && isdigit((unsigned char)p->src[p->pos]))
                p->pos++;
        } else {
            p->pos = save;
        }
    }
    /* 0x1f, 1j, 1_000, 12abc: not literals we accept */
    if (peekc(p, 0) >= 0 && (is_name_char(peekc(p, 0)) || peekc(p, 0) == '.'))
        return fail_syntax(p);
    char buf[64];
    size_t n = p->pos - s;
    if (n >= sizeof buf)
        return fail_at(p, p->line, "number `%.20s...` is too long", p->src + s);
    memcpy(buf, p->src + s, n);
    buf[n] = '\0';
    p->tok.kind = TK_NUM;
    p->tok.is_int = !is_float;
    if (is_float) {
        p->tok.num = strtod(buf, NULL);
        if (!isfinite(p->tok.num))
            return fail_at(p, p->line, "number `%s` is out of range", buf);
    } else {
        long v;
        if (parse_int(buf, -1000000000L, 1000000000L, &v) < 0)
            return fail_at(p, p->line, "number `%s` is out of range", buf);
        p->tok.ival = v;
        p->tok.num = (double)v;
    }
    return 0;
}

static bool name_is(const parser *p, const token *t, const char *s)
{
    size_t n = strlen(s);
    return t->kind == TK_NAME && t->end - t->start == n && !memcmp(p->src + t->start, s, n);
}

/* Advance to the next token; frees a string the previous token still owns. */
static int next(parser *p)
{
    free(p->tok.str);
    memset(&p->tok, 0, sizeof p->tok);
    size_t from = p->pos;
    bool line_start = p->at_stmt && (from == 0 || p->src[from - 1] == '\n');
    skip_space(p);
    /* An indented statement is Python's IndentationError (the subset has no blocks): not translated,
     * so OSWorld's outcome comes from the guest's python. Blank and comment-only lines may be indented. */
    if (line_start && p->pos > from && (p->src[from] == ' ' || p->src[from] == '\t') && peekc(p, 0) >= 0 &&
        peekc(p, 0) != '\n' && peekc(p, 0) != '\r')
        return fail_at(p, p->line, "unexpected indent (Python's IndentationError)");
    p->tok.start = p->pos;
    p->tok.line = p->line;
    if (p->at_stmt) {
        p->stmt_start = p->pos;
        p->stmt_line = p->line;
    }
    p->at_stmt = false;
    int rc = 0;
    int c = peekc(p, 0);
    if (c < 0) {
        p->tok.kind = TK_END;
    } else if (c == '\n' || c == ';') {
        p->tok.kind = TK_SEP;
        p->at_stmt = true;
        p->pos++;
        if (c == '\n')
            p->line++;
    } else if (c == '\'' || c == '"') {
        rc = lex_string(p, false);
    } else if (is_name_start(c)) {
        while (p->pos < p->len && is_name_char((unsigned char)p->src[p->pos]))
            p->pos++;
        int q = peekc(p, 0);
        if (q == '\'' || q == '"') { /* a prefixed string: r'' and u'' only; f'', b'' are refused */
            size_t n = p->pos - p->tok.start;
            char c0 = (char)tolower((unsigned char)p->src[p->tok.start]);
            if (n == 1 && (c0 == 'r' || c0 == 'u'))
                rc = lex_string(p, c0 == 'r');
            else
                return fail_syntax(p);
        } else {
            p->tok.kind = TK_NAME;
        }
    } else if (isdigit(c) || (c == '.' && peekc(p, 1) >= 0 && isdigit(peekc(p, 1)))) {
        rc = lex_number(p);
    } else {
        p->tok.kind = TK_OP;
        p->tok.op = (char)c;
        p->pos++;
        if (c == '(' || c == '[')
            p->depth++;
        else if ((c == ')' || c == ']') && p->depth > 0)
            p->depth--;
    }
    p->tok.end = p->pos;
    return rc;
}

static bool is_op(const parser *p, char op)
{
    return p->tok.kind == TK_OP && p->tok.op == op;
}

/* NAME '=' (not '==') ahead: a keyword argument. Looks at characters only. */
static bool keyword_ahead(const parser *p)
{
    size_t i = p->tok.end;
    while (i < p->len && (p->src[i] == ' ' || p->src[i] == '\t' || p->src[i] == '\r' || p->src[i] == '\n'))
        i++;
    return i < p->len && p->src[i] == '=' && (i + 1 >= p->len || p->src[i + 1] != '=');
}

/* ---- values ---- */

static void value_free(value *v)
{
    free(v->s);
    for (size_t i = 0; i < v->n; i++)
        value_free(&v->items[i]);
    free(v->items);
    memset(v, 0, sizeof *v);
}

static int parse_scalar(parser *p, value *v)
{
    memset(v, 0, sizeof *v);
    if (is_op(p, '-') || is_op(p, '+')) {
        bool neg = is_op(p, '-');
        if (next(p) < 0)
            return -1;
        if (p->tok.kind != TK_NUM)
            return fail_syntax(p);
        v->kind = V_NUM;
        v->is_int = p->tok.is_int;
        v->ival = neg ? -p->tok.ival : p->tok.ival;
        v->num = neg ? -p->tok.num : p->tok.num;
        return next(p);
    }
    switch (p->tok.kind) {
    case TK_NUM:
        v->kind = V_NUM;
        v->is_int = p->tok.is_int;
        v->ival = p->tok.ival;
        v->num = p->tok.num;
        return next(p);
    case TK_STR:
        /* Adjacent literals concatenate: 'a' 'b' == 'ab'. */
        v->kind = V_STR;
        v->s = p->tok.str;
        v->slen = p->tok.slen;
        p->tok.str = NULL;
        for (;;) {
            if (next(p) < 0)
                return -1;
            if (p->tok.kind != TK_STR)
                return 0;
            v->s = xrealloc(v->s, v->slen + p->tok.slen + 1);
            memcpy(v->s + v->slen, p->tok.str, p->tok.slen + 1);
            v->slen += p->tok.slen;
        }
    case TK_NAME:
        if (name_is(p, &p->tok, "True") || name_is(p, &p->tok, "False")) {
            v->kind = V_BOOL;
            v->b = name_is(p, &p->tok, "True");
            return next(p);
        }
        if (name_is(p, &p->tok, "None")) {
            v->kind = V_NONE;
            return next(p);
        }
        return fail_syntax(p);
    default:
        return fail_syntax(p);
    }
}

static int parse_value(parser *p, value *v)
{
    if (!is_op(p, '[') && !is_op(p, '('))
        return parse_scalar(p, v);
    memset(v, 0, sizeof *v);
    char close = is_op(p, '[') ? ']' : ')';
    v->kind = close == ']' ? V_LIST : V_TUPLE;
    bool comma = false;
    if (next(p) < 0)
        return -1;
    while (!is_op(p, close)) {
        if (v->n >= LIST_MAX)
            return fail_at(p, p->tok.line, "a list has more than %d items", LIST_MAX);
        v->items = xrealloc(v->items, (v->n + 1) * sizeof *v->items);
        value *item = &v->items[v->n++]; /* counted first: a half-parsed item is freed with the rest */
        memset(item, 0, sizeof *item);
        if (parse_scalar(p, item) < 0)
            return -1;
        if (is_op(p, ',')) {
            comma = true;
            if (next(p) < 0)
                return -1;
        } else if (!is_op(p, close)) {
            return fail_syntax(p);
        }
    }
    if (v->kind == V_TUPLE && v->n == 1 && !comma) { /* (x) is just x */
        value inner = v->items[0];
        free(v->items);
        *v = inner;
    }
    return next(p);
}

/* ---- calls ---- */

typedef struct call {
    const char *name;   /* as written, for messages */
    int line;
    const char *const *params;
    size_t nparams;
    value *slot[8];     /* by parameter index, NULL when not given */
    arg *args;          /* all arguments (varargs calls read these) */
    size_t nargs;
} call;

static const char *kind_name(const value *v)
{
    switch (v->kind) {
    case V_NUM: return v->is_int ? "integer" : "float";
    case V_STR: return "string";
    case V_BOOL: return "boolean";
    case V_NONE: return "None";
    case V_LIST: return "list";
    case V_TUPLE: return "tuple";
    }
    return "?";
}

static int fail_arg(parser *p, const call *c, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail_arg(parser *p, const call *c, const char *param, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail_at(p, c->line, "%s(): %s: %s", c->name, param, msg);
}

static value *slot(const call *c, const char *param)
{
    for (size_t i = 0; i < c->nparams; i++)
        if (!strcmp(c->params[i], param))
            return c->slot[i];
    return NULL;
}

static int emit(parser *p, json_t *one)
{
    if (json_array_size(p->out) >= PYAUTOGUI_ACTIONS_MAX) {
        json_decref(one);
        return em_fail_input(p->err, "pyautogui: the code expands to more than %d actions", PYAUTOGUI_ACTIONS_MAX);
    }
    json_array_append_new(p->out, one);
    return 0;
}

static json_t *act(const char *type)
{
    return json_pack("{s:s}", "action_type", type);
}

static int coord(parser *p, const call *c, const char *param, const value *v, long *out)
{
    if (v->kind != V_NUM)
        return fail_arg(p, c, param, "expected a number, got %s%s", kind_name(v),
                        v->kind == V_STR ? " (locating images on screen is not supported)" : "");
    if (!(fabs(v->num) <= COORD_MAX))
        return fail_arg(p, c, param, "%g is out of range", v->num);
    *out = v->is_int ? (long)v->ival : lround(v->num);
    return 0;
}

/* x and y: two numbers, an (x, y) tuple as x, or neither (None counts as not given). */
static int get_xy(parser *p, const call *c, bool required, bool *has, long *x, long *y)
{
    value *vx = slot(c, "x"), *vy = slot(c, "y");
    if (vx && vx->kind == V_NONE)
        vx = NULL;
    if (vy && vy->kind == V_NONE)
        vy = NULL;
    *has = false;
    if (vx && (vx->kind == V_TUPLE || vx->kind == V_LIST)) {
        if (vy)
            return fail_arg(p, c, "y", "given together with an (x, y) tuple");
        if (vx->n != 2)
            return fail_arg(p, c, "x", "expected an (x, y) pair, got %zu items", vx->n);
        if (coord(p, c, "x", &vx->items[0], x) < 0 || coord(p, c, "y", &vx->items[1], y) < 0)
            return -1;
        *has = true;
        return 0;
    }
    if (!vx && !vy)
        return required ? fail_at(p, c->line, "%s(): x and y are required", c->name) : 0;
    if ((vx && coord(p, c, "x", vx, x) < 0) || (vy && coord(p, c, "y", vy, y) < 0))
        return -1;
    if (!vx || !vy)
        return fail_arg(p, c, vx ? "y" : "x", "missing (x and y go together)");
    *has = true;
    return 0;
}

static int get_int(parser *p, const call *c, const char *param, long dflt, long lo, long hi, long *out)
{
    value *v = slot(c, param);
    *out = dflt;
    if (!v)
        return 0;
    if (v->kind != V_NUM || !v->is_int)
        return fail_arg(p, c, param, "expected an integer, got %s", kind_name(v));
    if (v->ival < lo || v->ival > hi)
        return fail_arg(p, c, param, "%lld is out of range (%ld..%ld)", v->ival, lo, hi);
    *out = (long)v->ival;
    return 0;
}

static int get_bool(parser *p, const call *c, const char *param, bool dflt, bool *out)
{
    value *v = slot(c, param);
    *out = dflt;
    if (!v)
        return 0;
    if (v->kind != V_BOOL)
        return fail_arg(p, c, param, "expected True or False, got %s", kind_name(v));
    *out = v->b;
    return 0;
}

/* interval=, duration=: accepted and ignored (the env paces events itself), but still literals. */
static int check_ignored_number(parser *p, const call *c, const char *param)
{
    value *v = slot(c, param);
    if (v && v->kind != V_NUM && v->kind != V_NONE)
        return fail_arg(p, c, param, "expected a number, got %s", kind_name(v));
    return 0;
}

static int get_button(parser *p, const call *c, const char *dflt, const char **out)
{
    value *v = slot(c, "button");
    *out = dflt;
    if (!v)
        return 0;
    if (v->kind != V_STR)
        return fail_arg(p, c, "button", "expected a string, got %s", kind_name(v));
    if (!strcmp(v->s, "left") || !strcmp(v->s, "primary"))
        *out = "left";
    else if (!strcmp(v->s, "right") || !strcmp(v->s, "secondary"))
        *out = "right";
    else if (!strcmp(v->s, "middle"))
        *out = "middle";
    else
        return fail_arg(p, c, "button", "expected 'left', 'right' or 'middle', got '%.32s'", v->s);
    return 0;
}

/* pyautogui lower-cases key names but not single characters ('A' is shift+a). */
static json_t *key_json(parser *p, const call *c, const char *param, const value *v)
{
    if (v->kind != V_STR) {
        fail_arg(p, c, param, "expected a key name, got %s", kind_name(v));
        return NULL;
    }
    if (v->slen == 0 || v->slen > 64 || strlen(v->s) != v->slen) {
        fail_arg(p, c, param, "key names are 1 to 64 characters");
        return NULL;
    }
    char buf[65];
    memcpy(buf, v->s, v->slen + 1);
    if (v->slen > 1)
        for (char *s = buf; *s; s++)
            *s = (char)tolower((unsigned char)*s);
    json_t *j = json_stringn(buf, v->slen);
    if (!j)
        fail_arg(p, c, param, "not valid UTF-8");
    return j;
}

static int emit_move(parser *p, long x, long y)
{
    json_t *a = act("MOVE_TO");
    json_object_set_new(a, "x", json_integer(x));
    json_object_set_new(a, "y", json_integer(y));
    return emit(p, a);
}

static int emit_click(parser *p, const char *type, bool has, long x, long y, const char *button, long n)
{
    json_t *a = act(type);
    if (has) {
        json_object_set_new(a, "x", json_integer(x));
        json_object_set_new(a, "y", json_integer(y));
    }
    if (button) {
        json_object_set_new(a, "button", json_string(button));
        json_object_set_new(a, "num_clicks", json_integer(n));
    }
    return emit(p, a);
}

static int do_click(parser *p, call *c)
{
    bool has;
    long x = 0, y = 0, clicks;
    const char *button;
    if (get_xy(p, c, false, &has, &x, &y) < 0 || get_int(p, c, "clicks", 1, 0, REPEAT_MAX, &clicks) < 0 ||
        get_button(p, c, "left", &button) < 0 || check_ignored_number(p, c, "interval") < 0 ||
        check_ignored_number(p, c, "duration") < 0)
        return -1;
    if (clicks == 0)
        return has ? emit_move(p, x, y) : 0;
    return emit_click(p, "CLICK", has, x, y, button, clicks);
}

static int do_multi_click(parser *p, call *c, long n)
{
    bool has;
    long x = 0, y = 0;
    const char *button;
    if (get_xy(p, c, false, &has, &x, &y) < 0 || get_button(p, c, "left", &button) < 0 ||
        check_ignored_number(p, c, "interval") < 0 || check_ignored_number(p, c, "duration") < 0)
        return -1;
    if (n == 2 && !strcmp(button, "left"))
        return emit_click(p, "DOUBLE_CLICK", has, x, y, NULL, 0);
    return emit_click(p, "CLICK", has, x, y, button, n);
}

static int do_double_click(parser *p, call *c)
{
    return do_multi_click(p, c, 2);
}

static int do_triple_click(parser *p, call *c)
{
    return do_multi_click(p, c, 3);
}

static int do_right_click(parser *p, call *c)
{
    bool has;
    long x = 0, y = 0;
    if (get_xy(p, c, false, &has, &x, &y) < 0 || check_ignored_number(p, c, "duration") < 0)
        return -1;
    return emit_click(p, "RIGHT_CLICK", has, x, y, NULL, 0);
}

static int do_middle_click(parser *p, call *c)
{
    bool has;
    long x = 0, y = 0;
    if (get_xy(p, c, false, &has, &x, &y) < 0 || check_ignored_number(p, c, "duration") < 0)
        return -1;
    return emit_click(p, "CLICK", has, x, y, "middle", 1);
}

static int do_move_to(parser *p, call *c)
{
    bool has;
    long x = 0, y = 0;
    if (get_xy(p, c, true, &has, &x, &y) < 0 || check_ignored_number(p, c, "duration") < 0)
        return -1;
    return emit_move(p, x, y);
}

static int emit_button(parser *p, const char *type, const char *button)
{
    json_t *a = act(type);
    json_object_set_new(a, "button", json_string(button));
    return emit(p, a);
}

static int do_drag_to(parser *p, call *c)
{
    bool has, downup;
    long x = 0, y = 0;
    const char *button;
    if (get_xy(p, c, true, &has, &x, &y) < 0 || get_button(p, c, "left", &button) < 0 ||
        get_bool(p, c, "mouseDownUp", true, &downup) < 0 || check_ignored_number(p, c, "duration") < 0)
        return -1;
    if (!downup)
        return emit_move(p, x, y);
    if (!strcmp(button, "left")) {
        json_t *a = act("DRAG_TO");
        json_object_set_new(a, "x", json_integer(x));
        json_object_set_new(a, "y", json_integer(y));
        return emit(p, a);
    }
    /* DRAG_TO drags with the left button; other buttons are spelled out. */
    if (emit_button(p, "MOUSE_DOWN", button) < 0 || emit_move(p, x, y) < 0)
        return -1;
    return emit_button(p, "MOUSE_UP", button);
}

static int do_mouse_button(parser *p, call *c, const char *type)
{
    bool has;
    long x = 0, y = 0;
    const char *button;
    if (get_xy(p, c, false, &has, &x, &y) < 0 || get_button(p, c, "left", &button) < 0 ||
        check_ignored_number(p, c, "duration") < 0)
        return -1;
    if (has && emit_move(p, x, y) < 0)
        return -1;
    return emit_button(p, type, button);
}

static int do_mouse_down(parser *p, call *c)
{
    return do_mouse_button(p, c, "MOUSE_DOWN");
}

static int do_mouse_up(parser *p, call *c)
{
    return do_mouse_button(p, c, "MOUSE_UP");
}

static int do_scroll_axis(parser *p, call *c, bool horizontal)
{
    bool has;
    long x = 0, y = 0, clicks;
    if (!slot(c, "clicks"))
        return fail_arg(p, c, "clicks", "missing");
    if (get_int(p, c, "clicks", 0, -REPEAT_MAX * SCROLL_CHUNK, REPEAT_MAX * SCROLL_CHUNK, &clicks) < 0 ||
        get_xy(p, c, false, &has, &x, &y) < 0)
        return -1;
    if (has && emit_move(p, x, y) < 0)
        return -1;
    while (clicks != 0) {
        long n = clicks > SCROLL_CHUNK ? SCROLL_CHUNK : clicks < -SCROLL_CHUNK ? -SCROLL_CHUNK : clicks;
        json_t *a = act("SCROLL");
        json_object_set_new(a, "dx", json_integer(horizontal ? n : 0));
        json_object_set_new(a, "dy", json_integer(horizontal ? 0 : n));
        if (emit(p, a) < 0)
            return -1;
        clicks -= n;
    }
    return 0;
}

static int do_scroll(parser *p, call *c)
{
    return do_scroll_axis(p, c, false);
}

static int do_hscroll(parser *p, call *c)
{
    return do_scroll_axis(p, c, true);
}

static int emit_key(parser *p, const call *c, const char *type, const char *param, const value *v)
{
    json_t *k = key_json(p, c, param, v);
    if (!k)
        return -1;
    json_t *a = act(type);
    json_object_set_new(a, "key", k);
    return emit(p, a);
}

static int do_typewrite(parser *p, call *c)
{
    value *m = slot(c, "message");
    if (!m)
        return fail_arg(p, c, "message", "missing");
    if (check_ignored_number(p, c, "interval") < 0)
        return -1;
    if (m->kind == V_LIST) { /* a list of key names: each is pressed */
        for (size_t i = 0; i < m->n; i++)
            if (emit_key(p, c, "PRESS", "message", &m->items[i]) < 0)
                return -1;
        return 0;
    }
    if (m->kind != V_STR)
        return fail_arg(p, c, "message", "expected a string or a list of keys, got %s", kind_name(m));
    /* Long text goes out in chunks, cut on UTF-8 character boundaries. */
    for (size_t off = 0; off < m->slen;) {
        size_t n = m->slen - off;
        if (n > TEXT_CHUNK) {
            n = TEXT_CHUNK;
            while (n > 1 && ((unsigned char)m->s[off + n] & 0xc0) == 0x80)
                n--;
        }
        json_t *t = json_stringn(m->s + off, n);
        if (!t)
            return fail_arg(p, c, "message", "text is not valid UTF-8");
        json_t *a = act("TYPING");
        json_object_set_new(a, "text", t);
        if (emit(p, a) < 0)
            return -1;
        off += n;
    }
    return 0;
}

static int do_press(parser *p, call *c)
{
    value *k = slot(c, "keys");
    long presses;
    if (!k)
        return fail_arg(p, c, "keys", "missing");
    if (get_int(p, c, "presses", 1, 0, REPEAT_MAX, &presses) < 0 || check_ignored_number(p, c, "interval") < 0)
        return -1;
    if (k->kind != V_LIST && k->kind != V_STR)
        return fail_arg(p, c, "keys", "expected a key name or a list of them, got %s", kind_name(k));
    for (long i = 0; i < presses; i++) {
        if (k->kind == V_STR) {
            if (emit_key(p, c, "PRESS", "keys", k) < 0)
                return -1;
            continue;
        }
        for (size_t j = 0; j < k->n; j++)
            if (emit_key(p, c, "PRESS", "keys", &k->items[j]) < 0)
                return -1;
    }
    return 0;
}

static int do_key_down(parser *p, call *c)
{
    value *k = slot(c, "key");
    return k ? emit_key(p, c, "KEY_DOWN", "key", k) : fail_arg(p, c, "key", "missing");
}

static int do_key_up(parser *p, call *c)
{
    value *k = slot(c, "key");
    return k ? emit_key(p, c, "KEY_UP", "key", k) : fail_arg(p, c, "key", "missing");
}

/* hotkey(*keys, interval=): the positional arguments, or one list of keys. */
static int do_hotkey(parser *p, call *c)
{
    json_t *keys = json_array();
    size_t npos = 0;
    for (size_t i = 0; i < c->nargs; i++) {
        arg *a = &c->args[i];
        if (a->kw) {
            if (strcmp(a->kw, "interval")) {
                json_decref(keys);
                return fail_at(p, c->line, "%s(): unexpected keyword argument `%s`", c->name, a->kw);
            }
            continue;
        }
        npos++;
        const value *items = &a->v;
        size_t n = 1;
        if (a->v.kind == V_LIST || a->v.kind == V_TUPLE) {
            if (c->nargs - (slot(c, "interval") ? 1 : 0) != 1) {
                json_decref(keys);
                return fail_arg(p, c, "keys", "a list of keys must be the only argument");
            }
            items = a->v.items;
            n = a->v.n;
        }
        for (size_t j = 0; j < n; j++) {
            json_t *k = key_json(p, c, "keys", &items[j]);
            if (!k) {
                json_decref(keys);
                return -1;
            }
            json_array_append_new(keys, k);
        }
    }
    if (check_ignored_number(p, c, "interval") < 0) {
        json_decref(keys);
        return -1;
    }
    if (json_array_size(keys) == 0) {
        json_decref(keys);
        return fail_arg(p, c, "keys", "missing");
    }
    json_t *a = act("HOTKEY");
    json_object_set_new(a, "keys", keys);
    return emit(p, a);
}

static int do_sleep(parser *p, call *c)
{
    value *v = slot(c, "secs");
    if (!v)
        return fail_arg(p, c, "secs", "missing");
    if (v->kind != V_NUM)
        return fail_arg(p, c, "secs", "expected a number, got %s", kind_name(v));
    if (!(v->num >= 0 && v->num <= PYAUTOGUI_SLEEP_MAX_S))
        return fail_arg(p, c, "secs", "%g is out of range (0..%g)", v->num, PYAUTOGUI_SLEEP_MAX_S);
    for (double left = v->num; left > 0; left -= WAIT_CHUNK_S) {
        json_t *a = act("WAIT");
        json_object_set_new(a, "seconds", json_real(left > WAIT_CHUNK_S ? WAIT_CHUNK_S : left));
        if (emit(p, a) < 0)
            return -1;
    }
    return 0;
}

typedef int (*call_fn)(parser *p, call *c);

static const char *const P_CLICK[] = {"x", "y", "clicks", "interval", "button", "duration"};
static const char *const P_MULTI[] = {"x", "y", "interval", "button", "duration"};
static const char *const P_XYD[] = {"x", "y", "duration"};
static const char *const P_DRAG[] = {"x", "y", "duration", "button", "mouseDownUp"};
static const char *const P_BUTTON[] = {"x", "y", "button", "duration"};
static const char *const P_SCROLL[] = {"clicks", "x", "y"};
static const char *const P_WRITE[] = {"message", "interval"};
static const char *const P_PRESS[] = {"keys", "presses", "interval"};
static const char *const P_KEY[] = {"key"};
static const char *const P_HOTKEY[] = {"interval"};
static const char *const P_SLEEP[] = {"secs"};

#define PARAMS(a) a, ARRAY_LEN(a)

static const struct {
    const char *module, *name;
    const char *const *params;
    size_t nparams;
    bool varargs; /* positional arguments are collected, not bound to params */
    call_fn fn;
} calls[] = {
    {"pyautogui", "click", PARAMS(P_CLICK), false, do_click},
    {"pyautogui", "doubleClick", PARAMS(P_MULTI), false, do_double_click},
    {"pyautogui", "tripleClick", PARAMS(P_MULTI), false, do_triple_click},
    {"pyautogui", "rightClick", PARAMS(P_XYD), false, do_right_click},
    {"pyautogui", "middleClick", PARAMS(P_XYD), false, do_middle_click},
    {"pyautogui", "moveTo", PARAMS(P_XYD), false, do_move_to},
    {"pyautogui", "dragTo", PARAMS(P_DRAG), false, do_drag_to},
    {"pyautogui", "mouseDown", PARAMS(P_BUTTON), false, do_mouse_down},
    {"pyautogui", "mouseUp", PARAMS(P_BUTTON), false, do_mouse_up},
    {"pyautogui", "scroll", PARAMS(P_SCROLL), false, do_scroll},
    {"pyautogui", "vscroll", PARAMS(P_SCROLL), false, do_scroll},
    {"pyautogui", "hscroll", PARAMS(P_SCROLL), false, do_hscroll},
    {"pyautogui", "typewrite", PARAMS(P_WRITE), false, do_typewrite},
    {"pyautogui", "write", PARAMS(P_WRITE), false, do_typewrite},
    {"pyautogui", "press", PARAMS(P_PRESS), false, do_press},
    {"pyautogui", "keyDown", PARAMS(P_KEY), false, do_key_down},
    {"pyautogui", "keyUp", PARAMS(P_KEY), false, do_key_up},
    {"pyautogui", "hotkey", PARAMS(P_HOTKEY), true, do_hotkey},
    {"pyautogui", "sleep", PARAMS(P_SLEEP), false, do_sleep},
    {"time", "sleep", PARAMS(P_SLEEP), false, do_sleep},
};

static void args_free(arg *args, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(args[i].kw);
        value_free(&args[i].v);
    }
    free(args);
}

/* Bind positional and keyword arguments to the parameter list, as Python would. */
static int bind_args(parser *p, call *c, bool varargs)
{
    size_t pos = 0;
    bool seen_kw = false;
    for (size_t i = 0; i < c->nargs; i++) {
        arg *a = &c->args[i];
        size_t idx;
        if (!a->kw) {
            if (seen_kw)
                return fail_at(p, c->line, "%s(): a positional argument follows a keyword argument", c->name);
            if (varargs)
                continue;
            if (pos >= c->nparams)
                return fail_at(p, c->line, "%s(): takes at most %zu positional arguments", c->name, c->nparams);
            idx = pos++;
        } else {
            seen_kw = true;
            for (idx = 0; idx < c->nparams && strcmp(c->params[idx], a->kw); idx++)
                ;
            if (idx == c->nparams)
                return fail_at(p, c->line, "%s(): unexpected keyword argument `%.32s`", c->name, a->kw);
        }
        if (c->slot[idx])
            return fail_at(p, c->line, "%s(): got multiple values for `%s`", c->name, c->params[idx]);
        c->slot[idx] = &a->v;
    }
    return 0;
}

static int parse_call(parser *p, size_t mod_tok_start, size_t mod_len)
{
    /* at '.' after the module name */
    if (next(p) < 0)
        return -1;
    if (p->tok.kind != TK_NAME)
        return fail_syntax(p);
    size_t fs = p->tok.start, fl = p->tok.end - p->tok.start;
    size_t ci;
    for (ci = 0; ci < ARRAY_LEN(calls); ci++)
        if (strlen(calls[ci].module) == mod_len && !memcmp(calls[ci].module, p->src + mod_tok_start, mod_len) &&
            strlen(calls[ci].name) == fl && !memcmp(calls[ci].name, p->src + fs, fl))
            break;
    if (ci == ARRAY_LEN(calls))
        return fail_syntax(p);
    int line = p->tok.line;
    if (next(p) < 0)
        return -1;
    if (!is_op(p, '('))
        return fail_syntax(p);
    if (next(p) < 0)
        return -1;

    call c = {.name = calls[ci].name, .line = line, .params = calls[ci].params, .nparams = calls[ci].nparams};
    int rc = -1;
    while (!is_op(p, ')')) {
        if (c.nargs >= ARGS_MAX) {
            fail_at(p, line, "%s(): more than %d arguments", c.name, ARGS_MAX);
            goto out;
        }
        c.args = xrealloc(c.args, (c.nargs + 1) * sizeof *c.args);
        arg *a = &c.args[c.nargs];
        memset(a, 0, sizeof *a);
        c.nargs++;
        if (p->tok.kind == TK_NAME && keyword_ahead(p)) {
            a->kw = xasprintf("%.*s", (int)(p->tok.end - p->tok.start), p->src + p->tok.start);
            if (next(p) < 0 || next(p) < 0) /* the name, then '=' */
                goto out;
        }
        if (parse_value(p, &a->v) < 0)
            goto out;
        if (is_op(p, ',')) {
            if (next(p) < 0)
                goto out;
        } else if (!is_op(p, ')')) {
            fail_syntax(p);
            goto out;
        }
    }
    if (next(p) < 0) /* past ')' */
        goto out;
    if (p->tok.kind != TK_SEP && p->tok.kind != TK_END) {
        fail_syntax(p);
        goto out;
    }
    if (bind_args(p, &c, calls[ci].varargs) < 0)
        goto out;
    rc = calls[ci].fn(p, &c);
out:
    args_free(c.args, c.nargs);
    return rc;
}

static int parse_import(parser *p)
{
    for (;;) {
        if (next(p) < 0)
            return -1;
        if (!name_is(p, &p->tok, "pyautogui") && !name_is(p, &p->tok, "time"))
            return fail_syntax(p);
        if (next(p) < 0)
            return -1;
        if (!is_op(p, ','))
            break;
    }
    return p->tok.kind == TK_SEP || p->tok.kind == TK_END ? 0 : fail_syntax(p);
}

static int parse_statement(parser *p)
{
    if (name_is(p, &p->tok, "import"))
        return parse_import(p);
    if (!name_is(p, &p->tok, "pyautogui") && !name_is(p, &p->tok, "time"))
        return fail_syntax(p);
    size_t ms = p->tok.start, ml = p->tok.end - p->tok.start;
    if (next(p) < 0)
        return -1;
    if (!is_op(p, '.'))
        return fail_syntax(p);
    return parse_call(p, ms, ml);
}

int pyautogui_parse(const char *code, json_t **actions, em_err *err)
{
    *actions = NULL;
    if (!code)
        return em_fail_input(err, "pyautogui: no code");
    size_t len = strlen(code);
    if (len > PYAUTOGUI_CODE_MAX)
        return em_fail_input(err, "pyautogui: code is %zu bytes, more than the limit of %d", len, PYAUTOGUI_CODE_MAX);
    parser p = {.src = code, .len = len, .line = 1, .at_stmt = true, .out = json_array(), .err = err};
    int rc = next(&p);
    while (rc == 0 && p.tok.kind != TK_END) {
        if (p.tok.kind == TK_SEP) {
            rc = next(&p);
            continue;
        }
        rc = parse_statement(&p);
    }
    free(p.tok.str);
    if (rc < 0) {
        json_decref(p.out);
        return -1;
    }
    *actions = p.out;
    return 0;
}

/* True when every translated action is valid on a w x h screen. */
static bool all_valid(json_t *list, int w, int h)
{
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a)
    {
        action parsed;
        em_err ignored = {0};
        if (action_parse(a, w, h, &parsed, &ignored) < 0)
            return false;
        action_free(&parsed);
    }
    return true;
}

int pyautogui_actions(const char *code, int w, int h, json_t **actions, em_err *err)
{
    em_err perr = {0};
    if (pyautogui_parse(code, actions, &perr) == 0) {
        if (all_valid(*actions, w, h))
            return 0;
        /* OSWorld's guest runs what envmgr's own schema refuses (a click off this screen, which
         * X clamps to its edge; a key pyautogui ignores): so does envmgr's guest. */
        json_decref(*actions);
        *actions = NULL;
    }
    size_t len = code ? strlen(code) : 0;
    if (len == 0 || len > PYAUTOGUI_CODE_MAX) {
        *err = perr;
        return -1;
    }
    *actions = json_pack("[{s:s, s:s}]", "action_type", "PYAUTOGUI", "code", code);
    return 0;
}

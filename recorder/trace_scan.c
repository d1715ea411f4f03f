/* Splitting trace.jsonl into lines and lines into JSON objects, with the
 * limits that keep a hostile file from costing more than it is allowed to. */
#include <stdio.h>
#include <string.h>

#include "envmgr/base/util.h"
#include "trace.h"
#include "trace_format.h"
#include "envmgr/base/fileio.h"

void trace_scan_init(trace_scan *s, const char *data, size_t len)
{
    linebuf_init_text(&s->in, data, len, TRACE_MAX_LINE);
    s->lineno = 0;
}

int trace_scan_next(trace_scan *s, const char **line, size_t *n, em_err *err)
{
    if (!linebuf_pending(&s->in))
        return 0;
    if (s->lineno >= TRACE_MAX_LINES)
        return em_fail_input(err, TRACE_FILE ": more than %d lines", TRACE_MAX_LINES);
    s->lineno++;
    int got = linebuf_next(&s->in, line, n);
    if (got == LINEBUF_TOO_LONG)
        return em_fail_input(err, TRACE_FILE " line %d: longer than the limit of %zu bytes", s->lineno,
                             TRACE_MAX_LINE);
    if (got == LINEBUF_NONE)
        return em_fail_input(err, TRACE_FILE " line %d: cut off (no newline at the end of the file): "
                                  "the trace was truncated mid-line", s->lineno);
    return 1;
}

/* jansson quotes the text near an error; keep it printable for a terminal. */
static void printable(char *s)
{
    for (unsigned char *p = (unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p >= 0x7f)
            *p = '?';
}

int trace_line_parse(const char *line, size_t n, int lineno, json_t **out, em_err *err)
{
    if (n == 0)
        return em_fail_input(err, TRACE_FILE " line %d: empty line", lineno);
    json_error_t jerr;
    /* No JSON_ALLOW_NUL: "\u0000" is refused, so every string is a C string. */
    json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        printable(jerr.text);
        return em_fail_input(err, TRACE_FILE " line %d: not valid JSON: %s (column %d)", lineno, jerr.text,
                             jerr.column);
    }
    if (!json_is_object(j)) {
        json_decref(j);
        return em_fail_input(err, TRACE_FILE " line %d: not a JSON object", lineno);
    }
    *out = j;
    return 0;
}

int trace_load(const char *dir, char **data, size_t *len, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" TRACE_FILE, dir);
    return read_file_flags(path, TRACE_MAX_BYTES, FILE_NOFOLLOW, data, len, err);
}

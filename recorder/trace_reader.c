/* Reading a trace back: every line parsed and checked against the format,
 * sorted by type for the accessors. The file is untrusted input; the limits
 * live in trace_scan.c and the rules in trace_schema.c. */
#include <stdlib.h>

#include "envmgr/base/util.h"
#include "trace.h"
#include "trace_format.h"

struct trace {
    char *dir;
    json_t *header, *setups, *steps, *postconfig, *egress, *evaluation, *trailer;
    size_t lines;
};

void trace_free(trace *t)
{
    if (!t)
        return;
    json_decref(t->header);
    json_decref(t->setups);
    json_decref(t->steps);
    json_decref(t->postconfig);
    json_decref(t->egress);
    json_decref(t->evaluation);
    json_decref(t->trailer);
    free(t->dir);
    free(t);
}

static void keep(trace *t, trace_line_type type, json_t *line)
{
    switch (type) {
    case TL_HEADER: t->header = line; return;
    case TL_SETUP: json_array_append_new(t->setups, line); return;
    case TL_STEP: json_array_append_new(t->steps, line); return;
    case TL_POSTCONFIG: json_array_append_new(t->postconfig, line); return;
    case TL_EGRESS: json_array_append_new(t->egress, line); return;
    case TL_EVALUATION: t->evaluation = line; return;
    case TL_TRAILER: t->trailer = line; return;
    }
}

int trace_read(const char *dir, trace **out, em_err *err)
{
    *out = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len;
    if (trace_load(dir, &data, &len, err) < 0)
        return em_prefix(err, "trace `%s`: ", dir);

    trace *t = xcalloc(1, sizeof *t);
    t->dir = xstrdup(dir);
    t->setups = json_array();
    t->steps = json_array();
    t->postconfig = json_array();
    t->egress = json_array();
    trace_scan scan;
    trace_schema schema = {0};
    trace_scan_init(&scan, data, len);
    const char *line;
    size_t n;
    int r;
    while ((r = trace_scan_next(&scan, &line, &n, err)) > 0) {
        json_t *obj;
        trace_line_type type;
        if (trace_line_parse(line, n, scan.lineno, &obj, err) < 0) {
            r = -1;
            break;
        }
        if (trace_schema_check(&schema, obj, &type, err) < 0) {
            json_decref(obj);
            r = -1;
            break;
        }
        keep(t, type, obj);
    }
    if (r == 0 && schema.lines == 0) {
        em_fail_input(err, TRACE_FILE " is empty");
        r = -1;
    }
    if (r != 0) {
        trace_free(t);
        return em_prefix(err, "trace `%s`: ", dir);
    }
    t->lines = (size_t)schema.lines;
    *out = t;
    return 0;
}

const char *trace_dir(const trace *t)
{
    return t->dir;
}

json_t *trace_header(const trace *t)
{
    return t->header;
}

size_t trace_n_setups(const trace *t)
{
    return json_array_size(t->setups);
}

json_t *trace_setup(const trace *t, size_t i)
{
    return json_array_get(t->setups, i);
}

size_t trace_n_steps(const trace *t)
{
    return json_array_size(t->steps);
}

json_t *trace_step(const trace *t, size_t i)
{
    return json_array_get(t->steps, i);
}

size_t trace_n_postconfig(const trace *t)
{
    return json_array_size(t->postconfig);
}

json_t *trace_postconfig(const trace *t, size_t i)
{
    return json_array_get(t->postconfig, i);
}

size_t trace_n_egress(const trace *t)
{
    return json_array_size(t->egress);
}

json_t *trace_egress(const trace *t, size_t i)
{
    return json_array_get(t->egress, i);
}

json_t *trace_evaluation(const trace *t)
{
    return t->evaluation;
}

json_t *trace_trailer(const trace *t)
{
    return t->trailer;
}

bool trace_complete(const trace *t)
{
    return t->trailer != NULL;
}

size_t trace_n_lines(const trace *t)
{
    return t->lines;
}

/* A request head as the gate sees it, read the way libmicrohttpd 0.9.75 reads it (CRLF or bare
 * LF line ends; empty lines before the request line skipped; a line is empty when it has no
 * bytes or starts with NUL), so that a head the gate calls complete is one MHD can act on at
 * once: otherwise a client could pass the gate with a blank line and trickle the rest to MHD. */
#include <string.h>
#include <strings.h>

#include "envmgr/api/api_gate.h"

/* The line starting at p (end excluded): its length without CR LF / LF, and where the next
 * starts; false when no line end is there yet. */
static bool next_line(const char *p, const char *end, size_t *len, const char **next)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return false;
    *len = (size_t)(nl - p) - (nl > p && nl[-1] == '\r');
    *next = nl + 1;
    return true;
}

static bool line_empty(const char *p, size_t len)
{
    return len == 0 || p[0] == '\0';
}

size_t api_gate_head_end(const char *buf, size_t len)
{
    const char *p = buf, *end = buf + len, *next;
    size_t n;
    bool request_line = false;
    while (next_line(p, end, &n, &next)) {
        if (line_empty(p, n) && request_line)
            return (size_t)(next - buf);
        request_line |= !line_empty(p, n);
        p = next;
    }
    return 0;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

/* The first value of `name` in a query (a=1&b=2): where it starts (NULL when absent), *len its length. */
static char *query_arg(char *query, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (char *p = query; p && *p;) {
        char *amp = strchr(p, '&');
        if (!strncmp(p, name, nl) && p[nl] == '=') {
            *len = amp ? (size_t)(amp - p - nl - 1) : strlen(p + nl + 1);
            return p + nl + 1;
        }
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

bool api_gate_head_credential(char *head, size_t len, const char *master, long now)
{
    char *p = head, *end = head + len, *line = NULL;
    const char *next;
    size_t n;
    api_creds cr = {0};
    while (next_line(p, end, &n, &next)) {
        p[n] = '\0';
        if (line_empty(p, n)) {
            if (line)
                break;
        } else if (!line) {
            line = p;
        } else {
            char *colon = strchr(p, ':');
            if (colon) {
                *colon = '\0';
                /* the first of each, as MHD_lookup_connection_value finds it */
                if (!cr.authorization && !strcasecmp(p, "Authorization"))
                    cr.authorization = trim(colon + 1);
                else if (!cr.cookie && !strcasecmp(p, "Cookie"))
                    cr.cookie = trim(colon + 1);
            }
        }
        p = (char *)next;
    }
    char *target = line ? strchr(line, ' ') : NULL;
    if (!target)
        return false;
    *target++ = '\0';
    char *sp = strchr(target, ' ');
    if (sp)
        *sp = '\0';
    char *query = strchr(target, '?');
    if (query) {
        *query++ = '\0';
        size_t tl = 0, cl = 0;
        char *t = query_arg(query, "token", &tl), *c = query_arg(query, "control", &cl);
        if (t)
            t[tl] = '\0';
        if (c)
            c[cl] = '\0';
        cr.query_token = t;
        cr.query_control = c;
    }
    api_route rt;
    api_error ae;
    if (api_route_match(line, target, &rt, &ae) < 0)
        return api_auth_bearer(cr.authorization, master);
    return api_auth_credential(master, &rt, &cr, now);
}

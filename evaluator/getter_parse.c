#include "evaluator/getter_parse.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/sbuf.h"
#include "envmgr/base/util.h"
#include "evaluator/getters.h"

#define TOOLBELT_ERROR_SHOWN 400 /* bytes of a toolbelt error quoted in a message */

int toolbelt_answer(const char *type, const char *out, size_t len, int code, json_t **answer, em_err *err)
{
    *answer = NULL;
    if (code == TOOLBELT_MISSING)
        return em_fail(err, "%s: the image has no guest toolbelt (envmgr-guest); use an image built with it "
                            "(`\"image\": \"apps\"`)", type);
    if (code < 0)
        return em_fail(err, "%s: envmgr-guest did not answer in time", type);
    json_error_t je;
    json_t *j = out && len ? json_loadb(out, len, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        return em_fail(err, "%s: envmgr-guest exited with status %d without a JSON answer", type, code);
    }
    json_t *e = json_object_get(j, "error");
    if (e || code != 0) {
        const char *msg = json_string_value(e);
        json_t *shown = getter_text_json(msg ? msg : "no message", msg ? strnlen(msg, TOOLBELT_ERROR_SHOWN) : 10);
        em_fail(err, "%s: %s", type, json_string_value(shown));
        json_decref(shown);
        json_decref(j);
        return TOOLBELT_REPORTED;
    }
    *answer = j;
    return 0;
}

/* ---- the address bar in the tree ---- */

/* The value of attribute name="..." in the start tag [tag, end), raw (still escaped). */
static bool attr_value(const char *tag, const char *end, const char *name, const char **v, size_t *vl)
{
    size_t nl = strlen(name);
    for (const char *p = tag + 1; p + nl + 2 < end; p++) { /* tag[0] is the `<` */
        if (p[-1] != ' ' || memcmp(p, name, nl) || p[nl] != '=' || p[nl + 1] != '"')
            continue;
        const char *s = p + nl + 2, *q = memchr(s, '"', (size_t)(end - s));
        if (!q)
            return false;
        *v = s;
        *vl = (size_t)(q - s);
        return true;
    }
    return false;
}

static bool attr_is(const char *tag, const char *end, const char *name, const char *want)
{
    const char *v;
    size_t vl;
    return attr_value(tag, end, name, &v, &vl) && vl == strlen(want) && !memcmp(v, want, vl);
}

/* XML text with the dumper's escapes (&amp; &lt; &gt; &quot; &apos; &#N;) decoded. */
static char *xml_unescape(const char *s, size_t n)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    sbuf b = {0};
    for (size_t i = 0; i < n;) {
        bool done = false;
        for (size_t k = 0; s[i] == '&' && k < ARRAY_LEN(ents) && !done; k++) {
            size_t el = strlen(ents[k].ent);
            if (i + el <= n && !memcmp(s + i, ents[k].ent, el)) {
                sbuf_add(&b, &ents[k].c, 1);
                i += el;
                done = true;
            }
        }
        if (!done && s[i] == '&' && i + 2 < n && s[i + 1] == '#') {
            char *e;
            long c = strtol(s + i + 2, &e, 10);
            if (e < s + n && *e == ';' && c > 0 && c < 128) {
                char ch = (char)c;
                sbuf_add(&b, &ch, 1);
                i = (size_t)(e - s) + 1;
                done = true;
            }
        }
        if (!done)
            sbuf_add(&b, s + i++, 1);
    }
    return b.s ? b.s : xstrdup("");
}

static const char *find_in(const char *p, const char *end, const char *needle)
{
    size_t nl = strlen(needle);
    for (; p && p + nl <= end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p || p + nl > end)
            return NULL;
        if (!memcmp(p, needle, nl))
            return p;
    }
    return NULL;
}

char *a11y_address_bar(const char *xml, size_t len)
{
    const char *end = xml + len;
    for (const char *app = find_in(xml, end, "<application "); app; app = find_in(app + 1, end, "<application ")) {
        const char *tag_end = memchr(app, '>', (size_t)(end - app));
        if (!tag_end)
            return NULL;
        if (!attr_is(app, tag_end, "name", "Google Chrome") && !attr_is(app, tag_end, "name", "Chromium"))
            continue;
        const char *app_end = find_in(tag_end, end, "</application>");
        if (!app_end)
            app_end = end;
        for (const char *e = find_in(tag_end, app_end, "<entry "); e; e = find_in(e + 1, app_end, "<entry ")) {
            const char *te = memchr(e, '>', (size_t)(app_end - e));
            if (!te)
                break;
            if (!attr_is(e, te, "name", "Address and search bar") || te[-1] == '/')
                continue;
            const char *text_end = memchr(te + 1, '<', (size_t)(app_end - te - 1));
            size_t tl = text_end ? (size_t)(text_end - te - 1) : 0;
            return tl ? xml_unescape(te + 1, tl) : NULL;
        }
    }
    return NULL;
}

/* ---- URLs ---- */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* %XX escapes as bytes (and, for a query component as parse_qs reads it, '+' as a space), as
 * Python's unquote; invalid UTF-8 in the result becomes U+FFFD. */
static json_t *pct_decode(const char *s, size_t n, bool plus)
{
    char *o = xmalloc(n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (plus && s[i] == '+')
            o[k++] = ' ';
        else if (s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            o[k++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else
            o[k++] = s[i];
    }
    json_t *j = getter_text_json(o, k);
    free(o);
    return j;
}

static json_t *qs_decode(const char *s, size_t n)
{
    return pct_decode(s, n, true);
}

json_t *url_query_pick(const char *url, json_t *keys, json_t *replace)
{
    json_t *found = json_object();
    const char *q = strchr(url, '?');
    if (q) {
        const char *qend = strchr(q, '#');
        qend = qend ? qend : q + strlen(q);
        for (const char *p = q + 1; p < qend;) {
            const char *amp = memchr(p, '&', (size_t)(qend - p));
            const char *pe = amp ? amp : qend, *eq = memchr(p, '=', (size_t)(pe - p));
            if (eq && eq + 1 < pe) { /* parse_qs drops blank values */
                json_t *k = qs_decode(p, (size_t)(eq - p));
                if (!json_object_get(found, json_string_value(k)))
                    json_object_set_new(found, json_string_value(k), qs_decode(eq + 1, (size_t)(pe - eq - 1)));
                json_decref(k);
            }
            p = pe + 1;
        }
    }
    json_t *out = json_object(), *k;
    size_t i;
    json_array_foreach(keys, i, k)
    {
        const char *ks = json_string_value(k);
        json_t *v = ks ? json_object_get(found, ks) : NULL;
        if (ks)
            json_object_set_new(out, ks, v ? json_incref(v) : json_string(""));
    }
    json_decref(found);
    const char *old;
    json_t *nw;
    json_object_foreach(replace, old, nw)
    {
        json_t *v = json_object_get(out, old);
        if (v && json_is_string(nw)) {
            json_incref(v);
            json_object_del(out, old);
            json_object_set_new(out, json_string_value(nw), v);
        }
    }
    return out;
}

char *url_dash_part(const char *url, long index, bool delete_id)
{
    long parts = 1;
    for (const char *p = url; (p = strchr(p, '/')); p++)
        parts++;
    if (index < 0)
        index += parts; /* Python's negative index */
    if (index < 0 || index >= parts)
        return NULL;
    const char *p = url;
    for (long n = 0; n < index; n++)
        p = strchr(p, '/') + 1;
    size_t l = strcspn(p, delete_id ? "/?" : "/");
    return xasprintf("%.*s", (int)l, p);
}

void url_split_lists(json_t *params)
{
    const char *k;
    json_t *v;
    json_object_foreach(params, k, v)
    {
        if (!json_is_string(v))
            continue;
        json_t *list = json_array();
        const char *p = json_string_value(v), *end = p + json_string_length(v);
        for (;;) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *e = comma ? comma : end;
            json_array_append_new(list, json_stringn(p, (size_t)(e - p)));
            if (!comma)
                break;
            p = comma + 1;
        }
        json_object_set_new(params, k, list);
    }
}

/* ---- Macy's product URL (url_path_parse) ---- */

/* The path of a URL as urlparse gives it: after the scheme and the //netloc, before ?query and
 * #fragment, without the last segment's ;params. */
static void url_path_span(const char *url, const char **start, size_t *len)
{
    const char *p = url;
    if (isalpha((unsigned char)*p)) {
        const char *c = p;
        while (isalnum((unsigned char)*c) || *c == '+' || *c == '-' || *c == '.')
            c++;
        if (*c == ':')
            p = c + 1;
    }
    if (p[0] == '/' && p[1] == '/')
        p += 2 + strcspn(p + 2, "/?#");
    size_t n = strcspn(p, "?#");
    const char *last = memrchr(p, '/', n);
    const char *semi = memchr(last ? last : p, ';', n - (size_t)((last ? last : p) - p));
    *start = p;
    *len = semi ? (size_t)(semi - p) : n;
}

/* Python's str.strip() for the ASCII blanks. */
static const char *strip_span(const char *s, size_t n, size_t *out)
{
    while (n && isspace((unsigned char)*s))
        s++, n--;
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    *out = n;
    return s;
}

/* The n-th (0-based) comma-separated field of a path segment, stripped; NULL past the last. */
static const char *field(const char *seg, size_t seglen, char sep, size_t n, size_t *len)
{
    const char *p = seg, *end = seg + seglen;
    for (size_t i = 0;; i++) {
        const char *c = memchr(p, sep, (size_t)(end - p));
        const char *e = c ? c : end;
        if (i == n)
            return strip_span(p, (size_t)(e - p), len);
        if (!c)
            return NULL;
        p = c + 1;
    }
}

static bool span_is(const char *s, size_t n, const char *want)
{
    return strlen(want) == n && !memcmp(s, want, n);
}

json_t *url_path_pick(const char *url, json_t *keys)
{
    const char *raw;
    size_t rawlen;
    url_path_span(url, &raw, &rawlen);
    json_t *pj = pct_decode(raw, rawlen, false);
    const char *path = json_string_value(pj);
    size_t plen = json_string_length(pj);
    json_t *out = json_object(), *kv = json_object();
    bool shirts = strstr(path, "shirts") != NULL, short_sleeve = strstr(path, "short-sleeve") != NULL;
    json_object_set_new(out, "mens_clothing", strstr(path, "mens-clothing") ? json_true() : json_null());
    /* path.strip('/').split('/'): the first two neighbouring segments that both hold a comma are
     * keys and values */
    const char *p = path, *end = path + plen;
    while (p < end && *p == '/')
        p++;
    while (end > p && end[-1] == '/')
        end--;
    for (const char *seg = p; seg <= end;) {
        const char *slash = memchr(seg, '/', (size_t)(end - seg));
        const char *se = slash ? slash : end;
        const char *next = slash ? slash + 1 : NULL;
        if (!next)
            break;
        const char *ne = memchr(next, '/', (size_t)(end - next));
        ne = ne ? ne : end;
        if (memchr(seg, ',', (size_t)(se - seg)) && memchr(next, ',', (size_t)(ne - next))) {
            for (size_t i = 0;; i++) {
                size_t kl, vl;
                const char *k = field(seg, (size_t)(se - seg), ',', i, &kl);
                const char *v = field(next, (size_t)(ne - next), ',', i, &vl);
                if (!k || !v)
                    break;
                _cleanup_free_ char *key = xasprintf("%.*s", (int)kl, k);
                json_t *val = vl ? json_stringn(v, vl) : json_null();
                if (!strcmp(key, "Price_discount_range") && vl) {
                    json_decref(val);
                    val = json_array();
                    size_t il;
                    const char *item;
                    for (size_t j = 0; (item = field(v, vl, '|', j, &il)); j++)
                        json_array_append_new(val, json_stringn(item, il));
                }
                json_object_set_new(kv, key, val);
                if (!strcmp(key, "Product_department") &&
                    (span_is(v, vl, "shirts") || span_is(v, vl, "Shirts") || span_is(v, vl, "Shirt")))
                    shirts = true;
                if (!strcmp(key, "Sleeve_length") && (span_is(v, vl, "short-sleeve") || span_is(v, vl, "Short Sleeve")))
                    short_sleeve = true;
            }
            break;
        }
        seg = next;
    }
    json_decref(pj);
    if (!json_object_get(kv, "Men_regular_size_t"))
        json_object_set_new(kv, "Men_regular_size_t", json_null());
    if (!json_object_get(kv, "Price_discount_range"))
        json_object_set_new(kv, "Price_discount_range", json_null());
    json_object_set_new(out, "shirts", shirts ? json_true() : json_null());
    json_object_set_new(out, "short_sleeve", short_sleeve ? json_true() : json_null());
    json_t *k;
    size_t i;
    json_array_foreach(keys, i, k)
    {
        const char *ks = json_string_value(k);
        json_t *v = ks ? json_object_get(kv, ks) : NULL;
        if (!v)
            continue;
        if (!strcmp(ks, "Price_discount_range")) {
            bool in50 = false, in30 = false, in20 = false;
            json_t *e;
            size_t j;
            json_array_foreach(v, j, e)
            {
                const char *es = json_string_value(e);
                in50 = in50 || !strcmp(es, "50_PERCENT_ off & more");
                in30 = in30 || !strcmp(es, "30_PERCENT_ off & more");
                in20 = in20 || !strcmp(es, "20_PERCENT_ off & more");
            }
            json_object_set_new(out, ks, json_string(in50 && !in30 && !in20 ? "50_PERCENT_ off & more"
                                                                             : "not_50_PERCENT_ off & more"));
        } else {
            json_object_set(out, ks, v);
        }
    }
    json_decref(kv);
    return out;
}

/* One line describing a computer_13 action, for `trace show` and the HTML
 * export. It reads fields generically (x, y, button, keys, text, ...) so an
 * action type this file has never heard of still reads sensibly. */
#include <string.h>

#include "envmgr/base/sbuf.h"
#include "trace.h"

#define MAX_KEYS 16
#define MAX_WORD 64

static void add_number(sbuf *b, json_t *v)
{
    if (json_is_integer(v))
        sbuf_printf(b, "%lld", (long long)json_integer_value(v));
    else
        sbuf_printf(b, "%g", json_number_value(v));
}

static void add_word(sbuf *b, json_t *v)
{
    if (json_is_string(v))
        sbuf_add_visible(b, json_string_value(v), MAX_WORD);
    else
        sbuf_puts(b, "?");
}

char *trace_action_summary(json_t *action, size_t max_text)
{
    sbuf b = {0};
    json_t *type = json_object_get(action, "action_type");
    if (!json_is_string(type)) {
        sbuf_puts(&b, "(no action_type)");
        return sbuf_steal(&b);
    }
    add_word(&b, type);
    json_t *v;
    if ((v = json_object_get(action, "button")) && json_is_string(v)) {
        sbuf_puts(&b, " ");
        add_word(&b, v);
    }
    json_t *x = json_object_get(action, "x"), *y = json_object_get(action, "y");
    if (json_is_number(x) && json_is_number(y)) {
        sbuf_puts(&b, " (");
        add_number(&b, x);
        sbuf_puts(&b, ", ");
        add_number(&b, y);
        sbuf_puts(&b, ")");
    }
    if ((v = json_object_get(action, "num_clicks")) && json_is_integer(v) && json_integer_value(v) != 1)
        sbuf_printf(&b, " x%lld", (long long)json_integer_value(v));
    json_t *dx = json_object_get(action, "dx"), *dy = json_object_get(action, "dy");
    if (json_is_number(dx) || json_is_number(dy)) {
        sbuf_puts(&b, " dx=");
        json_is_number(dx) ? add_number(&b, dx) : sbuf_puts(&b, "0");
        sbuf_puts(&b, " dy=");
        json_is_number(dy) ? add_number(&b, dy) : sbuf_puts(&b, "0");
    }
    if ((v = json_object_get(action, "key"))) {
        sbuf_puts(&b, " ");
        add_word(&b, v);
    }
    if ((v = json_object_get(action, "keys")) && json_is_array(v)) {
        sbuf_puts(&b, " ");
        for (size_t i = 0; i < json_array_size(v) && i < MAX_KEYS; i++) {
            if (i)
                sbuf_puts(&b, "+");
            add_word(&b, json_array_get(v, i));
        }
        if (json_array_size(v) > MAX_KEYS)
            sbuf_puts(&b, "+...");
    }
    if ((v = json_object_get(action, "text"))) {
        sbuf_puts(&b, " \"");
        if (json_is_string(v))
            sbuf_add_visible(&b, json_string_value(v), max_text);
        sbuf_puts(&b, "\"");
    }
    if ((v = json_object_get(action, "seconds")) && json_is_number(v)) {
        sbuf_puts(&b, " ");
        add_number(&b, v);
        sbuf_puts(&b, " s");
    }
    return sbuf_steal(&b);
}

#include "envmgr/base/jsonline.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "envmgr/base/util.h"

void jsonline_init(jsonline *c, int fd, const char *label, size_t max_line)
{
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->label = label;
    linebuf_init(&c->in, max_line);
}

void jsonline_release(jsonline *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    linebuf_release(&c->in);
}

static int fill(jsonline *c, double deadline, em_err *err)
{
    return linebuf_fill(&c->in, c->fd, deadline, err) < 0 ? em_prefix(err, "%s: ", c->label) : 0;
}

int jsonline_skip_to_ff(jsonline *c, double deadline, em_err *err)
{
    for (;;) {
        size_t n = linebuf_pending(&c->in);
        const char *ff = n ? memchr(linebuf_unread(&c->in), 0xff, n) : NULL;
        if (ff) {
            linebuf_skip(&c->in, (size_t)(ff - linebuf_unread(&c->in)) + 1);
            return 0;
        }
        linebuf_skip(&c->in, n); /* everything before the marker is stale */
        if (fill(c, deadline, err) < 0)
            return -1;
    }
}

/* Values in a JSON text, counted without parsing it: a reply of many tiny values (`[0,0,0,...]`)
 * costs jansson about 20 bytes of memory per byte of text, one of a few long strings (what QEMU's
 * guest agent and QMP send) about one. */
static size_t json_values(const char *s, size_t n)
{
    size_t count = 0;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_string) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_string = false;
        } else if (ch == '"') {
            in_string = true;
        } else if (ch == '{' || ch == '[' || ch == ',' || ch == ':') {
            count++;
        }
    }
    return count;
}

/* One line (no newline) as a JSON object: duplicate keys, more than JSONLINE_VALUES_MAX values,
 * malformed JSON and non-objects are refused, the message saying which ("malformed reply: ..."). */
static int jsonline_parse(const char *line, size_t n, json_t **msg, em_err *err)
{
    size_t values = json_values(line, n);
    if (values > JSONLINE_VALUES_MAX)
        return em_fail(err, "a reply of %zu JSON values (over %u): refused unparsed", values, JSONLINE_VALUES_MAX);
    json_error_t je;
    json_t *j = json_loadb(line, n, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return em_fail(err, "malformed reply: %s", je.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return em_fail(err, "reply is not a JSON object");
    }
    *msg = j;
    return 0;
}

int jsonline_read(jsonline *c, double deadline, json_t **msg, em_err *err)
{
    for (;;) {
        const char *line;
        size_t n;
        if (linebuf_read_line(&c->in, c->fd, deadline, &line, &n, err) < 0)
            return em_prefix(err, "%s: ", c->label);
        if (strspn(line, " \t\r") >= n) /* tolerate stray whitespace lines (line[n] is the newline) */
            continue;
        if (jsonline_parse(line, n, msg, err) < 0)
            return em_prefix(err, "%s: ", c->label);
        return 0;
    }
}

int jsonline_send(jsonline *c, json_t *msg, int fd, em_err *err)
{
    _cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
    if (!text)
        return em_fail(err, "%s: cannot encode message", c->label);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    text[n] = '\0';
    if (fd < 0)
        return send_full(c->fd, text, n, err) < 0 ? em_prefix(err, "%s: send: ", c->label) : 0;

    /* The fd must travel with the first byte of the command that uses it. */
    struct iovec iov = {.iov_base = text, .iov_len = n};
    char ctrl[CMSG_SPACE(sizeof(int))];
    memset(ctrl, 0, sizeof ctrl);
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl, .msg_controllen = sizeof ctrl};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    ssize_t w;
    do
        w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return em_fail_errno(err, "%s: sendmsg", c->label);
    if ((size_t)w < n && send_full(c->fd, text + w, n - (size_t)w, err) < 0)
        return em_prefix(err, "%s: send: ", c->label);
    return 0;
}

#include "envmgr/vm/vnc.h"

#include <rfb/rfbclient.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/vm/input_drain.h"
#include "envmgr/vm/pointer_axis.h"

struct vnc_session {
    rfbClient *client;
    char *path;
    long long area;     /* pixels received since the last request */
    bool want_full;     /* the request in flight is a full frame (connect), not a marker */
    bool marker_seen;   /* this update carries the marker block at (0,0) */
    bool hash_valid;    /* hash is of the pixels as they are (any update clears it) */
    uint64_t hash;
    bool frame_done;    /* the requested frame is complete */
    int wx, wy, buttons; /* the pointer's last VNC position (pointer_axis.h: where it lands differs) */
    bool pointer_known;
    bool extended_keys; /* the server accepted a scancode key event */
    int untaken;        /* key and button events sent since the guest was last seen to have taken them */
    bool key_untaken;   /* ... a key among them */
    bool button_untaken; /* ... a button pressed or released */
    double key_at;       /* when the last key event was sent (now_ms) */
    unsigned input_sent;     /* input events sent */
    unsigned input_read;     /* of those, how many QEMU has read: it answered a request sent after
                              * them, or the input drain saw the guest take them */
    unsigned request_covers; /* input_sent when the request in flight was sent */
    bool request_out;        /* a frame request is in flight: its answer has not come */
    double request_at;
    vnc_input_drain drain;
    void *drain_ctx;
};

#define REQUEST_RETRY_MS 1000.0
#define CLOSE_SYNC_MS 5000.0

static int tag;

static void quiet_log(const char *fmt, ...)
{
    if (!getenv("ENVMGR_VNC_DEBUG"))
        return;
    va_list ap;
    va_start(ap, fmt);
    em_vlog(EM_LOG_INFO, fmt, ap);
    va_end(ap);
}

static vnc_session *session_of(rfbClient *c)
{
    return rfbClientGetClientData(c, &tag);
}

static void got_update(rfbClient *c, int x, int y, int w, int h)
{
    vnc_session *v = session_of(c);
    v->hash_valid = false;
    v->area += (long long)w * h;
    if (x == 0 && y == 0)
        v->marker_seen = true;
}

static void finished_update(rfbClient *c)
{
    vnc_session *v = session_of(c);
    if (!v->frame_done && (v->want_full ? v->area >= (long long)c->width * c->height : v->marker_seen)) {
        v->frame_done = true;
        v->request_out = false;
        if ((int)(v->request_covers - v->input_read) > 0) /* QEMU answers in order: it read what came before */
            v->input_read = v->request_covers;
    }
    v->marker_seen = false;
}

/* The framebuffer is fixed at connect time; a resize would invalidate every coordinate. */
static rfbBool refuse_resize(rfbClient *c)
{
    size_t n = (size_t)c->width * c->height * 4;
    free(c->frameBuffer);
    c->frameBuffer = xcalloc(1, n);
    session_of(c)->hash_valid = false;
    return TRUE;
}

/* WaitForMessage watches only the socket, but libvncclient reads ahead up to 8 KB: the next
 * message can already sit in its buffer while the socket is quiet (on a still screen nothing more
 * comes to wake select), so look there first. */
static int wait_message(vnc_session *v, unsigned usecs)
{
    return v->client->buffered > 0 ? 1 : WaitForMessage(v->client, usecs);
}

/* Apply server messages until none comes within the time left; at or past the deadline, those
 * already waiting (a drain: it used to return before looking when called with now). The drain
 * stops after DRAIN_MAX messages: each handled update asks for the next, so a screen that never
 * stops changing on a host too slow to keep up would otherwise keep it going for good (then the
 * next frame may complete on an update already in flight: the screen was changing anyway). */
#define DRAIN_MAX 64
static int handle_messages(vnc_session *v, double deadline, em_err *err)
{
    for (int late = 0; late < DRAIN_MAX;) {
        double left = deadline - now_ms();
        if (left <= 0)
            late++;
        int n = wait_message(v, left <= 0 ? 0 : (unsigned)(left > 100 ? 100000 : left * 1000));
        if (n < 0)
            return em_fail(err, "vnc %s: connection lost", v->path);
        if (n == 0)
            return 0;
        if (!HandleRFBServerMessage(v->client))
            return em_fail(err, "vnc %s: connection lost (did QEMU exit?)", v->path);
    }
    return 0;
}

/* 1: the frame is complete; 0: not by `until`; -1: the connection is gone. */
static int wait_frame(vnc_session *v, double until, em_err *err)
{
    while (!v->frame_done) {
        if (now_ms() >= until)
            return 0;
        int n = wait_message(v, 50000);
        if (n < 0)
            return em_fail(err, "vnc %s: connection lost", v->path);
        if (n > 0 && !HandleRFBServerMessage(v->client))
            return em_fail(err, "vnc %s: connection lost (did QEMU exit?)", v->path);
    }
    return 1;
}

/* Wait for the answer owed to a request in flight (vnc_sync's), at most a second. */
static int take_owed_answer(vnc_session *v, double deadline, em_err *err)
{
    double owed = now_ms() + REQUEST_RETRY_MS;
    return v->request_out && wait_frame(v, owed < deadline ? owed : deadline, err) < 0 ? -1 : 0;
}

static void begin_request(vnc_session *v, bool full)
{
    v->area = 0;
    v->want_full = full;
    v->marker_seen = false;
    v->frame_done = false;
}

/* A client message of a type above the update request's (key, pointer, cut text) resets QEMU's
 * display refresh to its base interval (30 ms), which backs off by 50 ms after each refresh that
 * found nothing new. An empty cut text does it without reaching the guest (the guests have no
 * clipboard agent): a pointer event at the same place would wake the guest's input stack, which the
 * settle and the input drain watch for sleep. */
static int poke_refresh(vnc_session *v, em_err *err)
{
    if (!SendClientCutText(v->client, "", 0))
        return em_fail(err, "vnc %s: send cut text failed", v->path);
    return 0;
}

/* The request, then the poke: a poke that QEMU reads before the request can start a refresh that
 * finds nothing to send, which backs the next one off to 80 ms (seen: a frame after a pause took
 * 80 ms in a quarter of the settles). */
static int send_request(vnc_session *v, bool full, em_err *err)
{
    int w = full ? v->client->width : 1, h = full ? v->client->height : 1;
    if (!SendFramebufferUpdateRequest(v->client, 0, 0, w, h, FALSE))
        return em_fail(err, "vnc %s: send update request failed", v->path);
    if (poke_refresh(v, err) < 0)
        return -1;
    v->request_covers = v->input_sent;
    v->request_out = true;
    v->request_at = now_ms();
    return 0;
}

/* libvncclient follows every update with an incremental request, so QEMU pushes each change and
 * the client's framebuffer tracks the screen. A fresh frame then needs only proof that everything
 * up to now has arrived: a non-incremental request for the 16-pixel block at (0,0) (the marker)
 * makes QEMU's next update carry every dirty region plus that block, and that update is the last
 * one we need. Before it, an input message resets QEMU's refresh timer (an update request does
 * not; on a still screen it backs off to 3 s). A full frame (after connecting) waits for the
 * whole area instead: 8 MB at 1920x1080, where the marker costs a few hundred bytes. A request
 * unanswered for a second is sent again (an answer is due within one refresh, 30 ms). A marker
 * request still unanswered once the queue is drained (vnc_sync's) is answered at QEMU's next
 * refresh, after this call: that answer will do (waiting it out to ask again cost every frame
 * after keys a second refresh). */
static int request_frame(vnc_session *v, bool full, double deadline, em_err *err)
{
    /* Drain what is queued so the completion we wait for belongs to our request. */
    if (handle_messages(v, now_ms(), err) < 0)
        return -1;
    bool owed = !full && v->request_out;
    if (full && take_owed_answer(v, deadline, err) < 0)
        return -1;
    if (!owed)
        begin_request(v, full);
    /* the owed answer comes at QEMU's next refresh: not a backed-off one (a drain that waited for the
     * guest saw refreshes with nothing new) */
    else if (poke_refresh(v, err) < 0)
        return -1;
    for (bool ask = !owed;; ask = true) {
        if (ask && send_request(v, full, err) < 0)
            return -1;
        double until = (ask ? now_ms() : v->request_at) + REQUEST_RETRY_MS;
        int rc = wait_frame(v, until < deadline ? until : deadline, err);
        if (rc != 0)
            return rc < 0 ? -1 : 0;
        if (now_ms() >= deadline)
            return em_fail(err, "vnc %s: no complete frame before the timeout", v->path);
        quiet_log("vnc %s: no answer to a frame request in %.0f ms; asking again\n", v->path, REQUEST_RETRY_MS);
    }
}

int vnc_open(const char *sock_path, double timeout_ms, vnc_session **out, em_err *err)
{
    double deadline = now_ms() + timeout_ms;
    rfbClientLog = quiet_log;
    rfbClientErr = quiet_log;
    vnc_session *v = xcalloc(1, sizeof *v);
    v->path = xstrdup(sock_path);
    /* The VNC socket appears a moment after QEMU starts; wait for it. */
    int probe = unix_connect(sock_path, timeout_ms, err);
    if (probe < 0) {
        free(v->path);
        free(v);
        return em_prefix(err, "vnc: ");
    }
    close(probe);

    rfbClient *c = rfbGetClient(8, 3, 4);
    if (!c) {
        free(v->path);
        free(v);
        return em_fail(err, "vnc: out of memory");
    }
    rfbClientSetClientData(c, &tag, v);
    c->appData.encodingsString = "raw"; /* unix socket: copying is cheaper than any codec */
    c->appData.compressLevel = 0;
    c->canHandleNewFBSize = FALSE;
    c->GotFrameBufferUpdate = got_update;
    c->FinishedFrameBufferUpdate = finished_update;
    c->MallocFrameBuffer = refuse_resize;
    free(c->serverHost); /* rfbGetClient's placeholder */
    c->serverHost = strdup(sock_path); /* freed by rfbClientCleanup */
    c->serverPort = 0;
    c->readTimeout = 10; /* a QEMU that stops answering mid-message must not hang us */
    c->connectTimeout = 10;
    v->client = c;
    v->area = 0;
    v->want_full = true;
    v->frame_done = false;
    if (!rfbInitClient(c, NULL, NULL)) { /* frees c on failure */
        v->client = NULL;
        vnc_close(v);
        return em_fail(err, "vnc %s: handshake failed", sock_path);
    }
    /* rfbInitClient asked for a full frame; that one can be black, so drop it and ask again. */
    int got = wait_frame(v, deadline, err);
    if (got == 0)
        em_fail(err, "vnc %s: no first frame before the timeout", sock_path);
    if (got <= 0 || request_frame(v, true, deadline, err) < 0) {
        vnc_close(v);
        return -1;
    }
    *out = v;
    return 0;
}

void vnc_close(vnc_session *v)
{
    if (!v)
        return;
    /* QEMU drops what it has not read of a client that hangs up (ui/vnc.c: vnc_client_io, G_IO_HUP),
     * and its main loop reads nothing while it waits for a vCPU starved of host CPU: the last keys of
     * an `envmgr act` were lost. So hang up only once it has answered a request sent after them. */
    em_err ignored = {0};
    double deadline = now_ms() + CLOSE_SYNC_MS;
    if (v->client && v->input_read != v->input_sent && take_owed_answer(v, deadline, &ignored) == 0 &&
        v->input_read != v->input_sent)
        request_frame(v, false, deadline, &ignored);
    if (v->client) {
        free(v->client->frameBuffer); /* ours (refuse_resize): rfbClientCleanup leaves it */
        v->client->frameBuffer = NULL;
        rfbClientCleanup(v->client);
    }
    free(v->path);
    free(v);
}

int vnc_width(const vnc_session *v)
{
    return v->client->width;
}

int vnc_height(const vnc_session *v)
{
    return v->client->height;
}

const uint8_t *vnc_pixels(const vnc_session *v)
{
    return v->client->frameBuffer;
}

uint64_t vnc_frame_hash(vnc_session *v)
{
    if (v->hash_valid) /* the settle wait and the step's record hash the same frame */
        return v->hash;
    /* 64-bit multiply-xor over words: ~1 ms for 1280x800, enough to spot any change. */
    const uint8_t *p = v->client->frameBuffer;
    size_t n = (size_t)v->client->width * v->client->height;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < n; i++) {
        uint32_t px;
        memcpy(&px, p + i * 4, 4);
        h = (h ^ (px & 0x00ffffffu)) * 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    v->hash = h;
    v->hash_valid = true;
    return h;
}

int vnc_refresh(vnc_session *v, double timeout_ms, em_err *err)
{
    return request_frame(v, false, now_ms() + timeout_ms, err);
}

/* Events the guest must take (a key, a button pressed or released) go a batch at a time: its
 * keyboard holds 16 bytes and QEMU's tablet 16 reports (input_drain.h). Before one: a full batch is
 * first taken. */
static int before_counted(vnc_session *v, em_err *err)
{
    return v->untaken >= INPUT_DRAIN_BATCH ? vnc_wait_input_taken(v, err) : 0;
}

/* After one: a full batch asks QEMU now, so its answer (vnc_sync) is on its way while the event's
 * pace runs. */
static int after_counted(vnc_session *v, em_err *err)
{
    v->untaken++;
    return v->untaken >= INPUT_DRAIN_BATCH && v->drain && vnc_sync(v, err) < 0 ? -1 : 0;
}

int vnc_pointer(vnc_session *v, int x, int y, int buttons, em_err *err)
{
    int wx = pointer_axis_wire(x, v->client->width), wy = pointer_axis_wire(y, v->client->height);
    /* Motion alone needs no drain: QEMU's tablet merges a report into the one before it when their
     * buttons are the same and the guest has not read the earlier one (hw/input/hid.c:
     * hid_pointer_sync). That merge would also move an unread press or release to where the pointer
     * goes next (a drag's press landing on its path's second point), so motion right after a button
     * change waits until the guest has taken it. */
    bool counted = !v->pointer_known || buttons != v->buttons;
    bool moves = v->pointer_known && (wx != v->wx || wy != v->wy);
    if (counted ? before_counted(v, err) < 0
                : moves && v->button_untaken && vnc_wait_input_taken(v, err) < 0)
        return -1;
    if (!SendPointerEvent(v->client, wx, wy, buttons))
        return em_fail(err, "vnc %s: send pointer event failed", v->path);
    v->input_sent++;
    /* sent: the session knows where the pointer is even if asking QEMU about the batch fails */
    v->wx = wx;
    v->wy = wy;
    v->buttons = buttons;
    v->pointer_known = true;
    if (!counted)
        return 0;
    v->button_untaken = true;
    return after_counted(v, err);
}

void vnc_pointer_state(const vnc_session *v, int *x, int *y, int *buttons)
{
    *x = pointer_axis_landing(v->wx, v->client->width);
    *y = pointer_axis_landing(v->wy, v->client->height);
    *buttons = v->buttons;
}

void vnc_pointer_wire(const vnc_session *v, int *wx, int *wy, int *buttons)
{
    *wx = v->wx;
    *wy = v->wy;
    *buttons = v->buttons;
}

void vnc_set_pointer_wire(vnc_session *v, int wx, int wy, int buttons)
{
    v->wx = wx;
    v->wy = wy;
    v->buttons = buttons;
    v->pointer_known = true;
}

void vnc_set_input_drain(vnc_session *v, vnc_input_drain drain, void *ctx)
{
    v->drain = drain;
    v->drain_ctx = ctx;
}

int vnc_wait_input_taken(vnc_session *v, em_err *err)
{
    if (!v->untaken)
        return 0;
    int rc = 1; /* without a judge: once QEMU has read them */
    if (v->drain)
        rc = v->drain(v->drain_ctx, err);
    else if (request_frame(v, false, now_ms() + CLOSE_SYNC_MS, err) < 0)
        rc = -1;
    if (rc < 0)
        return -1;
    v->untaken = 0;
    v->key_untaken = false;
    v->button_untaken = false;
    if (rc > 0) /* taken: QEMU has read everything sent, so closing need not ask it */
        v->input_read = v->input_sent;
    return 0;
}

int vnc_wait_keys_taken(vnc_session *v, em_err *err)
{
    return v->key_untaken ? vnc_wait_input_taken(v, err) : 0;
}

int vnc_key(vnc_session *v, const key_code *k, bool down, double pace_ms, em_err *err)
{
    double wait = v->key_at + pace_ms - now_ms();
    if (wait > 0)
        sleep_ms(wait);
    if (before_counted(v, err) < 0)
        return -1;
    /* With scancodes the guest gets the physical key regardless of QEMU's keymap. */
    if (k->scancode && SendExtendedKeyEvent(v->client, k->keysym, k->scancode, down))
        v->extended_keys = true;
    else if (!SendKeyEvent(v->client, k->keysym, down))
        return em_fail(err, "vnc %s: send key event failed", v->path);
    v->key_at = now_ms();
    v->input_sent++;
    v->key_untaken = true;
    return after_counted(v, err);
}

int vnc_sync(vnc_session *v, em_err *err)
{
    if (v->request_out && handle_messages(v, now_ms(), err) < 0)
        return -1;
    if (v->input_read == v->input_sent)
        return 1;
    /* one request in flight at a time: the answer to an earlier one would pass for a later one's */
    if (!v->request_out || now_ms() - v->request_at >= REQUEST_RETRY_MS) {
        begin_request(v, false);
        if (send_request(v, false, err) < 0)
            return -1;
    }
    return 0;
}

int vnc_pump(vnc_session *v, double ms, em_err *err)
{
    double deadline = now_ms() + ms;
    while (now_ms() < deadline) {
        if (handle_messages(v, deadline, err) < 0 || check_interrupt(err) < 0)
            return -1;
        sleep_ms(deadline - now_ms() < 20 ? deadline - now_ms() : 20);
    }
    return 0;
}

/* A libvncclient session with QEMU's VNC server on a unix socket: fresh frames
 * on demand (QEMU sends only what changed), pointer and key events. QEMU quirks
 * handled here:
 *  - the first frame after connecting can be black: request a second full one;
 *  - the refresh timer backs off to 3 s on a static screen and an update
 *    request does not reset it, but input does: send an input message first;
 *  - keysyms of shifted characters arrive unshifted: wrap them in Shift, and
 *    send scancodes with QEMU's extended key event when offered;
 *  - it drops input it holds for a guest that does not read it (its PS/2 queue
 *    overflows) and input it has not read when the client hangs up: keys go in
 *    batches the guest has taken (input_drain.h), and closing waits until QEMU
 *    has read everything sent. */
#ifndef ENVMGR_VNC_H
#define ENVMGR_VNC_H

#include <stdbool.h>
#include <stdint.h>

#include "envmgr/base/err.h"
#include "envmgr/vm/keys.h"

typedef struct vnc_session vnc_session;

int vnc_open(const char *sock_path, double timeout_ms, vnc_session **out, em_err *err);
void vnc_close(vnc_session *v);

int vnc_width(const vnc_session *v);
int vnc_height(const vnc_session *v);
/* RGBX pixels of the last complete frame; stride is width * 4. */
const uint8_t *vnc_pixels(const vnc_session *v);
/* 64-bit hash of the current pixels (cheap change detection). */
uint64_t vnc_frame_hash(vnc_session *v);

/* Bring the frame up to date: everything the screen showed when this was called has arrived. */
int vnc_refresh(vnc_session *v, double timeout_ms, em_err *err);

/* Move the pointer onto screen pixel (x, y) (sent as the VNC position that lands there,
 * pointer_axis.h) with these buttons down (bit 0 left, 1 middle, 2 right, 3/4 wheel up/down, 5/6
 * wheel left/right). */
int vnc_pointer(vnc_session *v, int x, int y, int buttons, em_err *err);
/* The screen pixel the guest's pointer is on, and the buttons down. */
void vnc_pointer_state(const vnc_session *v, int *x, int *y, int *buttons);
/* The pointer's VNC position, what is kept across commands and in saved states (golden.json,
 * state.json, input.json: "pointer"; written before the position was mapped, it equals the
 * screen position sent, which is where QEMU had it). */
void vnc_pointer_wire(const vnc_session *v, int *wx, int *wy, int *buttons);
/* Tell the session the pointer's VNC position (restored from the env's state) without sending anything. */
void vnc_set_pointer_wire(vnc_session *v, int wx, int wy, int buttons);
/* Send a key event, at least pace_ms after this session's previous one (the pace is between keys:
 * nothing waits after the last). Once INPUT_DRAIN_BATCH key and button events are untaken, it first
 * waits until the guest has taken them (vnc_wait_input_taken); vnc_pointer does the same for a
 * button pressed or released. */
int vnc_key(vnc_session *v, const key_code *k, bool down, double pace_ms, em_err *err);
/* Returns once the guest has taken every key and button event sent (at once when there is none): the
 * input drain's judgement (input_drain.h), or without one, once QEMU has read them. */
int vnc_wait_input_taken(vnc_session *v, em_err *err);
/* The judge of vnc_wait_input_taken: it returns 1 once the guest has taken every event sent (QEMU
 * has read them all), 0 when it gave up waiting, -1 with err when it cannot go on (interrupted, or
 * QEMU is gone). */
typedef int (*vnc_input_drain)(void *ctx, em_err *err);
/* vnc_wait_input_taken when a key is among the events not yet taken: an action's end. A click's two
 * button events fit the tablet's queue many times over; waiting for the guest to take them would
 * only delay the settle that follows, which waits for the guest's work anyway. */
int vnc_wait_keys_taken(vnc_session *v, em_err *err);
void vnc_set_input_drain(vnc_session *v, vnc_input_drain drain, void *ctx);

/* 1 once QEMU has read every input event sent (it answered a frame request sent after them), 0 not
 * yet: a request is then on its way (its answer comes with QEMU's next refresh, within 30 ms), so a
 * call a little later tells. It never waits. */
int vnc_sync(vnc_session *v, em_err *err);

/* Read and apply server messages for up to ms (keeps socket buffers drained). */
int vnc_pump(vnc_session *v, double ms, em_err *err);

#endif

/* The rule that judges, from outside the guest, when it has taken the input envmgr sent it. The
 * probes it reads (vm_threads_awake and vm_threads_sched in vm.h, vnc_sync in vnc.h) stay out of
 * this file, so the rule can be tested alone.
 *
 * Why it is needed: QEMU does not hold input for a guest that does not read it. Its PS/2 keyboard
 * keeps 16 bytes and drops what comes on top (hw/input/ps2.c: ps2_queue returns when
 * PS2_QUEUE_SIZE - count < 1); its VNC server drops the messages it has not read yet when the client
 * hangs up (ui/vnc.c: vnc_client_io, G_IO_HUP: vnc_disconnect_start). A vCPU starved of host CPU
 * (4 TCG guests on 2 cores) reads nothing, and QEMU's main loop waits for it too, so keys sent at a
 * fixed pace of host time would pile up and be lost. So keys go in batches, each taken before the
 * next is sent. */
#ifndef ENVMGR_VM_INPUT_DRAIN_H
#define ENVMGR_VM_INPUT_DRAIN_H

#include <stdbool.h>

/* Key events sent before the guest must have taken them: half of QEMU's PS/2 queue (16 bytes, one a
 * key event in the translated scancodes Linux reads), and well inside the guest kernel's evdev buffer
 * (64 events, 3 a key event) should its X server be slow to read. */
#define INPUT_DRAIN_BATCH 8
/* Taken: every QEMU thread asleep in this many samples in a row, after the input was sent. (Not a
 * paused guest's: QEMU drops input while the guest is paused, ui/input.c: qemu_input_event_send, so
 * the env resumes it before any action.) */
#define INPUT_DRAIN_QUIET_SAMPLES 2
#define INPUT_DRAIN_SAMPLE_MS 1.0
/* A guest that never sleeps (busy): a VNC round trip, begun with the drain, is over (QEMU has read
 * every event sent and put it in the guest's device), and the vCPUs have run this long since the
 * drain began. (Since the round trip would be surer, but QEMU puts the keys in the device as it reads
 * them, long before its answer, and a batch left untaken still leaves the PS/2 queue room for one
 * more: waiting for the run time after the answer made a busy guest's typing twice as slow.) */
#define INPUT_DRAIN_BUSY_RUN_MS 10.0
/* The most one drain waits; after a drain gave up (a guest that takes no input at all), the next
 * ones wait only this long until one sees the input taken, so a hung guest does not stall typing. */
#define INPUT_DRAIN_MAX_MS 5000.0
#define INPUT_DRAIN_MAX_AFTER_GIVE_UP_MS 50.0

typedef struct {
    double waited_ms; /* since the drain began */
    int quiet;        /* samples in a row in which every QEMU thread slept */
    bool synced;      /* the drain's VNC round trip is over (vnc_sync) */
    double ran_ms;    /* vCPU run time since the drain began */
    double max_ms;    /* INPUT_DRAIN_MAX_MS, or INPUT_DRAIN_MAX_AFTER_GIVE_UP_MS after a give-up */
} input_drain_seen;

typedef enum {
    INPUT_DRAIN_WAIT,    /* sample again */
    INPUT_DRAIN_TAKEN,   /* the guest has taken the input */
    INPUT_DRAIN_GIVE_UP, /* waited max_ms: go on (what QEMU could not hold is lost) */
} input_drain_next;

input_drain_next input_drain_step(const input_drain_seen *s);

#endif

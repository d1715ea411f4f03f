#include "envmgr/vm/input_drain.h"

input_drain_next input_drain_step(const input_drain_seen *s)
{
    /* Asleep, every thread: QEMU's main loop woke for the input and went back to sleep (it has read
     * it and put it in the device), and the vCPU the device's interrupt woke halted again (the guest
     * read the device and nothing in it, its X server included, has work left). Twice, as the
     * threads are read one after the other: a vCPU read asleep just before the main loop woke it. */
    if (s->quiet >= INPUT_DRAIN_QUIET_SAMPLES)
        return INPUT_DRAIN_TAKEN;
    /* A guest that never sleeps: QEMU has read the input, and the vCPU has run long enough to take
     * the device's interrupts (a few microseconds each) and let its X server read them. */
    if (s->synced && s->ran_ms >= INPUT_DRAIN_BUSY_RUN_MS)
        return INPUT_DRAIN_TAKEN;
    if (s->waited_ms >= s->max_ms)
        return INPUT_DRAIN_GIVE_UP;
    return INPUT_DRAIN_WAIT;
}

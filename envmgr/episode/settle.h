/* When the screen after an action is final: the settle rule, apart from its probes (the VNC frame,
 * the vCPUs' run time, the disk's counters) so it can be tested on its own.
 *
 * A step waits until the screen has stayed the same and the guest has been idle (its vCPUs mostly
 * asleep, no disk request) for a still window. The window depends on the work the guest did since
 * the action began (a WAIT's seconds and a typed text's included): a guest that took the input with
 * at most SETTLE_QUICK_WORK_MS of work (the pointer over the background, a modifier, a character
 * echoed) has drawn what it asked, and SETTLE_MIN_MS (two display refreshes) will do; a guest that
 * did more started something (a dialog's answer, a save, an application), and what it started may
 * go on after an idle gap (an asynchronous file operation, a timer: seen, 130 ms and more after
 * an Enter in a save dialog), so it gets the run's whole settle_ms (--settle-ms) after its last
 * change. */
#ifndef ENVMGR_SETTLE_H
#define ENVMGR_SETTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "envmgr/env/env.h"

/* How a wait for the screen ended, recorded per step in the trace. */
typedef struct settle_info {
    double ms;        /* how long it took */
    double window_ms; /* the still window it asked for (by the guest's work since the action) */
    double work_ms;   /* the guest's vCPU time since the action began; infinite without the counters */
    int frames;       /* frames it looked at */
    bool settled;     /* false: the upper bound ended it */
    bool frozen;      /* it ended with the guest paused, on a frame taken after the pause */
    const char *why;  /* "settled", or what kept it from settling: "screen changing", "guest busy",
                       * "disk busy" */
} settle_info;

/* The still window of a step whose guest worked (--settle-ms's default). It outlasts GTK's tooltip,
 * which comes 500 ms after the pointer rests on a widget, also when a window opens under a resting
 * pointer: seen with 300 ms, in one of three runs of a demo task a tooltip came after the
 * observation (an idle gap longer than the window), and so did a replay's divergence. */
#define SETTLE_DEFAULT_MS 550.0
/* An interval is idle when the vCPUs ran at most this share of the time they could run (a guest
 * with work never sleeps, close to 1 per vCPU; an idle one mostly sleeps: 1-4 % under TCG). */
#define SETTLE_BUSY_MAX 0.25
/* QEMU's display refresh once input has come (ui/vnc.c: VNC_REFRESH_INTERVAL_BASE); a frame fetch
 * pokes it, so the looks come about this far apart. */
#define SETTLE_REFRESH_MS 30.0
/* The shortest still window: about two display refreshes (a look that pauses the guest just before
 * the second, SETTLE_PAUSE_LEAD_MS early, still counts). */
#define SETTLE_MIN_MS 55.0
/* How long before the refresh it expects a freezing look pauses the guest. */
#define SETTLE_PAUSE_LEAD_MS 3.0
/* The most vCPU time, since the action began, that still gets the shortest window. A click on the
 * desktop's background or a shift press costs the guest 10-20 ms, three characters echoed in a
 * terminal about 20 ms; an Enter that closes a save dialog 60 ms before its first idle gap. */
#define SETTLE_QUICK_WORK_MS 30.0
/* Still intervals in a row, at least: one frame matching the previous could be a refresh that had
 * not yet caught a change. */
#define SETTLE_MIN_INTERVALS 2

/* One look: a fresh frame's hash and the counters read right after it. */
typedef struct settle_sample {
    double t_ms;      /* when the counters were read */
    uint64_t hash;    /* the frame's */
    bool have_cpu;    /* run_ns and wait_ns are valid */
    uint64_t run_ns;  /* the vCPUs' run time so far, summed */
    uint64_t wait_ns; /* their time waiting for a host CPU so far, summed */
    bool disk;        /* a disk request completed or is in flight since the last sample */
} settle_sample;

typedef struct settle_rule {
    double settle_ms;     /* the longest window */
    bool started;
    settle_sample last;
    double still_since;   /* the time of the sample that began the current still run */
    int still;            /* still intervals in a row */
    double work_ms;       /* vCPU time since the first sample; infinite without the counters */
    int frames;
    const char *why;
} settle_rule;

void settle_rule_init(settle_rule *r, double settle_ms);
/* Feed the next sample; true when the screen is settled with it. */
bool settle_rule_feed(settle_rule *r, const settle_sample *s);
/* Work the guest did before the first sample (since the action began), counted as the samples' is. */
void settle_rule_add_work(settle_rule *r, double ms);
/* The still window the rule asks for now. */
double settle_rule_window_ms(const settle_rule *r);
/* Would a still sample at t_ms settle it? */
bool settle_rule_would_settle(const settle_rule *r, double t_ms);

/* Wait until the rule says settled, at most max_ms. Returns 0 either way (a screen that never
 * settles is not an error: info says so); -1 when the env failed. info may be NULL. The frame it
 * ended on is the env's current frame (env_frame_held).
 *
 * freeze: the caller pauses the guest next to observe it; then the look that would settle pauses
 * the guest first, just before the display refresh it expects, and its frame, taken after the
 * pause, is exactly the frozen screen (info->frozen): the observation needs no fetch of its own, a
 * display refresh saved on every step. A look that finds the screen not settled resumes the
 * guest. */
int screen_settle(env *e, double settle_ms, double max_ms, bool freeze, settle_info *info, em_err *err);

#endif

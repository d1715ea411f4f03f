/* The settle rule (episode/settle.h): when the screen after an action is final, from frames and the
 * guest's vCPU and disk counters, sample by sample. */
#include <math.h>

#include "envmgr/episode/settle.h"
#include "helpers/cunit_main.h"

#define MS 1000000ull /* ns */

/* A sample at t ms whose vCPUs have run `ran` ms in all. */
static settle_sample at(double t, uint64_t hash, double ran)
{
    return (settle_sample){.t_ms = t, .hash = hash, .have_cpu = true, .run_ns = (uint64_t)(ran * MS)};
}

static bool feed(settle_rule *r, settle_sample s)
{
    return settle_rule_feed(r, &s);
}

/* Feed samples every 30 ms (a display refresh) from t0 until settled; returns when, or -1. */
static double settle_after(settle_rule *r, double t0, uint64_t hash, double ran, double until)
{
    for (double t = t0; t <= until; t += 30)
        if (settle_rule_feed(r, &(settle_sample){.t_ms = t, .hash = hash, .have_cpu = true,
                                                 .run_ns = (uint64_t)(ran * MS)}))
            return t;
    return -1;
}

/* A click that changes nothing, in a guest that went back to sleep: two refreshes, not the whole
 * settle_ms. */
static void test_nothing_changes(void)
{
    settle_rule r;
    settle_rule_init(&r, 300);
    CU_ASSERT_FALSE(feed(&r, at(0, 7, 10)));
    CU_ASSERT_FALSE(feed(&r, at(30, 7, 11))); /* one still interval */
    CU_ASSERT_TRUE(feed(&r, at(60, 7, 11.5)));
    CU_ASSERT_STRING_EQUAL(r.why, "settled");
    CU_ASSERT_DOUBLE_EQUAL(settle_rule_window_ms(&r), SETTLE_MIN_MS, 1e-9);
    CU_ASSERT_EQUAL(r.frames, 3);
}

/* A guest that worked long (an application starting) gets the whole window after its last change. */
static void test_long_work_gets_the_whole_window(void)
{
    settle_rule r;
    settle_rule_init(&r, 300);
    feed(&r, at(0, 1, 0));
    for (int i = 1; i <= 20; i++) /* 600 ms: the screen changes, the vCPU busy */
        CU_ASSERT_FALSE(feed(&r, at(30.0 * i, (uint64_t)i, 28.0 * i)));
    CU_ASSERT_STRING_EQUAL(r.why, "screen changing");
    CU_ASSERT_DOUBLE_EQUAL(settle_rule_window_ms(&r), 300, 1e-9);
    double t = settle_after(&r, 630, 20, 28.0 * 20 + 1, 2000);
    CU_ASSERT_DOUBLE_EQUAL(t, 600 + 300, 1e-9); /* still from the sample at 600 ms on */
}

/* The shortest window up to SETTLE_QUICK_WORK_MS of work; past it, the whole settle_ms. */
static void test_window_by_work(void)
{
    settle_rule r;
    settle_rule_init(&r, 300);
    feed(&r, at(0, 1, 0));
    feed(&r, at(30, 2, 25)); /* changed, 25 ms of work */
    CU_ASSERT_DOUBLE_EQUAL(settle_rule_window_ms(&r), SETTLE_MIN_MS, 1e-9);
    feed(&r, at(60, 3, 50)); /* changed, 50 ms of work: it started something */
    CU_ASSERT_DOUBLE_EQUAL(settle_rule_window_ms(&r), 300, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(settle_after(&r, 90, 3, 50, 1000), 360, 1e-9); /* the first sample 300 ms past 60 */
}

/* Still frames do not settle a guest that works (a dialog being built) or waits for its disk. */
static void test_busy_or_disk_is_not_still(void)
{
    settle_rule r;
    settle_rule_init(&r, 300);
    feed(&r, at(0, 5, 0));
    CU_ASSERT_FALSE(feed(&r, at(30, 5, 20))); /* 67 % busy */
    CU_ASSERT_STRING_EQUAL(r.why, "guest busy");
    settle_sample d = at(60, 5, 20);
    d.disk = true;
    CU_ASSERT_FALSE(settle_rule_feed(&r, &d));
    CU_ASSERT_STRING_EQUAL(r.why, "disk busy");
    /* host load: the vCPU waited for a host CPU most of the interval, and ran the rest: busy */
    settle_sample w = at(90, 5, 25);
    w.wait_ns = 29 * MS + 500000;
    CU_ASSERT_FALSE(settle_rule_feed(&r, &w));
    CU_ASSERT_STRING_EQUAL(r.why, "guest busy");
    CU_ASSERT_EQUAL(r.still, 0);
}

/* Without the vCPU counters the guest's idleness is unknown: the whole settle_ms, on the screen. */
static void test_no_counters_whole_window(void)
{
    settle_rule r;
    settle_rule_init(&r, 300);
    for (int i = 0; i < 10; i++)
        CU_ASSERT_FALSE(settle_rule_feed(&r, &(settle_sample){.t_ms = 30.0 * i, .hash = 9}));
    CU_ASSERT_TRUE(isinf(r.work_ms));
    CU_ASSERT_TRUE(settle_rule_feed(&r, &(settle_sample){.t_ms = 300, .hash = 9}));
}

/* settle_ms below the minimum: one still interval of at least settle_ms; 0 settles on the first
 * interval that is still. */
static void test_short_settle_ms(void)
{
    settle_rule r;
    settle_rule_init(&r, 0);
    feed(&r, at(0, 1, 0));
    CU_ASSERT_FALSE(feed(&r, at(30, 2, 0)));
    CU_ASSERT_TRUE(feed(&r, at(60, 2, 0)));
    settle_rule_init(&r, 40);
    feed(&r, at(0, 1, 0));
    CU_ASSERT_FALSE(feed(&r, at(30, 1, 0)));
    CU_ASSERT_TRUE(feed(&r, at(60, 1, 0)));
}

/* The guest's work during the action (a WAIT's seconds, typing) counts as work after it. */
static void test_work_during_the_action(void)
{
    settle_rule r;
    settle_rule_init(&r, 300);
    feed(&r, at(0, 4, 0));
    settle_rule_add_work(&r, 120); /* busy through a WAIT */
    CU_ASSERT_DOUBLE_EQUAL(settle_rule_window_ms(&r), 300, 1e-9);
    CU_ASSERT_FALSE(feed(&r, at(30, 4, 0.5)));
    CU_ASSERT_FALSE(feed(&r, at(60, 4, 1))); /* two still intervals, but 60 ms < 300 */
    CU_ASSERT_DOUBLE_EQUAL(settle_after(&r, 90, 4, 1, 1000), 300, 1e-9);
}

static CU_TestInfo tests[] = {
    {"work during the action counts", test_work_during_the_action},
    {"nothing changes: two refreshes", test_nothing_changes},
    {"long work: the whole window after the last change", test_long_work_gets_the_whole_window},
    {"the window by the guest's work", test_window_by_work},
    {"a busy guest or its disk is not still", test_busy_or_disk_is_not_still},
    {"no counters: the whole window", test_no_counters_whole_window},
    {"settle_ms below the minimum", test_short_settle_ms},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("settle", tests);
}

/* The rule that says when a guest has taken the keys envmgr sent (vm/input_drain.h), and the probe
 * of QEMU's threads it reads (vm_threads_awake), on this process's own threads. */
#include <pthread.h>
#include <unistd.h>

#include "envmgr/vm/input_drain.h"
#include "envmgr/vm/vm.h"
#include "helpers/cunit_main.h"

static input_drain_seen seen(double waited_ms, int quiet, bool synced, double ran_ms)
{
    return (input_drain_seen){
        .waited_ms = waited_ms, .quiet = quiet, .synced = synced, .ran_ms = ran_ms, .max_ms = INPUT_DRAIN_MAX_MS};
}

static input_drain_next step(input_drain_seen s)
{
    return input_drain_step(&s);
}

/* An idle guest: taken once every thread has slept in two samples in a row, not after one (the
 * threads are read one after the other). */
static void test_quiet_guest(void)
{
    CU_ASSERT_EQUAL(step(seen(0.5, 0, false, 0)), INPUT_DRAIN_WAIT);
    CU_ASSERT_EQUAL(step(seen(1, 1, false, 0)), INPUT_DRAIN_WAIT);
    CU_ASSERT_EQUAL(step(seen(1.5, INPUT_DRAIN_QUIET_SAMPLES, false, 0)), INPUT_DRAIN_TAKEN);
    /* quiet wins whatever else: the round trip need not be over */
    CU_ASSERT_EQUAL(step(seen(3000, INPUT_DRAIN_QUIET_SAMPLES, false, 0)), INPUT_DRAIN_TAKEN);
}

/* A guest that never sleeps: taken once QEMU has read the keys (the round trip) and the vCPU has run
 * long enough since; neither alone will do. */
static void test_busy_guest(void)
{
    CU_ASSERT_EQUAL(step(seen(40, 0, false, 0)), INPUT_DRAIN_WAIT);
    CU_ASSERT_EQUAL(step(seen(40, 0, false, 100)), INPUT_DRAIN_WAIT); /* ran, but QEMU may not have read them */
    CU_ASSERT_EQUAL(step(seen(40, 0, true, INPUT_DRAIN_BUSY_RUN_MS - 0.1)), INPUT_DRAIN_WAIT);
    CU_ASSERT_EQUAL(step(seen(40, 0, true, INPUT_DRAIN_BUSY_RUN_MS)), INPUT_DRAIN_TAKEN);
}

/* A starved guest (its vCPU waits for a host CPU, or is stopped): no quiet, no run time. The drain
 * waits for it, up to its limit, then gives up; after a give-up the limit is short. */
static void test_starved_guest(void)
{
    CU_ASSERT_EQUAL(step(seen(INPUT_DRAIN_MAX_MS - 1, 0, true, 2)), INPUT_DRAIN_WAIT);
    CU_ASSERT_EQUAL(step(seen(INPUT_DRAIN_MAX_MS, 0, true, 2)), INPUT_DRAIN_GIVE_UP);
    input_drain_seen s = seen(INPUT_DRAIN_MAX_AFTER_GIVE_UP_MS, 1, false, 0);
    s.max_ms = INPUT_DRAIN_MAX_AFTER_GIVE_UP_MS;
    CU_ASSERT_EQUAL(input_drain_step(&s), INPUT_DRAIN_GIVE_UP);
    CU_ASSERT(INPUT_DRAIN_MAX_AFTER_GIVE_UP_MS < INPUT_DRAIN_MAX_MS);
}

/* A batch fits QEMU's PS/2 queue (16 bytes) twice over: one byte a key event, and room for what
 * the guest had not read yet. */
static void test_batch_fits_the_keyboard(void)
{
    CU_ASSERT(INPUT_DRAIN_BATCH >= 4 && INPUT_DRAIN_BATCH <= 16 / 2); /* a tap with Shift is 4 events */
}

static int wake[2];

static void *sleeper(void *arg)
{
    char c;
    (void)arg;
    return read(wake[0], &c, 1) == 1 ? NULL : arg; /* asleep in read until woken */
}

/* This thread runs (awake); one blocked in read sleeps and is not counted; a process that is gone
 * reads as -1. */
static void test_threads_awake(void)
{
    CU_ASSERT_EQUAL_FATAL(pipe(wake), 0);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, sleeper, NULL), 0);
    usleep(50 * 1000); /* let it reach its read */
    int awake = vm_threads_awake(getpid());
    CU_ASSERT(awake >= 1);  /* this one, reading /proc */
    CU_ASSERT(awake <= 1);  /* and not the sleeper */
    CU_ASSERT_EQUAL(write(wake[1], "x", 1), 1);
    pthread_join(t, NULL);
    close(wake[0]);
    close(wake[1]);
    CU_ASSERT_EQUAL(vm_threads_awake(0x3ffffff), -1); /* beyond pid_max */
}

static CU_TestInfo tests[] = {
    {"an idle guest: every thread asleep twice", test_quiet_guest},
    {"a busy guest: QEMU read the keys and the vCPU ran since", test_busy_guest},
    {"a starved guest: wait, up to the limit", test_starved_guest},
    {"a batch fits the PS/2 queue", test_batch_fits_the_keyboard},
    {"QEMU's threads awake, read from /proc", test_threads_awake},
    CU_TEST_INFO_NULL,
};

int main(void)
{
    return run_suite("input_drain", tests);
}

#include "envmgr/env/env.h"
#include "envmgr/env/env_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/env/guest_ops.h"
#include "envmgr/state/states.h"
#include "envmgr/vm/accel.h"
#include "envmgr/vm/boundaries.h"
#include "envmgr/vm/cgroup.h"
#include "envmgr/state/golden.h"
#include "envmgr/vm/overlay.h"
#include "envmgr/state/ramfs.h"
#include "envmgr/vm/manifest.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/vm/input_drain.h"
#include "envmgr/vm/vm.h"

#define ENV_INPUT "input.json"
#define ENV_LOCK "lock"
#define AGENT_TIMEOUT_MS 30000.0
/* The image's clock daemon (vm-images/toolbelt/envmgr_guest/clockd.py); without it, the agent's
 * guest-set-time, which starts hwclock in the guest. */
#define GUEST_CLOCK_FIFO "/run/envmgr-clock"
#define VNC_TIMEOUT_MS 20000.0


const char *env_name(const env *e) { return e->name; }
const char *env_dir(const env *e) { return e->dir; }
const char *env_accel(const env *e)
{
    const char *a = json_string_value(json_object_get(e->meta, "accel"));
    return a ? a : "unknown"; /* never NULL: it goes into json_pack and printf */
}
const char *env_image_sha256(const env *e) { return e->image->sha256; }

int env_vcpu_time(env *e, uint64_t *run_ns, uint64_t *wait_ns, em_err *err)
{
    if (e->vcpu_pid != e->pid) { /* a new QEMU since we asked (up, reset): new threads */
        e->nvcpu = 0;
        if (vm_vcpu_threads(e->dir, e->vcpu_tids, VM_VCPUS_MAX, &e->nvcpu, err) < 0)
            return em_prefix(err, "env %s: vCPU threads: ", e->name);
        e->vcpu_pid = e->pid;
    }
    vm_threads_sched(e->pid, e->vcpu_tids, e->nvcpu, run_ns, wait_ns);
    return 0;
}

/* How long the vCPUs have run, -1 when that cannot be read (then the drain goes by the threads'
 * sleep and the VNC round trip alone). */
static double vcpu_ms(env *e)
{
    uint64_t run = 0, wait;
    em_err ignored = {0};
    if (env_vcpu_time(e, &run, &wait, &ignored) < 0 || run == 0)
        return -1;
    return (double)run / 1e6;
}

static int drain_give_up(env *e, double waited_ms)
{
    if (!e->input_drain_gave_up)
        em_warn("envmgr: env %s: the guest took no input for %.0f ms; sending on (keys may be lost)", e->name,
                waited_ms);
    e->input_drain_gave_up = true;
    return 0;
}

/* vnc.h's input drain: returns 1 once the guest has taken every event sent, judged by input_drain.h
 * from QEMU's threads (/proc), a VNC round trip and the vCPUs' run time; 0 when it gave up. */
static int input_drain(void *ctx, em_err *err)
{
    env *e = ctx;
    input_drain_seen s = {.max_ms = e->input_drain_gave_up ? INPUT_DRAIN_MAX_AFTER_GIVE_UP_MS : INPUT_DRAIN_MAX_MS};
    double t0 = now_ms(), ran0 = 0;
    bool timing = false; /* ran0 is set: the vCPUs' run time is read only once a sample is not quiet
                          * (its first read in a process asks QEMU for the vCPU threads: ms) */
    for (;;) {
        /* threads unreadable (-1): never quiet; the round trip and the run time decide */
        s.quiet = vm_threads_awake(e->pid) == 0 ? s.quiet + 1 : 0;
        int rc = s.synced ? 1 : vnc_sync(e->vnc, err);
        if (rc < 0)
            return env_failed(e, err);
        s.synced = rc > 0;
        if (!s.quiet) {
            double ran = vcpu_ms(e);
            if (!timing)
                ran0 = ran;
            timing = true;
            s.ran_ms = ran < 0 || ran0 < 0 ? INPUT_DRAIN_BUSY_RUN_MS : ran - ran0;
        }
        s.waited_ms = now_ms() - t0;
        switch (input_drain_step(&s)) {
        case INPUT_DRAIN_TAKEN:
            e->input_drain_gave_up = false;
            return 1;
        case INPUT_DRAIN_GIVE_UP:
            return drain_give_up(e, s.waited_ms);
        case INPUT_DRAIN_WAIT:
            break;
        }
        if (check_interrupt(err) < 0)
            return -1;
        sleep_ms(INPUT_DRAIN_SAMPLE_MS);
    }
}

json_t *env_boundaries(env *e)
{
    json_t *b = NULL;
    em_err err = {0};
    if (e->pid <= 0 || vm_boundaries(e->pid, &b, &err) < 0)
        return json_pack("{s:s}", "error", e->pid > 0 ? err.msg : "no QEMU running");
    return b;
}

int env_block_ops(env *e, uint64_t *ops, em_err *err) { return vm_block_ops(e->dir, ops, err); }

bool env_io_waiting(env *e) { return e->pid > 0 && vm_threads_in_io(e->pid) > 0; }

/* Why the env cannot answer when its QEMU is gone, and whether the server of the saved state's RAM
 * it mapped died first (a guest then dies on its next page of RAM): the sockets' own errors say only
 * that the peer left. 0: its QEMU runs. */
static int gone_why(env *e, em_err *err)
{
    if (e->pid <= 0 || vm_alive(e->pid, e->dir))
        return 0;
    const char *ram = json_string_value(json_object_get(e->meta, "ram_file"));
    const char *slash = ram ? strrchr(ram, '/') : NULL;
    _cleanup_free_ char *mnt = slash ? xasprintf("%.*s", (int)(slash - ram), ram) : NULL;
    if (mnt && ramfs_dead(mnt))
        return em_fail(err, "env %s: its QEMU died after the server of its saved state's RAM did (`envmgr reset "
                            "%s` or a state restore brings the env back)",
                       e->name, e->name);
    return em_fail(err, "env %s: its QEMU died (see %s/" VM_LOG_FILE "; `envmgr reset %s` starts it again)",
                   e->name, e->dir, e->name);
}

#define DYING_WAIT_MS 1000.0 /* a QEMU whose sockets just closed may still be exiting */

int env_gone(env *e, double wait_ms, em_err *err)
{
    if (e->pid > 0 && wait_ms > 0 && vm_alive(e->pid, e->dir))
        vm_wait_gone(e->pid, wait_ms); /* still there after it: it runs */
    return gone_why(e, err) < 0 ? 1 : 0;
}

int env_failed(env *e, em_err *err)
{
    em_err why = {0};
    if (env_gone(e, DYING_WAIT_MS, &why) > 0)
        *err = why;
    return -1;
}

int env_hold(env *e, bool hold, em_err *err)
{
    if (vm_hold(e->dir, hold, err) < 0) {
        em_prefix(err, "env %s: %s the guest: ", e->name, hold ? "pausing" : "resuming");
        return env_failed(e, err);
    }
    e->running_known = !hold;
    return 0;
}

int env_guest_off(env *e, bool *off, em_err *err) { return vm_guest_shut_down(e->dir, off, err); }

/* An action or a guest command on a paused env (envmgr pause, an idle suite or API env) runs it
 * again first: neither can complete while its vCPUs stand still. */
static int ensure_running(env *e, em_err *err)
{
    return e->running_known ? 0 : env_hold(e, false, err);
}
int env_width(const env *e) { return e->image->width; }
const manifest *env_manifest(const env *e) { return e->image; }
int env_height(const env *e) { return e->image->height; }

static char *in_dir(const env *e, const char *file)
{
    return xasprintf("%s/%s", e->dir, file);
}

/* Where the pointer is and which buttons are down: the next command's VNC session starts there. */
static void write_input_state(env *e, int x, int y, int buttons)
{
    json_t *j = json_pack("{s:i, s:i, s:i}", "x", x, "y", y, "buttons", buttons);
    _cleanup_free_ char *path = in_dir(e, ENV_INPUT);
    json_save(path, j, JSON_COMPACT, 0600, NULL);
    json_decref(j);
}

static void save_pointer(env *e)
{
    if (!e->vnc)
        return;
    int x, y, b;
    vnc_pointer_wire(e->vnc, &x, &y, &b);
    write_input_state(e, x, y, b);
}

/* Close the VNC and agent connections, keeping where the pointer is (input.json). */
static void env_drop_connections(env *e)
{
    save_pointer(e);
    vnc_close(e->vnc);
    e->vnc = NULL;
    guest_close(e->ga);
    e->ga = NULL;
    e->png_valid = false;
}

static void env_free(env *e)
{
    if (!e)
        return;
    env_drop_connections(e);
    png_buf_free(&e->png);
    if (e->lockfd >= 0)
        close(e->lockfd);
    env_state_unhold(e);
    manifest_free(e->image);
    golden_free(e->gold);
    state_chain_free(e->chain, e->nchain);
    json_decref(e->meta);
    free(e->name);
    free(e->dir);
    free(e);
}

void env_close(env *e)
{
    env_free(e);
}

static int lock_dir(env *e, em_err *err)
{
    _cleanup_free_ char *path = in_dir(e, ENV_LOCK);
    e->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (e->lockfd < 0)
        return em_fail_errno(err, "env %s: open lock", e->name);
    /* Commands on one env take turns: QMP, VNC input and the agent serve one client well. */
    double deadline = now_ms() + 120000;
    while (flock(e->lockfd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return em_fail_errno(err, "env %s: lock", e->name);
        if (check_interrupt(err) < 0)
            return -1;
        if (now_ms() > deadline)
            return em_fail(err, "env %s: busy (another envmgr command holds it for 120 s)", e->name);
        sleep_ms(20);
    }
    return 0;
}

static int env_write_meta(env *e, em_err *err)
{
    _cleanup_free_ char *path = in_dir(e, ENV_META);
    return json_save(path, e->meta, JSON_INDENT(2), 0600, err);
}

/* Where the restored state left the pointer: the golden state's, or a saved state's. */
static void reset_pointer_state(env *e)
{
    const state *s = e->nchain ? e->chain[e->nchain - 1] : NULL;
    write_input_state(e, s ? s->pointer_x : e->gold ? e->gold->pointer_x : 0,
                      s ? s->pointer_y : e->gold ? e->gold->pointer_y : 0, 0);
}

/* input.json: false when there is none. */
static bool read_input_state(env *e, int *x, int *y, int *buttons)
{
    _cleanup_free_ char *input = in_dir(e, ENV_INPUT), *text = NULL;
    if (read_file_capped(input, 4096, &text, NULL, NULL) < 0)
        return false;
    json_t *j = json_loads(text, 0, NULL);
    *x = (int)json_integer_value(json_object_get(j, "x"));
    *y = (int)json_integer_value(json_object_get(j, "y"));
    *buttons = (int)json_integer_value(json_object_get(j, "buttons"));
    json_decref(j);
    return j != NULL;
}

void env_pointer_wire(env *e, int *x, int *y)
{
    int b;
    *x = *y = 0;
    if (e->vnc)
        vnc_pointer_wire(e->vnc, x, y, &b);
    else
        read_input_state(e, x, y, &b);
}

/* What a freshly restored guest still needs, done lazily by the first command that needs it: it
 * wakes with the clock of the moment it was saved, and setting it needs the guest agent (and, so that
 * no process starts in the guest, the image's clock daemon: ~0.2 s after a restore under TCG, where
 * the agent's guest-set-time, which starts hwclock, took ~0.75 s), so up/reset do not wait for it:
 * the screen and input are usable at once. (A served state's RAM still warming makes the guest slow
 * to take its first input, not lose it: keys and buttons go a batch at a time, each taken first.)
 * Its cgroup goes back to a running guest's CPU weight now (a restore has ten times it: cgroup.h). */
static void mark_restored(env *e)
{
    json_object_set_new(e->meta, "clock_synced", json_false());
    vm_cgroup_restored(e->dir);
}

/* Network machinery of allowlist envs: the egress proxy (started with QEMU
 * by vm_spawn) must answer, and the guest's /etc/hosts and /etc/environment
 * point at it again (a restore brings back the golden disk). Mode none: nothing. */
static int net_start(env *e, em_err *err)
{
    netpolicy p;
    guest *g;
    if (netpolicy_load(e->dir, &p, err) < 0)
        return -1;
    if (p.mode == NETPOLICY_NONE)
        return 0;
    if (netpolicy_wait_ready(e->dir, 10000, err) < 0 || env_guest(e, &g, err) < 0 ||
        netpolicy_guest_setup(g, &p, err) < 0)
        return em_prefix(err, "network: ");
    return 0;
}

int env_network(const env *e, netpolicy *p, em_err *err)
{
    return netpolicy_load(e->dir, p, err);
}

int env_set_network(env *e, const netpolicy *p, bool *changed, em_err *err)
{
    netpolicy cur;
    if (netpolicy_load(e->dir, &cur, err) < 0)
        return -1;
    *changed = !netpolicy_equal(&cur, p);
    return *changed ? netpolicy_save(e->dir, p, NULL, err) : 0;
}

static env *env_new(const char *name)
{
    env *e = xcalloc(1, sizeof *e);
    e->name = xstrdup(name);
    e->dir = paths_env_dir(name);
    e->lockfd = -1;
    e->state_hold_fd = -1;
    return e;
}

int env_up(const env_up_opts *o, env **out, env_timings *t, em_err *err)
{
    env_timings tm = {0};
    if (check_name("--name", o->name, err) < 0)
        return -1;
    if (paths_ensure_run_root(err) < 0)
        return -1;
    env *e = env_new(o->name);
    if (mkdir(e->dir, 0700) < 0) {
        int exists = errno == EEXIST;
        em_fail_errno(err, "env %s: create `%s`", o->name, e->dir);
        if (exists)
            em_fail_input(err, "--name: env `%s` already exists (envmgr down %s)", o->name, o->name);
        free(e->dir);
        e->dir = NULL; /* not ours: do not remove */
        env_free(e);
        return -1;
    }
    const char *accel = NULL;
    double t0 = now_ms();
    int rc = lock_dir(e, err);
    state *from = NULL; /* up --from-state: the state names the image and accelerator */
    if (rc == 0 && o->from_state)
        rc = state_load(o->from_state, &from, err);
    _cleanup_free_ char *image_dir = from ? xstrdup(from->image) : paths_image_dir(o->image);
    if (rc == 0 && (rc = manifest_load(image_dir, &e->image, err)) < 0)
        em_prefix(err, from ? "the state's image: " : "--image: ");
    if (rc == 0)
        rc = manifest_verify(e->image, 0, err);
    if (rc == 0 && from && strcmp(o->accel, "auto") && strcmp(o->accel, from->accel))
        rc = em_fail_input(err, "--accel: state `%s` was saved under %s", from->name, from->accel);
    if (rc == 0)
        rc = from ? env_state_use(e, from->name, from->accel, err) : accel_choose(o->accel, e->image, &accel, err);
    if (rc == 0 && from)
        accel = e->chain[e->nchain - 1]->accel;
    if (rc == 0 && !from)
        rc = golden_ensure(e->image, accel, &e->gold, err);
    state_free(from);
    double t1 = now_ms();
    if (rc == 0) {
        char when[40];
        iso8601_now(when, sizeof when);
        e->meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "name", o->name, "image", e->image->dir,
                            "image_sha256", e->image->sha256, "accel", accel, "golden", e->gold->dir, "created",
                            when, "width", e->image->width, "height", e->image->height);
        rc = env_write_meta(e, err);
    }
    if (rc == 0 && o->net)
        rc = netpolicy_save(e->dir, o->net, NULL, err);
    if (rc == 0)
        rc = e->nchain ? env_state_start(e, accel, &tm.flat_ms, &tm.ram_served, err)
                       : golden_start_clone(e->gold, e->image, accel, e->dir, o->name, &e->pid, err);
    double t2 = now_ms();
    if (rc == 0 && e->nchain)
        rc = env_state_record(e, err);
    if (rc == 0) {
        reset_pointer_state(e);
        mark_restored(e);
        rc = env_write_meta(e, err);
    }
    env_state_unhold(e); /* recorded as the state's user now: removal refuses */
    if (rc == 0)
        rc = net_start(e, err);
    if (rc < 0) {
        em_err ignored;
        if (e->pid)
            vm_stop(e->dir, e->pid, &ignored);
        netpolicy_stop_helper(e->dir, &ignored);
        env_drop_connections(e);
        vm_overlay_remove(e->dir);
        netpolicy_log_forget(e->dir);
        vm_forget(e->dir);
        remove_tree(e->dir, NULL);
        env_free(e);
        return em_prefix(err, "up %s: ", o->name);
    }
    tm.golden_ms = t1 - t0;
    tm.restore_ms = t2 - t1;
    if (t)
        *t = tm;
    *out = e;
    return 0;
}

static int load_existing(env *e, em_err *err)
{
    _cleanup_free_ char *path = in_dir(e, ENV_META), *text = NULL;
    struct stat st;
    if (stat(e->dir, &st) < 0)
        return em_fail_input(err, "env `%s` does not exist (envmgr ls lists the envs)", e->name);
    if (paths_check_private_dir(paths_run_root(), "run root", err) < 0 ||
        paths_check_private_dir(e->dir, "env directory", err) < 0)
        return em_prefix(err, "env %s: ", e->name);
    if (read_file_capped(path, JSON_DOC_MAX, &text, NULL, err) < 0)
        return em_prefix(err, "env %s: ", e->name);
    json_error_t je;
    e->meta = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    const char *image = json_string_value(json_object_get(e->meta, "image"));
    const char *gdir = json_string_value(json_object_get(e->meta, "golden"));
    const char *accel = json_string_value(json_object_get(e->meta, "accel"));
    if (!image || !gdir || !accel || (strcmp(accel, "kvm") && strcmp(accel, "tcg")))
        return em_fail(err, "env %s: %s is damaged", e->name, path);
    if (manifest_load(image, &e->image, err) < 0)
        return em_prefix(err, "env %s: ", e->name);
    if (golden_open(gdir, &e->gold, err) < 0)
        return em_prefix(err, "env %s: ", e->name);
    return 0;
}

/* dead_ok: for the operations that replace the QEMU (reset, restore), which bring back an env whose
 * QEMU died; e->pid is then 0. */
static int open_env(const char *name, bool dead_ok, env **out, em_err *err)
{
    if (check_name("env", name, err) < 0)
        return -1;
    env *e = env_new(name);
    int rc = load_existing(e, err);
    if (rc == 0)
        rc = lock_dir(e, err);
    em_err perr = {0};
    bool alive = rc == 0 && vm_read_pid(e->dir, &e->pid, &perr) == 0 && vm_alive(e->pid, e->dir);
    if (rc == 0 && !alive && dead_ok) {
        e->pid = 0;
        e->running_known = false;
    } else if (rc == 0 && !alive) {
        _cleanup_free_ char *log = in_dir(e, VM_LOG_FILE);
        rc = em_fail(err, "env %s: its QEMU is not running (it exited or was killed; see %s); `envmgr reset %s` "
                          "starts it again, `envmgr down %s` cleans it up",
                     name, log, name, name);
    }
    if (rc < 0) {
        env_free(e);
        return -1;
    }
    *out = e;
    return 0;
}

int env_open(const char *name, env **out, em_err *err) { return open_env(name, false, out, err); }

int env_open_to_restart(const char *name, env **out, em_err *err) { return open_env(name, true, out, err); }

int env_down(const char *name, em_err *err)
{
    if (check_name("env", name, err) < 0)
        return -1;
    _cleanup_free_ char *dir = paths_env_dir(name), *meta = xasprintf("%s/" ENV_META, dir);
    struct stat st;
    if (stat(dir, &st) < 0)
        return em_fail_input(err, "env `%s` does not exist (envmgr ls lists the envs)", name);
    pid_t pid;
    em_err ignored;
    if (vm_read_pid(dir, &pid, &ignored) == 0 && vm_stop(dir, pid, err) < 0)
        return em_prefix(err, "down %s: ", name);
    vm_kill_strays(dir, 0);
    _cleanup_free_ char *text = NULL;
    if (read_file_capped(meta, JSON_DOC_MAX, &text, NULL, NULL) == 0) { /* no longer on its saved state */
        json_t *j = json_loads(text, 0, NULL);
        state_release(json_string_value(json_object_get(json_object_get(j, "state"), "name")), dir);
        json_decref(j);
    }
    if (netpolicy_stop_helper(dir, err) < 0)
        return em_prefix(err, "down %s: ", name);
    vm_overlay_remove(dir);
    netpolicy_log_forget(dir);
    vm_forget(dir);
    return remove_tree(dir, err) < 0 ? em_prefix(err, "down %s: ", name) : 0;
}

int env_restart(env *e, env_timings *t, const char *what, em_err *err)
{
    double t0 = now_ms();
    env_drop_connections(e);
    if (vm_stop(e->dir, e->pid, err) < 0 || netpolicy_stop_helper(e->dir, err) < 0)
        return em_prefix(err, "%s %s: ", what, e->name);
    vm_kill_strays(e->dir, 0); /* a QEMU an earlier, killed command started: never two on one disk */
    e->pid = 0;
    double t1 = now_ms();
    const char *accel = env_accel(e);
    double flat_ms = 0;
    bool served = false;
    if ((e->nchain ? env_state_start(e, accel, &flat_ms, &served, err)
                   : golden_start_clone(e->gold, e->image, accel, e->dir, e->name, &e->pid, err)) < 0)
        return em_prefix(err, "%s %s: ", what, e->name);
    double t2 = now_ms();
    e->running_known = true; /* a restored guest runs */
    reset_pointer_state(e);
    mark_restored(e);
    if ((e->nchain && env_state_record(e, err) < 0) || env_write_meta(e, err) < 0 || net_start(e, err) < 0)
        return em_prefix(err, "%s %s: ", what, e->name);
    if (t) {
        t->golden_ms = 0;
        t->stop_ms = t1 - t0;
        t->restore_ms = t2 - t1;
        t->flat_ms = flat_ms;
        t->ram_served = served;
    }
    return 0;
}

int env_reset(env *e, env_timings *t, em_err *err)
{
    env_state_leave(e);
    return env_restart(e, t, "reset", err);
}

int env_guest(env *e, guest **g, em_err *err)
{
    /* Every operation inside the guest comes here: dispatched on the image's guest interface (the
     * envmgr agent and qga: the same QEMU guest agent; osworld slots in here). */
    bool qga = e->image->guest == MANIFEST_GUEST_QGA, osworld = e->image->guest == MANIFEST_GUEST_OSWORLD;
    if (e->image->guest != MANIFEST_GUEST_ENVMGR && !qga && !osworld)
        return em_fail_input(err, "env %s: image %s has no envmgr guest agent (guest %s: screenshots and input only)",
                             e->name, e->image->name, manifest_guest_name(e->image->guest));
    if (gone_why(e, err) < 0 || ensure_running(e, err) < 0)
        return -1;
    if (!e->ga) {
        _cleanup_free_ char *sock = in_dir(e, VM_QGA_SOCK), *password = osworld ? env_user_password(e) : NULL;
        /* osworld: OSWorld's server on the loopback of this QEMU's own network namespace (vm.h) */
        int rc = osworld ? guest_open_osworld(e->pid, password, &e->ga, err) : guest_open(sock, AGENT_TIMEOUT_MS, &e->ga, err);
        if (rc < 0) {
            em_prefix(err, "env %s: ", e->name);
            return env_failed(e, err);
        }
        if (!json_is_true(json_object_get(e->meta, "clock_synced"))) {
            em_err ferr = {0};
            /* qga: no clock FIFO; an agent that cannot set the clock (no /sbin/hwclock) leaves the
             * golden state's time, said once; osworld: date through /execute (sudo with the image's
             * password when the server's user may not), the same warning when neither may */
            if ((qga || osworld) && guest_set_time(e->ga, &ferr) < 0)
                em_warn("envmgr: env %s: the guest clock stays the saved state's: %s", e->name, ferr.msg);
            else if (!qga && guest_set_time_fifo(e->ga, GUEST_CLOCK_FIFO, &ferr) < 0 && guest_set_time(e->ga, err) < 0)
                return em_prefix(err, "env %s: set the guest clock: ", e->name);
            json_object_set_new(e->meta, "clock_synced", json_true());
            if (env_write_meta(e, err) < 0)
                return -1;
        }
    }
    *g = e->ga;
    return 0;
}

int env_pointer(env *e, int *x, int *y, em_err *err)
{
    vnc_session *v;
    int buttons;
    if (env_vnc(e, &v, err) < 0)
        return -1;
    vnc_pointer_state(v, x, y, &buttons);
    return 0;
}

int env_vnc(env *e, vnc_session **v, em_err *err)
{
    if (!e->vnc) {
        _cleanup_free_ char *sock = in_dir(e, VM_VNC_SOCK);
        int x, y, b;
        if (gone_why(e, err) < 0)
            return -1;
        if (vnc_open(sock, VNC_TIMEOUT_MS, &e->vnc, err) < 0) {
            em_prefix(err, "env %s: ", e->name);
            return env_failed(e, err);
        }
        vnc_set_input_drain(e->vnc, input_drain, e);
        if (read_input_state(e, &x, &y, &b))
            vnc_set_pointer_wire(e->vnc, x, y, b);
    }
    *v = e->vnc;
    return 0;
}

int env_frame(env *e, const uint8_t **pixels, em_err *err)
{
    vnc_session *v;
    if (env_vnc(e, &v, err) < 0)
        return -1;
    if (vnc_refresh(v, VNC_TIMEOUT_MS, err) < 0)
        return env_failed(e, err);
    *pixels = vnc_pixels(v);
    return 0;
}

int env_frame_held(env *e, const uint8_t **pixels, uint64_t *hash, em_err *err)
{
    vnc_session *v;
    if (env_vnc(e, &v, err) < 0)
        return -1;
    *pixels = vnc_pixels(v);
    *hash = vnc_frame_hash(v);
    return 0;
}

int env_screenshot(env *e, const png_buf **png, em_err *err)
{
    const uint8_t *px;
    if (env_frame(e, &px, err) < 0)
        return -1;
    uint64_t h = vnc_frame_hash(e->vnc);
    if (!e->png_valid || h != e->png_hash) {
        int w = vnc_width(e->vnc), hh = vnc_height(e->vnc);
        if (png_encode_rgbx(px, w, hh, (size_t)w * 4, 1, &e->png, err) < 0)
            return em_prefix(err, "env %s: screenshot: ", e->name);
        e->png_hash = h;
        e->png_valid = true;
    }
    *png = &e->png;
    return 0;
}

/* An agent's pyautogui code outside the translated subset, run as OSWorld's in-guest server runs
 * it: python3 as the desktop user with pyautogui imported (the toolbelt's, over XTEST), FAILSAFE
 * off, at most 120 s (the toolbelt's envmgr_guest/agent_code.py, which also keeps what the code
 * starts off the guest agent's pipes). The code is one argv string (no shell). A non-zero exit or
 * the timeout is the agent's error (EM_EXIT_USAGE, the last line of its stderr), not the env's. */
#define ENV_AGENT_CODE_TIMEOUT_S 120.0 /* OSWorld's /execute timeout */

static int run_agent_code(env *e, const action *a, em_err *err)
{
    const char *argv[] = {"python3", "-m", "envmgr_guest.agent_code", a->text, NULL};
    guest_exec_result r;
    if (e->image->guest != MANIFEST_GUEST_ENVMGR) /* the agent's mistake, as a failing code is */
        return em_fail_input(err, "pyautogui code outside the translated subset needs envmgr's toolbelt in the guest; "
                                  "image %s has guest %s", e->image->name, manifest_guest_name(e->image->guest));
    if (guest_ops_run(e, argv, 1, 0, ENV_AGENT_CODE_TIMEOUT_S, 64 * 1024, &r, err) < 0)
        return -1;
    int rc = 0;
    if (r.timed_out || r.exit_code != 0) {
        char *last = r.err ? r.err : "";
        size_t n = r.err ? r.err_len : 0;
        while (n > 0 && (last[n - 1] == '\n' || last[n - 1] == '\r'))
            last[--n] = '\0';
        char *nl = strrchr(last, '\n');
        rc = em_fail_input(err, "pyautogui code %s in the guest: %.300s",
                           r.timed_out ? "ran out of time" : "failed", nl ? nl + 1 : last);
    }
    free(r.out);
    free(r.err);
    return rc;
}

int env_act_vcpu_start(env *e, uint64_t *run_ns)
{
    if (!e->act_pid || e->act_pid != e->pid)
        return -1;
    *run_ns = e->act_run_ns;
    return 0;
}

/* Where the action began, in the vCPUs' run time: the settle after it counts the guest's work from
 * there (a WAIT's seconds included). */
static void note_act_start(env *e)
{
    uint64_t run, wait;
    em_err ignored = {0};
    e->act_pid = 0;
    if (env_vcpu_time(e, &run, &wait, &ignored) == 0) {
        e->act_run_ns = run;
        e->act_pid = e->pid;
    }
}

int env_act(env *e, const action *a, em_err *err)
{
    if (a->type == ACT_PYAUTOGUI) {
        if (ensure_running(e, err) < 0)
            return -1;
        note_act_start(e);
        return run_agent_code(e, a, err) < 0 ? em_prefix(err, "env %s: PYAUTOGUI: ", e->name) : 0;
    }
    vnc_session *v;
    if (ensure_running(e, err) < 0 || env_vnc(e, &v, err) < 0)
        return -1;
    note_act_start(e);
    if (action_execute(v, a, err) < 0)
        return em_prefix(err, "env %s: %s: ", e->name, action_type_name(a->type));
    save_pointer(e);
    return 0;
}

int env_list(json_t **out, em_err *err)
{
    json_t *list = json_array();
    DIR *d = opendir(paths_run_root());
    if (!d) {
        *out = list;
        return errno == ENOENT ? 0 : em_fail_errno(err, "open `%s`", paths_run_root());
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *dir = xasprintf("%s/%s", paths_run_root(), de->d_name);
        _cleanup_free_ char *meta_path = xasprintf("%s/" ENV_META, dir), *text = NULL;
        json_t *meta = NULL;
        if (read_file_capped(meta_path, JSON_DOC_MAX, &text, NULL, NULL) == 0)
            meta = json_loads(text, 0, NULL);
        pid_t pid = 0;
        em_err ignored;
        bool alive = vm_read_pid(dir, &pid, &ignored) == 0 && vm_alive(pid, dir);
        const char *status = !alive ? "dead" : vm_marked_paused(dir) ? "paused" : "running";
        json_t *row = json_pack("{s:s, s:s, s:i}", "name", de->d_name, "status", status, "pid",
                                alive ? (int)pid : 0);
        json_t *bounds = NULL;
        if (alive && vm_boundaries(pid, &bounds, &ignored) == 0) {
            /* the network policy in force: mode, allowlist, limits (as the trace header has it) */
            netpolicy np;
            if (netpolicy_load(dir, &np, &ignored) == 0)
                json_object_set_new(bounds, "network", netpolicy_to_json(&np));
            json_object_set_new(row, "boundaries", bounds);
        }
        /* what the guest has written to its disk so far (bounded by the image's virtual size) */
        _cleanup_free_ char *ov = xasprintf("%s/" VM_OVERLAY, dir);
        struct stat ost;
        if (stat(ov, &ost) == 0)
            json_object_set_new(row, "overlay_mib", json_real((double)ost.st_blocks * 512 / (1 << 20)));
        const char *on = json_string_value(json_object_get(json_object_get(meta, "state"), "name"));
        json_object_set_new(row, "state", on ? json_string(on) : json_null()); /* the saved state it runs on */
        const char *keys[] = {"image", "accel", "created"};
        for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
            json_t *v = json_object_get(meta, keys[i]);
            json_object_set(row, keys[i], v ? v : json_null());
        }
        json_decref(meta);
        json_array_append_new(list, row);
    }
    closedir(d);
    *out = list;
    return 0;
}

char *env_user_password(const env *e)
{
    return manifest_user_password(e ? e->image : NULL);
}

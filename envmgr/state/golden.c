#include "envmgr/state/golden.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "envmgr/vm/guest.h"
#include "envmgr/vm/guest_osworld.h"
#include "envmgr/state/migrate.h"
#include "envmgr/vm/overlay.h"
#include "envmgr/base/json_save.h"
#include "envmgr/base/paths.h"
#include "envmgr/vm/qmp.h"
#include "envmgr/base/sha256.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/jsonline.h"
#include "envmgr/base/util.h"
#include "envmgr/base/warn.h"
#include "envmgr/vm/vm.h"
#include "envmgr/vm/vnc.h"

#define GOLDEN_FORMAT "golden-v1"
#define STABLE_FOR_MS 3000.0       /* the screen must not change for this long */
#define BUILD_LOCK_WAIT_MS (30 * 60 * 1000.0) /* a cold boot under TCG takes minutes, not this */
#define QMP_TIMEOUT_MS 10000.0

void golden_free(golden *g)
{
    if (!g)
        return;
    free(g->dir);
    free(g->disk);
    free(g->ram);
    free(g->state);
    json_decref(g->meta);
    free(g);
}

static golden *golden_at(const char *dir, const char *key)
{
    golden *g = xcalloc(1, sizeof *g);
    g->dir = xstrdup(dir);
    g->disk = xasprintf("%s/golden.qcow2", dir);
    g->ram = xasprintf("%s/ram.bin", dir);
    g->state = xasprintf("%s/state.bin", dir);
    snprintf(g->key, sizeof g->key, "%s", key);
    return g;
}

static int load_meta(golden *g, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/golden.json", g->dir), *text = NULL;
    if (read_file_capped(path, JSON_DOC_MAX, &text, NULL, err) < 0)
        return -1;
    json_error_t je;
    g->meta = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(g->meta))
        return em_fail(err, "golden state `%s`: golden.json is not a JSON object (%s)", g->dir, je.text);
    json_t *p = json_object_get(g->meta, "pointer");
    json_t *x = json_array_get(p, 0), *y = json_array_get(p, 1);
    if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(x) || !json_is_integer(y) ||
        json_integer_value(x) < 0 || json_integer_value(x) > 65535 || json_integer_value(y) < 0 ||
        json_integer_value(y) > 65535)
        return em_fail(err, "golden state `%s`: golden.json has no pointer position", g->dir);
    g->pointer_x = (int)json_integer_value(x);
    g->pointer_y = (int)json_integer_value(y);
    const char *key = json_string_value(json_object_get(g->meta, "key")); /* the whole key, not the folder's */
    if (key && strlen(key) == 64 && !strncmp(key, g->key, strlen(g->key)))
        snprintf(g->key, sizeof g->key, "%s", key);
    return 0;
}

int golden_open(const char *dir, golden **out, em_err *err)
{
    const char *base = strrchr(dir, '/');
    golden *g = golden_at(dir, base ? base + 1 : dir);
    if (load_meta(g, err) < 0) {
        golden_free(g);
        return em_prefix(err, "golden state gone or damaged: ");
    }
    *out = g;
    return 0;
}

static int wait_desktop_ready(const char *dir, const manifest *m, double deadline, int *px, int *py, em_err *err)
{
    _cleanup_free_ char *qga = xasprintf("%s/" VM_QGA_SOCK, dir), *vncp = xasprintf("%s/" VM_VNC_SOCK, dir);
    guest *g = NULL;
    if (guest_open(qga, deadline - now_ms(), &g, err) < 0)
        return em_prefix(err, "waiting for the guest agent: ");
    const char *argv[] = {"test", "-e", "/tmp/.envmgr-desktop-ready", NULL};
    for (;;) {
        guest_exec_result r;
        if (guest_exec(g, argv, NULL, 0, 10, 4096, &r, err) < 0) {
            guest_close(g);
            return -1;
        }
        int ready = r.exit_code == 0;
        guest_exec_result_free(&r);
        if (ready)
            break;
        if (check_interrupt(err) < 0) {
            guest_close(g);
            return -1;
        }
        if (now_ms() > deadline) {
            guest_close(g);
            return em_fail(err, "the desktop session did not report ready (/tmp/.envmgr-desktop-ready) within %d s "
                                   "(the manifest's boot.ready_timeout_s)", m->ready_timeout_s);
        }
        sleep_ms(1000);
    }
    vnc_session *v = NULL;
    if (vnc_open(vncp, 20000, &v, err) < 0) {
        guest_close(g);
        return -1;
    }
    /* Park the pointer where it covers nothing that reacts to hover; golden.json keeps its VNC
     * position (vnc_pointer_wire). */
    int rc = vnc_pointer(v, m->width / 2, m->height / 2, 0, err), buttons;
    vnc_pointer_wire(v, px, py, &buttons);
    uint64_t last = 0;
    double stable_since = now_ms();
    while (rc == 0) {
        if ((rc = vnc_refresh(v, 10000, err)) < 0)
            break;
        uint64_t h = vnc_frame_hash(v);
        if (h != last) {
            last = h;
            stable_since = now_ms();
        } else if (now_ms() - stable_since >= STABLE_FOR_MS) {
            break;
        }
        if (check_interrupt(err) < 0)
            rc = -1;
        else if (now_ms() > deadline)
            rc = em_fail(err, "the screen never stood still for %.0f s", STABLE_FOR_MS / 1000);
        else
            sleep_ms(250);
    }
    vnc_close(v);
    if (rc == 0) {
        /* Flush the guest's page cache to its disk so the saved disk and RAM agree. */
        const char *sync_argv[] = {"sync", NULL};
        guest_exec_result r;
        rc = guest_exec(g, sync_argv, NULL, 0, 60, 4096, &r, err);
        if (rc == 0)
            guest_exec_result_free(&r);
    }
    guest_close(g);
    return rc;
}

/* A guest envmgr cannot ask (guest interface none): ready once its screen has not changed for
 * NONE_STABLE_MS while its vCPUs were mostly idle and it made no disk request (a boot still busy
 * behind a still screen, or a firmware's logo while its loader reads the kernel, is not ready),
 * within the manifest's boot.ready_timeout_s. */
#define NONE_STABLE_MS 5000.0
#define NONE_BUSY_MAX 0.5 /* vCPU time running or runnable over wall time across the stable window, at most */

static int wait_screen_settled(const char *dir, const manifest *m, pid_t pid, double deadline, int *px, int *py,
                               em_err *err)
{
    _cleanup_free_ char *vncp = xasprintf("%s/" VM_VNC_SOCK, dir);
    vnc_session *v = NULL;
    uint64_t last = 0, run0 = 0, ops0 = 0; /* run0: vCPU time running or runnable (starved is not idle) */
    double since = now_ms();
    pid_t tids[VM_VCPUS_MAX];
    size_t ntids = 0;
    int rc = 0;
    while (rc == 0) {
        /* A VNC session's screen size is fixed when it connects, and a booting guest changes modes
         * (the BIOS's text mode, the bootloader's, the kernel's): a session the server dropped for
         * that is opened again, and counts as a change. */
        em_err lost = {0};
        if (!v && vnc_open(vncp, 20000, &v, &lost) == 0)
            rc = vnc_pointer(v, m->width / 2, m->height / 2, 0, err);
        if (v && rc == 0 && vnc_refresh(v, 10000, &lost) < 0) {
            vnc_close(v);
            v = NULL;
        }
        if (rc == 0 && !vm_alive(pid, dir))
            rc = em_fail(err, "QEMU exited while the guest booted (%s)", lost.msg[0] ? lost.msg : "no VNC");
        if (rc < 0)
            break;
        /* QMP busy or slow to answer on a loaded host: asked again next round (no vCPU time, no verdict) */
        if (ntids == 0 && vm_vcpu_threads(dir, tids, VM_VCPUS_MAX, &ntids, &lost) < 0)
            ntids = 0;
        uint64_t h = v ? vnc_frame_hash(v) : 0, run_ns = 0, wait_ns = 0, ops = 0;
        if (ntids)
            vm_threads_sched(pid, tids, ntids, &run_ns, &wait_ns);
        run_ns += wait_ns; /* a vCPU waiting for a host CPU is a busy guest on a loaded host */
        bool have_ops = vm_block_ops(dir, &ops, &lost) == 0;
        double now = now_ms();
        if (!v || !ntids || !have_ops || h != last || run0 == 0) {
            last = h;
            since = now;
            run0 = run_ns;
            ops0 = ops;
        } else if (now - since >= NONE_STABLE_MS) {
            double busy = (double)(run_ns - run0) / 1e6 / (now - since) / (double)(ntids ? ntids : 1);
            if (busy <= NONE_BUSY_MAX && ops == ops0)
                break;
            since = now; /* a still screen on a guest still busy or reading its disk: look again */
            run0 = run_ns;
            ops0 = ops;
        }
        if (check_interrupt(err) < 0)
            rc = -1;
        else if (now > deadline)
            rc = em_fail_input(err, "the guest's screen did not settle (still for %.0f s, its vCPUs and disk idle) within %d s "
                                    "(the manifest's boot.ready_timeout_s; guest interface %s)%s%s",
                               NONE_STABLE_MS / 1000, m->ready_timeout_s, manifest_guest_name(m->guest),
                               lost.msg[0] ? "; last: " : "", lost.msg);
        else
            sleep_ms(250);
    }
    if (rc == 0 && (vnc_width(v) != m->width || vnc_height(v) != m->height))
        rc = em_fail_input(err, "the guest's screen is %dx%d once settled, the manifest says %dx%d (import it with "
                                "--screen %dx%d)", vnc_width(v), vnc_height(v), m->width, m->height, vnc_width(v),
                           vnc_height(v));
    if (rc == 0) {
        int buttons;
        vnc_pointer_wire(v, px, py, &buttons);
    }
    vnc_close(v);
    return rc;
}

/* A guest with the QEMU guest agent and nothing of envmgr's (guest interface qga): ready once the agent
 * answers guest-sync on its virtio-serial port and then the screen has settled as a none guest's (the
 * agent starts early in a boot, the desktop later), both within the manifest's boot.ready_timeout_s. */
static int wait_agent_and_screen(const char *dir, const manifest *m, pid_t pid, double deadline, int *px, int *py,
                                 em_err *err)
{
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QGA_SOCK, dir);
    guest *g = NULL;
    em_err why = {0};
    if (guest_open(sock, deadline - now_ms(), &g, &why) < 0) {
        if (check_interrupt(err) < 0)
            return -1;
        return em_fail_input(err, "the QEMU guest agent did not answer on org.qemu.guest_agent.0 within %d s (the "
                                  "manifest's boot.ready_timeout_s; guest interface qga: is qemu-guest-agent "
                                  "installed and started in the guest?); last: %s", m->ready_timeout_s, why.msg);
    }
    guest_close(g);
    return wait_screen_settled(dir, m, pid, deadline, px, py, err);
}

/* A guest running OSWorld's server (guest interface osworld): ready once GET /screenshot answers 200,
 * as OSWorld's own providers wait, through the network namespace of its QEMU (vm.h), and then the
 * screen has settled as a none guest's, both within the manifest's boot.ready_timeout_s. */
#define OSWORLD_SCREENSHOT_MAX (32u << 20)
#define OSWORLD_POLL_TIMEOUT_MS 10000.0
#define OSWORLD_POLL_PAUSE_MS 1000.0

static int wait_server_and_screen(const char *dir, const manifest *m, pid_t pid, double deadline, int *px, int *py,
                                  em_err *err)
{
    osworld *o = osworld_new(pid, NULL);
    em_err why = {0};
    bool ready = false;
    while (!ready) {
        double left = deadline - now_ms();
        osworld_reply r;
        if (osworld_request(o, "/screenshot", NULL, left < OSWORLD_POLL_TIMEOUT_MS ? left : OSWORLD_POLL_TIMEOUT_MS,
                            OSWORLD_SCREENSHOT_MAX, &r, &why) == 0) {
            ready = r.status == 200;
            if (!ready)
                em_fail(&why, "GET /screenshot answered %ld", r.status);
            osworld_reply_free(&r);
        }
        if (ready || check_interrupt(err) < 0 || !vm_alive(pid, dir) || now_ms() + OSWORLD_POLL_PAUSE_MS >= deadline)
            break;
        sleep_ms(OSWORLD_POLL_PAUSE_MS);
    }
    osworld_free(o);
    if (!ready) {
        if (interrupted())
            return -1;
        if (!vm_alive(pid, dir))
            return em_fail(err, "QEMU exited while the guest booted");
        return em_fail_input(err, "OSWorld's server did not answer GET /screenshot with 200 within %d s (the "
                                  "manifest's boot.ready_timeout_s; guest interface osworld: does the guest run "
                                  "OSWorld's server on port 5000?); last: %s", m->ready_timeout_s,
                             why.msg[0] ? why.msg : "no answer");
    }
    return wait_screen_settled(dir, m, pid, deadline, px, py, err);
}

static int save_state(const char *dir, const char *state_path, em_err *err)
{
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, dir);
    qmp *q = NULL;
    if (qmp_open(sock, QMP_TIMEOUT_MS, &q, err) < 0)
        return -1;
    _cleanup_close_ int fd = open(state_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? em_fail_errno(err, "create `%s`", state_path) : 0;
    if (rc == 0)
        rc = qmp_execute(q, "stop", NULL, QMP_TIMEOUT_MS, NULL, err);
    if (rc == 0)
        rc = vm_migrate_fd(q, "migrate", fd, err);
    if (rc == 0 && fsync(fd) < 0)
        rc = em_fail_errno(err, "fsync `%s`", state_path);
    qmp_close(q);
    return rc < 0 ? em_prefix(err, "save the golden state: ") : 0;
}

void golden_key(const manifest *m, const char *accel, const char *qemu_version, char key[65])
{
    /* The disk's path is part of the key: golden.qcow2 names it as its backing file, so the same image
     * at another place (a moved or copied cache) needs a golden state of its own. */
    _cleanup_free_ char *material =
        xasprintf(GOLDEN_FORMAT "|%s|%s|%s|%s", m->sha256, accel, qemu_version, m->disk);
    sha256_hex(material, strlen(material), key);
}

static int compute_key(const manifest *m, const char *accel, char key[65], em_err *err)
{
    char *ver = NULL;
    if (vm_qemu_version(&ver, err) < 0)
        return -1;
    golden_key(m, accel, ver, key);
    free(ver);
    return 0;
}

static int build(const manifest *m, const char *accel, const char *final_dir, const char *key, em_err *err)
{
    double t0 = now_ms();
    _cleanup_free_ char *tmp = xasprintf("%s.build", final_dir);
    remove_tree(tmp, NULL);
    if (mkdir_p(tmp, 0755, err) < 0)
        return -1;
    /* Sockets need a short path: the builder's run directory lives under the run root. */
    _cleanup_free_ char *run = xasprintf("%s/.golden-%d", paths_run_root(), (int)getpid());
    remove_tree(run, NULL);
    if (paths_ensure_run_root(err) < 0 || mkdir_p(run, 0700, err) < 0)
        return -1;
    golden *g = golden_at(tmp, key);
    pid_t pid = 0;
    int px = 0, py = 0, rc = 0;
    double t_ready = 0;
    em_info("envmgr: building the golden state of %s (%s): cold boot to a ready desktop...", m->name,
            accel);

    _cleanup_close_ int ramfd = open(g->ram, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (ramfd < 0 || ftruncate(ramfd, (off_t)m->memory_mb << 20) < 0)
        rc = em_fail_errno(err, "create `%s`", g->ram);
    if (rc == 0)
        rc = vm_create_overlay(m->disk, g->disk, err);
    vm_spec spec = {.image = m, .accel = accel, .dir = run, .disk = g->disk, .ram_file = g->ram,
                    .ram_shared = true, .incoming = false, .name = "golden"};
    if (rc == 0)
        rc = vm_spawn(&spec, &pid, err);
    if (rc == 0) {
        double deadline = now_ms() + m->ready_timeout_s * 1000.0; /* the manifest's */
        /* When the guest is ready, by its guest interface (manifest.h) */
        switch (m->guest) {
        case MANIFEST_GUEST_ENVMGR:
            rc = wait_desktop_ready(run, m, deadline, &px, &py, err);
            break;
        case MANIFEST_GUEST_NONE:
            rc = wait_screen_settled(run, m, pid, deadline, &px, &py, err);
            break;
        case MANIFEST_GUEST_QGA:
            rc = wait_agent_and_screen(run, m, pid, deadline, &px, &py, err);
            break;
        case MANIFEST_GUEST_OSWORLD:
            rc = wait_server_and_screen(run, m, pid, deadline, &px, &py, err);
            break;
        default:
            rc = em_fail_input(err, "guest interface %s: not supported yet", manifest_guest_name(m->guest));
        }
        t_ready = now_ms();
    }
    if (rc == 0)
        rc = save_state(run, g->state, err);
    double t_saved = now_ms();
    if (pid) {
        em_err stop_err;
        if (vm_stop(run, pid, &stop_err) < 0 && rc == 0)
            rc = em_fail(err, "%s", stop_err.msg);
    }
    if (rc == 0) {
        char when[40];
        iso8601_now(when, sizeof when);
        json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:[i,i], s:f, s:f}", "format", GOLDEN_FORMAT, "key", key,
                                 "image_sha256", m->sha256, "accel", accel, "pointer", px, py, "boot_to_ready_s",
                                 (t_ready - t0) / 1000, "save_s", (t_saved - t_ready) / 1000);
        json_object_set_new(meta, "created", json_string(when));
        _cleanup_free_ char *meta_path = xasprintf("%s/golden.json", tmp);
        rc = json_save(meta_path, meta, JSON_INDENT(2), 0644, err);
        json_decref(meta);
    }
    /* Read-only from now on: envs only ever read these files. */
    if (rc == 0 && (chmod(g->disk, 0444) < 0 || chmod(g->ram, 0444) < 0 || chmod(g->state, 0444) < 0))
        rc = em_fail_errno(err, "chmod golden files");
    if (rc == 0 && rename(tmp, final_dir) < 0)
        rc = em_fail_errno(err, "rename `%s`", tmp);
    golden_free(g);
    vm_forget(run);
    remove_tree(run, NULL);
    if (rc < 0) {
        remove_tree(tmp, NULL);
        return em_prefix(err, "golden state of %s: ", m->name);
    }
    em_info("envmgr: golden state ready in %.1f s (boot to ready %.1f s, save %.2f s)",
            (now_ms() - t0) / 1000, (t_ready - t0) / 1000, (t_saved - t_ready) / 1000);
    return 0;
}

int golden_ensure(const manifest *m, const char *accel, golden **out, em_err *err)
{
    char key[65];
    if (compute_key(m, accel, key, err) < 0)
        return -1;
    _cleanup_free_ char *root = xasprintf("%s/golden", paths_cache_root());
    if (mkdir_p(root, 0755, err) < 0)
        return -1;
    _cleanup_free_ char *dir = xasprintf("%s/%.16s", root, key), *lock = xasprintf("%s/%.16s.lock", root, key);
    _cleanup_free_ char *meta = xasprintf("%s/golden.json", dir);
    if (access(meta, R_OK) != 0) {
        /* Another envmgr may be building it: wait for it (a build has its own deadlines; this one
         * covers a wedged builder). */
        _cleanup_close_ int lfd = -1;
        if (lock_file_wait(lock, false, BUILD_LOCK_WAIT_MS, "the golden-state build", &lfd, err) < 0)
            return -1;
        if (access(meta, R_OK) != 0 && build(m, accel, dir, key, err) < 0)
            return -1;
    }
    golden *g = golden_at(dir, key);
    if (load_meta(g, err) < 0) {
        golden_free(g);
        return -1;
    }
    *out = g;
    return 0;
}

int golden_start_clone(const golden *g, const manifest *m, const char *accel, const char *env_dir, const char *name,
                       pid_t *pid_out, em_err *err)
{
    _cleanup_free_ char *overlay = NULL;
    if (vm_overlay_place(env_dir, &overlay, err) < 0 || vm_create_overlay(g->disk, overlay, err) < 0)
        return -1;
    vm_spec spec = {.image = m, .accel = accel, .dir = env_dir, .disk = overlay, .ram_file = g->ram,
                    .ram_shared = false, .incoming = true, .name = name};
    pid_t pid;
    if (vm_spawn(&spec, &pid, err) < 0)
        return -1;
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, env_dir);
    _cleanup_close_ int fd = open(g->state, O_RDONLY | O_CLOEXEC);
    qmp *q = NULL;
    int rc = fd < 0 ? em_fail_errno(err, "open `%s`", g->state) : 0;
    if (rc == 0)
        rc = qmp_open(sock, QMP_TIMEOUT_MS, &q, err);
    /* The state was saved from a stopped VM, so it arrives paused: start it. */
    if (rc == 0)
        rc = vm_migrate_fd(q, "migrate-incoming", fd, err);
    if (rc == 0)
        rc = qmp_execute(q, "cont", NULL, QMP_TIMEOUT_MS, NULL, err);
    qmp_close(q);
    if (rc < 0) {
        em_err ignored;
        vm_stop(env_dir, pid, &ignored);
        return em_prefix(err, "restore from the golden state: ");
    }
    *pid_out = pid;
    return 0;
}

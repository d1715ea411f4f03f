/* The QEMU process of one env: its arguments, spawn, liveness and teardown.
 * Nothing outside vm.* and qmp.* builds QEMU arguments. */
#ifndef ENVMGR_VM_H
#define ENVMGR_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "envmgr/base/err.h"
#include "envmgr/vm/manifest.h"

typedef struct vm_spec {
    const manifest *image;
    const char *accel;    /* "tcg" or "kvm" */
    const char *dir;      /* run directory: sockets, pid file, logs (absolute) */
    const char *disk;     /* the env's qcow2 overlay (absolute) */
    const char *ram_file; /* guest RAM backing file (absolute) */
    bool ram_shared;      /* share=on: the golden builder writes RAM into the file;
                             otherwise a private copy-on-write mapping of it */
    bool incoming;        /* start paused, waiting for migrate-incoming */
    bool devices_only;    /* with incoming: the stream is a saved state's device state alone
                             (savestate.h), and the guest stays paused after it */
    const char *name;     /* shown in ps */
} vm_spec;

/* File names inside a run directory. */
#define VM_QMP_SOCK "qmp.sock"
#define VM_VNC_SOCK "vnc.sock"
#define VM_QGA_SOCK "qga.sock"
#define VM_PID_FILE "qemu.pid"
#define VM_PAUSED_FILE "paused" /* there while envmgr holds the guest paused (a killed save leaves it) */
#define VM_LOG_FILE "qemu.log"
#define VM_SERIAL_RING "1M" /* the guest console's ring buffer in QEMU */

/* An image with guest interface osworld: its QEMU runs in a network namespace of its own (only `lo`,
 * no route out; vm_spawn, needs root) and its slirp forwards that namespace's 127.0.0.1 ports to the
 * guest's: OSWorld's server (5000), Chrome's DevTools (9222), VLC's HTTP interface (8080). Only a
 * process that enters the namespace (/proc/QEMU_PID/ns/net: vm/netns.h) reaches them. */
#define VM_OSWORLD_PORT 5000
#define VM_OSWORLD_HOSTFWD                                                                                       \
    ",hostfwd=tcp:127.0.0.1:5000-:5000,hostfwd=tcp:127.0.0.1:9222-:9222,hostfwd=tcp:127.0.0.1:8080-:8080"

/* Network extras of an env (written by netpolicy for allowlist envs; absent
 * for the default, mode none). When <dir>/VM_NET_FILE exists, vm_spawn reads
 *   {"guestfwd": ["tcp:10.0.2.X:PORT-cmd:...", ...], "supervisor": [argv...]}
 * and then (and only then):
 *   - appends each guestfwd rule to the user netdev (restrict=on stays);
 *   - relaxes the sandbox to spawn=allow,elevateprivileges=allow when a rule
 *     runs a command (libslirp forks, calls setsid and execs it per guest
 *     connection); QEMU gets no_new_privs instead;
 *   - starts the supervisor argv (+ "--qemu-pid" PID) as QEMU's parent, a
 *     child subreaper that reaps those commands; QEMU gets SIGKILL if it dies.
 * The golden state builder never has this file, and netdev options are not
 * part of the migrated device state, so clones restore either way. */
#define VM_NET_FILE "vm-net.json"

const char *vm_qemu_binary(void);
/* Start QEMU detached from this process (its own session, reparented to init or to the
 * allowlist supervisor; no -daemonize: spawn=deny refuses its fork); returns once its QMP
 * socket exists. */
int vm_spawn(const vm_spec *s, pid_t *pid, em_err *err);
/* The pid is a live QEMU of this run directory (not a reused pid, not a zombie). */
bool vm_alive(pid_t pid, const char *dir);
int vm_read_pid(const char *dir, pid_t *pid, em_err *err);
/* Ask QEMU to quit over QMP, then SIGTERM, then SIGKILL; returns when it is gone. */
int vm_stop(const char *dir, pid_t pid, em_err *err);
/* What a run directory holds outside itself (its cgroup, its QEMU user id): give it back once its
 * QEMU is stopped, before the directory is removed. */
void vm_forget(const char *dir);
/* Wait for a pid to exit (non-child), up to timeout. 0 gone, -1 still there. */
int vm_wait_gone(pid_t pid, double timeout_ms);

/* qemu-img create -f qcow2 -b backing overlay */
#define VM_VCPUS_MAX 16
/* The thread ids of QEMU's vCPUs (QMP query-cpus-fast). */
int vm_vcpu_threads(const char *dir, pid_t *tids, size_t max, size_t *n, em_err *err);
/* How long those threads of process pid ran, and waited runnable for a CPU, in ns (schedstat;
 * 0 when unreadable). The rest of the time they slept: a halted (idle) vCPU. */
void vm_threads_sched(pid_t pid, const pid_t *tids, size_t n, uint64_t *run_ns, uint64_t *wait_ns);
/* How many of QEMU's threads wait in the kernel for I/O right now (state D, or asleep in a page fault:
 * a served state's RAM page on its way): a guest read that the host's disk has not answered yet,
 * which QEMU's counters show only once it completes. */
int vm_threads_in_io(pid_t pid);
/* How many of QEMU's threads are not asleep right now: running, waiting for a CPU, waiting for I/O
 * (D, or a page fault) or stopped; -1 when its threads cannot be read. 0 means QEMU and its guest have nothing left to
 * do (a halted vCPU sleeps). */
int vm_threads_awake(pid_t pid);

/* Did the guest power itself off (QEMU runs with -no-shutdown, so it stays, stopped)? */
int vm_guest_shut_down(const char *dir, bool *off, em_err *err);
/* Stop a running guest (hold) or continue one stopped that way (QMP stop/cont): its vCPUs and
 * its clocks stand still in between. A guest in any other state is left as it is. */
int vm_hold(const char *dir, bool hold, em_err *err);
/* Note in the run directory that the guest is paused (or no longer), so `ls` can say so even when
 * the envmgr that paused it was killed before it resumed it. */
void vm_mark_paused(const char *dir, bool paused);
/* Kill every QEMU of run directory dir but keep (its pid file's): one whose start was cut short (the
 * envmgr that started it killed before QEMU wrote its pid file) would otherwise run on unseen,
 * beside the next one on the same disk. Returns how many. */
int vm_kill_strays(const char *dir, pid_t keep);
bool vm_marked_paused(const char *dir);
/* Disk requests the guest has made so far (all drives): a guest waiting for its disk has idle
 * vCPUs but is not done. */
int vm_block_ops(const char *dir, uint64_t *ops, em_err *err);
int vm_create_overlay(const char *backing, const char *overlay, em_err *err);
/* "7.2.22" etc. (caller frees) */
int vm_qemu_version(char **out, em_err *err);

#endif

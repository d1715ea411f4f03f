/* The user each env's QEMU and egress proxy run as when envmgr runs as root.
 *
 * A QEMU an attacker took over through a device bug should hold nothing but its own env. So,
 * when envmgr is root, each env gets a user id of its own (no passwd entry: a number from
 * VM_RUNAS_UID_BASE on, its group the same number), claimed in a registry only root can write
 * (/run/envmgr-qemu-users/<uid> holds the run directory that owns it) and recorded in the run
 * directory (`qemu-user`). QEMU opens its files, sockets and /dev/kvm as root and then drops to
 * that id itself (`-runas uid:gid`, before the guest runs); the proxy drops to it once its
 * socket and logs are open. The env's files stay root's, so the dropped QEMU can neither read
 * nor change anything of envmgr's, of the host's or of another env. Not root: nothing to drop,
 * QEMU runs as the operator's user. ENVMGR_QEMU_RUNAS=off (operator only) keeps QEMU as root. */
#ifndef ENVMGR_VM_RUNAS_H
#define ENVMGR_VM_RUNAS_H

#include <stdbool.h>
#include <sys/types.h>

#include "envmgr/base/err.h"

#define VM_RUNAS_FILE "qemu-user"
#define VM_RUNAS_UID_BASE 2146435072u /* 0x7ff00000: far above login users and subuid ranges */
#define VM_RUNAS_UID_COUNT 65536u

typedef struct vm_runas {
    bool drop; /* false: QEMU runs as envmgr's own user */
    uid_t uid;
    gid_t gid;
} vm_runas;

/* The id of run directory dir: the one it already holds, or a free one claimed now. */
int vm_runas_acquire(const char *dir, vm_runas *out, em_err *err);
/* The id dir holds (drop false when it holds none). */
int vm_runas_read(const char *dir, vm_runas *out, em_err *err);
/* Give dir's id back (when the run directory goes away; a stale claim is also taken over once
 * its run directory is gone). */
void vm_runas_release(const char *dir);
/* Where the env's egress proxy listens when it runs as r's user (caller frees): a socket in the
 * registry, which that user can reach by path (every folder above it is root's and at least
 * 0711) and nobody can replace; the run directory's egress.sock links to it. */
char *vm_runas_socket(const vm_runas *r);
/* A copy of the envmgr binary `helper` every env user can run (the relays QEMU starts run as
 * the env's user, and the operator's copy may sit below a 0700 home): *out is `helper` itself
 * when nothing is dropped. Caller frees. */
int vm_runas_helper(const vm_runas *r, const char *helper, char **out, em_err *err);
/* Give back the ids whose run directory is gone; returns how many (would be) given back. */
int vm_runas_orphans(bool dry_run);
/* Become that user for good (groups, gid, uid); for the proxy, after it opened what it needs. */
int vm_runas_become(const vm_runas *r, em_err *err);

#endif

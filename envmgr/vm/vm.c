#include "envmgr/vm/vm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "envmgr/vm/cgroup.h"
#include "envmgr/vm/qemu_log.h"
#include "envmgr/vm/qmp.h"
#include "envmgr/vm/runas.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/warn.h"

#define SPAWN_TIMEOUT_MS 30000.0
#define ARGV_MAX 96

const char *vm_qemu_binary(void)
{
    const char *q = getenv("ENVMGR_QEMU");
    return q && *q ? q : "qemu-system-x86_64";
}

typedef struct argv_builder {
    char *v[ARGV_MAX + 1];
    int n;
} argv_builder;

static void arg(argv_builder *a, char *s) /* takes ownership */
{
    if (a->n < ARGV_MAX)
        a->v[a->n++] = s;
    else
        free(s);
}

static void args_free(argv_builder *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
}

/* ---- network extras (VM_NET_FILE, see vm.h) ---- */
#define NET_FILE_MAX (256 * 1024)
#define NET_FWD_MAX 80
#define NET_FWD_LEN_MAX 1000 /* QEMU copies each rule into a 1024-byte buffer */
#define NET_SUP_MAX 16

typedef struct vm_net {
    char *netdev;      /* the -netdev value */
    bool relaxed;      /* guestfwd commands need spawn and setsid */
    char **supervisor; /* NULL-terminated, or NULL */
} vm_net;

static void net_free(vm_net *n)
{
    free(n->netdev);
    for (size_t i = 0; n->supervisor && n->supervisor[i]; i++)
        free(n->supervisor[i]);
    free(n->supervisor);
}

/* Append s to the netdev value with QEMU's option escaping (',' becomes ',,'). */
static void append_escaped(char **dst, const char *s)
{
    size_t n = strlen(*dst), extra = strlen(s);
    for (const char *c = s; *c; c++)
        extra += *c == ',';
    *dst = xrealloc(*dst, n + extra + 1);
    char *o = *dst + n;
    for (const char *c = s; *c; c++) {
        *o++ = *c;
        if (*c == ',')
            *o++ = ',';
    }
    *o = '\0';
}

static int load_net(const char *dir, vm_net *n, em_err *err)
{
    memset(n, 0, sizeof *n);
    /* ipv6=off: with IPv6 on, libslirp's restrict check reads IPv4 fields that overlap an IPv6
     * source address, and a crafted source reaches the host's [::1] past every rule. */
    n->netdev = xstrdup("user,id=net0,restrict=on,ipv6=off");
    _cleanup_free_ char *path = xasprintf("%s/" VM_NET_FILE, dir), *text = NULL;
    if (access(path, F_OK) != 0)
        return 0;
    if (read_file_capped(path, NET_FILE_MAX, &text, NULL, err) < 0)
        return -1;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    json_t *fwd = json_object_get(j, "guestfwd"), *sup = json_object_get(j, "supervisor");
    int rc = 0;
    if (!json_is_object(j) || !json_is_array(fwd) || json_array_size(fwd) > NET_FWD_MAX ||
        (sup && (!json_is_array(sup) || json_array_size(sup) == 0 || json_array_size(sup) > NET_SUP_MAX)))
        rc = em_fail(err, "`%s`: expected {guestfwd: [...], supervisor: [...]} within limits", path);
    for (size_t i = 0; rc == 0 && i < json_array_size(fwd); i++) {
        const char *r = json_string_value(json_array_get(fwd, i));
        /* guestfwd targets must stay inside slirp's network */
        if (!r || strncmp(r, "tcp:10.0.2.", 11) || strlen(r) > NET_FWD_LEN_MAX)
            rc = em_fail(err, "`%s`: guestfwd[%zu] is not a tcp:10.0.2.x rule within %d bytes", path, i,
                         NET_FWD_LEN_MAX);
        else {
            char *joined = xasprintf("%s,guestfwd=", n->netdev); /* the separator stays a single comma */
            free(n->netdev);
            n->netdev = joined;
            append_escaped(&n->netdev, r);
            n->relaxed |= strstr(r, "-cmd:") != NULL;
        }
    }
    if (rc == 0 && sup) {
        n->supervisor = xcalloc(json_array_size(sup) + 3, sizeof *n->supervisor);
        for (size_t i = 0; rc == 0 && i < json_array_size(sup); i++) {
            const char *v = json_string_value(json_array_get(sup, i));
            if (!v || (i == 0 && v[0] != '/'))
                rc = em_fail(err, "`%s`: supervisor[%zu] must be a string (the first an absolute path)", path, i);
            else
                n->supervisor[i] = xstrdup(v);
        }
    }
    json_decref(j);
    return rc;
}

/* Every path QEMU sees is absolute: -daemonize changes its directory to /. */
static void build_argv(const vm_spec *s, const vm_net *net, const vm_runas *runas, argv_builder *a)
{
    const manifest *m = s->image;
    bool kvm = !strcmp(s->accel, "kvm");
    arg(a, xstrdup(vm_qemu_binary()));
    arg(a, xstrdup("-name"));
    arg(a, xasprintf("envmgr-%s,process=envmgr-%s", s->name, s->name));
    arg(a, xstrdup("-nodefaults"));
    arg(a, xstrdup("-no-user-config"));
    arg(a, xstrdup("-machine"));
    arg(a, xasprintf("%s,accel=%s,memory-backend=ram0", m->machine, kvm ? "kvm" : "tcg"));
    arg(a, xstrdup("-cpu"));
    arg(a, xstrdup(kvm ? "host" : "max"));
    arg(a, xstrdup("-smp"));
    arg(a, xasprintf("%d", m->cpus));
    arg(a, xstrdup("-m"));
    arg(a, xasprintf("%d", m->memory_mb));
    arg(a, xstrdup("-object"));
    arg(a, xasprintf("memory-backend-file,id=ram0,size=%dM,mem-path=%s,share=%s", m->memory_mb, s->ram_file,
                     s->ram_shared ? "on" : "off"));
    if (m->kernel) { /* an image envmgr built; an imported one boots from its own bootloader */
        arg(a, xstrdup("-kernel"));
        arg(a, xstrdup(m->kernel));
        arg(a, xstrdup("-initrd"));
        arg(a, xstrdup(m->initrd));
        arg(a, xstrdup("-append"));
        arg(a, xstrdup(m->append));
    }
    if (m->uefi) { /* vm_spawn checked that OVMF is there; read-only, so envs share it */
        arg(a, xstrdup("-bios"));
        arg(a, xstrdup(manifest_ovmf_path()));
    }
    if (runas->drop) { /* vm_spawn passes the disk as fds 3 (read-write) and 4 (read-only): QEMU
                          * picks the one whose access mode matches each open */
        arg(a, xstrdup("-add-fd"));
        arg(a, xstrdup("fd=3,set=1"));
        arg(a, xstrdup("-add-fd"));
        arg(a, xstrdup("fd=4,set=1"));
        arg(a, xstrdup("-drive"));
        arg(a, xstrdup("file=/dev/fdset/1,if=none,id=disk0,format=qcow2,discard=unmap"));
    } else {
        arg(a, xstrdup("-drive"));
        arg(a, xasprintf("file=%s,if=none,id=disk0,format=qcow2,discard=unmap", s->disk));
    }
    arg(a, xstrdup("-device"));
    arg(a, xstrdup("virtio-blk-pci,drive=disk0"));
    arg(a, xstrdup("-device"));
    arg(a, xasprintf("VGA,edid=on,xres=%d,yres=%d", m->width, m->height));
    arg(a, xstrdup("-device"));
    arg(a, xstrdup("virtio-serial-pci"));
    arg(a, xstrdup("-chardev"));
    arg(a, xasprintf("socket,id=qga0,path=%s/" VM_QGA_SOCK ",server=on,wait=off", s->dir));
    arg(a, xstrdup("-device"));
    arg(a, xstrdup("virtserialport,chardev=qga0,name=org.qemu.guest_agent.0"));
    /* restrict=on: the guest reaches nothing but what a guestfwd rule opens. */
    arg(a, xstrdup("-netdev"));
    if (m->guest == MANIFEST_GUEST_OSWORLD) /* in QEMU's own network namespace: vm_spawn */
        arg(a, xasprintf("%s%s", net->netdev, VM_OSWORLD_HOSTFWD));
    else
        arg(a, xstrdup(net->netdev));
    arg(a, xstrdup("-device"));
    arg(a, xstrdup("virtio-net-pci,netdev=net0"));
    arg(a, xstrdup("-device"));
    arg(a, xstrdup("qemu-xhci"));
    arg(a, xstrdup("-device"));
    arg(a, xstrdup("usb-tablet")); /* absolute pointer: VNC coordinates are screen coordinates */
    /* key-delay-ms=0: QEMU's VNC server otherwise queues each key 10 ms behind the last and lets
     * them out by host time whether the guest reads them or not (ui/input.c: kbd_queue, on the
     * virtual clock, which TCG runs on host time); envmgr paces keys by the guest's own progress
     * (vnc.h: vnc_wait_input_taken), which needs every key it sent to be in the guest's device. */
    arg(a, xstrdup("-vnc"));
    arg(a, xasprintf("unix:%s/" VM_VNC_SOCK ",key-delay-ms=0", s->dir));
    arg(a, xstrdup("-qmp"));
    arg(a, xasprintf("unix:%s/" VM_QMP_SOCK ",server=on,wait=off", s->dir));
    /* The guest's console in a 1 MiB ring inside QEMU (QMP ringbuf-read), not a file: guest root
     * writing to its serial port without end must not fill the host's disk or tmpfs. */
    arg(a, xstrdup("-chardev"));
    arg(a, xstrdup("ringbuf,id=serial0,size=" VM_SERIAL_RING));
    arg(a, xstrdup("-serial"));
    arg(a, xstrdup("chardev:serial0"));
    arg(a, xstrdup("-display"));
    arg(a, xstrdup("none"));
    /* A guest that powers off stays a stopped QEMU, so the episode records guest_shutdown (scored)
     * instead of losing its env (an env error a suite would retry). */
    arg(a, xstrdup("-no-shutdown"));
    /* -runas: QEMU opens its files as root, then drops to the env's own user before the guest
     * runs. That drop is set*id calls after the filter is in place, so elevateprivileges must
     * allow them; once the user is unprivileged (no capabilities, no_new_privs) those calls can
     * only switch among its own ids. */
    if (runas->drop) {
        arg(a, xstrdup("-runas"));
        arg(a, xasprintf("%u:%u", (unsigned)runas->uid, (unsigned)runas->gid));
    }
    arg(a, xstrdup("-sandbox"));
    arg(a, xasprintf("on,obsolete=deny,elevateprivileges=%s,spawn=%s,resourcecontrol=deny",
                     net->relaxed || runas->drop ? "allow" : "deny", net->relaxed ? "allow" : "deny"));
    /* No -daemonize: its fork is refused by spawn=deny; envmgr detaches QEMU itself. */
    arg(a, xstrdup("-pidfile"));
    arg(a, xasprintf("%s/" VM_PID_FILE, s->dir));
    if (s->incoming) {
        arg(a, xstrdup("-incoming"));
        arg(a, xstrdup("defer"));
    }
    /* A saved state's device state has no configuration section (xen-save-devices-state writes
     * none), and its RAM is written in before the guest may run: -S keeps it paused. */
    if (s->incoming && s->devices_only) {
        arg(a, xstrdup("-S"));
        arg(a, xstrdup("-global"));
        arg(a, xstrdup("migration.send-configuration=off"));
    }
    a->v[a->n] = NULL;
}

static void last_log_line(const char *dir, char *buf, size_t len)
{
    _cleanup_free_ char *path = xasprintf("%s/" VM_LOG_FILE, dir), *text = NULL;
    buf[0] = '\0';
    if (read_file_capped(path, JSON_DOC_MAX, &text, NULL, NULL) < 0)
        return;
    char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == '\r'))
        *--end = '\0';
    char *start = strrchr(text, '\n');
    snprintf(buf, len, "%s", start ? start + 1 : text);
}

int vm_spawn(const vm_spec *s, pid_t *pid_out, em_err *err)
{
    vm_net net = {0};
    vm_runas runas;
    argv_builder a = {0};
    int cg[VM_CGROUP_MAX_FDS], logfd = -1, diskfd[2] = {-1, -1}, rc = -1;
    size_t ncg = 0;
    pid_t keeper = -1, qemu = -1;
    const char **sup_argv = NULL;
    if (s->image->uefi && !manifest_ovmf_path()) {
        em_fail(err, "image %s: boot.firmware uefi needs OVMF (Debian's ovmf package), which is not installed",
                s->image->name);
        goto done;
    }
    /* OSWorld's server is reached on the loopback of a network namespace QEMU alone is in (its slirp
     * forwards 127.0.0.1:5000 there to the guest): no port any other process of the host can reach. */
    bool own_netns = s->image->guest == MANIFEST_GUEST_OSWORLD;
    if (own_netns && geteuid() != 0) {
        em_fail_input(err, "image %s: guest osworld needs root: its QEMU runs in a network namespace of its own "
                           "(CAP_SYS_ADMIN), so that the guest's server is reachable by no other local user",
                      s->image->name);
        goto done;
    }
    if (load_net(s->dir, &net, err) < 0 || vm_runas_acquire(s->dir, &runas, err) < 0)
        goto done;
    build_argv(s, &net, &runas, &a);
    if (a.n >= ARGV_MAX) {
        em_fail(err, "too many arguments");
        goto done;
    }
    static const char *socks[] = {VM_QMP_SOCK, VM_VNC_SOCK, VM_QGA_SOCK, VM_PID_FILE, VM_PAUSED_FILE};
    for (size_t i = 0; i < ARRAY_LEN(socks); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", s->dir, socks[i]);
        unlink(p);
    }
    if (getenv("ENVMGR_DEBUG")) {
        sbuf line = {0};
        for (int i = 0; i < a.n; i++)
            sbuf_printf(&line, "%s%s", i ? " " : "", a.v[i]);
        em_info("%s", line.s ? line.s : "");
        sbuf_release(&line);
    }
    /* The disk as an open fd: a restored guest's `cont` reopens it, after the drop to the env's
     * user, who may not open it by path (nor reach its folder). */
    if (runas.drop && ((diskfd[0] = open(s->disk, O_RDWR | O_CLOEXEC)) < 0 ||
                       (diskfd[1] = open(s->disk, O_RDONLY | O_CLOEXEC)) < 0)) {
        em_fail_errno(err, "open `%s`", s->disk);
        goto done;
    }
    vm_cgroup_limits lim;
    vm_cgroup_limits_for(s->image->memory_mb, s->image->cpus, &lim);
    lim.restoring = s->incoming; /* vm_cgroup_restored (env.c) lowers it once the guest runs */
    if (vm_cgroup_prepare(s->dir, &lim, cg, &ncg, err) < 0 ||
        vm_log_keeper_start(s->dir, cg, ncg, &logfd, &keeper, err) < 0)
        goto done;
    spawn_opts qo = {.argv = (const char *const *)a.v, .fd_in = SPAWN_DEVNULL, .fd_out = logfd, .fd_err = logfd,
                     .flags = SPAWN_PRIVATE_FILES, .join_fds = cg, .njoin = ncg,
                     .pass_fds = diskfd, .npass = runas.drop ? 2 : 0};
    if (net.relaxed)
        qo.flags |= SPAWN_NO_NEW_PRIVS;
    if (own_netns)
        qo.flags |= SPAWN_NEWNET;
    spawn_opts so = {0};
    char pid_arg[24] = "";
    if (net.supervisor) { /* the supervisor takes QEMU's pid as its last arguments */
        size_t n = 0;
        while (net.supervisor[n])
            n++;
        sup_argv = xcalloc(n + 3, sizeof *sup_argv);
        for (size_t i = 0; i < n; i++)
            sup_argv[i] = net.supervisor[i];
        sup_argv[n] = "--qemu-pid";
        sup_argv[n + 1] = pid_arg;
        so = (spawn_opts){.argv = sup_argv, .fd_in = SPAWN_DEVNULL, .fd_out = logfd, .fd_err = logfd,
                          .flags = SPAWN_PRIVATE_FILES, .join_fds = cg, .njoin = ncg,
                          .pid_arg = pid_arg, .pid_arg_len = sizeof pid_arg};
    }
    /* QEMU becomes a child of init (or of the supervisor) in its own session, so it outlives
     * this command and a Ctrl-C at the terminal does not reach it. */
    rc = spawn_detached(&qo, net.supervisor ? &so : NULL, SPAWN_TIMEOUT_MS, &qemu, err);
done:
    if (logfd >= 0)
        close(logfd); /* without a QEMU, the keeper meets the end of its input and exits */
    for (size_t i = 0; i < 2; i++)
        if (diskfd[i] >= 0)
            close(diskfd[i]);
    for (size_t i = 0; i < ncg; i++)
        close(cg[i]);
    free(sup_argv);
    args_free(&a);
    net_free(&net);
    if (rc < 0)
        return em_prefix(err, "qemu: ");

    /* Ready when QMP accepts connections; dead if the process went away first. */
    _cleanup_free_ char *qmp_path = xasprintf("%s/" VM_QMP_SOCK, s->dir);
    double deadline = now_ms() + SPAWN_TIMEOUT_MS;
    for (;;) {
        struct stat st;
        if (stat(qmp_path, &st) == 0 && S_ISSOCK(st.st_mode))
            break;
        if (!pid_running(qemu)) {
            char line[512];
            vm_log_keeper_wait(keeper);
            last_log_line(s->dir, line, sizeof line);
            return em_fail(err, "qemu failed to start: %s", line[0] ? line : "it exited without a message");
        }
        if (now_ms() > deadline) {
            kill(qemu, SIGKILL);
            return em_fail(err, "qemu: no QMP socket after %.0f s", SPAWN_TIMEOUT_MS / 1000);
        }
        sleep_ms(2);
    }
    *pid_out = qemu;
    return 0;
}

int vm_read_pid(const char *dir, pid_t *pid, em_err *err)
{
    _cleanup_free_ char *path = xasprintf("%s/" VM_PID_FILE, dir), *text = NULL;
    if (read_file_capped(path, 64, &text, NULL, err) < 0)
        return -1;
    long v;
    text[strcspn(text, "\r\n")] = '\0';
    if (parse_int(text, 2, 1 << 30, &v) < 0)
        return em_fail(err, "pid file `%s` holds no pid", path);
    *pid = (pid_t)v;
    return 0;
}

/* pid is a QEMU of run directory dir: an argument names its QMP socket there. */
static bool qemu_of(pid_t pid, const char *dir)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    _cleanup_free_ char *cmd = NULL;
    size_t len;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    cmd = xmalloc(65537);
    ssize_t n = read(fd, cmd, 65536);
    close(fd);
    if (n <= 0)
        return false;
    len = (size_t)n;
    cmd[len] = '\0';
    _cleanup_free_ char *needle = xasprintf("%s/" VM_QMP_SOCK, dir);
    for (size_t i = 0; i < len; i += strlen(cmd + i) + 1)
        if (strstr(cmd + i, needle))
            return true;
    return false;
}

bool vm_alive(pid_t pid, const char *dir)
{
    /* guards against pid reuse: the process must be a QEMU of this run directory */
    return pid_running(pid) && qemu_of(pid, dir);
}

int vm_kill_strays(const char *dir, pid_t keep)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 1 || pid == keep || pid == getpid() || !pid_running((pid_t)pid) ||
            !qemu_of((pid_t)pid, dir))
            continue;
        kill((pid_t)pid, SIGKILL);
        vm_wait_gone((pid_t)pid, 5000);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

void vm_forget(const char *dir)
{
    vm_cgroup_remove(dir);
    vm_runas_release(dir);
}

int vm_wait_gone(pid_t pid, double timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    while (pid_running(pid)) {
        if (now_ms() > deadline)
            return -1;
        sleep_ms(5);
    }
    return 0;
}

int vm_stop(const char *dir, pid_t pid, em_err *err)
{
    if (!vm_alive(pid, dir))
        return 0;
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, dir);
    qmp *q = NULL;
    em_err ignored;
    if (qmp_open(sock, 1000, &q, &ignored) == 0) {
        qmp_execute(q, "quit", NULL, 1000, NULL, &ignored);
        qmp_close(q);
        if (vm_wait_gone(pid, 3000) == 0)
            return 0;
    }
    kill(pid, SIGTERM);
    if (vm_wait_gone(pid, 2000) == 0)
        return 0;
    kill(pid, SIGKILL);
    if (vm_wait_gone(pid, 5000) == 0)
        return 0;
    return em_fail(err, "qemu pid %d did not exit after SIGKILL", (int)pid);
}

/* Run a helper program with a timeout; its output (stdout and stderr) comes back in *out. */
static int run_tool(char *const argv[], double timeout_ms, char **out, em_err *err)
{
    spawn_opts so = {.argv = (const char *const *)argv};
    spawn_io io = {.out_cap = 64 * 1024, .err_cap = 0, .timeout_ms = timeout_ms, .merge_stderr = true};
    spawn_result r;
    if (spawn_run(&so, &io, &r, err) < 0)
        return -1;
    if (r.timed_out || r.overflow || r.lost || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
        char how[64];
        r.out[strcspn(r.out, "\n")] = '\0';
        em_fail(err, "%s failed: %s", argv[0], r.out[0] ? r.out : spawn_status_text(&r, how, sizeof how));
        spawn_result_free(&r);
        return -1;
    }
    if (out) {
        *out = r.out;
        r.out = NULL;
    }
    spawn_result_free(&r);
    return 0;
}

/* One QMP command on a connection of its own: QEMU's monitor serves one client at a time, and
 * nothing else in this process keeps one open. */
static int qmp_once(const char *dir, const char *cmd, json_t **ret, em_err *err)
{
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, dir);
    qmp *q = NULL;
    if (qmp_open(sock, 2000, &q, err) < 0)
        return -1;
    int rc = qmp_execute(q, cmd, NULL, 2000, ret, err);
    qmp_close(q);
    return rc;
}

int vm_vcpu_threads(const char *dir, pid_t *tids, size_t max, size_t *n, em_err *err)
{
    *n = 0;
    json_t *ret = NULL;
    int rc = qmp_once(dir, "query-cpus-fast", &ret, err);
    size_t i;
    json_t *cpu;
    json_array_foreach(ret, i, cpu)
    {
        json_t *tid = json_object_get(cpu, "thread-id");
        if (*n < max && json_is_integer(tid) && json_integer_value(tid) > 0)
            tids[(*n)++] = (pid_t)json_integer_value(tid);
    }
    json_decref(ret);
    return rc;
}

void vm_threads_sched(pid_t pid, const pid_t *tids, size_t n, uint64_t *run_ns, uint64_t *wait_ns)
{
    *run_ns = *wait_ns = 0;
    for (size_t i = 0; i < n; i++) {
        char path[64], buf[128];
        snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tids[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r > 0) {
            buf[r] = '\0';
            char *end;
            *run_ns += strtoull(buf, &end, 10); /* on a CPU */
            *wait_ns += strtoull(end, NULL, 10); /* runnable, waiting for one */
        }
    }
}

/* Whether thread tid of pid, asleep by its state, sleeps outside a system call: in a page fault
 * (/proc's syscall file reads "-1 sp pc" then). A guest whose RAM is a saved state's served over
 * FUSE waits so for the pages it touches (request_wait_answer, state S) while the server reads them
 * from disk: not idle, and not done taking its input. Unreadable (no ptrace access to QEMU): no. */
static bool asleep_in_fault(pid_t pid, const char *tid)
{
    char path[320], buf[8];
    snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid, tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    return r >= 3 && !memcmp(buf, "-1 ", 3);
}

/* How many of QEMU's threads are (in) or are not (!in) in one of these states (/proc stat's third
 * field), counting a thread asleep in a page fault as waiting for I/O, not asleep; -1 when its
 * threads cannot be read (it is gone). */
static int threads_in_states(pid_t pid, const char *states, bool in)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char stat[320], buf[512];
        snprintf(stat, sizeof stat, "/proc/%d/task/%s/stat", (int)pid, de->d_name);
        int fd = open(stat, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t r = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (r <= 0)
            continue;
        buf[r] = '\0';
        const char *after = strrchr(buf, ')'); /* the name in parentheses may hold anything */
        if (!after || after[1] != ' ' || !after[2])
            continue;
        char st = after[2];
        bool asleep = st == 'S' || st == 'I';
        if ((strchr(states, st) != NULL) == in || (asleep && asleep_in_fault(pid, de->d_name)))
            n++;
    }
    closedir(d);
    return n;
}

int vm_threads_in_io(pid_t pid)
{
    int n = threads_in_states(pid, "D", true);
    return n < 0 ? 0 : n;
}

int vm_threads_awake(pid_t pid)
{
    return threads_in_states(pid, "SI", false);
}

int vm_guest_shut_down(const char *dir, bool *off, em_err *err)
{
    *off = false;
    json_t *ret = NULL;
    int rc = qmp_once(dir, "query-status", &ret, err);
    if (rc == 0)
        *off = !strcmp(json_string_value(json_object_get(ret, "status")) ?: "", "shutdown");
    json_decref(ret);
    return rc;
}

void vm_mark_paused(const char *dir, bool paused)
{
    _cleanup_free_ char *p = xasprintf("%s/" VM_PAUSED_FILE, dir);
    if (!paused) {
        unlink(p);
        return;
    }
    int fd = open(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
}

bool vm_marked_paused(const char *dir)
{
    _cleanup_free_ char *p = xasprintf("%s/" VM_PAUSED_FILE, dir);
    return access(p, F_OK) == 0;
}

int vm_hold(const char *dir, bool hold, em_err *err)
{
    _cleanup_free_ char *sock = xasprintf("%s/" VM_QMP_SOCK, dir);
    qmp *q = NULL;
    if (qmp_open(sock, 2000, &q, err) < 0)
        return -1;
    char *status = NULL;
    int rc = qmp_status(q, 2000, &status, err);
    /* Only a running guest is stopped and only one paused by `stop` is continued: a guest that
     * powered off, or one still arriving from the golden state, keeps its state. */
    if (rc == 0 && hold && !strcmp(status, "running"))
        rc = qmp_execute(q, "stop", NULL, 2000, NULL, err);
    else if (rc == 0 && !hold && !strcmp(status, "paused"))
        rc = qmp_execute(q, "cont", NULL, 2000, NULL, err);
    if (rc == 0)
        vm_mark_paused(dir, hold);
    free(status);
    qmp_close(q);
    return rc;
}

int vm_block_ops(const char *dir, uint64_t *ops, em_err *err)
{
    *ops = 0;
    json_t *ret = NULL;
    if (qmp_once(dir, "query-blockstats", &ret, err) < 0)
        return -1;
    size_t i;
    json_t *dev;
    json_array_foreach(ret, i, dev)
    {
        json_t *st = json_object_get(dev, "stats");
        const char *keys[] = {"rd_operations", "wr_operations", "flush_operations", "unmap_operations"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            *ops += (uint64_t)json_integer_value(json_object_get(st, keys[k]));
    }
    json_decref(ret);
    return 0;
}

int vm_create_overlay(const char *backing, const char *overlay, em_err *err)
{
    unlink(overlay);
    char *argv[] = {"qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", (char *)backing,
                    (char *)overlay, NULL};
    if (run_tool(argv, 30000, NULL, err) < 0)
        return em_prefix(err, "overlay `%s`: ", overlay);
    return 0;
}

int vm_qemu_version(char **out, em_err *err)
{
    char *argv[] = {(char *)vm_qemu_binary(), "--version", NULL};
    char *text = NULL;
    if (run_tool(argv, 10000, &text, err) < 0)
        return -1;
    const char *v = strstr(text, "version ");
    char ver[64] = "unknown";
    if (v)
        sscanf(v + 8, "%63s", ver);
    free(text);
    *out = xstrdup(ver);
    return 0;
}

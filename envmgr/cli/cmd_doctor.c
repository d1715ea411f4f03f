/* envmgr doctor: is this host ready to run envs? One line per check, and for what is missing the
 * Debian package that brings it, gathered into one apt-get line at the end. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "envmgr/base/owned.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/sbuf.h"
#include "envmgr/base/spawn.h"
#include "envmgr/base/util.h"
#include "envmgr/state/states.h"
#include "envmgr/state/ramfs.h"
#include "envmgr/env/env_image.h"

static const char usage[] =
    "usage: envmgr doctor\n"
    "  Check the host for what envmgr needs: QEMU (version), the KVM verdict, cgroups, bubblewrap and\n"
    "  the other tools, free disk space in the cache and run directories, the data directory and the\n"
    "  image cache. Prints one line per check (ok, warn, MISSING) and, when a Debian package would fix\n"
    "  something, the apt-get line that installs it. Exit 0 when nothing required is missing, else 1.\n";

#define GIB (1024.0 * 1024 * 1024)

typedef struct doctor {
    int missing;      /* required parts absent */
    sbuf packages;    /* space-separated Debian packages that fix what is absent */
} doctor;

static void line(const char *verdict, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const char *verdict, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%-8s", verdict);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

/* Something is absent: MISSING when required (counts), warn otherwise; its package joins the fix. */
static void absent(doctor *d, bool required, const char *package, const char *what)
{
    if (required)
        d->missing++;
    if (package) {
        sbuf_printf(&d->packages, "%s%s", d->packages.len ? " " : "", package);
        line(required ? "MISSING" : "warn", "%s (fix: apt-get install -y %s)", what, package);
    } else {
        line(required ? "MISSING" : "warn", "%s", what);
    }
}

static bool in_path(const char *program)
{
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, program);
        if (access(p, X_OK) == 0)
            return true;
    }
    return false;
}

typedef struct tool {
    const char *program, *package, *what;
    bool required;
} tool;

static const tool tools[] = {
    {"qemu-img", "qemu-utils", "qemu-img: env overlays and golden disks", true},
    {"python3", "python3", "python3: evaluator scripts and the scripted agent", true},
    {"bwrap", "bubblewrap", "bwrap: the sandbox evaluator scripts run in", false},
    {"debootstrap", "debootstrap", "debootstrap: building guest images (as root)", false},
    {"sbatch", "slurm-client", "sbatch: Slurm shards (docs/slurm.md)", false},
};

static void check_qemu(doctor *d)
{
    em_err err = {0};
    _cleanup_free_ char *ver = NULL;
    if (env_host_qemu_version(&ver, &err) < 0) {
        _cleanup_free_ char *what = xasprintf("QEMU: cannot run `%s --version`", env_host_qemu_binary());
        absent(d, true, getenv("ENVMGR_QEMU") ? NULL : "qemu-system-x86", what);
        return;
    }
    int major = 0, minor = 0;
    sscanf(ver, "%d.%d", &major, &minor);
    if (major < 7 || (major == 7 && minor < 2))
        absent(d, true, "qemu-system-x86", "QEMU: version 7.2 or newer needed");
    else
        line("ok", "QEMU %s (%s)", ver, env_host_qemu_binary());
}

static void check_kvm(void)
{
    const char *verdict = env_host_accel_cached();
    int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    if (verdict && !strcmp(verdict, "kvm"))
        line("ok", "KVM: works here (cached verdict); --accel auto uses it");
    else if (verdict)
        line("warn", "KVM: %s; envs run under TCG (slower, fully supported)",
             fd >= 0 ? "/dev/kvm opens but could not boot the guest kernel (cached verdict)" : "not usable");
    else if (fd < 0)
        line("warn", "KVM: /dev/kvm cannot be opened; envs will run under TCG (slower, fully supported)");
    else
        line("ok", "KVM: /dev/kvm opens; the first `envmgr up` probes whether it boots the guest");
}

static void check_cgroups(void)
{
    struct statfs fs, uni;
    if (statfs("/sys/fs/cgroup", &fs) < 0)
        line("warn", "cgroups: /sys/fs/cgroup is not mounted (envmgr limits its children with rlimits)");
    else if (fs.f_type == CGROUP2_SUPER_MAGIC)
        line("ok", "cgroups: v2 (unified)");
    else if (statfs("/sys/fs/cgroup/unified", &uni) == 0 && uni.f_type == CGROUP2_SUPER_MAGIC)
        line("ok", "cgroups: v1 with a v2 hierarchy at /sys/fs/cgroup/unified (hybrid)");
    else
        line("ok", "cgroups: v1");
}

static void check_bwrap_works(void)
{
    if (!in_path("bwrap"))
        return;
    const char *argv[] = {"bwrap", "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "true", NULL};
    spawn_opts so = {.argv = argv, .fd_in = SPAWN_DEVNULL};
    spawn_io io = {.timeout_ms = 10000};
    spawn_result r;
    em_err err = {0};
    bool works = false;
    if (spawn_run(&so, &io, &r, &err) == 0) {
        works = !r.timed_out && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
        spawn_result_free(&r);
    }
    if (!works)
        line("warn", "bwrap: installed but cannot create a sandbox here (user namespaces disabled?)");
}

/* dir, or its nearest existing parent, in p: the folder that stands for its file system. */
static bool existing_dir(const char *dir, char p[PATH_MAX])
{
    snprintf(p, PATH_MAX, "%s", dir);
    struct stat st;
    while (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
        char *slash = strrchr(p, '/');
        if (!slash || slash == p) {
            snprintf(p, PATH_MAX, "/");
            return stat(p, &st) == 0;
        }
        *slash = '\0';
    }
    return true;
}

/* Free space of the file system that holds dir (or of its nearest existing parent). */
static void check_space(const char *what, const char *dir, double want_gib)
{
    char p[PATH_MAX];
    struct statvfs st;
    if (!existing_dir(dir, p) || statvfs(p, &st) < 0)
        return;
    double gib = (double)st.f_bavail * (double)st.f_frsize / GIB;
    line(gib >= want_gib ? "ok" : "warn", "disk: %.1f GiB free for the %s (%s)%s", gib, what, dir,
         gib >= want_gib ? "" : "; less than envmgr wants there");
}

/* A restored state's RAM is served over FUSE where /dev/fuse works (no disk beyond its own files);
 * else its flat RAM file shares the golden RAM file's data only with reflink, on the golden
 * states' own file system (docs/states.md, "Disk per saved state"). */
static void check_state_disk(void)
{
    state_ram_mode mode = STATE_RAM_AUTO;
    em_err err;
    if (state_ram_mode_of(&mode, &err) < 0) {
        line("warn", "states: %s (a restore refuses it)", err.msg);
        return;
    }
    if (mode != STATE_RAM_FILE && ramfs_available()) {
        line("ok", "states: a restored state's RAM is served over FUSE (/dev/fuse works): no flat RAM file on "
             "disk (docs/states.md)");
        return;
    }
    if (mode == STATE_RAM_SERVED) {
        line("warn", "states: ENVMGR_STATE_RAM=served, but no FUSE here (/dev/fuse, root or fusermount3): "
             "restores from saved states fail (docs/states.md)");
        return;
    }
    if (mode == STATE_RAM_AUTO)
        line("ok", "states: no FUSE here (/dev/fuse, root or fusermount3): a restored state's RAM is a flat RAM "
             "file on disk (docs/states.md)");
    _cleanup_free_ char *states = paths_state_root();
    _cleanup_free_ char *golden = xasprintf("%s/golden", paths_cache_root());
    char sp[PATH_MAX], gp[PATH_MAX];
    struct stat ss, gs;
    bool reflink = false;
    if (!existing_dir(states, sp) || !existing_dir(golden, gp) || stat(sp, &ss) < 0 || stat(gp, &gs) < 0)
        return;
    if (dir_has_reflink(sp, &reflink, &err) < 0)
        line("ok", "states: %s (cannot tell whether its file system has reflink: %s)", states, err.msg);
    else if (reflink && ss.st_dev == gs.st_dev)
        line("ok", "states: %s, with reflink beside the golden states: a restored state's flat RAM file "
             "shares the golden RAM file's data (docs/states.md)", states);
    else
        line("ok", "states: %s, %s: a restored state's flat RAM file costs the golden RAM file's data again "
             "(XFS with reflink or Btrfs holding the cache would share it; docs/states.md)", states,
             reflink ? "not on the golden states' file system" : "no reflink on its file system");
}

static void check_images(doctor *d)
{
    const char *data = paths_data_dir(), *root = paths_image_root();
    _cleanup_free_ char *scripts = xasprintf("%s/evaluator/scripts", data);
    if (access(scripts, R_OK) == 0)
        line("ok", "data: %s", data);
    else
        absent(d, true, NULL, "data: no evaluator/scripts in the data directory (set ENVMGR_DATA_DIR, or `make install`)");

    int images = cli_print_images("ok      image ", "warn    image ");
    if (images == 0) {
        _cleanup_free_ char *what = xasprintf(
            "image: none in %s (build or relink it as root: `make image` in a checkout, or "
            "`%s/vm-images/build-image.sh " IMAGE_DEFAULT "`; cached builds are reused)",
            root, data);
        absent(d, true, NULL, what);
    }

    int goldens = 0;
    _cleanup_free_ char *gdir = xasprintf("%s/golden", paths_cache_root());
    DIR *g = opendir(gdir);
    struct dirent *e;
    while (g && (e = readdir(g)))
        goldens += e->d_type == DT_DIR && e->d_name[0] != '.';
    if (g)
        closedir(g);
    line("ok", "golden states: %d cached in %s%s", goldens, gdir,
         goldens ? "" : " (the first `envmgr up` of an image builds one: about 100 s under TCG)");
}

int cmd_doctor(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc > 1)
        return cli_usage_error(usage, "doctor: takes no arguments");
    doctor d = {0};
    printf("envmgr %s\n", ENVMGR_VERSION);
    check_qemu(&d);
    check_kvm();
    check_cgroups();
    for (size_t i = 0; i < ARRAY_LEN(tools); i++) {
        if (in_path(tools[i].program))
            line("ok", "%s", tools[i].what);
        else
            absent(&d, tools[i].required, tools[i].package, tools[i].what);
    }
    check_bwrap_works();
    const char *novnc = getenv("ENVMGR_NOVNC_DIR");
    _cleanup_free_ char *vnc_html = xasprintf("%s/vnc.html", novnc && *novnc ? novnc : "/usr/share/novnc");
    if (access(vnc_html, R_OK) == 0)
        line("ok", "noVNC: the live view in a browser (envmgr serve)");
    else
        absent(&d, false, "novnc", "noVNC: the live view in a browser (envmgr serve)");
    check_space("cache (golden states)", paths_cache_root(), 4);
    check_space("run directory (env overlays)", paths_run_root(), 1);
    check_state_disk();
    check_images(&d);

    if (d.packages.len)
        printf("to install what is missing: sudo apt-get install -y %s\n", d.packages.s);
    printf("doctor: %s\n", d.missing ? "something required is missing (MISSING lines above)"
                                     : "ready to run envs");
    sbuf_release(&d.packages);
    return d.missing ? EM_EXIT_FAIL : 0;
}

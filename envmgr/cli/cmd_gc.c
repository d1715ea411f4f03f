#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/env/gc.h"

static const char usage[] =
    "usage: envmgr gc [--all-suite] [--keep-golden] [--keep-states] [--state-cap MIB] [--dry-run]\n"
    "  Reap what crashed or killed envmgr commands left: run directories whose QEMU is dead, suite\n"
    "  envs (suite-<pid>-<k>) whose envmgr is gone (with their QEMU), dead golden-state builders, and\n"
    "  golden states in the cache whose image manifest no longer exists (each holds a RAM file of the\n"
    "  guest's memory size), and overlays kept on disk for envs whose run directory is gone (a reboot\n"
    "  wipes a tmpfs run root), the work folders of killed `image import`s and `image rm`s, and saved states beyond the cache's cap (their flat RAM files first, rebuilt\n"
    "  at the next restore, then states, least recently used first) or whose golden state is gone. Anything an envmgr still holds, a QEMU still maps or an env or another saved\n"
    "  state depends on is left alone.\n"
    "  --all-suite    also stop suite envs whose envmgr still runs\n"
    "  --keep-golden  leave the golden states alone\n"
    "  --keep-states  leave the saved states alone\n"
    "  --state-cap MIB  the saved states' cap for this run (default: ENVMGR_STATE_CAP_MIB, else 20480)\n"
    "  --dry-run      say what would be removed, remove nothing\n";

int cmd_gc(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    gc_opts o = {.state_cap_mib = -1};
    static const struct option opts[] = {{"all-suite", no_argument, 0, 'a'},
                                         {"keep-golden", no_argument, 0, 'k'},
                                         {"keep-states", no_argument, 0, 'K'},
                                         {"state-cap", required_argument, 0, 'c'},
                                         {"dry-run", no_argument, 0, 'n'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'a': o.all_suite = true; break;
        case 'k': o.keep_golden = true; break;
        case 'K': o.keep_states = true; break;
        case 'c':
            if (parse_int(optarg, 0, 1L << 30, &o.state_cap_mib) < 0)
                return cli_usage_error(usage, "--state-cap: expected a number of MiB, got `%s`", optarg);
            break;
        case 'n': o.dry_run = true; break;
        default: return cli_usage_error(usage, "gc: bad option");
        }
    }
    if (optind != argc)
        return cli_usage_error(usage, "gc: takes no arguments");
    em_err err = {0};
    gc_stats st;
    int rc = suite_gc(&o, stdout, &st, &err);
    printf("gc: %s%zu env%s (%zu QEMU%s stopped), %zu golden state%s (%.0f MiB); %zu in use, left alone\n",
           o.dry_run ? "would remove " : "removed ", st.envs, st.envs == 1 ? "" : "s", st.qemus,
           st.qemus == 1 ? "" : "s", st.goldens, st.goldens == 1 ? "" : "s", st.golden_mib, st.busy);
    if (st.cgroups || st.qemu_users)
        printf("gc: %s%zu empty env cgroup%s and %zu QEMU user id%s of run directories that are gone\n",
               o.dry_run ? "would remove " : "removed ", st.cgroups, st.cgroups == 1 ? "" : "s", st.qemu_users,
               st.qemu_users == 1 ? "" : "s");
    if (st.states)
        printf("gc: %s%zu saved state%s (%.0f MiB)\n", o.dry_run ? "would evict " : "evicted ", st.states,
               st.states == 1 ? "" : "s", st.state_mib);
    if (st.overlays)
        printf("gc: %s%zu overlay%s and egress logs on disk of envs that are gone (%.0f MiB)\n",
               o.dry_run ? "would remove " : "removed ", st.overlays, st.overlays == 1 ? "" : "s", st.overlay_mib);
    fflush(stdout);
    return rc < 0 ? cli_report(&err) : 0;
}

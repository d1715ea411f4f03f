#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/env/env.h"
#include "envmgr/state/states.h"

static const char usage[] =
    "usage: envmgr state save ENV NAME\n"
    "       envmgr state restore ENV NAME\n"
    "       envmgr state ls [--json]\n"
    "       envmgr state rm NAME\n"
    "  Saved states (docs/states.md): any moment of an env, kept in envmgr's cache, restored in about the\n"
    "  time of a reset. A state stores only what differs from the state the env was restored from (the\n"
    "  RAM pages the guest wrote, the disk blocks), and every file is checked against its sha256 before\n"
    "  use. `envmgr up --from-state NAME` starts new envs from one.\n"
    "  save     save ENV (running or paused; it runs on, or stays paused) as state NAME\n"
    "  restore  bring ENV back to state NAME: a fresh QEMU on the state's flat RAM file, as a reset does\n"
    "           (a state's first restore builds that file from the state: a second or so)\n"
    "  ls       the states: parent, size (its own files; its flat RAM file: the bytes each owns, so with\n"
    "           reflink not the golden RAM file's extents a flat file shares), last use, the envs on each\n"
    "  rm       remove state NAME (refused while a state saved from it or an env runs on it)\n"
    "  The cache keeps at most ENVMGR_STATE_CAP_MIB (default 20480) MiB: a save and `envmgr gc` remove flat\n"
    "  RAM files, then evict the least recently used states beyond it, never one something depends on.\n";

static int cmd_state_save(int argc, char **argv)
{
    if (argc != 3)
        return cli_usage_error(usage, "state save: expected ENV NAME");
    em_err err = {0};
    env *e;
    if (state_check_user_name(argv[2], &err) < 0 || env_open(argv[1], &e, &err) < 0)
        return cli_report(&err);
    json_t *since = json_pack("{s:s}", "by", "envmgr state save"), *info = NULL;
    int rc = env_state_save(e, argv[2], since, &info, &err);
    json_decref(since);
    env_close(e);
    if (rc < 0)
        return cli_report(&err);
    json_t *parent = json_object_get(info, "parent");
    printf("state %s saved from env %s (parent %s): %.0f ms, guest paused %.0f ms; RAM delta %.1f MiB, disk "
           "%.1f MiB, devices %.0f KiB\n",
           argv[2], argv[1], json_is_string(parent) ? json_string_value(parent) : "the golden state",
           json_real_value(json_object_get(info, "save_ms")), json_real_value(json_object_get(info, "paused_ms")),
           json_real_value(json_object_get(info, "ram_delta_mib")), json_real_value(json_object_get(info, "disk_mib")),
           json_real_value(json_object_get(info, "devices_kib")));
    json_decref(info);
    return 0;
}

const char *cli_flat_note(const env_timings *t)
{
    static char note[80];
    note[0] = '\0';
    if (t->flat_ms > 0)
        snprintf(note, sizeof note, " (of which %s %.0f ms)",
                 t->ram_served ? "starting the server of its RAM" : "the flat RAM file build", t->flat_ms);
    return note;
}

static int cmd_state_restore(int argc, char **argv)
{
    if (argc != 3)
        return cli_usage_error(usage, "state restore: expected ENV NAME");
    em_err err = {0};
    env *e;
    if (env_open_to_restart(argv[1], &e, &err) < 0)
        return cli_report(&err);
    env_timings t;
    int rc = env_state_restore(e, argv[2], &t, &err);
    if (rc == 0)
        printf("env %s restored to state %s: stop %.0f ms, restore %.0f ms%s\n", argv[1], argv[2], t.stop_ms,
               t.restore_ms, cli_flat_note(&t));
    env_close(e);
    return rc < 0 ? cli_report(&err) : 0;
}

static int cmd_state_ls(int argc, char **argv)
{
    bool as_json = argc == 2 && !strcmp(argv[1], "--json");
    if (argc > 1 && !as_json)
        return cli_usage_error(usage, "state ls: unexpected argument `%s`", argv[1]);
    em_err err = {0};
    json_t *list;
    if (state_list(&list, &err) < 0)
        return cli_report(&err);
    if (as_json) {
        json_dumpf(list, stdout, JSON_INDENT(2));
        putchar('\n');
    } else {
        /* MIB: the state's own files; FLAT MIB: its flat RAM file (derived, rebuilt when gone); both what
         * the state owns on disk (extents no other file shares: not the golden RAM file's, with reflink) */
        printf("%-24s %-24s %9s %9s %-20s %s\n", "NAME", "PARENT", "MIB", "FLAT MIB", "LAST USED", "ENVS");
        size_t i;
        json_t *row;
        json_array_foreach(list, i, row)
        {
            const char *name = json_string_value(json_object_get(row, "name"));
            const char *error = json_string_value(json_object_get(row, "error"));
            if (error) {
                printf("%-24s damaged: %s\n", name, error);
                continue;
            }
            const char *parent = json_string_value(json_object_get(row, "parent"));
            time_t used = (time_t)json_real_value(json_object_get(row, "last_used"));
            char when[32] = "-";
            struct tm tm;
            if (used && gmtime_r(&used, &tm))
                strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
            printf("%-24s %-24s %9.1f %9.1f %-20s %zu\n", name, parent ? parent : "(golden)",
                   json_real_value(json_object_get(row, "mib")), json_real_value(json_object_get(row, "flat_mib")), when,
                   json_array_size(json_object_get(row, "users")));
        }
    }
    json_decref(list);
    return 0;
}

static int cmd_state_rm(int argc, char **argv)
{
    if (argc != 2)
        return cli_usage_error(usage, "state rm: expected NAME");
    em_err err = {0};
    if (state_remove(argv[1], &err) < 0)
        return cli_report(&err);
    printf("state %s removed\n", argv[1]);
    return 0;
}

int cmd_state(int argc, char **argv)
{
    static const cli_command subs[] = {{"save", "", cmd_state_save},
                                       {"restore", "", cmd_state_restore},
                                       {"ls", "", cmd_state_ls},
                                       {"rm", "", cmd_state_rm}};
    return cli_dispatch(argc, argv, usage, "state", subs, sizeof subs / sizeof *subs);
}

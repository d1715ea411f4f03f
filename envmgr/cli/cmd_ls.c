#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/env/env.h"

static const char usage[] = "usage: envmgr ls [--json]\n"
                            "  List envs: name, status (running, paused or dead), pid, accel, the user id QEMU runs as, its cgroup\n"
                            "  limits, image. --json adds every recorded boundary.\n";

/* "mem 2048M pids 512 cpu 150%" from the recorded cgroup limits ("-" for none). */
static void limits_text(json_t *cg, char *out, size_t len)
{
    static const struct {
        const char *controller, *label;
    } show[] = {{"memory", "mem"}, {"pids", "pids"}, {"cpu", "cpu"}};
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(show); i++) {
        const char *limit = json_string_value(json_object_get(json_object_get(cg, show[i].controller), "limit"));
        if (!limit || !strcmp(limit, "unlimited"))
            continue;
        char v[32];
        unsigned long long n = strtoull(limit, NULL, 10);
        if (!strcmp(show[i].controller, "memory"))
            snprintf(v, sizeof v, "%lluM", n >> 20);
        else if (!strcmp(show[i].controller, "cpu")) /* v1 quota per 100 ms period, or v2 "quota period" */
            snprintf(v, sizeof v, "%llu%%", n / 1000);
        else
            snprintf(v, sizeof v, "%llu", n);
        int w = snprintf(out + used, len - used, "%s%s %s", used ? " " : "", show[i].label, v);
        if (w < 0 || (size_t)w >= len - used)
            break;
        used += (size_t)w;
    }
    if (!used)
        snprintf(out, len, "-");
}

int cmd_ls(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    int as_json = argc == 2 && !strcmp(argv[1], "--json");
    if (argc > 1 && !as_json)
        return cli_usage_error(usage, "ls: unexpected argument `%s`", argv[1]);
    em_err err = {0};
    json_t *list;
    if (env_list(&list, &err) < 0)
        return cli_report(&err);
    if (as_json) {
        char *text = json_dumps(list, JSON_INDENT(2));
        puts(text);
        free(text);
    } else {
        printf("%-20s %-8s %-8s %-5s %-11s %-26s %s\n", "NAME", "STATUS", "PID", "ACCEL", "QEMU UID", "LIMITS", "IMAGE");
        size_t i;
        json_t *row;
        json_array_foreach(list, i, row)
        {
            const char *accel = json_string_value(json_object_get(row, "accel"));
            const char *image = json_string_value(json_object_get(row, "image"));
            json_t *b = json_object_get(row, "boundaries"), *uid = json_object_get(b, "uid");
            char uid_text[24] = "-", limits[64];
            if (json_is_integer(uid))
                snprintf(uid_text, sizeof uid_text, "%lld", (long long)json_integer_value(uid));
            limits_text(json_object_get(b, "cgroup"), limits, sizeof limits);
            printf("%-20s %-8s %-8lld %-5s %-11s %-26s %s\n", json_string_value(json_object_get(row, "name")),
                   json_string_value(json_object_get(row, "status")),
                   (long long)json_integer_value(json_object_get(row, "pid")), accel ? accel : "-", uid_text, limits,
                   image ? image : "-");
        }
    }
    json_decref(list);
    return 0;
}

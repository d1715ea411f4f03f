#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envmgr/env/env.h"

static const char usage[] = "usage: envmgr ls [--json]\n"
                            "  List envs: name, status (running or dead), pid, accel, image.\n";

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
        printf("%-20s %-8s %-8s %-5s %s\n", "NAME", "STATUS", "PID", "ACCEL", "IMAGE");
        size_t i;
        json_t *row;
        json_array_foreach(list, i, row)
        {
            const char *accel = json_string_value(json_object_get(row, "accel"));
            const char *image = json_string_value(json_object_get(row, "image"));
            printf("%-20s %-8s %-8lld %-5s %s\n", json_string_value(json_object_get(row, "name")),
                   json_string_value(json_object_get(row, "status")),
                   (long long)json_integer_value(json_object_get(row, "pid")), accel ? accel : "-",
                   image ? image : "-");
        }
    }
    json_decref(list);
    return 0;
}

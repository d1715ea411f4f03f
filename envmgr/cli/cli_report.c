/* What every command prints when it fails or is misused: one line on stderr, and the exit code. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* One line on the terminal, whatever a message quotes (an env's or a state's name, a guest's
 * output): control bytes are written as \xNN, so none can move the cursor or end the line. */
static void put_line(const char *msg)
{
    fputs("envmgr: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(stderr, "\\x%02x", *p);
        else
            fputc(*p, stderr);
    }
    fputc('\n', stderr);
}

int cli_report(const em_err *err)
{
    put_line(err->msg[0] ? err->msg : "failed");
    return err->code ? err->code : EM_EXIT_FAIL;
}

int cli_wants_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 1;
        }
    }
    return 0;
}

int cli_usage_error(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[EM_ERR_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    put_line(msg);
    const char *first = strchr(usage, '\n');
    fprintf(stderr, "%.*s\n", first ? (int)(first - usage) : (int)strlen(usage), usage);
    return EM_EXIT_USAGE;
}

int cli_dispatch(int argc, char **argv, const char *usage, const char *command, const cli_command *subs, size_t n)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? EM_EXIT_USAGE : 0;
    }
    if (cli_wants_help(argc - 1, argv + 1, usage))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(argv[1], subs[i].name))
            return subs[i].run(argc - 1, argv + 1);
    char names[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", subs[i].name);
    return cli_usage_error(usage, "%s: unknown subcommand `%s` (%s)", command, argv[1], names);
}

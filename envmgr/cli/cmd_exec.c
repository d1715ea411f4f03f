#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "envmgr/env/env.h"
#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

static const char usage[] =
    "usage: envmgr exec NAME [--stdin] [--timeout S] [--max-output BYTES] -- COMMAND [ARG...]\n"
    "  Run a command in the guest as root through the guest agent; its stdout and stderr are\n"
    "  copied here and its exit code becomes ours. Default timeout 60 s, output cap 1 MiB per stream.\n"
    "  --stdin (-i) passes our stdin to it (up to 4 MiB, read to its end first); without it the\n"
    "  command's stdin is empty and ours is not read.\n";

int cmd_exec(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc < 2 || argv[1][0] == '-')
        return cli_usage_error(usage, "exec: NAME missing");
    const char *name = argv[1];
    argc--;
    argv++; /* options follow the name */
    double timeout = 60;
    long cap = GUEST_OUTPUT_CAP_DEFAULT;
    bool want_stdin = false;
    static const struct option opts[] = {{"timeout", required_argument, 0, 't'},
                                         {"max-output", required_argument, 0, 'm'},
                                         {"stdin", no_argument, 0, 'i'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "+t:m:i", opts, NULL)) != -1) {
        switch (c) {
        case 'i': want_stdin = true; break;
        case 't':
            if (parse_double(optarg, &timeout) < 0 || timeout <= 0 || timeout > 86400)
                return cli_usage_error(usage, "--timeout: expected seconds in (0, 86400], got `%s`", optarg);
            break;
        case 'm':
            if (parse_int(optarg, 1, 16L << 20, &cap) < 0)
                return cli_usage_error(usage, "--max-output: expected 1..16777216 bytes, got `%s`", optarg);
            break;
        default: return cli_usage_error(usage, "exec: bad option");
        }
    }
    if (optind < argc && !strcmp(argv[optind], "--"))
        optind++;
    if (optind >= argc)
        return cli_usage_error(usage, "exec: COMMAND missing");
    em_err err = {0};
    _cleanup_free_ char *in = NULL;
    size_t in_len = 0;
    if (want_stdin && read_fd_capped(0, "exec --stdin", GUEST_STDIN_MAX, 0, &in, &in_len, &err) < 0)
        return cli_report(&err);
    env *e;
    if (env_open(name, &e, &err) < 0)
        return cli_report(&err);
    guest *g;
    guest_exec_result r;
    int rc = env_guest(e, &g, &err);
    if (rc == 0)
        rc = guest_exec(g, (const char *const *)argv + optind, in, in_len, timeout, (size_t)cap, &r, &err);
    if (rc < 0)
        env_failed(e, &err);
    env_close(e);
    if (rc < 0)
        return cli_report(&err);
    em_err ignored;
    write_full(1, r.out, r.out_len, &ignored);
    write_full(2, r.err, r.err_len, &ignored);
    int code = r.exit_code;
    if (r.timed_out)
        fprintf(stderr, "envmgr: exec: `%s` timed out after %.0f s\n", argv[optind], timeout);
    if (r.truncated)
        fprintf(stderr, "envmgr: exec: output cut at %ld bytes\n", cap);
    guest_exec_result_free(&r);
    return code < 0 ? 128 + r.signal : code;
}

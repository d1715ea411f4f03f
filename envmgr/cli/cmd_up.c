#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/env/env.h"
#include "envmgr/episode/plan.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"
#include "envmgr/task/task.h"

static const char usage[] =
    "usage: envmgr up --name NAME [--image IMAGE | --from-state STATE] [--accel auto|kvm|tcg]\n"
    "                 [--network none|allowlist] [--allow HOST:PORT]... [--allow-private ADDR:PORT]...\n"
    "                 [--task FILE] [--unsafe-open-network]\n"
    "                 [--max-egress-bytes N] [--max-connections-per-minute N]\n"
    "  Boot an env from the image's golden state (built on first use: a cold boot to a ready desktop).\n"
    "  --name NAME     the env's name (letters, digits, . - _)\n"
    "  --image IMAGE   an image name under ENVMGR_IMAGE_DIR or a directory with manifest.json (default: desktop)\n"
    "  --from-state STATE  start from a saved state (envmgr state save) instead of the golden state; the\n"
    "                  state names the image. Many envs may start from one state at once\n"
    "  --accel MODE    auto (default: KVM only if a probe boot works), kvm or tcg\n"
    "  --network MODE  none (default: the guest reaches nothing) or allowlist (only --allow entries, through\n"
    "                  envmgr's logged egress proxy; docs/security.md)\n"
    "  --allow H:P     allow host:port, [IPv6]:port or *.domain:port (repeatable; implies allowlist); public\n"
    "                  addresses only\n"
    "  --allow-private A:P  allow a loopback, private or link-local address (the operator's choice: no task,\n"
    "                  trace or API request can; kept when a task's network section applies; repeatable)\n"
    "  --task FILE     take the network section of a task file instead\n"
    "  --unsafe-open-network  let the guest reach every public address (still through the logged proxy;\n"
    "                  loopback and private addresses only when listed by --allow-private); traces record it\n"
    CLI_NET_LIMITS_USAGE;

int cmd_up(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    env_up_opts o = {.image = IMAGE_DEFAULT, .accel = "auto"};
    static const struct option opts[] = {{"name", required_argument, 0, 'n'},
                                         {"image", required_argument, 0, 'i'},
                                         {"from-state", required_argument, 0, 'F'},
                                         {"accel", required_argument, 0, 'a'},
                                         {"network", required_argument, 0, 'N'},
                                         {"allow", required_argument, 0, 'A'},
                                         {"allow-private", required_argument, 0, 'P'},
                                         {"task", required_argument, 0, 'T'},
                                         {"unsafe-open-network", no_argument, 0, 'U'},
                                         CLI_NET_LIMIT_OPTIONS,
                                         {0, 0, 0, 0}};
    /* Network flags: none given leaves the env in mode none without a policy file. */
    netpolicy net;
    netpolicy_init(&net);
    const char *mode = NULL, *task_path = NULL;
    bool any_net = false, open_net = false, allowed = false, private_rules = false, image_given = false;
    em_err err = {0};
    int c;
    while ((c = getopt_long(argc, argv, "+n:i:a:", opts, NULL)) != -1) {
        switch (c) {
        case 'n': o.name = optarg; break;
        case 'i': o.image = optarg; image_given = true; break;
        case 'F': o.from_state = optarg; break;
        case 'a': o.accel = optarg; break;
        case 'N': mode = optarg; break;
        case 'A':
            if (netpolicy_add(&net, optarg, &err) < 0)
                return cli_usage_error(usage, "--allow: %s", err.msg);
            allowed = true;
            break;
        case 'P':
            if (netpolicy_add_private(&net, optarg, &err) < 0)
                return cli_usage_error(usage, "--allow-private: %s", err.msg);
            private_rules = true;
            break;
        case 'T': task_path = optarg; break;
        case 'U': open_net = true; break;
        case CLI_OPT_MAX_EGRESS_BYTES:
        case CLI_OPT_MAX_CONN_PER_MIN:
            if (cli_net_limit_option(usage, c, optarg, &net))
                return EM_EXIT_USAGE;
            break;
        default: return cli_usage_error(usage, "up: bad option");
        }
        any_net |= c == 'N' || c == 'A' || c == 'P' || c == 'T' || c == 'U' || c == 'B' || c == 'C';
    }
    if (optind < argc)
        return cli_usage_error(usage, "up: unexpected argument `%s`", argv[optind]);
    if (!o.name)
        return cli_usage_error(usage, "--name: missing");
    if (image_given && o.from_state)
        return cli_usage_error(usage, "--image: not with --from-state (the state names its image)");
    if (task_path && (mode || allowed))
        return cli_usage_error(usage, "--task: takes the whole network section; not with --network or --allow");
    if (mode && netpolicy_mode_parse(mode, &net.mode, &err) < 0)
        return cli_usage_error(usage, "--network: %s", err.msg);
    if (mode && net.mode == NETPOLICY_NONE && (allowed || open_net))
        return cli_usage_error(usage, "--network none: no --allow or --unsafe-open-network with it");
    if (!mode && (allowed || private_rules))
        net.mode = NETPOLICY_ALLOWLIST; /* with --network none, private rules wait for a task's allowlist */
    if (task_path) {
        _cleanup_task_ task *t = NULL;
        netpolicy base = net;
        if (task_load(task_path, &t, &err) < 0 || plan_network(&base, t, &net, &err) < 0)
            return cli_report(&err);
    }
    if (open_net)
        net.mode = NETPOLICY_OPEN;
    if (any_net)
        o.net = &net;
    env *e;
    env_timings t;
    if (env_up(&o, &e, &t, &err) < 0)
        return cli_report(&err);
    if (o.from_state)
        printf("env %s ready (%s) from state %s: restore %.0f ms%s\n", o.name, env_accel(e), o.from_state,
               t.restore_ms, cli_flat_note(&t));
    else
        printf("env %s ready (%s): restore %.0f ms, golden state %.0f ms\n", o.name, env_accel(e), t.restore_ms,
               t.golden_ms);
    if (net.mode != NETPOLICY_NONE)
        printf("network %s: %zu rule%s through http://%s:%d/ (envmgr net show %s)\n", netpolicy_mode_name(net.mode),
               net.nrules, net.nrules == 1 ? "" : "s", NETPOLICY_PROXY_ADDR, NETPOLICY_PROXY_PORT, o.name);
    env_close(e);
    return 0;
}

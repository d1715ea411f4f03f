/* The thin CLI: one small file per subcommand over the env library. */
#ifndef ENVMGR_CLI_H
#define ENVMGR_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"
#include "envmgr/episode/observation.h"
#include "envmgr/episode/plan.h"
#include "envmgr/net/netpolicy.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

/* Print "envmgr: msg" (one line) and return the exit code the error carries. */
int cli_report(const em_err *err);
/* True when argv holds -h/--help; prints usage then. */
int cli_wants_help(int argc, char **argv, const char *usage);
/* A command made of subcommands (`envmgr suite run ...`): usage on no argument (exit 2) or on
 * --help, else the subcommand named by argv[1] runs with argv + 1; an unknown one is a usage error
 * listing the names. */
int cli_dispatch(int argc, char **argv, const char *usage, const char *command, const cli_command *subs, size_t n);
/* Print a usage error (one line) and return EM_EXIT_USAGE. */
int cli_usage_error(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line per image under the image root, after lead: name, build time, directory (one that does
 * not load: after bad_lead, with the reason). Returns how many loaded. */
int cli_print_images(const char *lead, const char *bad_lead);

struct env_timings;
/* " (of which the flat RAM file build N ms)" when a restore built it (or "starting the server of
 * its RAM" when it started that), else "" (static). */
const char *cli_flat_note(const struct env_timings *t);

int cmd_up(int argc, char **argv);
int cmd_down(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_screenshot(int argc, char **argv);
int cmd_act(int argc, char **argv);
int cmd_reset(int argc, char **argv);
int cmd_state(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_task_get(int argc, char **argv);
int cmd_net(int argc, char **argv);
int cmd_image(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_suite(int argc, char **argv);
int cmd_task(int argc, char **argv);
/* --offline and --asset-mirror PREFIX=DIR|URL, shared by task fetch, run and suite run (the
 * asset cache's process-wide settings). Returns 0, or EM_EXIT_USAGE after printing why. */
#define CLI_ASSET_USAGE                                                                                              \
    "  --offline          assets only from the cache (and mirror folders); a missing URL is an error\n"            \
    "  --asset-mirror PREFIX=DIR|URL   fetch http(s) assets starting with PREFIX from DIR/<rest> or URL<rest>\n"
int cli_asset_option(const char *usage, int offline, const char *mirror);
/* --allow-private ADDR:PORT, the operator's, on task fetch, run, suite run and serve: the host's
 * asset fetcher may connect to this loopback/private address (assets.h), and with net, so may the
 * env's guest when a task's allowlist applies (netpolicy_add_private). Returns 0, or EM_EXIT_USAGE
 * after printing why. */
struct netpolicy;
int cli_allow_private(const char *usage, const char *arg, struct netpolicy *net);
/* --agent-env NAME (repeatable) and --agent-sandbox on|off, shared by run and suite run
 * (docs/agent-protocol.md, "Environment"). cli_agent_option returns 0, or EM_EXIT_USAGE after
 * printing why. */
#define CLI_AGENT_ENV_MAX 64
typedef struct cli_agent {
    const char *env[CLI_AGENT_ENV_MAX + 1]; /* NULL-terminated names (argv's strings) */
    size_t nenv;
    int sandbox_off;
} cli_agent;
#define CLI_AGENT_USAGE                                                                                              \
    "  --agent-env NAME   also pass NAME of envmgr's environment to the agent (repeatable; never ENVMGR_*)\n"      \
    "  --agent-sandbox on|off  on (default): the agent runs where it cannot see envmgr's run and cache\n"         \
    "                     folders (bubblewrap, when the host allows it); off: for an agent that needs them\n"
enum { CLI_OPT_AGENT_ENV = 0x1000, CLI_OPT_AGENT_SANDBOX };
int cli_agent_option(const char *usage, int opt, const char *arg, cli_agent *a);
/* --max-egress-bytes N and --max-connections-per-minute N, shared by up, run, serve and suite run:
 * the operator's maxima of an env's egress limits (netpolicy.h). CLI_NET_LIMIT_OPTIONS goes into a
 * command's getopt table; cli_net_limit_option takes the option it returned and sets *p's maxima
 * (and limits in force). Returns 0, or EM_EXIT_USAGE after printing why. */
enum { CLI_OPT_MAX_EGRESS_BYTES = 0x1010, CLI_OPT_MAX_CONN_PER_MIN };
#define CLI_NET_LIMIT_OPTIONS                                                                                        \
    {"max-egress-bytes", required_argument, 0, CLI_OPT_MAX_EGRESS_BYTES},                                           \
        {"max-connections-per-minute", required_argument, 0, CLI_OPT_MAX_CONN_PER_MIN}
#define CLI_NET_LIMITS_USAGE                                                                                         \
    "  --max-egress-bytes N  bytes an episode's guest may send out (default 256 MiB), and the most a\n"          \
    "                  task's network.limits.max_bytes_out may ask for; 0: no limit\n"                            \
    "  --max-connections-per-minute N  new egress connections a minute (default 600), and the most a task's\n"  \
    "                  network.limits.max_connections_per_minute may ask for; 0: no limit\n"
struct netpolicy;
int cli_net_limit_option(const char *usage, int opt, const char *arg, struct netpolicy *p);
/* --image NAME [--force-image], shared by run, suite run, suite list and serve: the image for tasks
 * (and, for serve, API requests) that name none, or for every task with --force-image; the rule
 * itself is plan_image's (envmgr/episode/plan.h). cli_image_option takes the option getopt
 * returned; cli_image_check refuses --force-image without --image. Both return 0, or
 * EM_EXIT_USAGE after printing why. */
enum { CLI_OPT_IMAGE = 0x1020, CLI_OPT_FORCE_IMAGE };
#define CLI_IMAGE_OPTIONS                                                                                            \
    {"image", required_argument, 0, CLI_OPT_IMAGE}, { "force-image", no_argument, 0, CLI_OPT_FORCE_IMAGE }
#define CLI_IMAGE_USAGE                                                                                              \
    "  --image NAME    the image for tasks that name none (OSWorld's never do; default desktop): a task's\n"       \
    "                  own `image` wins unless --force-image. A task whose related_apps the image lacks is\n"     \
    "                  refused before any VM starts, naming the image that has them\n"                            \
    "  --force-image   --image for every task, even one that names another\n"
struct plan_image_choice;
int cli_image_option(const char *usage, int opt, const char *arg, struct plan_image_choice *ch);
int cli_image_check(const char *usage, const struct plan_image_choice *ch);
int cmd_suite_audit(int argc, char **argv);
int cmd_suite_export(int argc, char **argv);
/* --envs N (-n), --resume, --accel, --progress for suite run and suite audit (getopt returns 'n', 'R',
 * 'A', 'p'): true when c was one of them, with *rc 0 or EM_EXIT_USAGE after printing why. */
#define CLI_POOL_OPTIONS                                                                                             \
    {"envs", required_argument, 0, 'n'}, {"resume", no_argument, 0, 'R'}, {"accel", required_argument, 0, 'A'},   \
        {"progress", required_argument, 0, 'p'}
struct pool_opts;
bool cli_pool_option(const char *usage, int c, const char *arg, struct pool_opts *o, int *rc);
int cmd_gc(int argc, char **argv);
/* The episode options run, suite run, suite audit, serve and mcp read alike, parsed by one function
 * (cli_episode.c) into one struct: the settle rule, the operator's network rules and maxima, the image
 * choice, what is recorded (observation, video), the assets, the agent's environment and sandbox. A
 * command's getopt table lists the groups it takes (CLI_EPISODE_*_OPTIONS); cli_episode_option takes
 * what getopt returned: true when it was one of them, with *rc 0 or EM_EXIT_USAGE after printing why. */
enum { CLI_OPT_SETTLE_MS = 0x1040, CLI_OPT_OBSERVATION, CLI_OPT_VIDEO, CLI_OPT_ALLOW_PRIVATE, CLI_OPT_OFFLINE,
       CLI_OPT_ASSET_MIRROR };
typedef struct cli_episode {
    double settle_ms;        /* --settle-ms (default SETTLE_DEFAULT_MS) */
    obs_kind observation;    /* --observation */
    bool video;              /* --video */
    plan_image_choice image; /* --image, --force-image */
    netpolicy net;           /* --allow-private, --max-egress-bytes, --max-connections-per-minute */
    bool has_net;            /* one of those was given */
    cli_agent ag;            /* --agent-env, --agent-sandbox */
} cli_episode;
#define CLI_EPISODE_ENV_OPTIONS                                                                                      \
    {"settle-ms", required_argument, 0, CLI_OPT_SETTLE_MS},                                                        \
        {"allow-private", required_argument, 0, CLI_OPT_ALLOW_PRIVATE}, CLI_NET_LIMIT_OPTIONS, CLI_IMAGE_OPTIONS
#define CLI_EPISODE_RECORD_OPTIONS                                                                                   \
    {"observation", required_argument, 0, CLI_OPT_OBSERVATION}, { "video", no_argument, 0, CLI_OPT_VIDEO }
#define CLI_EPISODE_ASSET_OPTIONS                                                                                    \
    {"offline", no_argument, 0, CLI_OPT_OFFLINE}, { "asset-mirror", required_argument, 0, CLI_OPT_ASSET_MIRROR }
#define CLI_EPISODE_AGENT_OPTIONS                                                                                    \
    {"agent-env", required_argument, 0, CLI_OPT_AGENT_ENV}, { "agent-sandbox", required_argument, 0, CLI_OPT_AGENT_SANDBOX }
void cli_episode_init(cli_episode *e);
bool cli_episode_option(const char *usage, int c, const char *arg, cli_episode *e, int *rc);
/* What the episode options say that a suite pool's options hold (o keeps pointers into ep). */
struct pool_opts;
void cli_pool_from_episode(struct pool_opts *o, const cli_episode *ep);
/* The options only serve and mcp take (getopt returns 'm', 'o', 'r', 'A'), beside CLI_EPISODE_ENV_OPTIONS:
 * true when c was one of them, with *rc 0 or EM_EXIT_USAGE after printing why. */
#define CLI_API_OPTIONS                                                                                              \
    {"max-envs", required_argument, 0, 'm'}, {"out", required_argument, 0, 'o'},                                   \
        {"task-root", required_argument, 0, 'r'}, {"accel", required_argument, 0, 'A'}, CLI_EPISODE_ENV_OPTIONS
#define CLI_API_USAGE                                                                                                \
    "  --max-envs N        envs the server may own at once (default 4, at most 64)\n"                                \
    "  --out DIR           episodes: DIR/<env id>/<n>/{result.json,trace/} (default ./envmgr-out/serve)\n"          \
    "  --task-root DIR     task paths in requests resolve inside DIR (default: the current directory)\n"           \
    "  --settle-ms MS      after each action wait for a still screen and an idle guest, up to MS (default 550)\n" \
    "  --allow-private A:P every env may reach this loopback/private address when its task's allowlist\n"         \
    "                      applies, and the host may fetch task assets from it (the operator's choice:\n"          \
    "                      no request or task can; repeatable)\n" CLI_NET_LIMITS_USAGE CLI_IMAGE_USAGE
struct api_config;
bool cli_api_option(const char *usage, int c, const char *arg, struct api_config *cfg, int *rc);
/* What the episode options say that the server's configuration holds (it keeps pointers into ep). */
void cli_api_from_episode(struct api_config *cfg, const cli_episode *ep);
int cmd_serve(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_replay_agent(int argc, char **argv);
int cmd_metric(int argc, char **argv);

#endif

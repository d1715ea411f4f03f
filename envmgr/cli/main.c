#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/base/util.h"
#include "envmgr/env/env_image.h"
#include "envmgr/state/ramfs.h"

static const cli_command commands[] = {
    {"up", "boot (restore) a desktop env from its image's golden state", cmd_up},
    {"down", "stop an env and remove its run directory", cmd_down},
    {"ls", "list envs and whether their QEMU runs", cmd_ls},
    {"screenshot", "save a PNG (or raw RGBX) of the env's screen", cmd_screenshot},
    {"act", "perform an agent's reply (computer_13, pyautogui, a computer-use tool call) on the env", cmd_act},
    {"reset", "return the env to the clean golden state", cmd_reset},
    {"state", "saved states: save an env's moment, restore it, list, remove", cmd_state},
    {"pause", "pause an env: no CPU used, its guest clock stands still", cmd_pause},
    {"resume", "let a paused env run again", cmd_resume},
    {"exec", "run a command in the guest through the guest agent", cmd_exec},
    {"net", "the env's network policy and egress log (log, show)", cmd_net},
    {"run", "run a task (or a folder of tasks) with an agent, score it, record a trace", cmd_run},
    {"trace", "traces: verify, show, export", cmd_trace},
    {"metric", "run one metric on host files in the evaluator sandbox; list the metrics", cmd_metric},
    {"replay", "replay a recorded episode and check that every frame and the score reproduce", cmd_replay},
    {"image", "images: list, verify, import, rm", cmd_image},
    {"task", "tasks without a VM: check them (every problem), fetch their assets, list OSWorld's pieces", cmd_task},
    {"suite", "run a suite of tasks on a pool of envs; compare, merge, list runs", cmd_suite},
    {"gc", "reap dead envs, envs of killed suite runs and golden states of deleted images", cmd_gc},
    {"serve", "serve the JSON HTTP API for remote agents (docs/http-api.md)", cmd_serve},
    {"mcp", "serve an env as MCP tools on stdio, for MCP clients (docs/mcp.md)", cmd_mcp},
    {"view", "watch an env with any VNC viewer (view-only)", cmd_view},
    {"doctor", "check the host: QEMU, KVM, tools, disk space, images; say what to install", cmd_doctor},
};

static void usage(FILE *out)
{
    fputs("usage: envmgr COMMAND [OPTIONS]\n\n"
          "envmgr boots QEMU desktop guests for benchmarking GUI agents: observe (screenshots over VNC),\n"
          "act (mouse and keyboard over VNC), reset to a golden snapshot, run commands in the guest.\n\n"
          "commands:\n",
          out);
    for (size_t i = 0; i < ARRAY_LEN(commands); i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fputs("\n`envmgr COMMAND --help` lists each command's options.\n"
          "environment: ENVMGR_RUN_DIR, ENVMGR_CACHE_DIR, ENVMGR_IMAGE_DIR, ENVMGR_DATA_DIR, ENVMGR_QEMU\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EM_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("envmgr %s\n", ENVMGR_VERSION);
        return 0;
    }
    install_interrupt_handlers();
    if (!strcmp(argv[1], "__qemu-log") && argc == 3) /* started beside each QEMU, not listed */
        return env_log_keeper_main(argv[2]);
    if (!strcmp(argv[1], "__ramfs")) /* a state's RAM server (state/ramfs.h), started by a restore, not listed */
        return ramfs_main(argc - 1, argv + 1);
    if (!strcmp(argv[1], "__replay-agent")) /* started by `envmgr replay`, not listed */
        return cmd_replay_agent(argc - 1, argv + 1);
    for (size_t i = 0; i < ARRAY_LEN(commands); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "envmgr: unknown command `%s` (envmgr --help lists them)\n", argv[1]);
    return EM_EXIT_USAGE;
}

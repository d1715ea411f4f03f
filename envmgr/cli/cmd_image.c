#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/env/env_image.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"

static const char usage[] =
    "usage: envmgr image verify [IMAGE]\n"
    "       envmgr image list   (or ls)\n"
    "       envmgr image import NAME DISK [--guest none|qga|osworld] [--screen WxH] [--memory MiB] [--cpus N]\n"
    "                           [--firmware bios|uefi] [--ready-timeout S] [--accel auto|kvm|tcg] [--no-golden]\n"
    "       envmgr image rm NAME\n"
    "  verify  recompute the sha256 of every file the image's manifest.json lists and\n"
    "          refuse an image whose files changed. IMAGE: a name (default desktop) or a directory.\n"
    "  list    the images under ENVMGR_IMAGE_DIR (default: vm-images/out in envmgr's data\n"
    "          directory): name, build time, guest interface, directory\n"
    "  import  a disk envmgr did not build (qcow2 or raw, read from its header; a backing file, an external\n"
    "          data file, encryption, a corrupt header or a disk over 256 GiB is refused) becomes image NAME:\n"
    "          envmgr's own qcow2 copy, booted from its own bootloader, then its golden state is made\n"
    "          (docs/images.md, \"Imported images\"). A refusal is one line, exit 2, and keeps nothing.\n"
    "    --guest none|qga|osworld  how envmgr reaches inside it: none (screenshots and input only; the\n"
    "                        golden state is taken once the screen is still); qga (the QEMU guest agent on\n"
    "                        org.qemu.guest_agent.0: commands as root and files; ready once it answers and\n"
    "                        the screen is still); osworld (OSWorld's server on port 5000, reached in a\n"
    "                        network namespace of QEMU's own: needs root; ready once GET /screenshot\n"
    "                        answers 200 and the screen is still)\n"
    "    --screen WxH        its screen (default 1280x800)\n"
    "    --memory MiB        its RAM (default 2048)      --cpus N   its vCPUs (default 1)\n"
    "    --firmware bios|uefi  SeaBIOS (default) or OVMF (Debian's ovmf package)\n"
    "    --ready-timeout S   the longest cold boot to a ready screen (default 600)\n"
    "    --accel A           the golden state's accelerator (default auto)\n"
    "    --no-golden         import only; the first `envmgr up --image NAME` makes the golden state\n"
    "  rm      remove an imported image (refused while an env runs on it)\n";

int cli_print_images(const char *lead, const char *bad_lead)
{
    const char *root = paths_image_root();
    int n = 0;
    DIR *dir = opendir(root);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *img = xasprintf("%s/%s", root, e->d_name);
        env_image_facts f;
        em_err err = {0};
        if (env_image_facts_read(img, &f, &err) < 0) {
            printf("%s%s: %s\n", bad_lead, e->d_name, err.msg);
            continue;
        }
        printf("%s%-16s %-20s %-7s %s%s\n", lead, e->d_name, f.built ? f.built : "?", f.guest, img,
               f.imported ? " (imported)" : "");
        env_image_facts_free(&f);
        n++;
    }
    if (dir)
        closedir(dir);
    return n;
}

static int parse_screen(const char *arg, int *w, int *h)
{
    long x, y;
    char wbuf[16];
    const char *sep = strchr(arg, 'x');
    if (!sep || (size_t)(sep - arg) >= sizeof wbuf)
        return -1;
    memcpy(wbuf, arg, (size_t)(sep - arg));
    wbuf[sep - arg] = '\0';
    if (parse_int(wbuf, 320, 7680, &x) < 0 || parse_int(sep + 1, 200, 4320, &y) < 0)
        return -1;
    *w = (int)x;
    *h = (int)y;
    return 0;
}

/* --memory, --cpus, --ready-timeout: an integer within the manifest's bounds (0, or a usage error). */
static int int_option(int c, const char *arg, env_image_import_opts *o)
{
    static const struct {
        int c;
        const char *name, *unit;
        long lo, hi;
    } opts[] = {{'m', "memory", "MiB", 256, 65536}, {'c', "cpus", "vCPUs", 1, 16},
                {'t', "ready-timeout", "seconds", 10, 7200}};
    int *field[] = {&o->memory_mb, &o->cpus, &o->ready_timeout_s};
    long v;
    for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
        if (opts[i].c != c)
            continue;
        if (parse_int(arg, opts[i].lo, opts[i].hi, &v) < 0) {
            cli_usage_error(usage, "--%s: expected %s from %ld to %ld, got `%.32s`", opts[i].name, opts[i].unit,
                            opts[i].lo, opts[i].hi, arg);
            return -1;
        }
        *field[i] = (int)v;
    }
    return 0;
}

static int image_import_cmd(int argc, char **argv)
{
    static const struct option opts[] = {{"guest", required_argument, 0, 'g'},
                                         {"screen", required_argument, 0, 's'},
                                         {"memory", required_argument, 0, 'm'},
                                         {"cpus", required_argument, 0, 'c'},
                                         {"firmware", required_argument, 0, 'f'},
                                         {"ready-timeout", required_argument, 0, 't'},
                                         {"accel", required_argument, 0, 'a'},
                                         {"no-golden", no_argument, 0, 'G'},
                                         {0, 0, 0, 0}};
    env_image_import_opts o = {.guest = "none", .accel = "auto"};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'g':
            o.guest = optarg;
            break;
        case 's':
            if (parse_screen(optarg, &o.width, &o.height) < 0)
                return cli_usage_error(usage, "--screen: expected WxH from 320x200 to 7680x4320, got `%.32s`", optarg);
            break;
        case 'm':
        case 'c':
        case 't':
            if (int_option(c, optarg, &o) < 0)
                return EM_EXIT_USAGE;
            break;
        case 'f':
            if (strcmp(optarg, "bios") && strcmp(optarg, "uefi"))
                return cli_usage_error(usage, "--firmware: expected bios or uefi, got `%.32s`", optarg);
            o.uefi = !strcmp(optarg, "uefi");
            break;
        case 'a':
            o.accel = optarg;
            break;
        case 'G':
            o.accel = NULL;
            break;
        default:
            return cli_usage_error(usage, "image import: unknown option");
        }
    }
    if (argc - optind != 2)
        return cli_usage_error(usage, "image import: expected NAME DISK");
    em_err err = {0};
    env_image_facts f;
    double t0 = now_ms();
    if (env_image_import(argv[optind], argv[optind + 1], &o, &f, &err) < 0)
        return cli_report(&err);
    printf("image %s imported: %s (guest %s, %dx%d, %d MiB, %s%s) in %.1f s\n", argv[optind], f.dir, f.guest,
           f.width, f.height, f.memory_mb, f.firmware, o.accel ? ", golden state made" : "", (now_ms() - t0) / 1000);
    env_image_facts_free(&f);
    return 0;
}

int cmd_image(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc == 2 && (!strcmp(argv[1], "list") || !strcmp(argv[1], "ls"))) {
        cli_print_images("", "broken ");
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "import"))
        return image_import_cmd(argc - 1, argv + 1);
    em_err err = {0};
    if (argc >= 2 && !strcmp(argv[1], "rm")) {
        if (argc != 3)
            return cli_usage_error(usage, "image rm: expected NAME");
        if (env_image_remove(argv[2], &err) < 0)
            return cli_report(&err);
        printf("image %s removed\n", argv[2]);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "verify") || argc > 3)
        return cli_usage_error(usage, "image: expected `verify [IMAGE]`, `list`, `import NAME DISK` or `rm NAME`");
    env_image_facts f;
    double t0 = now_ms();
    if (env_image_verify(argc == 3 ? argv[2] : IMAGE_DEFAULT, &f, &err) < 0)
        return cli_report(&err);
    printf("image %s ok: %zu files match manifest %.12s (%.1f s)\n", f.dir, f.files, f.sha256,
           (now_ms() - t0) / 1000);
    env_image_facts_free(&f);
    return 0;
}

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/env/env_image.h"
#include "envmgr/base/paths.h"
#include "envmgr/base/util.h"

static const char usage[] = "usage: envmgr image verify [IMAGE]\n"
                            "       envmgr image list\n"
                            "  verify  recompute the sha256 of every file the image's manifest.json lists and\n"
                            "          refuse an image whose files changed. IMAGE: a name (default desktop) or a directory.\n"
                            "  list    the images under ENVMGR_IMAGE_DIR (default: vm-images/out in envmgr's data\n"
                            "          directory): name, build time, directory\n";

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
        printf("%s%-16s %-20s %s\n", lead, e->d_name, f.built ? f.built : "?", img);
        env_image_facts_free(&f);
        n++;
    }
    if (dir)
        closedir(dir);
    return n;
}

int cmd_image(int argc, char **argv)
{
    if (cli_wants_help(argc, argv, usage))
        return 0;
    if (argc == 2 && !strcmp(argv[1], "list")) {
        cli_print_images("", "broken ");
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "verify") || argc > 3)
        return cli_usage_error(usage, "image: expected `verify [IMAGE]` or `list`");
    em_err err = {0};
    env_image_facts f;
    double t0 = now_ms();
    if (env_image_verify(argc == 3 ? argv[2] : IMAGE_DEFAULT, &f, &err) < 0)
        return cli_report(&err);
    printf("image %s ok: %zu files match manifest %.12s (%.1f s)\n", f.dir, f.files, f.sha256,
           (now_ms() - t0) / 1000);
    env_image_facts_free(&f);
    return 0;
}

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "envmgr/vm/manifest.h"
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
        manifest *m = NULL;
        em_err err = {0};
        if (manifest_load(img, &m, &err) < 0) {
            printf("%s%s: %s\n", bad_lead, e->d_name, err.msg);
            continue;
        }
        const char *built = json_string_value(json_object_get(m->json, "built"));
        printf("%s%-16s %-20s %s\n", lead, e->d_name, built ? built : "?", img);
        manifest_free(m);
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
    _cleanup_free_ char *dir = paths_image_dir(argc == 3 ? argv[2] : IMAGE_DEFAULT);
    em_err err = {0};
    manifest *m;
    if (manifest_load(dir, &m, &err) < 0)
        return cli_report(&err);
    double t0 = now_ms();
    int rc = manifest_verify(m, 1, &err);
    if (rc == 0)
        printf("image %s ok: %zu files match manifest %.12s (%.1f s)\n", m->dir,
               json_object_size(json_object_get(m->json, "files")), m->sha256, (now_ms() - t0) / 1000);
    manifest_free(m);
    return rc < 0 ? cli_report(&err) : 0;
}

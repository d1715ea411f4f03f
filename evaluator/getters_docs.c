/* Getters that read a guest document: a slide's audio or background image in a pptx, an xlsx's
 * last row. The document is fetched from the guest like vm_file, then parsed by
 * evaluator/metrics/getter_run.py inside the evaluator sandbox (sandbox.h), never here: envmgr
 * only binds the file in and takes back a small JSON answer (a media part's bytes as base64, or
 * the guest path of a linked file, fetched next). */
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/base64.h"
#include "envmgr/base/util.h"
#include "evaluator/getter_call.h"
#include "evaluator/getters.h"
#include "evaluator/registry.h"
#include "evaluator/sandbox.h"

#define DOC_TIMEOUT_S 120.0
/* a media part of GETTER_FILE_CAP bytes as base64, and the answer around it */
#define DOC_ANSWER_CAP ((size_t)GETTER_FILE_CAP / 3 * 4 + (64u << 10))

static int check_guest_file(json_t *spec, const char *key, em_err *err)
{
    if (getter_check_string(spec, key, true, err) < 0)
        return -1;
    const char *p = json_string_value(json_object_get(spec, key));
    return p[0] == '/' || p[0] == '~' ? 0 : em_fail_input(err, "%s: `%.200s` must be an absolute guest path", key, p);
}

/* OSWorld reads slide_index with int(): an integer, or a string of digits. */
static int check_slide(json_t *spec, em_err *err)
{
    json_t *i = json_object_get(spec, "slide_index");
    const char *s = json_string_value(i);
    bool digits = s && *s && strspn(s, "0123456789") == strlen(s);
    if (check_guest_file(spec, "ppt_file_path", err) < 0 || getter_check_string(spec, "dest", true, err) < 0)
        return -1;
    if (!(json_is_integer(i) && json_integer_value(i) >= 0) && !digits)
        return em_fail_input(err, "slide_index: expected an integer >= 0");
    return 0;
}

static int check_content(json_t *spec, em_err *err)
{
    if (check_guest_file(spec, "path", err) < 0)
        return -1;
    const char *ft = json_string_value(json_object_get(spec, "file_type"));
    const char *fc = json_string_value(json_object_get(spec, "file_content"));
    if (!ft || strcmp(ft, "xlsx"))
        return em_fail_input(err, "file_type: expected \"xlsx\" (the only type OSWorld reads)");
    if (!fc || strcmp(fc, "last_row"))
        return em_fail_input(err, "file_content: expected \"last_row\" (the only content OSWorld reads)");
    return 0;
}

/* getter_run.py on a fetched file (a file artifact), in the sandbox: its JSON answer. */
static int run_in_sandbox(const char *type, json_t *file, json_t *options, json_t **answer, em_err *err)
{
    sandbox sb;
    sandbox_init(&sb);
    sb.out_cap = DOC_ANSWER_CAP;
    sandbox_add(&sb, registry_metrics_dir(), "/metrics");
    json_auto_t *req = json_pack("{s:s, s:o, s:O}", "getter", type, "file", sandbox_osworld_value(&sb, file, "result"),
                                 "options", options);
    static const char *const argv[] = {SANDBOX_PYTHON, "-I", "/metrics/getter_run.py", NULL};
    int rc = sandbox_run_json(&sb, argv, req, DOC_TIMEOUT_S, type, answer, err);
    sandbox_free(&sb);
    if (rc == 0 && !*answer)
        rc = em_fail(err, "%s: the evaluator script answered no JSON object", type);
    return rc;
}

/* The media a slide refers to: null when it has none (or the pptx is gone: OSWorld's None), the
 * embedded part's bytes, or the linked guest file, saved under dest. */
static int run_slide_media(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    const char *type = json_string_value(json_object_get(spec, "type"));
    const char *dest = json_string_value(json_object_get(spec, "dest"));
    json_auto_t *pptx = NULL, *answer = NULL;
    if (getter_fetch_vm_file(gc, json_string_value(json_object_get(spec, "ppt_file_path")), NULL, true, &pptx, err) < 0)
        return em_prefix(err, "%s: ", type);
    if (!pptx) {
        *art = getter_json_artifact(NULL);
        return 0;
    }
    json_t *idx = json_object_get(spec, "slide_index");
    json_auto_t *opts = json_pack("{s:I}", "slide_index",
                                  json_is_integer(idx) ? json_integer_value(idx)
                                                       : (json_int_t)strtoll(json_string_value(idx), NULL, 10));
    if (run_in_sandbox(type, pptx, opts, &answer, err) < 0)
        return -1;
    const char *data = json_string_value(json_object_get(answer, "data"));
    const char *ext = json_string_value(json_object_get(answer, "external"));
    if (data) {
        unsigned char *bytes = NULL;
        size_t n = 0;
        if (base64_decode(data, &bytes, &n) < 0)
            return em_fail(err, "%s: the evaluator script's media is not base64", type);
        int rc = getter_save_bytes(gc, type, dest, (const char *)bytes, n, art, err);
        free(bytes);
        if (rc == 0)
            json_object_set(*art, "member", json_object_get(answer, "member"));
        return rc;
    }
    if (ext) {
        if (getter_fetch_vm_file(gc, ext, dest, true, art, err) < 0)
            return em_prefix(err, "%s: ", type);
        if (!*art)
            *art = getter_json_artifact(NULL);
        return 0;
    }
    *art = getter_json_artifact(NULL);
    return 0;
}

static int run_content(const getter_call *gc, json_t *spec, json_t **art, em_err *err)
{
    json_auto_t *file = NULL, *answer = NULL;
    if (getter_fetch_vm_file(gc, json_string_value(json_object_get(spec, "path")), NULL, false, &file, err) < 0)
        return em_prefix(err, "content_from_vm_file: ");
    json_auto_t *opts = json_pack("{s:O, s:O}", "file_type", json_object_get(spec, "file_type"), "file_content",
                                  json_object_get(spec, "file_content"));
    if (run_in_sandbox("content_from_vm_file", file, opts, &answer, err) < 0)
        return -1;
    json_t *v = json_object_get(answer, "value");
    if (!json_is_array(v))
        return em_fail(err, "content_from_vm_file: the evaluator script answered no `value` list");
    *art = getter_json_artifact(json_incref(v));
    return 0;
}

static const getter_def defs[] = {
    {"audio_in_slide", check_slide, run_slide_media, true,
     "the pptx fetched from the guest and read in the evaluator sandbox: the first audio relationship of slide "
     "slide_index, its embedded part (or the linked guest file) saved under `dest`; null without one"},
    {"background_image_in_slide", check_slide, run_slide_media, true,
     "the pptx read in the evaluator sandbox: the image of the slide's background fill (p:bgPr's a:blip), "
     "embedded or linked, saved under `dest`; null without one"},
    {"content_from_vm_file", check_content, run_content, true,
     "xlsx, last_row: the guest file read in the evaluator sandbox with pandas.read_excel, the last row's values "
     "as str, as OSWorld"},
};

const getter_def *getter_doc_defs(size_t *n)
{
    *n = ARRAY_LEN(defs);
    return defs;
}

/* libFuzzer target: the API's request router and body parsers. The first
 * line of the input is "METHOD PATH", the rest a request body that goes
 * through api_parse_body, then the step, task and field checks. Nothing may
 * crash, leak or read out of bounds; every refusal must carry a 4xx status. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envmgr/api/api_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t first = nl ? (size_t)(nl - data) : size;
    char line[2048];
    size_t keep = first < sizeof line ? first : sizeof line - 1; /* a longer first line is cut, the body is not */
    memcpy(line, data, keep);
    line[keep] = '\0';
    char *sp = strchr(line, ' ');
    const char *method = "GET", *path = line;
    if (sp) {
        *sp = '\0';
        method = line;
        path = sp + 1;
    }
    api_route rt;
    api_error ae = {0};
    if (api_route_match(method, path, &rt, &ae) < 0 && (ae.status < 400 || ae.status > 499))
        abort();
    const char *body = nl ? (const char *)nl + 1 : "";
    size_t blen = nl ? size - first - 1 : 0;
    json_t *j = NULL;
    if (api_parse_body(body, blen, &j, &ae) < 0) {
        if (ae.status < 400 || ae.status > 499)
            abort();
        return 0;
    }
    json_t *reply = NULL;
    if (api_parse_step(j, 1280, 800, &reply, &ae) == 0)
        json_decref(reply);
    else if (ae.status != 400)
        abort();
    json_t *spec = json_object_get(j, "task");
    if (json_is_object(spec)) { /* inline tasks only: a path would read files */
        task *t;
        char *p, sha[65];
        if (api_parse_task(spec, "task", "/nonexistent/fuzz-root", "/nonexistent/fuzz-empty", NULL, 1280, 800, NULL, &t, &p,
                           sha, &ae) == 0) {
            task_free(t);
            free(p);
        }
    }
    api_check_fields(j, " image task accel ", &ae);
    json_decref(j);
    return 0;
}

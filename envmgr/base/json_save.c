#include "envmgr/base/json_save.h"

#include <stdlib.h>
#include <string.h>

#include "envmgr/base/fileio.h"
#include "envmgr/base/util.h"

int json_save(const char *path, json_t *j, size_t flags, mode_t mode, em_err *err)
{
    _cleanup_free_ char *text = j ? json_dumps(j, flags) : NULL;
    if (!text)
        return em_fail(err, "`%s`: the document cannot be encoded as JSON", path);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    return write_file_atomic(path, text, n, mode, err);
}

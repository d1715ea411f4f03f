/* libFuzzer target: task_parse on arbitrary bytes, then screen
 * substitution on whatever parsed. Neither may crash, leak or read out of
 * bounds, whatever the input. */
#include <stddef.h>
#include <stdint.h>

#include "envmgr/task/task.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    em_err err = {0};
    task *t = NULL;
    /* The folder does not exist: paths are checked lexically, nothing is read. */
    if (task_parse((const char *)data, size, "/nonexistent/fuzz-task", &t, &err) == 0) {
        task_substitute_screen(t, 1280, 800, &err);
        task_free(t);
    }
    return 0;
}

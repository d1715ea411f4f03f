#include "envmgr/base/argvec.h"

#include <stdarg.h>
#include <stdlib.h>

#include "envmgr/base/util.h"

void argvec_add(argvec *a, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    for (const char *s = arg; s; s = va_arg(ap, const char *)) {
        if (a->n + 2 > a->cap) {
            a->cap = a->cap ? a->cap * 2 : 64;
            a->v = xrealloc(a->v, a->cap * sizeof *a->v);
        }
        a->v[a->n++] = xstrdup(s);
        a->v[a->n] = NULL;
    }
    va_end(ap);
}

void argv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

void argvec_free(argvec *a)
{
    argv_free(a->v);
    *a = (argvec){0};
}

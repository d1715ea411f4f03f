/* Ownership in one place, on bubblewrap's model: a variable declared with a cleanup attribute
 * releases what it holds when it goes out of scope, whichever way the function returns, and
 * steal_pointer hands what it holds on (the variable is NULL after, so nothing is released twice).
 * _cleanup_free_, _cleanup_close_ and _cleanup_fclose_ are util.h's. */
#ifndef ENVMGR_CLEANUP_H
#define ENVMGR_CLEANUP_H

#include <jansson.h>

#include "envmgr/base/util.h"

void cleanup_jsonp(json_t **j);
#define _cleanup_json_ __attribute__((cleanup(cleanup_jsonp)))

static inline void *steal_pointer_impl(void *pp)
{
    void **p = pp, *v = *p;
    *p = NULL;
    return v;
}
/* *pp's value, and *pp NULL: `return steal_pointer(&obj);` keeps a cleanup variable from freeing it. */
#define steal_pointer(pp) ((__typeof__(*(pp)))steal_pointer_impl(pp))

#endif

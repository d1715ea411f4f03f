/* The HMAC key comes from the environment, never from a file in the trace. */
#include <stdlib.h>
#include <string.h>

#include "envmgr/base/util.h"
#include "trace.h"
#include "trace_format.h"

int trace_key_from_env(char **key, size_t *len, em_err *err)
{
    const char *v = getenv(TRACE_KEY_ENV);
    *key = NULL;
    *len = 0;
    if (!v)
        return 0;
    size_t n = strlen(v);
    if (n == 0)
        return em_fail_input(err, TRACE_KEY_ENV " is set but empty: give it 1 to %d bytes or unset it",
                             TRACE_KEY_MAX);
    if (n > TRACE_KEY_MAX)
        return em_fail_input(err, TRACE_KEY_ENV " is %zu bytes, more than the limit of %d", n, TRACE_KEY_MAX);
    *key = xmalloc(n + 1);
    memcpy(*key, v, n + 1);
    *len = n;
    return 1;
}

void trace_key_free(char *key, size_t len)
{
    if (!key)
        return;
    explicit_bzero(key, len);
    free(key);
}

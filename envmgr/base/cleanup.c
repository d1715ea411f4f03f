#include "envmgr/base/cleanup.h"

void cleanup_jsonp(json_t **j)
{
    json_decref(*j);
}

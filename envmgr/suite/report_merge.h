/* `envmgr suite merge --out DIR SHARD_DIR...`: join the run directories of
 * the shards of one suite (a Slurm job array writes one each) into one run
 * directory: results.jsonl (every line of every shard), suite.json (the
 * union of the shards' tasks), summary.json and junit.xml, and traces/
 * whose entries are symlinks to the shards' traces (nothing is copied). */
#ifndef ENVMGR_REPORT_MERGE_H
#define ENVMGR_REPORT_MERGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "envmgr/base/err.h"

typedef struct report_merge_info {
    int shards_n;          /* N of the shards' K/N (0 when they were not sharded alike) */
    size_t shards_found;   /* distinct K seen */
    bool complete;         /* every expected episode of every shard finished, and no shard is missing */
} report_merge_info;

int report_merge(const char *const *dirs, size_t n, const char *out_dir, json_t **summary, report_merge_info *info,
                 em_err *err);

#endif

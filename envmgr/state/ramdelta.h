/* A saved state's memory as what differs from its parent: the pages of guest RAM (which its flat
 * RAM file, ramflat.h, applies over the golden RAM file) and of the VGA memory (which a restore
 * writes into QEMU). One file, read by mapping it:
 *   [0, 4096)      header: "EMRAMDL1", u32 version, u32 page size, u64 pages[RAMDELTA_REGIONS] (each
 *                  region's size), u64 count, u64 data_pages, u64 index_off (all little-endian)
 *   [4096, ...)    data_pages pages of 4096 bytes
 *   index_off      count entries {u64 key = region << 56 | page, u64 slot}: sorted by key, unique;
 *                  slot is a data page number, or RAMDELTA_ZERO for a page of zeros
 * A parent's view of a page is the last delta of its chain that holds the page, else the golden
 * RAM file (RAM) or zeros (VGA memory, which no state inherits: each stores its own). */
#ifndef ENVMGR_STATE_RAMDELTA_H
#define ENVMGR_STATE_RAMDELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "envmgr/base/err.h"

#define RAMDELTA_PAGE 4096u
#define RAMDELTA_ZERO UINT64_MAX
enum { RAMDELTA_RAM = 0, RAMDELTA_VRAM = 1, RAMDELTA_REGIONS = 2 };

typedef struct ramdelta ramdelta;
typedef struct ramdelta_writer ramdelta_writer;

typedef struct ramdelta_stats {
    uint64_t pages[RAMDELTA_REGIONS]; /* entries per region */
    uint64_t zero_pages;              /* of them, pages of zeros (no data stored) */
    uint64_t bytes;                   /* the file's size */
} ramdelta_stats;

/* Map and check a delta: header, sizes, index order and bounds (a file that fails any is an error
 * naming it, never a read out of bounds). */
int ramdelta_open(const char *path, ramdelta **out, em_err *err);
void ramdelta_close(ramdelta *d);
uint64_t ramdelta_region_pages(const ramdelta *d, int region);
/* d holds the page: true, with *data its bytes (NULL: zeros). */
bool ramdelta_find(const ramdelta *d, int region, uint64_t page, const uint8_t **data);

/* One page a restore writes: where, and what (NULL: zeros). */
typedef struct ramdelta_page {
    uint64_t page;
    const uint8_t *data;
} ramdelta_page;
/* The pages of region in a chain of deltas (root first), each from the last delta that holds it,
 * in page order (*out: malloc'd, valid while the deltas are open). */
int ramdelta_merge(ramdelta *const *chain, size_t n, int region, ramdelta_page **out, size_t *count, em_err *err);

/* Write a delta: pages added in increasing (region, page) order; data NULL or all zeros is stored
 * as a zero page. finish writes the index and header and fsyncs; abort removes the file. Both free w. */
int ramdelta_create(const char *path, const uint64_t pages[RAMDELTA_REGIONS], ramdelta_writer **out, em_err *err);
int ramdelta_add(ramdelta_writer *w, int region, uint64_t page, const uint8_t *data, em_err *err);
int ramdelta_finish(ramdelta_writer *w, ramdelta_stats *st, em_err *err);
void ramdelta_abort(ramdelta_writer *w);

bool ramdelta_page_is_zero(const uint8_t *p);

#endif

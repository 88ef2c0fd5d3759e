/*
 * columns.h - memory for the columns of a job held once (alike.h): arrays
 * of one value per rank and task, tens of megabytes each for a job of
 * hundreds of ranks.  Private to the library.
 *
 * Such an array is written once, front to back, right after it is
 * allocated.  Fresh memory reaches a process one 4 KiB page per fault, and
 * at a hundred megabytes the faults cost as much as the replay itself
 * (measured: a fifth of a 256-rank `simulate`).  So a large column is
 * mapped with its pages populated in one call (Linux's MAP_POPULATE); a
 * small one, or where that fails, comes from g_malloc.  Free with
 * rv_column_free, never g_free.
 */
#ifndef REVERIE_UTIL_COLUMNS_H
#define REVERIE_UTIL_COLUMNS_H

#include <glib.h>
#include <stdint.h>

/* Room for `count` values of `size` bytes, uninitialised (one spare value,
 * so that count 0 is a valid pointer). */
void *rv_column_new(gsize count, gsize size);
/* A copy of count values of size bytes. */
void *rv_column_copy(const void *values, gsize count, gsize size);
void rv_column_free(void *column);

#endif

/*
 * stats.h - small summaries of measured values.
 *
 * The builder (typical launch lag, inter-kernel gap), the transform API
 * (typical launch call) and plugins (a block's activation size) all take
 * the median of a list of nanoseconds or element counts: one function, so
 * they agree on which median (the upper one for an even count).
 */
#ifndef REVERIE_STATS_H
#define REVERIE_STATS_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* The upper median of a GArray of int64 (sorted in place), or fallback
 * when it is empty. */
int64_t rv_median_int64(GArray *values, int64_t fallback);

/* The same upper median in O(n) by selection: the array is left reordered,
 * not sorted.  For one median of a long list (the typical launch call). */
int64_t rv_median_int64_select(GArray *values, int64_t fallback);

/* Sort a GArray of int64 ascending. */
void rv_sort_int64(GArray *values);

/* The value at quantile q in [0, 1] of a GArray of int64: the element that
 * sorting would put at index floor(q * (len - 1)), found by selection in
 * O(n) (the array is left reordered, not sorted); fallback when empty. */
int64_t rv_quantile_int64(GArray *values, double q, int64_t fallback);

G_END_DECLS

#endif

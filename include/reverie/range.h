/*
 * range.h - how far an estimated task duration may be off.
 *
 * A plugin that estimates a task's new duration from a model (hardware:
 * another GPU) also says how far the estimate may be off: the duration
 * times `low` and times `high` bound it (graph.h's duration_ranges, as
 * factors, so that a later plugin that scales the task scales its range
 * with it).  A second range on the same task compounds with the first.
 * Reports replay the graph at both ends (every task at its low end, then
 * at its high end), which gives a range on every step and total; a task
 * without a range counts as exact at both ends.
 */
#ifndef REVERIE_RANGE_H
#define REVERIE_RANGE_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* Give `task` the range [duration x low, duration x high] (0 < low <= 1 <= high),
 * compounded with the one it had. */
void rv_duration_range_set(rv_graph *graph, int32_t task, double low, double high);
/* A task's factors; {1, 1} when it has none. */
rv_duration_range rv_duration_range_of(const rv_graph *graph, int32_t task);
/* TRUE when any task that is not removed has a range wider than a point. */
gboolean rv_graph_has_duration_ranges(const rv_graph *graph);
/* Move every task of graph to the low (or high) end of its range.  FALSE
 * with an RV_ERROR_USAGE error when a duration would leave the limits
 * (validate.h); the graph is then unchanged. */
gboolean rv_graph_to_range_end(rv_graph *graph, gboolean high, GError **error);

G_END_DECLS

#endif

/*
 * range.c - ranges on estimated task durations (range.h).
 */
#include "reverie/range.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <math.h>

void rv_duration_range_set(rv_graph *graph, int32_t task, double low, double high)
{
    if (task < 0 || task >= rv_graph_task_count(graph) || !(low > 0) || !(high >= low)) return;
    guint old_length = graph->duration_ranges->len;
    if ((guint)task >= old_length) {
        g_array_set_size(graph->duration_ranges, (guint)task + 1);
        for (guint t = old_length; t < graph->duration_ranges->len; t++)
            g_array_index(graph->duration_ranges, rv_duration_range, t) = (rv_duration_range){ 1, 1 };
    }
    rv_duration_range *range = &g_array_index(graph->duration_ranges, rv_duration_range, task);
    range->low = (float)MIN(range->low * low, 1.0);
    range->high = (float)MAX(range->high * high, 1.0);
}

rv_duration_range rv_duration_range_of(const rv_graph *graph, int32_t task)
{
    if (task < 0 || graph->duration_ranges == NULL || (guint)task >= graph->duration_ranges->len)
        return (rv_duration_range){ 1, 1 };
    return g_array_index(graph->duration_ranges, rv_duration_range, task);
}

gboolean rv_graph_has_duration_ranges(const rv_graph *graph)
{
    for (guint t = 0; t < graph->duration_ranges->len; t++) {
        const rv_duration_range *range = &g_array_index(graph->duration_ranges, rv_duration_range, t);
        if ((range->low < 1 || range->high > 1) && !(rv_graph_task((rv_graph *)graph, (int32_t)t)->flags & RV_TASK_FLAG_REMOVED))
            return TRUE;
    }
    return FALSE;
}

gboolean rv_graph_to_range_end(rv_graph *graph, gboolean high, GError **error)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    gboolean ok = TRUE;
    for (guint t = 0; ok && t < graph->duration_ranges->len; t++) {
        rv_duration_range range = g_array_index(graph->duration_ranges, rv_duration_range, t);
        double factor = high ? range.high : range.low;
        int64_t duration = -1;
        if (factor != 1)
            ok = rv_task_duration_from(graph, (int32_t)t, (double)rv_graph_task(graph, (int32_t)t)->duration_ns * factor,
                                       "the range of an estimate", &duration, error);
        g_array_append_val(durations, duration);
    }
    for (guint t = 0; ok && t < durations->len; t++) {
        int64_t duration = g_array_index(durations, int64_t, t);
        if (duration >= 0) rv_transform_set_duration(graph, (int32_t)t, duration);
    }
    g_array_unref(durations);
    return ok;
}

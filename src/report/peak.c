/*
 * peak.c - the peak memory a what-if reports next to its time (memory.h;
 * whatif and sweep): the model of memory.h on the graph before and after the
 * optimizations, and the recorded peak where the trace has one.
 */
#include "reverie/memory.h"

void rv_memory_peak_before(rv_memory_peak *peak, const rv_graph *graph)
{
    GError *error = NULL;
    int64_t reserved;
    int32_t device, rank_index;
    peak->estimated = rv_memory_estimate_graph(graph, &peak->baseline, &error);
    if (!peak->estimated) {
        peak->missing = g_strdup("no operator with Input Dims: record with record_shapes=True");
        g_error_free(error);
    } else if (peak->baseline.peak <= 0) {
        /* shaped calls, but none in a phase the model reads: 0 MiB would be a wrong answer */
        peak->estimated = FALSE;
        peak->missing = g_strdup("the shaped calls give no tensor in a forward, backward or optimizer phase; "
                                 "see reverie memory");
    }
    peak->recorded = rv_memory_recorded_peak(graph, &peak->recorded_bytes, &reserved, &device, &rank_index);
}

void rv_memory_peak_after(rv_memory_peak *peak, const rv_graph *graph)
{
    GError *error = NULL;
    if (peak->estimated && !rv_memory_estimate_graph(graph, &peak->predicted, &error)) {
        /* the optimizations left no shaped work: say so rather than guess */
        peak->estimated = FALSE;
        peak->missing = g_strdup("the optimizations left no operator with Input Dims");
        g_error_free(error);
    } else if (peak->estimated && peak->predicted.shaped_ops * 2 < peak->baseline.shaped_ops) {
        /* The model reads recorded operators (also those removed with their
         * GPU work kept, as cuda-graphs does, or moved to a pipeline stage);
         * a plugin that removed most of them without saying where their
         * work went left a graph whose peak the model cannot read, and a
         * peak from the rest would be a wrong answer. */
        peak->estimated = FALSE;
        peak->missing = g_strdup_printf("the optimizations removed %u of the %u launch calls with Input Dims the "
                                        "model reads",
                                        peak->baseline.shaped_ops - peak->predicted.shaped_ops,
                                        peak->baseline.shaped_ops);
    }
}

void rv_memory_peak_clear(rv_memory_peak *peak)
{
    g_clear_pointer(&peak->missing, g_free);
}

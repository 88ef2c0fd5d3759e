/*
 * clock.c - the offset between the CPU and GPU clocks of a trace, found and
 * corrected before any edge that compares the two is inferred.
 *
 * Kineto writes GPU times on the CPU clock after a conversion that can be
 * off.  Two facts of the CUDA API bound the offset d = GPU clock - CPU clock:
 *   - a GPU task cannot start before its launch call began:
 *       d <= high = min over launches of (gpu start - launch start);
 *   - a blocking call returns only after the GPU work it waited for ended
 *     (pairs from sync.c, found from the CPU side alone):
 *       d >= low = max over blocking calls of (awaited end - call end).
 * Each bound drops its most extreme 0.1% of samples, so one mismatched
 * correlation cannot move it.  The clocks are trusted as they are when 0
 * lies in [low, high]; otherwise the offset is the nearest bound, the
 * smallest correction that makes the trace possible.  When low > high no
 * single offset fits (a clock jump, or waits the rules misread); the launch
 * bound wins, because it holds for every GPU task, and the contradicted
 * sync pairs are dropped later.  The result goes to graph->timing for
 * `info`, and every GPU task's recorded start is corrected by it.
 */
#include "streams.h"
#include "reverie/stats.h"

/* Index of the bound after dropping the most extreme 0.1% of n samples. */
static guint trimmed_index(guint n, gboolean from_top)
{
    guint dropped = n / 1000;
    return from_top ? n - 1 - dropped : dropped;
}

/* The bound a list of samples gives: its minimum or maximum after dropping
 * the most extreme 0.1%; 0 for no samples.  Takes the list. */
static int64_t trimmed_extreme(GArray *values, gboolean from_top, uint64_t *samples)
{
    *samples = values->len;
    int64_t bound = 0;
    if (values->len) {
        rv_sort_int64(values);
        bound = g_array_index(values, int64_t, trimmed_index(values->len, from_top));
    }
    g_array_unref(values);
    return bound;
}

static int64_t launch_bound(const builder *b, uint64_t *samples)
{
    GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        if (launch < 0) continue;
        int64_t value = rv_graph_task(b->graph, id)->recorded_start_ns -
                        rv_graph_task(b->graph, launch)->recorded_start_ns;
        g_array_append_val(values, value);
    }
    return trimmed_extreme(values, FALSE, samples);
}

static int64_t sync_bound(const builder *b, const GArray *pairs, uint64_t *samples)
{
    GArray *values = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < pairs->len; i++) {
        const rv_sync_pair *pair = &g_array_index(pairs, rv_sync_pair, i);
        if (pair->rule == RV_SYNC_RULE_STAGED) continue;
        int64_t value = task_recorded_end(rv_graph_task(b->graph, pair->awaited)) -
                        task_recorded_end(rv_graph_task(b->graph, pair->call));
        g_array_append_val(values, value);
    }
    return trimmed_extreme(values, TRUE, samples);
}

static void choose_offset(rv_timing *timing)
{
    gboolean has_high = timing->offset_launch_pairs > 0, has_low = timing->offset_sync_pairs > 0;
    int64_t low = has_low ? timing->offset_low_ns : G_MININT64;
    int64_t high = has_high ? timing->offset_high_ns : G_MAXINT64;
    if (!has_high && !has_low) {
        timing->clock_offset_ns = 0;
        timing->clock_status = RV_CLOCK_NO_EVIDENCE;
    } else if (low > high) {
        timing->clock_offset_ns = MIN(0, high);
        timing->clock_status = RV_CLOCK_INCONSISTENT;
    } else {
        timing->clock_offset_ns = CLAMP(0, low, high);
        timing->clock_status = timing->clock_offset_ns == 0 ? RV_CLOCK_CONSISTENT : RV_CLOCK_CORRECTED;
    }
}

void rv_build_clock(builder *b, const GArray *sync_pairs)
{
    rv_timing *timing = &b->graph->timing;
    timing->offset_high_ns = launch_bound(b, &timing->offset_launch_pairs);
    timing->offset_low_ns = sync_bound(b, sync_pairs, &timing->offset_sync_pairs);
    choose_offset(timing);
    if (timing->clock_offset_ns == 0) return;
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        rv_task *task = rv_graph_task(b->graph, id);
        if (builder_is_gpu_task(task)) task->recorded_start_ns -= timing->clock_offset_ns;
    }
}

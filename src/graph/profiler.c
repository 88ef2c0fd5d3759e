/*
 * profiler.c - what the profiler itself cost the host it recorded.
 *
 * The PyTorch profiler records every operator through RecordFunction
 * callbacks on its entry and exit: they take timestamps, copy shapes and
 * append the event.  That time lies on the host between runtime calls, so
 * it is part of reverie's host overhead (graph.h); a user who asks what the
 * job does unprofiled needs it apart.  Two things are found here:
 *
 * 1. The cost per operator, bounded from above.  Between two consecutive
 *    operators that one C++ operator called (siblings under an operator,
 *    no runtime call or Python function between them) the host runs the
 *    first one's exit callback, the dispatcher and the second one's entry
 *    callback, and nothing else.  The 10th percentile of those gaps bounds
 *    the per-operator cost (the dispatcher's share cannot be told apart,
 *    so it is a bound, not a measurement; a low quantile rather than the
 *    minimum, because traces with whole-microsecond timestamps round many
 *    gaps to 0).  On such traces a quantile below one microsecond is
 *    raised to it: a gap recorded as 0 was under 1 us, not nothing.
 *    Fewer than MIN_SIBLING_GAPS gaps give no bound.
 *
 * 2. How many operators each CPU task's host overhead holds: those that
 *    begin after the previous call on the thread and no later than the
 *    task (graph->host_operators).  Operators after a thread's last call
 *    belong to no task.
 *
 * Together they bound what the profiler took from each call's host
 * overhead (rv_task_profiler_overhead_ns); the `unprofiled` plugin takes it
 * out and `whatif` says how much of a host-bound prediction it may be.
 */
#include "build.h"
#include "reverie/stats.h"
#include <string.h>

/* Sibling gaps below this many give no bound: a handful of gaps in a tiny
 * trace may all include Python. */
#define MIN_SIBLING_GAPS 30
/* The quantile of the sibling gaps taken as the bound. */
#define SIBLING_GAP_QUANTILE 0.10
/* A gap longer than this is not the profiler's (a wait, a lock): dropped. */
#define MAX_SIBLING_GAP_NS 100000

static gboolean is_recorded_operator(const rv_event *event)
{
    return event->kind == RV_EV_CPU_OP || event->kind == RV_EV_USER_ANNOTATION;
}

typedef struct {
    int64_t end_ns;
    gboolean is_operator;        /* a C++ operator: its children follow each other without Python */
    int64_t previous_child_end;  /* -1: no operator child yet, or the last child was not one */
} open_scope;

/* Is there a CPU task of the thread starting in (from, to)? */
static gboolean call_between(const builder *b, const GArray *tasks, int64_t from, int64_t to)
{
    guint low = 0, high = tasks->len;
    while (low < high) { /* first task starting after from */
        guint middle = (low + high) / 2;
        if (rv_graph_task(b->graph, g_array_index(tasks, int32_t, middle))->recorded_start_ns <= from) low = middle + 1;
        else high = middle;
    }
    return low < tasks->len && rv_graph_task(b->graph, g_array_index(tasks, int32_t, low))->recorded_start_ns < to;
}

/* The gaps between sibling operators of one thread's scopes (sorted by
 * start, longer first), appended to gaps. */
static void sibling_gaps(const builder *b, const GPtrArray *scopes, const GArray *tasks, GArray *gaps)
{
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(open_scope));
    for (guint i = 0; i < scopes->len; i++) {
        const rv_event *event = g_ptr_array_index(scopes, i);
        while (stack->len > 0 && g_array_index(stack, open_scope, stack->len - 1).end_ns <= event->ts_ns)
            g_array_set_size(stack, stack->len - 1);
        gboolean operator = event->kind == RV_EV_CPU_OP;
        if (stack->len > 0) {
            open_scope *parent = &g_array_index(stack, open_scope, stack->len - 1);
            if (parent->is_operator && operator && parent->previous_child_end >= 0) {
                int64_t gap = event->ts_ns - parent->previous_child_end;
                if (gap >= 0 && gap <= MAX_SIBLING_GAP_NS &&
                    !call_between(b, tasks, parent->previous_child_end, event->ts_ns))
                    g_array_append_val(gaps, gap);
            }
            parent->previous_child_end = operator ? event->ts_ns + event->dur_ns : -1;
        }
        open_scope scope = { event->ts_ns + event->dur_ns, operator, -1 };
        g_array_append_val(stack, scope);
    }
    g_array_unref(stack);
}

/* Count each recorded operator into the first non-marker task of the
 * thread that starts at or after it. */
static void count_operators(builder *b, const GPtrArray *scopes, const GArray *tasks)
{
    GArray *counts = b->graph->host_operators;
    guint k = 0;
    for (guint i = 0; i < scopes->len; i++) {
        const rv_event *event = g_ptr_array_index(scopes, i);
        if (!is_recorded_operator(event)) continue;
        while (k < tasks->len) {
            const rv_task *task = rv_graph_task(b->graph, g_array_index(tasks, int32_t, k));
            if (task->kind != RV_TASK_MARKER && task->recorded_start_ns >= event->ts_ns) break;
            k++;
        }
        if (k == tasks->len) return;
        int32_t id = g_array_index(tasks, int32_t, k);
        if ((guint)id >= counts->len) g_array_set_size(counts, (guint)id + 1);
        g_array_index(counts, uint32_t, id)++;
        b->graph->timing.profiled_operators++;
    }
}

/* 1 us when every gap is whole microseconds (2021-era and HTA traces
 * write integer timestamps), else 1 ns. */
static int64_t timestamp_resolution_ns(const GArray *gaps)
{
    for (guint i = 0; i < gaps->len; i++)
        if (g_array_index(gaps, int64_t, i) % 1000 != 0) return 1;
    return 1000;
}

void rv_build_profiler_cost(builder *b)
{
    GPtrArray *per_thread = builder_scopes_by_thread(b);
    GArray *gaps = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint r = 0; r < b->graph->resources->len; r++) {
        if (g_array_index(b->graph->resources, rv_resource, r).kind != RV_RES_CPU_THREAD) continue;
        const GPtrArray *scopes = g_ptr_array_index(per_thread, r);
        const GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        sibling_gaps(b, scopes, tasks, gaps);
        count_operators(b, scopes, tasks);
    }
    rv_estimate cost = { 0, 0, gaps->len, RV_SOURCE_NONE };
    if (gaps->len >= MIN_SIBLING_GAPS) {
        cost.value = MAX(rv_quantile_int64(gaps, SIBLING_GAP_QUANTILE, 0), timestamp_resolution_ns(gaps));
        cost.spread = rv_quantile_int64(gaps, 0.75, 0) - rv_quantile_int64(gaps, 0.25, 0);
        cost.source = RV_SOURCE_BOUND;
    }
    b->graph->timing.profiler_op_cost = cost;
    g_array_unref(gaps);
    g_ptr_array_free(per_thread, TRUE);
}

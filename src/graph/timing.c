/*
 * timing.c - derive each task's gap and lag so that the untransformed graph
 * replays the recording (see the timing model in graph.h).
 *
 * For task k recorded to start at T on a resource whose previous task p
 * ended at E_p, with dependencies (other than resource order) met at R:
 *   - if R <= E_p the resource was the constraint: gap(p) = T - E_p and
 *     lag(k) is only a typical launch latency (GPU) or zero (CPU);
 *   - otherwise the dependency was: lag(k) = T - R, and gap(p) keeps only
 *     what a resource would spend anyway - a typical inter-kernel gap on a
 *     GPU stream, nothing on a CPU thread (the thread was waiting).
 * Either way max(E_p + gap(p), R + lag(k)) = T, so the replay is exact,
 * while a transformation that moves R moves k with it.  A task with no
 * predecessor at all starts at its offset from the trace's origin.
 */
#include "build.h"
#include "reverie/stats.h"
#include <string.h>

typedef struct {
    int64_t *ready_ns;      /* recorded time the task's dependencies were met */
    gboolean *has_ready;
} readiness;

static gboolean is_order_edge(const rv_edge *edge)
{
    return edge->kind == RV_EDGE_THREAD || edge->kind == RV_EDGE_STREAM;
}

static void compute_readiness(builder *b, readiness *ready)
{
    int32_t count = rv_graph_task_count(b->graph);
    ready->ready_ns = g_new(int64_t, count);
    ready->has_ready = g_new0(gboolean, count);
    for (guint e = 0; e < b->graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(b->graph->edges, rv_edge, e);
        if (is_order_edge(edge)) continue;
        const rv_task *from = rv_graph_task(b->graph, edge->from);
        int64_t at = edge->from_start ? from->recorded_start_ns : task_recorded_end(from);
        if (!ready->has_ready[edge->to] || at > ready->ready_ns[edge->to]) ready->ready_ns[edge->to] = at;
        ready->has_ready[edge->to] = TRUE;
    }
}

/* Typical launch latency and inter-kernel gap of this trace's GPU, from
 * the tasks where each one alone decided the start. */
static void typical_gpu_delays(builder *b, const readiness *ready, int64_t *launch_lag, int64_t *kernel_gap)
{
    GArray *lags = g_array_new(FALSE, FALSE, sizeof(int64_t));
    GArray *gaps = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint r = 0; r < b->graph->resources->len; r++) {
        if (g_array_index(b->graph->resources, rv_resource, r).kind != RV_RES_GPU_STREAM) continue;
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        for (guint k = 1; k < tasks->len; k++) {
            int32_t id = g_array_index(tasks, int32_t, k);
            const rv_task *task = rv_graph_task(b->graph, id);
            int64_t previous_end = task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, k - 1)));
            int64_t value;
            if (ready->has_ready[id] && ready->ready_ns[id] > previous_end) {
                value = task->recorded_start_ns - ready->ready_ns[id];
                if (value >= 0) g_array_append_val(lags, value);
            } else {
                value = task->recorded_start_ns - previous_end;
                if (value >= 0) g_array_append_val(gaps, value);
            }
        }
    }
    *launch_lag = rv_median_int64(lags, 5000);
    *kernel_gap = rv_median_int64(gaps, 1000);
    g_array_unref(lags);
    g_array_unref(gaps);
}

static void time_resource(builder *b, int32_t resource, const readiness *ready, int64_t launch_lag,
                          int64_t kernel_gap)
{
    gboolean gpu = g_array_index(b->graph->resources, rv_resource, resource).kind == RV_RES_GPU_STREAM;
    GArray *tasks = builder_resource_tasks(b, resource);
    rv_task *previous = NULL;
    for (guint k = 0; k < tasks->len; k++) {
        int32_t id = g_array_index(tasks, int32_t, k);
        rv_task *task = rv_graph_task(b->graph, id);
        int64_t start = task->recorded_start_ns;
        int64_t ready_at = ready->ready_ns[id];
        gboolean has_ready = ready->has_ready[id];
        task->gap_ns = 0;
        if (previous == NULL) {
            task->lag_ns = MAX(0, start - (has_ready ? ready_at : b->origin_ns));
            previous = task;
            continue;
        }
        int64_t previous_end = task_recorded_end(previous);
        int64_t idle = start - previous_end;
        if (idle < 0) {
            if (gpu) b->graph->build_stats.overlapping_gpu_tasks++;
            idle = 0;
        }
        if (!has_ready || ready_at <= previous_end) {
            previous->gap_ns = idle;
            task->lag_ns = has_ready && gpu ? CLAMP(start - ready_at, 0, launch_lag) : 0;
        } else {
            task->lag_ns = MAX(0, start - ready_at);
            previous->gap_ns = gpu ? MIN(idle, kernel_gap) : 0;
        }
        previous = task;
    }
}

void rv_build_timing(builder *b)
{
    readiness ready;
    compute_readiness(b, &ready);
    int64_t launch_lag, kernel_gap;
    typical_gpu_delays(b, &ready, &launch_lag, &kernel_gap);
    for (guint r = 0; r < b->graph->resources->len; r++)
        time_resource(b, (int32_t)r, &ready, launch_lag, kernel_gap);
    g_free(ready.ready_ns);
    g_free(ready.has_ready);
}

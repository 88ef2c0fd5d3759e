/*
 * inserted.c - small streaming kernels a what-if adds next to recorded GPU
 * work, with their launch calls (inserted.h).
 */
#include "reverie/inserted.h"
#include "reverie/stats.h"
#include "reverie/transform.h"
#include "reverie/validate.h"

/* The median host time before a GPU task's launch call (the launch
 * calls found in one pass, rv_graph_launch_calls; the overheads written
 * in place). */
static int64_t median_launch_overhead(const rv_graph *graph)
{
    int32_t n = rv_graph_task_count(graph);
    int32_t *launch = rv_graph_launch_calls(graph);
    GArray *overheads = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), (guint)n);
    g_array_set_size(overheads, (guint)n);
    guint found = 0;
    for (int32_t t = 0; t < n; t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!(task->flags & RV_TASK_FLAG_GPU) || (task->flags & RV_TASK_FLAG_REMOVED) || launch[t] < 0) continue;
        g_array_index(overheads, int64_t, found++) = g_array_index(graph->tasks, rv_task, launch[t]).host_overhead_ns;
    }
    g_array_set_size(overheads, found);
    g_free(launch);
    /* by selection, not sorting: a 1M-task graph has half a million launches */
    int64_t median = rv_median_int64_select(overheads, 0);
    g_array_unref(overheads);
    return median;
}

void rv_kernel_inserter_init(rv_kernel_inserter *in, rv_graph *graph, const rv_cost_model *model, GError **error)
{
    in->graph = graph;
    in->model = model;
    in->launch_call_ns = rv_graph_typical_launch_ns(graph);
    in->launch_overhead_ns = median_launch_overhead(graph);
    in->kernels = 0;
    in->error = error;
}

int32_t rv_kernel_inserter_add(rv_kernel_inserter *in, int32_t gpu_task, gboolean before, const char *name, double bytes)
{
    int64_t duration_ns;
    if (!rv_task_duration_from(in->graph, -1, rv_cost_model_streaming_ns(in->model, bytes), "the inserted kernel",
                               &duration_ns, in->error))
        return -2;
    return rv_kernel_inserter_add_lasting(in, gpu_task, before, name, duration_ns);
}

int32_t rv_kernel_inserter_add_lasting(rv_kernel_inserter *in, int32_t gpu_task, gboolean before, const char *name,
                                       int64_t duration_ns)
{
    rv_graph *graph = in->graph;
    int32_t launch = rv_graph_launch_of(graph, gpu_task);
    int32_t stream_anchor = before ? rv_graph_resource_previous(graph, gpu_task) : gpu_task;
    int32_t thread_anchor = launch < 0 ? -1 : before ? rv_graph_resource_previous(graph, launch) : launch;
    if (stream_anchor < 0 || thread_anchor < 0) return -1;
    const rv_task *anchor = rv_graph_task(graph, gpu_task);
    rv_insert_spec spec = { { 0 }, stream_anchor, thread_anchor };
    spec.task.kind = RV_TASK_KERNEL;
    spec.task.resource = anchor->resource;
    spec.task.name = rv_strings_intern(graph->strings, name);
    spec.task.layer = anchor->layer;
    spec.task.phase = anchor->phase;
    spec.task.step = anchor->step;
    spec.task.input_dims = -1;
    spec.task.correlation = -1;
    spec.task.recorded_start_ns = anchor->recorded_start_ns;
    spec.task.duration_ns = duration_ns;
    int32_t id = rv_transform_insert(graph, &spec, in->error);
    if (id < 0) return -2;
    int32_t call = rv_graph_launch_of(graph, id);
    if (call >= 0) rv_graph_task(graph, call)->host_overhead_ns = in->launch_overhead_ns;
    in->kernels++;
    return id;
}

/*
 * gpu_time.c - the summed duration of GPU kernels, in all and per step,
 * and a recording's steady value (report.h): what whatif and validate
 * report as "GPU kernel time" beside the step times.
 *
 * A GPU kernel is a live task on a GPU stream of kind kernel or comm (an
 * NCCL/RCCL kernel is a kernel too); copies and sets are not kernels.  A
 * kernel belongs to the step its launch belongs to; a graph without steps
 * is one step.
 */
#include "reverie/report.h"

static gboolean is_gpu_kernel(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED) &&
           (task->kind == RV_TASK_KERNEL || task->kind == RV_TASK_COMM);
}

int64_t rv_gpu_kernel_ns(const rv_graph *graph)
{
    int64_t total = 0;
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (is_gpu_kernel(task)) total += task->duration_ns;
    }
    return total;
}

GArray *rv_gpu_kernel_ns_by_step(const rv_graph *graph)
{
    guint steps = graph->steps->len ? graph->steps->len : 1;
    GArray *per_step = g_array_new(FALSE, TRUE, sizeof(int64_t));
    g_array_set_size(per_step, steps);
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!is_gpu_kernel(task)) continue;
        if (graph->steps->len == 0) g_array_index(per_step, int64_t, 0) += task->duration_ns;
        else if (task->step >= 0 && (guint)task->step < steps) g_array_index(per_step, int64_t, task->step) += task->duration_ns;
    }
    return per_step;
}

static gint compare_int64(gconstpointer left, gconstpointer right)
{
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return a < b ? -1 : a > b;
}

int64_t rv_steady_ns(const GArray *values)
{
    if (values->len == 0) return 0;
    GArray *sorted = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = values->len > 1 ? 1 : 0; i < values->len; i++) g_array_append_val(sorted, g_array_index(values, int64_t, i));
    g_array_sort(sorted, compare_int64);
    guint n = sorted->len;
    int64_t steady = n % 2 ? g_array_index(sorted, int64_t, n / 2)
                           : (g_array_index(sorted, int64_t, n / 2 - 1) + g_array_index(sorted, int64_t, n / 2)) / 2;
    g_array_unref(sorted);
    return steady;
}

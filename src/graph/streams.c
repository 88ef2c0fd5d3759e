/*
 * streams.c - launch-time index over GPU streams (see streams.h).
 */
#include "streams.h"

/* When a task was launched: its launch call's start.  A task with no
 * launch call in the trace (launched before the recording began, or by a
 * call the profiler missed) was launched after the one before it on its
 * stream and before the one after it: it takes the time before it (the
 * caller's running maximum), never its own GPU start, which can lie long
 * after later launches when the GPU runs behind. */
static int64_t launch_time(const builder *b, int32_t task, int64_t before)
{
    int32_t launch = g_array_index(b->task_launch, int32_t, task);
    return launch >= 0 ? rv_graph_task(b->graph, launch)->recorded_start_ns : before;
}

void stream_index_init(stream_index *index, const builder *b)
{
    index->launch_times = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < b->graph->resources->len; r++) {
        GArray *times = g_array_new(FALSE, FALSE, sizeof(int64_t));
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind == RV_RES_GPU_STREAM) {
            GArray *tasks = builder_resource_tasks(b, (int32_t)r);
            int64_t running_max = G_MININT64;
            for (guint k = 0; k < tasks->len; k++) {
                /* Keep the times monotonic so that binary search is valid even
                 * when two threads' launches interleave on one stream. */
                running_max = MAX(running_max, launch_time(b, g_array_index(tasks, int32_t, k), running_max));
                g_array_append_val(times, running_max);
            }
        }
        g_ptr_array_add(index->launch_times, times);
    }
}

void stream_index_clear(stream_index *index)
{
    g_ptr_array_free(index->launch_times, TRUE);
}

/* Number of tasks on the resource launched strictly before t. */
static guint count_before(const stream_index *index, int32_t resource, int64_t t)
{
    GArray *times = g_ptr_array_index(index->launch_times, resource);
    guint low = 0, high = times->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(times, int64_t, middle) < t) low = middle + 1;
        else high = middle;
    }
    return low;
}

int32_t stream_last_launched_before(const stream_index *index, const builder *b, int32_t resource,
                                    int64_t t)
{
    guint before = count_before(index, resource, t);
    return before == 0 ? -1 : g_array_index(builder_resource_tasks(b, resource), int32_t, before - 1);
}

int32_t stream_first_launched_after(const stream_index *index, const builder *b, int32_t resource,
                                    int64_t t)
{
    guint before = count_before(index, resource, t);
    GArray *tasks = builder_resource_tasks(b, resource);
    return before < tasks->len ? g_array_index(tasks, int32_t, before) : -1;
}

int32_t builder_find_gpu_resource(const builder *b, int64_t device, int64_t stream)
{
    char key[64];
    g_snprintf(key, sizeof key, "%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, device, stream);
    gpointer found = g_hash_table_lookup(b->gpu_resource, key);
    return found ? GPOINTER_TO_INT(found) - 1 : -1;
}

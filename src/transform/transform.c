/*
 * transform.c - the transformation primitives (see transform.h).
 *
 * Edges are a flat array; there is no adjacency index kept up to date.
 * Single-task look-ups scan the edges (fine for a plugin's handful of
 * calls); removal, the one primitive plugins call thousands of times, works
 * on a batch with one index built for the whole batch.
 */
#include "reverie/transform.h"
#include "reverie/stats.h"
#include "reverie/error.h"
#include <math.h>
#include <string.h>

static gboolean is_order_kind(uint8_t kind)
{
    return kind == RV_EDGE_THREAD || kind == RV_EDGE_STREAM;
}

static gboolean removed(const rv_graph *graph, int32_t task)
{
    return (g_array_index(graph->tasks, rv_task, task).flags & RV_TASK_FLAG_REMOVED) != 0;
}

void rv_transform_scale(rv_graph *graph, const GArray *tasks, double factor)
{
    for (guint i = 0; i < tasks->len; i++) {
        rv_task *task = rv_graph_task(graph, g_array_index(tasks, int32_t, i));
        task->duration_ns = (int64_t)llround((double)task->duration_ns * MAX(0.0, factor));
    }
}

void rv_transform_scale_host_overhead(rv_graph *graph, const GArray *tasks, double factor)
{
    for (guint i = 0; i < tasks->len; i++) {
        rv_task *task = rv_graph_task(graph, g_array_index(tasks, int32_t, i));
        task->host_overhead_ns = (int64_t)llround((double)task->host_overhead_ns * MAX(0.0, factor));
    }
}

void rv_transform_set_duration(rv_graph *graph, int32_t task, int64_t duration_ns)
{
    rv_graph_task(graph, task)->duration_ns = MAX(0, duration_ns);
}

static int32_t order_neighbour(const rv_graph *graph, int32_t task, gboolean forward)
{
    int32_t resource = g_array_index(graph->tasks, rv_task, task).resource;
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (!is_order_kind(edge->kind)) continue;
        int32_t here = forward ? edge->from : edge->to, there = forward ? edge->to : edge->from;
        if (here == task && !removed(graph, there) &&
            g_array_index(graph->tasks, rv_task, there).resource == resource)
            return there;
    }
    return -1;
}

int32_t rv_graph_resource_previous(const rv_graph *graph, int32_t task) { return order_neighbour(graph, task, FALSE); }
int32_t rv_graph_resource_next(const rv_graph *graph, int32_t task) { return order_neighbour(graph, task, TRUE); }

int32_t rv_graph_launch_of(const rv_graph *graph, int32_t task)
{
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_LAUNCH && edge->to == task) return edge->from;
    }
    return -1;
}

int64_t rv_graph_typical_launch_ns(const rv_graph *graph)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        if (edge->kind != RV_EDGE_LAUNCH) continue;
        const rv_task *call = &g_array_index(graph->tasks, rv_task, edge->from);
        if (call->kind == RV_TASK_CPU && !(call->flags & RV_TASK_FLAG_BLOCKING))
            g_array_append_val(durations, call->duration_ns);
    }
    int64_t typical = rv_median_int64(durations, 5000); /* a CUDA launch costs a few microseconds */
    g_array_unref(durations);
    return typical;
}

GHashTable *rv_tasks_by_step_new(void)
{
    return g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
}

void rv_tasks_by_step_add(GHashTable *groups, int32_t step, int32_t task)
{
    gpointer key = GINT_TO_POINTER(step + 2);
    GArray *list = g_hash_table_lookup(groups, key);
    if (list == NULL) {
        list = g_array_new(FALSE, FALSE, sizeof(int32_t));
        g_hash_table_insert(groups, key, list);
    }
    g_array_append_val(list, task);
}

/* ---- removal -------------------------------------------------------- */

typedef struct {
    int32_t *in_first, *in_edges;   /* CSR of edge indices by target */
    int32_t *out_first, *out_edges; /* CSR of edge indices by source */
} edge_index;

static void index_build(const rv_graph *graph, edge_index *index)
{
    int32_t n = rv_graph_task_count(graph);
    guint m = graph->edges->len;
    index->in_first = g_new0(int32_t, n + 1);
    index->out_first = g_new0(int32_t, n + 1);
    for (guint e = 0; e < m; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        index->in_first[edge->to + 1]++;
        index->out_first[edge->from + 1]++;
    }
    for (int32_t t = 0; t < n; t++) {
        index->in_first[t + 1] += index->in_first[t];
        index->out_first[t + 1] += index->out_first[t];
    }
    index->in_edges = g_new(int32_t, m + 1);
    index->out_edges = g_new(int32_t, m + 1);
    int32_t *in_fill = g_memdup2(index->in_first, sizeof(int32_t) * (gsize)n);
    int32_t *out_fill = g_memdup2(index->out_first, sizeof(int32_t) * (gsize)n);
    for (guint e = 0; e < m; e++) {
        const rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
        index->in_edges[in_fill[edge->to]++] = (int32_t)e;
        index->out_edges[out_fill[edge->from]++] = (int32_t)e;
    }
    g_free(in_fill);
    g_free(out_fill);
}

static void index_clear(edge_index *index)
{
    g_free(index->in_first); g_free(index->in_edges);
    g_free(index->out_first); g_free(index->out_edges);
}

/* Live tasks reached from `start` along edges (backwards or forwards),
 * walking through removed tasks.  Appends (task, edge kind of the last hop). */
static void live_neighbours(const rv_graph *graph, const edge_index *index, int32_t start,
                            gboolean forward, GArray *found, GHashTable *visited)
{
    GArray *stack = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_val(stack, start);
    g_hash_table_remove_all(visited);
    while (stack->len) {
        int32_t task = g_array_index(stack, int32_t, stack->len - 1);
        g_array_set_size(stack, stack->len - 1);
        const int32_t *first = forward ? index->out_first : index->in_first;
        const int32_t *edges = forward ? index->out_edges : index->in_edges;
        for (int32_t i = first[task]; i < first[task + 1]; i++) {
            const rv_edge *edge = &g_array_index(graph->edges, rv_edge, edges[i]);
            int32_t other = forward ? edge->to : edge->from;
            if (g_hash_table_contains(visited, GINT_TO_POINTER(other + 1))) continue;
            g_hash_table_add(visited, GINT_TO_POINTER(other + 1));
            if (removed(graph, other)) { g_array_append_val(stack, other); continue; }
            int32_t pair[2] = { other, edge->kind };
            g_array_append_vals(found, pair, 1);
        }
    }
    g_array_unref(stack);
}

static void reconnect(rv_graph *graph, const edge_index *index, int32_t task, GHashTable *added)
{
    GArray *before = g_array_new(FALSE, FALSE, sizeof(int32_t) * 2);
    GArray *after = g_array_new(FALSE, FALSE, sizeof(int32_t) * 2);
    GHashTable *visited = g_hash_table_new(g_direct_hash, g_direct_equal);
    live_neighbours(graph, index, task, FALSE, before, visited);
    live_neighbours(graph, index, task, TRUE, after, visited);
    for (guint i = 0; i < before->len; i++) {
        int32_t from = ((int32_t *)before->data)[2 * i];
        for (guint j = 0; j < after->len; j++) {
            int32_t to = ((int32_t *)after->data)[2 * j], kind = ((int32_t *)after->data)[2 * j + 1];
            if (from == to) continue;
            guint64 key = ((guint64)(guint32)from << 32) | (guint32)to;
            if (g_hash_table_contains(added, &key)) continue;
            g_hash_table_add(added, g_memdup2(&key, sizeof key));
            const rv_task *a = &g_array_index(graph->tasks, rv_task, from);
            const rv_task *b = &g_array_index(graph->tasks, rv_task, to);
            rv_edge_kind edge_kind = a->resource == b->resource
                ? ((a->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD)
                : (is_order_kind((uint8_t)kind) || kind == RV_EDGE_LAUNCH ? RV_EDGE_PLUGIN : (rv_edge_kind)kind);
            rv_graph_add_edge(graph, from, to, edge_kind, FALSE);
        }
    }
    g_hash_table_destroy(visited);
    g_array_unref(before);
    g_array_unref(after);
}

/* The live task after `task` in its resource's order, walking on through
 * removed ones (earlier in the same batch), or -1. */
static int32_t live_next(const rv_graph *graph, const edge_index *index, int32_t task)
{
    int32_t resource = g_array_index(graph->tasks, rv_task, task).resource;
    for (int32_t current = task;;) {
        int32_t removed_next = -1;
        for (int32_t i = index->out_first[current]; i < index->out_first[current + 1]; i++) {
            const rv_edge *edge = &g_array_index(graph->edges, rv_edge, index->out_edges[i]);
            if (!is_order_kind(edge->kind) ||
                g_array_index(graph->tasks, rv_task, edge->to).resource != resource) continue;
            if (!removed(graph, edge->to)) return edge->to;
            removed_next = edge->to;
        }
        if (removed_next < 0) return -1;
        current = removed_next;
    }
}

static void mark_removed(rv_graph *graph, const edge_index *index, int32_t task, rv_remove_mode mode,
                         int *count)
{
    rv_task *victim = rv_graph_task(graph, task);
    if (victim->flags & RV_TASK_FLAG_REMOVED) return;
    /* Marked first, so that a victim's overhead skips the other victims
     * of the batch and lands on the next task that stays. */
    rv_graph_task(graph, task)->flags |= RV_TASK_FLAG_REMOVED;
    if (mode == RV_REMOVE_KEEP_OVERHEAD) {
        int32_t next = live_next(graph, index, task);
        if (next >= 0) rv_graph_task(graph, next)->host_overhead_ns += victim->host_overhead_ns;
    }
    (*count)++;
}

int rv_transform_remove_many(rv_graph *graph, const GArray *tasks, rv_remove_mode mode)
{
    int count = 0;
    GArray *victims = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < tasks->len; i++) {
        int32_t task = g_array_index(tasks, int32_t, i);
        if (removed(graph, task)) continue;
        g_array_append_val(victims, task);
        if (g_array_index(graph->tasks, rv_task, task).flags & RV_TASK_FLAG_GPU) {
            int32_t launch = rv_graph_launch_of(graph, task);
            if (launch >= 0 && !removed(graph, launch)) g_array_append_val(victims, launch);
        }
    }
    edge_index index;
    index_build(graph, &index);
    for (guint i = 0; i < victims->len; i++)
        mark_removed(graph, &index, g_array_index(victims, int32_t, i), mode, &count);
    GHashTable *added = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint i = 0; i < victims->len; i++) reconnect(graph, &index, g_array_index(victims, int32_t, i), added);
    g_hash_table_destroy(added);
    index_clear(&index);
    g_array_unref(victims);
    return count;
}

int rv_transform_remove(rv_graph *graph, int32_t task, rv_remove_mode mode)
{
    GArray *one = g_array_new(FALSE, FALSE, sizeof(int32_t));
    g_array_append_val(one, task);
    int count = rv_transform_remove_many(graph, one, mode);
    g_array_unref(one);
    return count;
}

/* ---- insertion ------------------------------------------------------ */

/* Put `task` right after `after` in their resource's order. */
static void splice_after(rv_graph *graph, int32_t after, int32_t task)
{
    const rv_task *anchor = &g_array_index(graph->tasks, rv_task, after);
    rv_edge_kind kind = (anchor->flags & RV_TASK_FLAG_GPU) ? RV_EDGE_STREAM : RV_EDGE_THREAD;
    int32_t next = rv_graph_resource_next(graph, after);
    if (next >= 0) {
        for (guint e = 0; e < graph->edges->len; e++) {
            rv_edge *edge = &g_array_index(graph->edges, rv_edge, e);
            if (edge->from == after && edge->to == next && is_order_kind(edge->kind)) edge->from = task;
        }
    }
    rv_graph_add_edge(graph, after, task, kind, FALSE);
}

static int32_t insert_launch(rv_graph *graph, int32_t after, const rv_task *gpu_task)
{
    rv_task call = *gpu_task;
    const rv_task *anchor = rv_graph_task(graph, after);
    call.kind = RV_TASK_CPU;
    call.flags = RV_TASK_FLAG_INSERTED;
    call.resource = anchor->resource;
    call.name = rv_strings_intern(graph->strings, "cudaLaunchKernel");
    call.duration_ns = rv_graph_typical_launch_ns(graph);
    call.host_overhead_ns = 0; /* issued from C++ (a library or the framework): no Python before it */
    call.recorded_start_ns = anchor->recorded_start_ns;
    call.correlation = -1;
    int32_t id = rv_graph_add_task(graph, &call);
    splice_after(graph, after, id);
    return id;
}

int32_t rv_transform_insert(rv_graph *graph, const rv_insert_spec *spec, GError **error)
{
    int32_t count = rv_graph_task_count(graph);
    if (spec->task.resource < 0 || spec->task.resource >= (int32_t)graph->resources->len ||
        spec->after >= count || spec->launch_after >= count) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "insert: resource or anchor task out of range");
        return -1;
    }
    /* an anchor elsewhere would splice the task into another resource's order */
    if (spec->after >= 0 && rv_graph_task(graph, spec->after)->resource != spec->task.resource) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "insert: `after` task %d is on another resource", spec->after);
        return -1;
    }
    if (spec->launch_after >= 0 &&
        g_array_index(graph->resources, rv_resource, rv_graph_task(graph, spec->launch_after)->resource).kind !=
            RV_RES_CPU_THREAD) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "insert: `launch_after` task %d is not on a CPU thread",
                    spec->launch_after);
        return -1;
    }
    rv_task task = spec->task;
    const rv_resource *resource = &g_array_index(graph->resources, rv_resource, task.resource);
    task.flags = (uint16_t)((task.flags & ~RV_TASK_FLAG_REMOVED) | RV_TASK_FLAG_INSERTED);
    if (resource->kind == RV_RES_GPU_STREAM) task.flags |= RV_TASK_FLAG_GPU;
    if (task.recorded_start_ns == 0 && spec->after >= 0)
        task.recorded_start_ns = rv_graph_task(graph, spec->after)->recorded_start_ns;
    int32_t id = rv_graph_add_task(graph, &task);
    if (spec->after >= 0) splice_after(graph, spec->after, id);
    if ((task.flags & RV_TASK_FLAG_GPU) && spec->launch_after >= 0) {
        int32_t launch = insert_launch(graph, spec->launch_after, &task);
        rv_graph_add_edge(graph, launch, id, RV_EDGE_LAUNCH, FALSE);
    }
    return id;
}

void rv_transform_add_edge(rv_graph *graph, int32_t from, int32_t to)
{
    rv_graph_add_edge(graph, from, to, RV_EDGE_PLUGIN, FALSE);
}

int32_t rv_transform_add_channel(rv_graph *graph, const char *name)
{
    for (guint r = 0; r < graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind == RV_RES_CHANNEL && strcmp(rv_strings_get(graph->strings, resource->name), name) == 0)
            return (int32_t)r;
    }
    return rv_graph_add_resource(graph, RV_RES_CHANNEL, -1, -1, name);
}

static gint compare_step_keys(gconstpointer a, gconstpointer b)
{
    int x = GPOINTER_TO_INT(a), y = GPOINTER_TO_INT(b);
    return x < y ? -1 : x > y;
}

GList *rv_tasks_by_step_keys(GHashTable *groups)
{
    return g_list_sort(g_hash_table_get_keys(groups), compare_step_keys);
}

gint rv_task_compare_recorded(gconstpointer a, gconstpointer b, gpointer graph)
{
    const rv_task *tasks = (const rv_task *)((const rv_graph *)graph)->tasks->data;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int64_t tx = tasks[x].recorded_start_ns, ty = tasks[y].recorded_start_ns;
    if (tx != ty) return tx < ty ? -1 : 1;
    return x < y ? -1 : x > y;
}

void rv_tasks_sort_recorded(const rv_graph *graph, GArray *tasks)
{
    g_array_sort_with_data(tasks, rv_task_compare_recorded, (gpointer)graph);
}

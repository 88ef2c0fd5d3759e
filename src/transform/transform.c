/*
 * transform.c - the transformation primitives (see transform.h).
 *
 * Questions about a task's neighbours go through the graph's edge index
 * (src/graph/index.h), so each costs the task's own degree and a plugin
 * that splices or removes thousands of tasks stays linear in the graph.
 * Removal reconnects every live predecessor of a removed region to every
 * live successor; the sets on either side of each removed task are worked
 * out once per batch and shared by the removed tasks next to it.
 */
#include "reverie/transform.h"
#include "reverie/checked.h"
#include "reverie/stats.h"
#include "reverie/error.h"
#include "../graph/index.h"
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

static const rv_edge *edge_at(const rv_graph *graph, int32_t edge)
{
    return &g_array_index(graph->edges, rv_edge, edge);
}

/* Durations changed: the typical launch must be worked out again. */
static void durations_changed(rv_graph *graph)
{
    if (graph->index) graph->index->launch_ns = -1;
}

void rv_transform_invalidate(rv_graph *graph)
{
    rv_graph_index_reset(graph);
}

/* ns * factor within 0 .. RV_MAX_DURATION_NS: a plugin is meant to check
 * its factor first (rv_tasks_check_scale), but llround of a value beyond
 * int64 is undefined, so the primitive clamps rather than trusts. */
static int64_t scaled_ns(int64_t ns, double factor)
{
    double scaled = (double)ns * factor;
    if (!(scaled > 0)) return 0; /* also NaN */
    return scaled >= (double)RV_MAX_DURATION_NS ? RV_MAX_DURATION_NS : (int64_t)llround(scaled);
}

void rv_transform_scale(rv_graph *graph, const GArray *tasks, double factor)
{
    for (guint i = 0; i < tasks->len; i++) {
        rv_task *task = rv_graph_task(graph, g_array_index(tasks, int32_t, i));
        task->duration_ns = scaled_ns(task->duration_ns, factor);
    }
    durations_changed(graph);
}

void rv_transform_scale_host_overhead(rv_graph *graph, const GArray *tasks, double factor)
{
    for (guint i = 0; i < tasks->len; i++) {
        rv_task *task = rv_graph_task(graph, g_array_index(tasks, int32_t, i));
        task->host_overhead_ns = scaled_ns(task->host_overhead_ns, factor);
    }
}

void rv_transform_set_duration(rv_graph *graph, int32_t task, int64_t duration_ns)
{
    rv_graph_task(graph, task)->duration_ns = MAX(0, duration_ns);
    durations_changed(graph);
}

/* The first live task on the same resource joined to `task` by an order
 * edge (out-edges when forward, in-edges otherwise), in edge order. */
static int32_t order_neighbour(const rv_graph *graph, int32_t task, gboolean forward)
{
    if (task < 0 || task >= rv_graph_task_count(graph)) return -1;
    const rv_graph_index *index = rv_graph_index_sync(graph);
    int32_t resource = g_array_index(graph->tasks, rv_task, task).resource;
    for (int32_t e = rv_graph_index_first(index, task, forward); e >= 0; e = rv_graph_index_next(index, e, forward)) {
        const rv_edge *edge = edge_at(graph, e);
        if (!is_order_kind(edge->kind)) continue;
        int32_t there = forward ? edge->to : edge->from;
        if (!removed(graph, there) && g_array_index(graph->tasks, rv_task, there).resource == resource)
            return there;
    }
    return -1;
}

int32_t rv_graph_resource_previous(const rv_graph *graph, int32_t task) { return order_neighbour(graph, task, FALSE); }
int32_t rv_graph_resource_next(const rv_graph *graph, int32_t task) { return order_neighbour(graph, task, TRUE); }

int32_t rv_graph_launch_of(const rv_graph *graph, int32_t task)
{
    if (task < 0 || task >= rv_graph_task_count(graph)) return -1;
    const rv_graph_index *index = rv_graph_index_sync(graph);
    for (int32_t e = rv_graph_index_first(index, task, FALSE); e >= 0; e = rv_graph_index_next(index, e, FALSE))
        if (edge_at(graph, e)->kind == RV_EDGE_LAUNCH) return edge_at(graph, e)->from;
    return -1;
}

int64_t rv_graph_typical_launch_ns(const rv_graph *graph)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint e = 0; e < graph->edges->len; e++) {
        const rv_edge *edge = edge_at(graph, (int32_t)e);
        if (edge->kind != RV_EDGE_LAUNCH) continue;
        const rv_task *call = &g_array_index(graph->tasks, rv_task, edge->from);
        if (call->kind == RV_TASK_CPU && !(call->flags & RV_TASK_FLAG_BLOCKING))
            g_array_append_val(durations, call->duration_ns);
    }
    int64_t typical = rv_median_int64_select(durations, 5000); /* a CUDA launch costs a few microseconds */
    g_array_unref(durations);
    return typical;
}

/* The typical launch for an inserted call, computed once and kept until a
 * duration or a launch edge changes it (index.c says which do). */
static int64_t launch_cost(rv_graph *graph)
{
    rv_graph_index *index = rv_graph_index_sync(graph);
    if (index->launch_ns < 0) index->launch_ns = rv_graph_typical_launch_ns(graph);
    return index->launch_ns;
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

/* A live task reached through removed ones, and the kind of the last hop. */
typedef struct {
    int32_t task;
    int32_t kind;
} reached;

/*
 * For each removed task met in one batch, and each direction, the live
 * tasks it reaches through removed tasks only: a list in `pool` (a count,
 * then the entries), found by the index's marks (0: backward, 1: forward;
 * value = the list's offset, IN_PROGRESS while its neighbours are worked
 * out).  A removed task's list is the union of its neighbours': live ones
 * themselves, removed ones their own list - so a chain of removed tasks is
 * walked once, not once per task in it.
 */
typedef struct {
    rv_graph *graph;
    rv_graph_index *index;
    GArray *pool;   /* reached */
    GArray *stack;  /* int32 */
} reach_sets;

enum { UNVISITED = -1, IN_PROGRESS = -2 };

static void add_reached(reach_sets *sets, int32_t task, int32_t kind)
{
    rv_task_marks *seen = &sets->index->marks[2];
    if (rv_task_marks_has(seen, task)) return;
    rv_task_marks_set(seen, task, 0);
    reached entry = { task, kind };
    g_array_append_val(sets->pool, entry);
}

/* The list of a removed task whose removed neighbours have theirs.  When
 * it equals one of theirs (a removed chain: the same live tasks on either
 * side), that list is shared instead of copied, so reconnect() can tell
 * the tasks of a chain apart from new work by their lists alone. */
static int32_t collect(reach_sets *sets, int32_t task, gboolean forward)
{
    const rv_task_marks *memo = &sets->index->marks[forward ? 1 : 0];
    rv_task_marks_begin(&sets->index->marks[2], rv_graph_task_count(sets->graph));
    int32_t header = (int32_t)sets->pool->len, largest = -1, largest_length = -1;
    reached count = { 0, 0 };
    g_array_append_val(sets->pool, count);
    for (int32_t e = rv_graph_index_first(sets->index, task, forward); e >= 0;
         e = rv_graph_index_next(sets->index, e, forward)) {
        const rv_edge *edge = edge_at(sets->graph, e);
        int32_t other = forward ? edge->to : edge->from;
        if (!removed(sets->graph, other)) { add_reached(sets, other, edge->kind); continue; }
        int32_t list = rv_task_marks_get(memo, other, UNVISITED);
        if (list < 0) continue; /* on a cycle of removed tasks */
        int32_t length = g_array_index(sets->pool, reached, list).task;
        if (length > largest_length) { largest = list; largest_length = length; }
        for (int32_t i = 1; i <= length; i++) {
            reached entry = g_array_index(sets->pool, reached, list + i);
            add_reached(sets, entry.task, entry.kind);
        }
    }
    int32_t length = (int32_t)sets->pool->len - header - 1;
    if (largest >= 0 && length == largest_length) { /* the union is that list: share it */
        g_array_set_size(sets->pool, (guint)header);
        return largest;
    }
    g_array_index(sets->pool, reached, header).task = length;
    return header;
}

/* The offset in the pool of `start`'s list (a removed task), worked out
 * depth first without recursion: chains of removed tasks can be long. */
static int32_t reach_set(reach_sets *sets, int32_t start, gboolean forward)
{
    rv_task_marks *memo = &sets->index->marks[forward ? 1 : 0];
    g_array_set_size(sets->stack, 0);
    g_array_append_val(sets->stack, start);
    while (sets->stack->len > 0) {
        int32_t task = g_array_index(sets->stack, int32_t, sets->stack->len - 1);
        int32_t state = rv_task_marks_get(memo, task, UNVISITED);
        if (state >= 0) { g_array_set_size(sets->stack, sets->stack->len - 1); continue; }
        if (state == IN_PROGRESS) {
            g_array_set_size(sets->stack, sets->stack->len - 1);
            rv_task_marks_set(memo, task, collect(sets, task, forward));
            continue;
        }
        rv_task_marks_set(memo, task, IN_PROGRESS);
        for (int32_t e = rv_graph_index_first(sets->index, task, forward); e >= 0;
             e = rv_graph_index_next(sets->index, e, forward)) {
            int32_t other = forward ? edge_at(sets->graph, e)->to : edge_at(sets->graph, e)->from;
            if (removed(sets->graph, other) && !rv_task_marks_has(memo, other)) g_array_append_val(sets->stack, other);
        }
    }
    return rv_task_marks_get(memo, start, UNVISITED);
}

/* Join every live task before `task` to every live task after it, unless
 * a task with the same two lists did already. */
static void reconnect(reach_sets *sets, int32_t task, GHashTable *added, GHashTable *joined)
{
    rv_graph *graph = sets->graph;
    int32_t before = reach_set(sets, task, FALSE), after = reach_set(sets, task, TRUE);
    guint64 lists = ((guint64)(guint32)before << 32) | (guint32)after;
    if (g_hash_table_contains(joined, &lists)) return;
    g_hash_table_add(joined, g_memdup2(&lists, sizeof lists));
    int32_t before_count = g_array_index(sets->pool, reached, before).task;
    int32_t after_count = g_array_index(sets->pool, reached, after).task;
    for (int32_t i = 1; i <= before_count; i++) {
        int32_t from = g_array_index(sets->pool, reached, before + i).task;
        for (int32_t j = 1; j <= after_count; j++) {
            reached next = g_array_index(sets->pool, reached, after + j);
            int32_t to = next.task, kind = next.kind;
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
}

/* The live task after `task` in its resource's order, walking on through
 * removed ones (earlier in the same batch), or -1. */
static int32_t live_next(const rv_graph *graph, const rv_graph_index *index, int32_t task)
{
    int32_t resource = g_array_index(graph->tasks, rv_task, task).resource;
    for (int32_t current = task, hops = 0; hops < rv_graph_task_count(graph); hops++) {
        int32_t removed_next = -1;
        for (int32_t e = rv_graph_index_first(index, current, TRUE); e >= 0; e = rv_graph_index_next(index, e, TRUE)) {
            const rv_edge *edge = edge_at(graph, e);
            if (!is_order_kind(edge->kind) ||
                g_array_index(graph->tasks, rv_task, edge->to).resource != resource) continue;
            if (!removed(graph, edge->to)) return edge->to;
            removed_next = edge->to;
        }
        if (removed_next < 0) return -1;
        current = removed_next;
    }
    return -1; /* a cycle of removed tasks */
}

static void mark_removed(rv_graph *graph, const rv_graph_index *index, int32_t task, rv_remove_mode mode, int *count)
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
    reach_sets sets = { graph, rv_graph_index_sync(graph), g_array_new(FALSE, FALSE, sizeof(reached)),
                        g_array_new(FALSE, FALSE, sizeof(int32_t)) };
    for (guint i = 0; i < victims->len; i++)
        mark_removed(graph, sets.index, g_array_index(victims, int32_t, i), mode, &count);
    rv_task_marks_begin(&sets.index->marks[0], rv_graph_task_count(graph));
    rv_task_marks_begin(&sets.index->marks[1], rv_graph_task_count(graph));
    GHashTable *added = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    GHashTable *joined = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint i = 0; i < victims->len; i++) reconnect(&sets, g_array_index(victims, int32_t, i), added, joined);
    g_hash_table_destroy(added);
    g_hash_table_destroy(joined);
    g_array_unref(sets.pool);
    g_array_unref(sets.stack);
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
        const rv_graph_index *index = rv_graph_index_sync(graph);
        for (int32_t e = rv_graph_index_first(index, after, TRUE), following; e >= 0; e = following) {
            following = rv_graph_index_next(index, e, TRUE); /* before e moves to another list */
            const rv_edge *edge = edge_at(graph, e);
            if (edge->to == next && is_order_kind(edge->kind)) rv_graph_index_set_edge_source(graph, e, task);
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
    call.duration_ns = launch_cost(graph);
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

void rv_predecessor_rows(const rv_graph *graph, int32_t **first_out, int32_t **from_out)
{
    int32_t n = rv_graph_task_count(graph);
    const rv_edge *edges = (const rv_edge *)graph->edges->data;
    int32_t *first = g_new0(int32_t, n + 1);
    for (guint e = 0; e < graph->edges->len; e++) first[edges[e].to + 1]++;
    for (int32_t t = 0; t < n; t++) first[t + 1] += first[t];
    int32_t *from = g_new(int32_t, graph->edges->len + 1);
    int32_t *fill = g_memdup2(first, sizeof(int32_t) * (gsize)(n + 1));
    for (guint e = 0; e < graph->edges->len; e++) from[fill[edges[e].to]++] = edges[e].from;
    g_free(fill);
    *first_out = first;
    *from_out = from;
}

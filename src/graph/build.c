/*
 * build.c - turn a trace's events into resources, tasks and steps, then run
 * the edge and timing passes.
 *
 * Tasks are made from runtime calls (CPU side) and kernels, copies and sets
 * (GPU side).  Operators and annotations are not tasks; they become tags
 * (tags.c) and step boundaries.  Each step gets two zero-length marker tasks
 * on its annotation's thread so that the simulator can say when the
 * annotation would have ended.
 */
#include "streams.h"
#include "reverie/job.h"
#include <string.h>

gboolean builder_is_gpu_task(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_GPU) != 0;
}

int32_t builder_add_task(builder *b, const rv_task *task, int32_t event_index)
{
    int32_t id = rv_graph_add_task(b->graph, task);
    int32_t none = -1;
    comm_scope no_comm = { -1, -1 };
    g_array_append_val(b->task_event, event_index);
    g_array_append_val(b->task_launch, none);
    g_array_append_val(b->task_comm, no_comm);
    g_array_append_val(builder_resource_tasks(b, task->resource), id);
    return id;
}

static int32_t add_resource(builder *b, GHashTable *index, rv_resource_kind kind, int64_t process,
                            int64_t thread, const char *label)
{
    char *key = g_strdup_printf("%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, process, thread);
    gpointer found = g_hash_table_lookup(index, key);
    if (found != NULL) {
        g_free(key);
        return GPOINTER_TO_INT(found) - 1;
    }
    char *name = g_strdup_printf("%s %s", label, key);
    int32_t id = rv_graph_add_resource(b->graph, kind, process, thread, name);
    g_free(name);
    g_hash_table_insert(index, key, GINT_TO_POINTER(id + 1));
    g_ptr_array_add(b->resource_tasks, g_array_new(FALSE, FALSE, sizeof(int32_t)));
    return id;
}

int32_t builder_cpu_resource(builder *b, int64_t pid, int64_t tid)
{
    return add_resource(b, b->cpu_resource, RV_RES_CPU_THREAD, pid, tid, "thread");
}

static int32_t gpu_resource(builder *b, int64_t device, int64_t stream)
{
    return add_resource(b, b->gpu_resource, RV_RES_GPU_STREAM, device, stream, "gpu stream");
}

static rv_task task_from_event(const rv_event *event, int32_t resource, rv_task_kind kind)
{
    rv_task task = { 0 };
    task.duration_ns = event->dur_ns;
    task.recorded_start_ns = event->ts_ns;
    task.correlation = event->correlation;
    task.bytes = event->bytes > 0 ? event->bytes : 0;
    task.resource = resource;
    task.name = event->name;
    task.input_dims = -1;
    task.step = -1;
    task.kind = (uint8_t)kind;
    task.phase = RV_PHASE_OTHER;
    return task;
}

static gboolean name_has(const builder *b, int32_t name, const char *needle)
{
    return strstr(rv_strings_get(b->graph->strings, name), needle) != NULL;
}

static rv_task_kind gpu_kind(const builder *b, const rv_event *event)
{
    if (event->kind == RV_EV_MEMCPY) return RV_TASK_MEMCPY;
    if (event->kind == RV_EV_MEMSET) return RV_TASK_MEMSET;
    if (name_has(b, event->name, "nccl") || name_has(b, event->name, "rccl"))
        return RV_TASK_COMM;
    return RV_TASK_KERNEL;
}

static void add_gpu_tasks(builder *b)
{
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        if (event->kind != RV_EV_KERNEL && event->kind != RV_EV_MEMCPY && event->kind != RV_EV_MEMSET)
            continue;
        int32_t resource = gpu_resource(b, event->device, event->stream);
        rv_task task = task_from_event(event, resource, gpu_kind(b, event));
        task.flags = RV_TASK_FLAG_GPU;
        int32_t id = builder_add_task(b, &task, (int32_t)i);
        if (event->correlation >= 0 &&
            !g_hash_table_contains(b->gpu_by_correlation, &event->correlation))
            g_hash_table_insert(b->gpu_by_correlation, g_memdup2(&event->correlation, 8),
                                GINT_TO_POINTER(id + 1));
    }
}

static gint compare_by_start(gconstpointer left, gconstpointer right, gpointer data)
{
    const rv_graph *graph = data;
    const rv_task *a = &g_array_index(graph->tasks, rv_task, *(const int32_t *)left);
    const rv_task *c = &g_array_index(graph->tasks, rv_task, *(const int32_t *)right);
    if (a->recorded_start_ns != c->recorded_start_ns)
        return a->recorded_start_ns < c->recorded_start_ns ? -1 : 1;
    /* At one instant: a step's end marker, then its begin marker, then work;
     * longer (enclosing) calls before the calls they contain. */
    int rank_a = (a->flags & RV_TASK_FLAG_STEP_END) ? 0 : (a->flags & RV_TASK_FLAG_STEP_BEGIN) ? 1 : 2;
    int rank_c = (c->flags & RV_TASK_FLAG_STEP_END) ? 0 : (c->flags & RV_TASK_FLAG_STEP_BEGIN) ? 1 : 2;
    if (rank_a != rank_c) return rank_a - rank_c;
    if (a->duration_ns != c->duration_ns) return a->duration_ns > c->duration_ns ? -1 : 1;
    return *(const int32_t *)left - *(const int32_t *)right;
}

void builder_sort_resource(builder *b, int32_t resource)
{
    GArray *tasks = builder_resource_tasks(b, resource);
    g_array_sort_with_data(tasks, compare_by_start, b->graph);
}

/*
 * Runtime calls that start inside another call on the same thread (a driver
 * call under a runtime call) are not separate work: the thread runs one task
 * at a time.  They are dropped, and their correlation maps to the outer call
 * so that what they launched still gets a launch edge.
 */
static void add_cpu_tasks(builder *b)
{
    GArray *events = b->trace->events;
    GArray *order = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        if (event->kind != RV_EV_RUNTIME) continue;
        int32_t resource = builder_cpu_resource(b, event->pid, event->tid);
        rv_task task = task_from_event(event, resource, RV_TASK_CPU);
        builder_add_task(b, &task, (int32_t)i);
    }
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind != RV_RES_CPU_THREAD) continue;
        builder_sort_resource(b, (int32_t)r);
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        g_array_set_size(order, 0);
        int32_t outer = -1;
        for (guint k = 0; k < tasks->len; k++) {
            int32_t id = g_array_index(tasks, int32_t, k);
            rv_task *task = rv_graph_task(b->graph, id);
            if (outer >= 0 && task->recorded_start_ns < task_recorded_end(rv_graph_task(b->graph, outer))) {
                task->flags |= RV_TASK_FLAG_REMOVED;
                b->graph->build_stats.nested_runtime_calls++;
            } else {
                outer = id;
                g_array_append_val(order, id);
            }
            if (task->correlation >= 0 && !g_hash_table_contains(b->cpu_by_correlation, &task->correlation))
                g_hash_table_insert(b->cpu_by_correlation, g_memdup2(&task->correlation, 8),
                                    GINT_TO_POINTER(outer + 1));
        }
        g_array_set_size(tasks, 0);
        g_array_append_vals(tasks, order->data, order->len);
    }
    g_array_unref(order);
}

/* ---- steps ---------------------------------------------------------- */

static gboolean is_step_annotation(const builder *b, const rv_event *event)
{
    if (event->kind != RV_EV_USER_ANNOTATION && event->kind != RV_EV_CPU_OP) return FALSE;
    return g_str_has_prefix(rv_strings_get(b->graph->strings, event->name), "ProfilerStep#");
}

static gint compare_events_by_start(gconstpointer left, gconstpointer right)
{
    const rv_event *a = *(rv_event *const *)left, *c = *(rv_event *const *)right;
    if (a->ts_ns != c->ts_ns) return a->ts_ns < c->ts_ns ? -1 : 1;
    return (int)a->file_index - (int)c->file_index;
}

static int32_t add_marker(builder *b, int32_t resource, int32_t name, int64_t at_ns, uint16_t flag)
{
    rv_task marker = { 0 };
    marker.recorded_start_ns = at_ns;
    marker.resource = resource;
    marker.name = name;
    marker.input_dims = -1;
    marker.correlation = -1;
    marker.kind = RV_TASK_MARKER;
    marker.phase = RV_PHASE_OTHER;
    marker.flags = flag;
    return builder_add_task(b, &marker, -1);
}

/* Runtime calls that carry a correlation, sorted by start: the candidates
 * for "GPU work launched inside a step". */
static GPtrArray *sorted_launch_calls(const builder *b)
{
    GPtrArray *calls = g_ptr_array_new();
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *call = &g_array_index(events, rv_event, i);
        if (call->kind == RV_EV_RUNTIME && call->correlation >= 0)
            g_ptr_array_add(calls, (gpointer)call);
    }
    g_ptr_array_sort(calls, compare_events_by_start);
    return calls;
}

/* The recorded end of a step: the later of its annotation's end and the end
 * of the last GPU task launched (by any thread of the process) inside it.
 * This is the rule tracestat.py applies; keep the two in step. */
static int64_t recorded_step_end(builder *b, const GPtrArray *calls, const rv_event *annotation)
{
    int64_t begin = annotation->ts_ns, end_of_annotation = begin + annotation->dur_ns;
    int64_t end = end_of_annotation;
    guint low = 0, high = calls->len;
    while (low < high) { /* first call starting at or after begin */
        guint middle = (low + high) / 2;
        const rv_event *call = g_ptr_array_index(calls, middle);
        if (call->ts_ns < begin) low = middle + 1; else high = middle;
    }
    for (guint i = low; i < calls->len; i++) {
        const rv_event *call = g_ptr_array_index(calls, i);
        if (call->ts_ns > end_of_annotation) break;
        if (call->pid != annotation->pid) continue;
        gpointer found = g_hash_table_lookup(b->gpu_by_correlation, &call->correlation);
        if (found == NULL) continue;
        const rv_task *gpu = rv_graph_task(b->graph, GPOINTER_TO_INT(found) - 1);
        end = MAX(end, task_recorded_end(gpu));
    }
    return end;
}

static void add_steps(builder *b)
{
    GPtrArray *annotations = g_ptr_array_new();
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        if (is_step_annotation(b, event)) g_ptr_array_add(annotations, (gpointer)event);
    }
    g_ptr_array_sort(annotations, compare_events_by_start);
    GPtrArray *calls = sorted_launch_calls(b);
    const rv_event *previous = NULL;
    for (guint i = 0; i < annotations->len; i++) {
        const rv_event *event = g_ptr_array_index(annotations, i);
        if (previous && previous->ts_ns == event->ts_ns && previous->dur_ns == event->dur_ns &&
            previous->name == event->name)
            continue; /* the same annotation recorded twice */
        previous = event;
        int32_t resource = builder_cpu_resource(b, event->pid, event->tid);
        rv_step step = { event->name, event->ts_ns, recorded_step_end(b, calls, event), -1, -1 };
        step.begin_marker = add_marker(b, resource, event->name, event->ts_ns, RV_TASK_FLAG_STEP_BEGIN);
        step.end_marker = add_marker(b, resource, event->name, event->ts_ns + event->dur_ns,
                                     RV_TASK_FLAG_STEP_END);
        rv_graph_task(b->graph, step.begin_marker)->step = (int32_t)b->graph->steps->len;
        rv_graph_task(b->graph, step.end_marker)->step = (int32_t)b->graph->steps->len;
        g_array_append_val(b->graph->steps, step);
        g_array_append_val(b->step_pids, event->pid);
    }
    g_ptr_array_free(annotations, TRUE);
    g_ptr_array_free(calls, TRUE);
}

/* Data loading in the training thread is CPU time inside an
 * "enumerate(DataLoader)#" annotation; it becomes one task so that the
 * dataloader optimization has something to shrink.  Its length stops at the
 * first runtime call inside (pinned copies are not loading). */
static void add_dataload_tasks(builder *b)
{
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *event = &g_array_index(events, rv_event, i);
        if ((event->kind != RV_EV_USER_ANNOTATION && event->kind != RV_EV_CPU_OP) ||
            !g_str_has_prefix(rv_strings_get(b->graph->strings, event->name), "enumerate(DataLoader)"))
            continue;
        int32_t resource = builder_cpu_resource(b, event->pid, event->tid);
        int64_t end = event->ts_ns + event->dur_ns;
        GArray *tasks = builder_resource_tasks(b, resource);
        for (guint k = 0; k < tasks->len; k++) {
            const rv_task *task = rv_graph_task(b->graph, g_array_index(tasks, int32_t, k));
            if (task->kind == RV_TASK_CPU && task->recorded_start_ns >= event->ts_ns &&
                task->recorded_start_ns < end)
                end = task->recorded_start_ns;
        }
        rv_task task = task_from_event(event, resource, RV_TASK_DATALOAD);
        task.duration_ns = end - event->ts_ns;
        task.correlation = -1;
        task.phase = RV_PHASE_DATALOAD;
        builder_add_task(b, &task, (int32_t)i);
    }
}

/* ---- launch edges --------------------------------------------------- */

static void add_launch_edges(builder *b)
{
    int32_t count = rv_graph_task_count(b->graph);
    for (int32_t id = 0; id < count; id++) {
        rv_task *task = rv_graph_task(b->graph, id);
        if (!builder_is_gpu_task(task)) continue;
        gpointer found = task->correlation >= 0 ? g_hash_table_lookup(b->cpu_by_correlation, &task->correlation) : NULL;
        if (found == NULL) {
            b->graph->build_stats.unmatched_gpu_tasks++;
            continue;
        }
        int32_t launch = GPOINTER_TO_INT(found) - 1;
        g_array_index(b->task_launch, int32_t, id) = launch;
        /* From the call's end: the simulator adds the stream's launch latency. */
        rv_graph_add_edge(b->graph, launch, id, RV_EDGE_LAUNCH, FALSE);
    }
}

static void copy_metadata(builder *b)
{
    rv_graph *graph = b->graph;
    const rv_trace *trace = b->trace;
    for (guint i = 0; i < trace->device_names->len; i++)
        g_ptr_array_add(graph->device_names, g_strdup(g_ptr_array_index(trace->device_names, i)));
    graph->rank = trace->rank;
    graph->world_size = trace->world_size;
    graph->backend = g_strdup(trace->backend);
    graph->legacy_schema = trace->legacy_schema;
    graph->trace_stats = trace->stats;
    /* A trace is one rank of its job; job.c joins several. */
    rv_rank rank = { trace->rank >= 0 ? trace->rank : 0, trace->world_size, 0,
                     rv_strings_intern(graph->strings, trace->source ? trace->source : ""), 0 };
    g_array_append_val(graph->ranks, rank);
}

static void builder_init(builder *b, const rv_trace *trace)
{
    memset(b, 0, sizeof *b);
    b->trace = trace;
    b->graph = rv_graph_new(trace->strings, trace->source);
    b->resource_tasks = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    b->task_event = g_array_new(FALSE, FALSE, sizeof(int32_t));
    b->task_launch = g_array_new(FALSE, FALSE, sizeof(int32_t));
    b->cpu_by_correlation = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    b->gpu_by_correlation = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    b->cpu_resource = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    b->gpu_resource = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    b->step_pids = g_array_new(FALSE, FALSE, sizeof(int64_t));
    b->task_comm = g_array_new(FALSE, FALSE, sizeof(comm_scope));
    b->return_samples = g_array_new(FALSE, FALSE, sizeof(int64_t));
}

static void builder_clear(builder *b)
{
    g_ptr_array_free(b->resource_tasks, TRUE);
    g_array_unref(b->task_event);
    g_array_unref(b->task_launch);
    g_hash_table_destroy(b->cpu_by_correlation);
    g_hash_table_destroy(b->gpu_by_correlation);
    g_hash_table_destroy(b->cpu_resource);
    g_hash_table_destroy(b->gpu_resource);
    g_array_unref(b->step_pids);
    g_array_unref(b->task_comm);
    g_array_unref(b->return_samples);
}

static void find_origin(builder *b)
{
    b->origin_ns = G_MAXINT64;
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        const rv_task *task = rv_graph_task(b->graph, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED))
            b->origin_ns = MIN(b->origin_ns, task->recorded_start_ns);
    }
    if (b->origin_ns == G_MAXINT64) b->origin_ns = 0;
}

static void sort_resources(builder *b)
{
    for (guint r = 0; r < b->graph->resources->len; r++) builder_sort_resource(b, (int32_t)r);
}

/*
 * The passes, in the order their inputs require: launch edges need both
 * sides' tasks; the clock correction needs launches and the sync pairs
 * (found from CPU-side order alone); steps and every edge that compares
 * times need corrected GPU times; timing needs every edge.
 */
static void run_passes(builder *b)
{
    add_gpu_tasks(b);
    add_cpu_tasks(b);
    sort_resources(b);
    add_launch_edges(b);
    rv_build_launches(b);
    stream_index streams;
    stream_index_init(&streams, b);
    GArray *sync_pairs = rv_sync_pairs(b, &streams);
    rv_build_clock(b, sync_pairs);
    /* GPU tasks without a launch are indexed by their own (now corrected) start. */
    stream_index_clear(&streams);
    stream_index_init(&streams, b);
    add_steps(b);
    add_dataload_tasks(b);
    sort_resources(b);
    find_origin(b);
    b->graph->whole_trace_step = b->graph->steps->len == 0;
    rv_build_tags(b);
    rv_build_collectives(b);
    rv_build_sync_edges(b, sync_pairs, &streams);
    rv_build_cross_stream_edges(b, &streams);
    g_array_unref(sync_pairs);
    stream_index_clear(&streams);
    rv_build_inter_thread_edges(b);
    rv_build_thread_origins(b);
    rv_build_order_edges(b);
    rv_build_timing(b);
    rv_build_profiler_cost(b);
    rv_build_memory(b);
}

/* The id of `id`'s text in `canonical`, interned on first use. */
static int32_t canonical_id(const rv_strings *old, rv_strings *canonical, int32_t *map, int32_t id)
{
    if (id <= 0) return id; /* 0: "", -1: none (input_dims) */
    if (map[id] < 0) map[id] = rv_strings_intern(canonical, rv_strings_get(old, id));
    return map[id];
}

/*
 * Give the graph its own string table, numbered in order of first use by
 * resources, then tasks (name, operator, layer, Input Dims, arguments) in id order,
 * then steps, collectives' process groups and the ranks' sources.  The importer interns from several threads, so its ids
 * depend on timing; these do not, and a trace imported twice saves to the
 * same bytes.  Strings no task uses are left behind.
 */
static void renumber_strings(rv_graph *graph)
{
    rv_strings *old = graph->strings, *canonical = rv_strings_new();
    int32_t count = rv_strings_count(old);
    int32_t *map = g_new(int32_t, count);
    for (int32_t id = 0; id < count; id++) map[id] = -1;
    for (guint r = 0; r < graph->resources->len; r++) {
        rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        resource->name = canonical_id(old, canonical, map, resource->name);
    }
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        rv_task *task = rv_graph_task(graph, t);
        task->name = canonical_id(old, canonical, map, task->name);
        task->op = canonical_id(old, canonical, map, task->op);
        task->layer = canonical_id(old, canonical, map, task->layer);
        task->input_dims = canonical_id(old, canonical, map, task->input_dims);
        if ((guint)t < graph->op_args->len) {
            int32_t *op_args = &g_array_index(graph->op_args, int32_t, t);
            *op_args = canonical_id(old, canonical, map, *op_args);
        }
    }
    for (guint s = 0; s < graph->steps->len; s++) {
        rv_step *step = &g_array_index(graph->steps, rv_step, s);
        step->name = canonical_id(old, canonical, map, step->name);
    }
    for (guint c = 0; c < graph->collectives->len; c++) {
        rv_collective_info *info = &g_array_index(graph->collectives, rv_collective_info, c);
        info->group = canonical_id(old, canonical, map, info->group);
    }
    for (guint r = 0; r < graph->ranks->len; r++) {
        rv_rank *rank = &g_array_index(graph->ranks, rv_rank, r);
        rank->source = canonical_id(old, canonical, map, rank->source);
    }
    g_free(map);
    graph->strings = canonical;
    rv_strings_free(old);
}

rv_graph *rv_graph_build(const rv_trace *trace, GError **error)
{
    builder b;
    builder_init(&b, trace);
    copy_metadata(&b);
    run_passes(&b);
    rv_graph *graph = b.graph;
    builder_clear(&b);
    if (rv_graph_task_count(graph) == 0) {
        uint64_t foreign = trace->stats.unmodelled_backend;
        if (foreign > 0)
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: nothing to simulate: %" G_GUINT64_FORMAT " of its events belong to a device backend reverie "
                        "does not model (" RV_UNMODELLED_BACKENDS "), and it has no CUDA/ROCm runtime calls, GPU "
                        "work or step annotations",
                        trace->source, foreign);
        else
            g_set_error(error, RV_ERROR, RV_ERROR_INPUT,
                        "%s: the trace has no runtime calls, GPU work or step annotations to simulate",
                        trace->source);
        rv_graph_free(graph);
        return NULL;
    }
    rv_graph_split_peer_waits(graph);
    if (!rv_graph_check_acyclic(graph, error)) {
        rv_graph_free(graph);
        return NULL;
    }
    renumber_strings(graph);
    return graph;
}

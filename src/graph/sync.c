/*
 * sync.c - synchronization edges and the blocking-call split (edge rule 4).
 *
 * A blocking call's recorded duration includes its wait for the GPU.  The
 * call is split into a zero-length head (where the call was issued; launch
 * edges leave from here) and a SYNC tail that starts when both the thread
 * reached the call and the awaited GPU work ended, and lasts only the call's
 * own cost after the wait.  A faster GPU then shortens the wait, as it
 * should, while the recorded timeline is still reproduced exactly:
 *   tail start = max(S, E), tail duration = R - max(S, E)
 * for a call recorded over [S, R] that waited for GPU work ending at E.
 *
 * Which GPU work a call waited for comes from cuda_sync events where the
 * trace has them, otherwise from the call's kind and the stream order.
 */
#include "streams.h"
#include <string.h>

typedef enum { WAIT_NONE, WAIT_OWN, WAIT_STREAM, WAIT_EVENT, WAIT_DEVICE } wait_kind;

/* A call this long that returns within RELEASE_WINDOW_NS of some GPU task's
 * end was held up by it: a launch into a full queue, or an implicit
 * synchronization (cudaFree, pageable copies). */
#define IMPLICIT_WAIT_MIN_NS 50000
#define RELEASE_WINDOW_NS 50000

typedef struct {
    int64_t end_ns;
    int64_t launch_ns;
    int32_t task;
} gpu_ending;

static wait_kind wait_kind_of_name(const char *name)
{
    if (strstr(name, "DeviceSynchronize") || strstr(name, "CtxSynchronize")) return WAIT_DEVICE;
    if (strstr(name, "StreamSynchronize")) return WAIT_STREAM;
    if (strstr(name, "EventSynchronize")) return WAIT_EVENT;
    return WAIT_NONE;
}

static GHashTable *sync_events_by_correlation(const builder *b)
{
    GHashTable *table = g_hash_table_new(g_int64_hash, g_int64_equal);
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        rv_event *event = &g_array_index(events, rv_event, i);
        if (event->kind == RV_EV_CUDA_SYNC && event->correlation >= 0)
            g_hash_table_insert(table, &event->correlation, event);
    }
    return table;
}

static void add_candidate(GArray *awaited, const builder *b, int32_t task, int64_t call_end)
{
    if (task < 0) return;
    if (task_recorded_end(rv_graph_task(b->graph, task)) > call_end + RV_CAUSAL_TOLERANCE_NS) return;
    g_array_append_val(awaited, task);
}

/* Each stream's last launch before t, on one device (or all when device < 0). */
static void add_device_streams(GArray *awaited, const builder *b, const stream_index *index,
                               int64_t device, int64_t t, int64_t call_end)
{
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind != RV_RES_GPU_STREAM || (device >= 0 && resource->process != device)) continue;
        add_candidate(awaited, b, stream_last_launched_before(index, b, (int32_t)r, t), call_end);
    }
}

/* Without a stream named, the call waited for whichever stream's last launch
 * finished latest while the call was still blocked: the one that released it. */
static void add_releasing_stream(GArray *awaited, const builder *b, const stream_index *index,
                                 int64_t t, int64_t call_end)
{
    GArray *all = g_array_new(FALSE, FALSE, sizeof(int32_t));
    add_device_streams(all, b, index, -1, t, call_end);
    int32_t best = -1;
    for (guint i = 0; i < all->len; i++) {
        int32_t task = g_array_index(all, int32_t, i);
        if (best < 0 || task_recorded_end(rv_graph_task(b->graph, task)) >
                            task_recorded_end(rv_graph_task(b->graph, best)))
            best = task;
    }
    if (best >= 0) g_array_append_val(awaited, best);
    g_array_unref(all);
}

static void awaited_from_sync_event(GArray *awaited, const builder *b, const stream_index *index,
                                    const rv_event *sync, const rv_task *call)
{
    int64_t start = call->recorded_start_ns, end = task_recorded_end(call);
    if (sync->sync_kind == RV_SYNC_CONTEXT) {
        add_device_streams(awaited, b, index, sync->device, start, end);
    } else if (sync->sync_kind == RV_SYNC_STREAM) {
        int32_t resource = builder_find_gpu_resource(b, sync->device, sync->stream);
        if (resource >= 0) add_candidate(awaited, b, stream_last_launched_before(index, b, resource, start), end);
    } else if (sync->sync_kind == RV_SYNC_EVENT && sync->wait_on_record_correlation >= 0) {
        gpointer record = g_hash_table_lookup(b->cpu_by_correlation, &sync->wait_on_record_correlation);
        int32_t resource = builder_find_gpu_resource(b, sync->device, sync->wait_on_stream);
        if (record != NULL && resource >= 0) {
            int64_t recorded_at = rv_graph_task(b->graph, GPOINTER_TO_INT(record) - 1)->recorded_start_ns;
            add_candidate(awaited, b, stream_last_launched_before(index, b, resource, recorded_at), end);
        }
    }
}

static gint compare_gpu_endings(gconstpointer left, gconstpointer right)
{
    const gpu_ending *a = left, *c = right;
    return a->end_ns < c->end_ns ? -1 : a->end_ns > c->end_ns;
}

static GArray *gpu_tasks_by_end(const builder *b)
{
    GArray *endings = g_array_new(FALSE, FALSE, sizeof(gpu_ending));
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        const rv_task *task = rv_graph_task(b->graph, id);
        if (!builder_is_gpu_task(task)) continue;
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        gpu_ending e = { task_recorded_end(task),
                         launch >= 0 ? rv_graph_task(b->graph, launch)->recorded_start_ns : task->recorded_start_ns, id };
        g_array_append_val(endings, e);
    }
    g_array_sort(endings, compare_gpu_endings);
    return endings;
}

/* The GPU task, launched before the call began, whose end released it. */
static int32_t releasing_task(const GArray *endings, const rv_task *call)
{
    int64_t start = call->recorded_start_ns, end = task_recorded_end(call);
    guint low = 0, high = endings->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(endings, gpu_ending, middle).end_ns <= end) low = middle + 1;
        else high = middle;
    }
    for (guint i = low; i > 0; i--) {
        const gpu_ending *candidate = &g_array_index(endings, gpu_ending, i - 1);
        /* The call must have spent most of its time waiting for it. */
        if (candidate->end_ns - start < (end - start) / 2 || end - candidate->end_ns > RELEASE_WINDOW_NS) return -1;
        if (candidate->launch_ns < start) return candidate->task;
    }
    return -1;
}

static void find_awaited(GArray *awaited, builder *b, const stream_index *index, GHashTable *syncs,
                         const GArray *endings, int32_t id)
{
    const rv_task *call = rv_graph_task(b->graph, id);
    int64_t start = call->recorded_start_ns, end = task_recorded_end(call);
    const rv_event *sync = call->correlation >= 0 ? g_hash_table_lookup(syncs, &call->correlation) : NULL;
    if (sync != NULL && sync->sync_kind != RV_SYNC_STREAM_WAIT_EVENT) {
        b->graph->build_stats.sync_events_used++;
        awaited_from_sync_event(awaited, b, index, sync, call);
        return;
    }
    wait_kind kind = wait_kind_of_name(rv_strings_get(b->graph->strings, call->name));
    if (kind == WAIT_DEVICE) {
        add_device_streams(awaited, b, index, -1, start, end);
    } else if (kind == WAIT_STREAM || kind == WAIT_EVENT) {
        add_releasing_stream(awaited, b, index, start, end);
    } else if (call->correlation >= 0) {
        /* A copy that returns only after its GPU side finished is blocking.
         * (A tiny kernel finishing inside its own launch call is not: the
         * call did not wait for it.) */
        gpointer own = g_hash_table_lookup(b->gpu_by_correlation, &call->correlation);
        if (own != NULL) {
            int32_t gpu = GPOINTER_TO_INT(own) - 1;
            if (rv_graph_task(b->graph, gpu)->kind == RV_TASK_MEMCPY &&
                g_array_index(b->task_launch, int32_t, gpu) == id &&
                task_recorded_end(rv_graph_task(b->graph, gpu)) <= end)
                g_array_append_val(awaited, gpu);
        }
    }
    if (awaited->len == 0 && call->duration_ns >= IMPLICIT_WAIT_MIN_NS) {
        int32_t releaser = releasing_task(endings, call);
        if (releaser >= 0) {
            g_array_append_val(awaited, releaser);
            b->graph->build_stats.implicit_waits++;
        }
    }
}

/* Split call `id` into head and tail; returns the tail's id. */
static int32_t split_blocking_call(builder *b, int32_t id, int64_t awaited_end)
{
    rv_task *head = rv_graph_task(b->graph, id);
    rv_task tail = *head;
    int64_t call_end = task_recorded_end(head);
    tail.kind = RV_TASK_SYNC;
    tail.correlation = -1;
    tail.recorded_start_ns = MIN(MAX(head->recorded_start_ns, awaited_end), call_end);
    tail.duration_ns = call_end - tail.recorded_start_ns;
    head->duration_ns = 0;
    head->flags |= RV_TASK_FLAG_BLOCKING;
    int32_t tail_id = rv_graph_add_task(b->graph, &tail);
    /* Copied out first: append_val takes the address of its argument, and
     * the append may move the array it points into. */
    int32_t none = -1, event_index = g_array_index(b->task_event, int32_t, id);
    g_array_append_val(b->task_event, event_index);
    g_array_append_val(b->task_launch, none);
    b->graph->build_stats.blocking_calls_split++;
    return tail_id;
}

static void split_thread(builder *b, int32_t resource, const stream_index *index, GHashTable *syncs,
                         const GArray *endings)
{
    GArray *tasks = builder_resource_tasks(b, resource);
    GArray *rebuilt = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), tasks->len);
    GArray *awaited = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (guint k = 0; k < tasks->len; k++) {
        int32_t id = g_array_index(tasks, int32_t, k);
        g_array_append_val(rebuilt, id);
        if (rv_graph_task(b->graph, id)->kind != RV_TASK_CPU) continue;
        g_array_set_size(awaited, 0);
        find_awaited(awaited, b, index, syncs, endings, id);
        if (awaited->len == 0) continue;
        int64_t awaited_end = G_MININT64;
        for (guint i = 0; i < awaited->len; i++)
            awaited_end = MAX(awaited_end, task_recorded_end(rv_graph_task(b->graph, g_array_index(awaited, int32_t, i))));
        int32_t tail = split_blocking_call(b, id, awaited_end);
        g_array_append_val(rebuilt, tail);
        for (guint i = 0; i < awaited->len; i++)
            rv_graph_add_edge(b->graph, g_array_index(awaited, int32_t, i), tail, RV_EDGE_SYNC, FALSE);
    }
    g_array_set_size(tasks, 0);
    g_array_append_vals(tasks, rebuilt->data, rebuilt->len);
    g_array_unref(rebuilt);
    g_array_unref(awaited);
}

void rv_build_sync_edges(builder *b, const stream_index *index)
{
    GHashTable *syncs = sync_events_by_correlation(b);
    GArray *endings = gpu_tasks_by_end(b);
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind == RV_RES_CPU_THREAD) split_thread(b, (int32_t)r, index, syncs, endings);
    }
    g_array_unref(endings);
    g_hash_table_destroy(syncs);
}

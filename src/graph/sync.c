/*
 * sync.c - synchronization edges and the blocking-call split (edge rule 4).
 *
 * Which GPU work a blocking call waited for comes from what the API means,
 * read off the CPU side alone (the order of calls on one clock), never from
 * comparing CPU and GPU timestamps:
 *   - a cuda_sync record with the call's correlation names it exactly;
 *   - device (and context) synchronize, and the implicit device syncs of
 *     cudaFree / cudaFreeHost: the last task launched before the call on
 *     each stream of the device the thread last launched on;
 *   - stream synchronize: the last task launched before the call on the
 *     stream of the thread's last launch (PyTorch syncs the current stream,
 *     where the thread's copy or kernel just went);
 *   - event synchronize: the same stream, as of the thread's last event
 *     record when the trace has event-record calls, else as of the call;
 *   - copies, by CUDA's documented behaviour: a synchronous memcpy (any
 *     name without "Async", and hipMemcpyWithStream) waits for its own copy
 *     unless it is device to device; an async copy to pageable host memory
 *     waits for its own copy; an async copy from pageable host memory of at
 *     least RV_STAGED_COPY_BYTES is staged chunk by chunk and keeps the call
 *     busy until about its end, so it waits for its own copy too (it
 *     returns a little before the copy ends, so it does not bound the
 *     clock offset).
 * These pairs are found before the clock offset is known (rv_sync_pairs);
 * clock.c uses them to bound the offset, and the split below uses them once
 * the GPU times are corrected, dropping any pair the recording contradicts.
 *
 * The split: a blocking call's recorded duration includes its wait.  It
 * becomes a head (the call's own issuing cost: zero for a pure sync, the
 * trace's typical launch call for a copy; launch edges leave from here) and
 * a SYNC tail that starts when both the head ended and the awaited work
 * ended, lasting only what the call took after the wait:
 *   tail start = max(head end, E), tail duration = R - tail start
 * for a call recorded to return at R that waited for GPU work ending at E.
 * A faster GPU then shortens the wait, as it should.
 *
 * A pair the recording contradicts (the awaited task ended after the call
 * returned) is kept where the API is certain of it - the clocks are off
 * there, not the rule - and counted; a stream or event synchronize, whose
 * stream is a guess, is rerouted to the device's stream that fits.
 *
 * Release search (counted as tails_released): a call that returned long
 * after what its rule says it waited for was released by something else -
 * a later kernel, a stream the rule did not name: the GPU task that ended
 * just before it returned, launched before it began, is added.  Not for a
 * free, which does its own work after the device sync.
 *
 * Fallback (counted as implicit_waits): a long call that may wait for the
 * GPU by the API's documentation (a synchronize, copy, set or free), is not
 * a launch, matched no rule, and returned right after a GPU task ended, is
 * taken to have waited for it.  These compare clocks, so they run after
 * the offset correction and only where the rules leave time unexplained.
 */
#include "streams.h"
#include "reverie/stats.h"
#include <string.h>

/* A call this long that returns within RELEASE_WINDOW_NS of some GPU task's
 * end, having spent most of its time after that task began, waited for it. */
#define IMPLICIT_WAIT_MIN_NS 50000
#define RELEASE_WINDOW_NS 50000

typedef enum { WAIT_NONE, WAIT_DEVICE, WAIT_STREAM, WAIT_EVENT } wait_kind;

/* What a thread did last, as the API rules need it. */
typedef struct {
    int32_t launch_stream;  /* resource of the thread's last launched GPU task, or -1 */
    int64_t record_ns;      /* start of its last event-record call, or -1 */
    int32_t record_stream;  /* the thread's launch stream at that record */
} thread_state;

/* The runtime and driver calls that free memory after synchronizing the
 * device; the driver's are recorded with their version suffix
 * (cuMemFree_v2), which is not part of what the call does. */
static const char *const FREEING_CALLS[] = { "cudaFree", "cudaFreeHost", "hipFree", "hipHostFree", "hipFreeHost",
                                             "cuMemFree", "cuMemFreeHost", NULL };

/* The length of a call's name without a "_v<digits>" version suffix. */
static gsize unversioned_length(const char *name)
{
    const char *suffix = strrchr(name, '_');
    if (suffix == NULL || suffix[1] != 'v' || suffix[2] == '\0') return strlen(name);
    for (const char *c = suffix + 2; *c; c++)
        if (!g_ascii_isdigit(*c)) return strlen(name);
    return (gsize)(suffix - name);
}

gboolean rv_call_works_after_wait(const char *name)
{
    gsize length = unversioned_length(name);
    for (const char *const *call = FREEING_CALLS; *call; call++)
        if (strlen(*call) == length && strncmp(name, *call, length) == 0) return TRUE;
    return FALSE;
}

static wait_kind wait_kind_of_name(const char *name)
{
    if (strstr(name, "DeviceSynchronize") || strstr(name, "CtxSynchronize")) return WAIT_DEVICE;
    /* cudaFree / cudaFreeHost / hipFree synchronize the device implicitly. */
    if (rv_call_works_after_wait(name)) return WAIT_DEVICE;
    if (strstr(name, "StreamSynchronize")) return WAIT_STREAM;
    if (strstr(name, "EventSynchronize")) return WAIT_EVENT;
    return WAIT_NONE;
}

static gboolean is_event_record(const char *name)
{
    return strstr(name, "EventRecord") != NULL;
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

static void add_pair(GArray *pairs, int32_t call, int32_t awaited, rv_sync_rule rule)
{
    if (awaited < 0) return;
    rv_sync_pair pair = { call, awaited, rule };
    g_array_append_val(pairs, pair);
}

/* Each stream's last launch before t, on one device (or all when device < 0). */
static void add_device_streams(GArray *pairs, const builder *b, const stream_index *index, int32_t call,
                               int64_t device, int64_t t, rv_sync_rule rule)
{
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind != RV_RES_GPU_STREAM || (device >= 0 && resource->process != device)) continue;
        add_pair(pairs, call, stream_last_launched_before(index, b, (int32_t)r, t), rule);
    }
}

static int64_t device_of(const builder *b, int32_t stream)
{
    return stream >= 0 ? g_array_index(b->graph->resources, rv_resource, stream).process : -1;
}

static void pairs_from_sync_event(GArray *pairs, const builder *b, const stream_index *index, int32_t call,
                                  const rv_event *sync)
{
    int64_t start = rv_graph_task(b->graph, call)->recorded_start_ns;
    if (sync->sync_kind == RV_SYNC_CONTEXT) {
        add_device_streams(pairs, b, index, call, sync->device, start, RV_SYNC_RULE_CUDA_SYNC);
    } else if (sync->sync_kind == RV_SYNC_STREAM) {
        int32_t resource = builder_find_gpu_resource(b, sync->device, sync->stream);
        if (resource >= 0)
            add_pair(pairs, call, stream_last_launched_before(index, b, resource, start), RV_SYNC_RULE_CUDA_SYNC);
    } else if (sync->sync_kind == RV_SYNC_EVENT && sync->wait_on_record_correlation >= 0) {
        gpointer record = g_hash_table_lookup(b->cpu_by_correlation, &sync->wait_on_record_correlation);
        int32_t resource = builder_find_gpu_resource(b, sync->device, sync->wait_on_stream);
        if (record != NULL && resource >= 0) {
            int64_t recorded_at = rv_graph_task(b->graph, GPOINTER_TO_INT(record) - 1)->recorded_start_ns;
            add_pair(pairs, call, stream_last_launched_before(index, b, resource, recorded_at),
                     RV_SYNC_RULE_CUDA_SYNC);
        }
    }
}

/* The GPU task a call launched (its first, by correlation), or -1. */
static int32_t launched_by(const builder *b, int32_t call)
{
    const rv_task *task = rv_graph_task(b->graph, call);
    if (task->correlation < 0) return -1;
    gpointer found = g_hash_table_lookup(b->gpu_by_correlation, &task->correlation);
    if (found == NULL) return -1;
    int32_t gpu = GPOINTER_TO_INT(found) - 1;
    return g_array_index(b->task_launch, int32_t, gpu) == call ? gpu : -1;
}

/* How a copy call waits for its own copy, by CUDA's "API synchronization
 * behavior" (the copy's direction and host memory kind are in its name,
 * e.g. "Memcpy DtoH (Device -> Pageable)"): RV_SYNC_RULE_COPY, _STAGED,
 * or -1 when it does not wait. */
static int copy_wait_rule(const builder *b, const rv_task *call, const rv_task *copy)
{
    const char *api = rv_strings_get(b->graph->strings, call->name);
    const char *what = rv_strings_get(b->graph->strings, copy->name);
    if (strstr(what, "DtoD") != NULL || strstr(what, "PtoP") != NULL) return -1;
    if (strstr(api, "Async") == NULL) return RV_SYNC_RULE_COPY;
    if (strstr(what, "DtoH") != NULL && strstr(what, "Pageable") != NULL) return RV_SYNC_RULE_COPY;
    if (strstr(what, "HtoD") != NULL && strstr(what, "Pageable") != NULL && copy->bytes >= RV_STAGED_COPY_BYTES)
        return RV_SYNC_RULE_STAGED;
    return -1;
}

static void pairs_of_call(GArray *pairs, const builder *b, const stream_index *index, GHashTable *syncs,
                          thread_state *state, int32_t call)
{
    const rv_task *task = rv_graph_task(b->graph, call);
    const rv_event *sync = task->correlation >= 0 ? g_hash_table_lookup(syncs, &task->correlation) : NULL;
    if (sync != NULL && sync->sync_kind != RV_SYNC_STREAM_WAIT_EVENT) {
        pairs_from_sync_event(pairs, b, index, call, sync);
        return;
    }
    int64_t start = task->recorded_start_ns;
    switch (wait_kind_of_name(rv_strings_get(b->graph->strings, task->name))) {
    case WAIT_DEVICE:
        add_device_streams(pairs, b, index, call, device_of(b, state->launch_stream), start, RV_SYNC_RULE_DEVICE);
        return;
    case WAIT_STREAM:
        if (state->launch_stream >= 0)
            add_pair(pairs, call, stream_last_launched_before(index, b, state->launch_stream, start),
                     RV_SYNC_RULE_STREAM);
        return;
    case WAIT_EVENT:
        if (state->record_ns >= 0 && state->record_stream >= 0)
            add_pair(pairs, call, stream_last_launched_before(index, b, state->record_stream, state->record_ns),
                     RV_SYNC_RULE_EVENT);
        else if (state->launch_stream >= 0)
            add_pair(pairs, call, stream_last_launched_before(index, b, state->launch_stream, start),
                     RV_SYNC_RULE_EVENT);
        return;
    case WAIT_NONE:
        break;
    }
    int32_t gpu = launched_by(b, call);
    if (gpu < 0 || rv_graph_task(b->graph, gpu)->kind != RV_TASK_MEMCPY) return;
    int rule = copy_wait_rule(b, task, rv_graph_task(b->graph, gpu));
    if (rule >= 0) add_pair(pairs, call, gpu, (rv_sync_rule)rule);
}

static void pairs_of_thread(GArray *pairs, const builder *b, const stream_index *index, GHashTable *syncs,
                            int32_t resource)
{
    GArray *tasks = builder_resource_tasks(b, resource);
    thread_state state = { -1, -1, -1 };
    for (guint k = 0; k < tasks->len; k++) {
        int32_t call = g_array_index(tasks, int32_t, k);
        const rv_task *task = rv_graph_task(b->graph, call);
        if (task->kind != RV_TASK_CPU) continue;
        pairs_of_call(pairs, b, index, syncs, &state, call);
        if (is_event_record(rv_strings_get(b->graph->strings, task->name))) {
            state.record_ns = task->recorded_start_ns;
            state.record_stream = state.launch_stream;
        }
        int32_t gpu = launched_by(b, call);
        if (gpu >= 0) state.launch_stream = rv_graph_task(b->graph, gpu)->resource;
    }
}

GArray *rv_sync_pairs(const builder *b, const stream_index *index)
{
    GArray *pairs = g_array_new(FALSE, FALSE, sizeof(rv_sync_pair));
    GHashTable *syncs = sync_events_by_correlation(b);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (g_array_index(b->graph->resources, rv_resource, r).kind == RV_RES_CPU_THREAD)
            pairs_of_thread(pairs, b, index, syncs, (int32_t)r);
    g_hash_table_destroy(syncs);
    return pairs;
}

/* ---- the timestamp fallback ------------------------------------------ */

typedef struct {
    int64_t end_ns;
    int64_t launch_ns;
    int32_t task;
} gpu_ending;

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
        if (candidate->end_ns - start < (end - start) / 2 || end - candidate->end_ns > RELEASE_WINDOW_NS) return -1;
        if (candidate->launch_ns < start) return candidate->task;
    }
    return -1;
}

/* ---- the split ---------------------------------------------------------- */

/* Split call `id` into head and tail; returns the tail's id. */
static int32_t split_blocking_call(builder *b, int32_t id, int64_t head_ns, int64_t awaited_end)
{
    rv_task *head = rv_graph_task(b->graph, id);
    rv_task tail = *head;
    int64_t call_end = task_recorded_end(head);
    head->duration_ns = MIN(head_ns, head->duration_ns);
    head->flags |= RV_TASK_FLAG_BLOCKING;
    int64_t head_end = task_recorded_end(head);
    tail.kind = RV_TASK_SYNC;
    tail.correlation = -1;
    tail.host_overhead_ns = 0;
    tail.recorded_start_ns = MIN(MAX(head_end, awaited_end), call_end);
    tail.duration_ns = call_end - tail.recorded_start_ns;
    if (awaited_end > head_end && awaited_end <= call_end) { /* it blocked: how soon it returned */
        int64_t returned = call_end - awaited_end;
        g_array_append_val(b->return_samples, returned);
    }
    int32_t tail_id = rv_graph_add_task(b->graph, &tail);
    /* Copied out first: append_val takes the address of its argument, and
     * the append may move the array it points into. */
    int32_t none = -1, event_index = g_array_index(b->task_event, int32_t, id);
    comm_scope comm = g_array_index(b->task_comm, comm_scope, id);
    g_array_append_val(b->task_event, event_index);
    g_array_append_val(b->task_launch, none);
    g_array_append_val(b->task_comm, comm);
    b->graph->build_stats.blocking_calls_split++;
    return tail_id;
}

/* The median cost of issuing a launch, over the launch calls that did not
 * block: what the head of a blocking copy keeps (its wait goes to the tail). */
static int64_t typical_launch_call(const builder *b, GHashTable *first_pair)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        if (launch >= 0 && !g_hash_table_contains(first_pair, GINT_TO_POINTER(launch)))
            g_array_append_val(durations, rv_graph_task(b->graph, launch)->duration_ns);
    }
    int64_t typical = rv_median_int64(durations, 5000);
    g_array_unref(durations);
    return typical;
}

typedef struct {
    GArray *awaited;       /* per call being split: its awaited tasks */
    int64_t launch_ns;     /* typical launch call */
    GArray *endings;       /* GPU tasks by end, for the fallback and the release search */
    const stream_index *streams;
} split_context;

/* Does the API say for certain which GPU work the call waits for?  A
 * cuda_sync record, a device synchronize (every stream of the device) and
 * a blocking copy's own copy do; a stream or event synchronize names its
 * stream only through the thread's last launch (an inference). */
static gboolean rule_is_certain(rv_sync_rule rule)
{
    return rule != RV_SYNC_RULE_STREAM && rule != RV_SYNC_RULE_EVENT;
}

static gboolean contradicts(const builder *b, int32_t call, int32_t awaited)
{
    return task_recorded_end(rv_graph_task(b->graph, awaited)) >
           task_recorded_end(rv_graph_task(b->graph, call)) + RV_CAUSAL_TOLERANCE_NS;
}

/* A stream or event synchronize whose guessed stream the recording
 * contradicts (its last task ended after the call returned): the stream
 * of the same device whose last task launched before the call ended last
 * before the call returned, and close enough before it to have released
 * it; or -1 (then the clocks are off there, not the guess). */
static int32_t rerouted(const builder *b, const stream_index *streams, int32_t call, int32_t guessed)
{
    const rv_task *task = rv_graph_task(b->graph, call);
    int64_t device = g_array_index(b->graph->resources, rv_resource, rv_graph_task(b->graph, guessed)->resource).process;
    int32_t best = -1;
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        if (resource->kind != RV_RES_GPU_STREAM || resource->process != device) continue;
        int32_t candidate = stream_last_launched_before(streams, b, (int32_t)r, task->recorded_start_ns);
        if (candidate < 0 || contradicts(b, call, candidate) ||
            task_recorded_end(task) - task_recorded_end(rv_graph_task(b->graph, candidate)) > RELEASE_WINDOW_NS)
            continue;
        if (best < 0 || task_recorded_end(rv_graph_task(b->graph, candidate)) > task_recorded_end(rv_graph_task(b->graph, best)))
            best = candidate;
    }
    return best;
}

/* The awaited tasks of one call.  pairs is sorted by call; first_pair maps
 * a call to its first pair + 1.  A pair the recording contradicts is kept
 * when the API is certain of it (the clocks are off there, not the rule:
 * counted), and rerouted to a stream that fits when the stream was a
 * guess; a guess that nothing else fits is kept as well. */
static void awaited_by_rule(builder *b, const split_context *context, const GArray *pairs, GHashTable *first_pair,
                            int32_t call, GArray *awaited, gboolean *any_rule, rv_sync_rule *rule)
{
    g_array_set_size(awaited, 0);
    *any_rule = FALSE;
    gpointer found = g_hash_table_lookup(first_pair, GINT_TO_POINTER(call));
    if (found == NULL) return;
    *any_rule = TRUE;
    *rule = g_array_index(pairs, rv_sync_pair, GPOINTER_TO_INT(found) - 1).rule;
    for (guint i = (guint)GPOINTER_TO_INT(found) - 1; i < pairs->len; i++) {
        const rv_sync_pair *pair = &g_array_index(pairs, rv_sync_pair, i);
        if (pair->call != call) break;
        int32_t task = pair->awaited;
        if (pair->rule != RV_SYNC_RULE_STAGED && contradicts(b, call, task)) {
            int32_t other = rule_is_certain(pair->rule) ? -1 : rerouted(b, context->streams, call, task);
            if (other >= 0) {
                task = other;
                b->graph->build_stats.syncs_rerouted++;
            } else {
                b->graph->build_stats.syncs_contradicted++;
            }
        }
        g_array_append_val(awaited, task);
    }
}

static void count_rule(rv_build_stats *stats, rv_sync_rule rule)
{
    if (rule == RV_SYNC_RULE_CUDA_SYNC) {
        stats->sync_events_used++;
        return;
    }
    stats->syncs_by_api++;
    switch (rule) {
    case RV_SYNC_RULE_DEVICE: stats->syncs_device++; break;
    case RV_SYNC_RULE_STREAM: stats->syncs_stream++; break;
    case RV_SYNC_RULE_EVENT: stats->syncs_event++; break;
    case RV_SYNC_RULE_COPY: stats->syncs_copy++; break;
    case RV_SYNC_RULE_STAGED: stats->syncs_staged_copy++; break;
    default: break;
    }
}

static gboolean is_launch_call(const builder *b, int32_t call)
{
    return launched_by(b, call) >= 0;
}

static int64_t latest_end(const builder *b, const GArray *tasks)
{
    int64_t end = G_MININT64;
    for (guint i = 0; i < tasks->len; i++)
        end = MAX(end, task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, i))));
    return end;
}

/* Can a call of this name wait for the GPU, by CUDA's "API synchronization
 * behavior"?  Synchronizes, copies and sets, and frees.  Others (cudaMalloc,
 * attribute queries) that run long do their own work: a GPU task that
 * happens to end just before they return did not release them. */
static gboolean may_wait_for_gpu(const char *name)
{
    return strstr(name, "Synchronize") || strstr(name, "Memcpy") || strstr(name, "Memset") || strstr(name, "Free");
}

/* What the call waited for: its rule's tasks; when it returned long after
 * they ended, also the GPU task whose end released it (a later kernel, a
 * stream the rule did not name), unless the call does work of its own
 * after the wait (a free); with no rule, a long call that may wait for the
 * GPU, is not a launch and returned right after a GPU task ended (the
 * fallback).  FALSE when it waited for nothing. */
static gboolean find_awaited(builder *b, split_context *context, const GArray *pairs, GHashTable *first_pair,
                             int32_t id)
{
    gboolean any_rule;
    rv_sync_rule rule = RV_SYNC_RULE_CUDA_SYNC;
    awaited_by_rule(b, context, pairs, first_pair, id, context->awaited, &any_rule, &rule);
    const rv_task *call = rv_graph_task(b->graph, id);
    if (any_rule) {
        if (context->awaited->len == 0) return FALSE;
        count_rule(&b->graph->build_stats, rule);
        const char *name = rv_strings_get(b->graph->strings, call->name);
        if (task_recorded_end(call) - latest_end(b, context->awaited) > IMPLICIT_WAIT_MIN_NS &&
            !rv_call_works_after_wait(name)) {
            int32_t releaser = releasing_task(context->endings, call);
            if (releaser >= 0 && task_recorded_end(rv_graph_task(b->graph, releaser)) > latest_end(b, context->awaited)) {
                g_array_append_val(context->awaited, releaser);
                b->graph->build_stats.tails_released++;
            }
        }
        return TRUE;
    }
    if (call->duration_ns < IMPLICIT_WAIT_MIN_NS || is_launch_call(b, id) ||
        !may_wait_for_gpu(rv_strings_get(b->graph->strings, call->name)))
        return FALSE;
    int32_t releaser = releasing_task(context->endings, call);
    if (releaser < 0) return FALSE;
    g_array_append_val(context->awaited, releaser);
    b->graph->build_stats.implicit_waits++;
    return TRUE;
}

static void split_thread(builder *b, int32_t resource, const GArray *pairs, GHashTable *first_pair,
                         split_context *context)
{
    GArray *tasks = builder_resource_tasks(b, resource);
    GArray *rebuilt = g_array_sized_new(FALSE, FALSE, sizeof(int32_t), tasks->len);
    for (guint k = 0; k < tasks->len; k++) {
        int32_t id = g_array_index(tasks, int32_t, k);
        g_array_append_val(rebuilt, id);
        if (rv_graph_task(b->graph, id)->kind != RV_TASK_CPU || !find_awaited(b, context, pairs, first_pair, id))
            continue;
        int64_t head_ns = is_launch_call(b, id) ? context->launch_ns : 0;
        int32_t tail = split_blocking_call(b, id, head_ns, latest_end(b, context->awaited));
        g_array_append_val(rebuilt, tail);
        for (guint i = 0; i < context->awaited->len; i++)
            rv_graph_add_edge(b->graph, g_array_index(context->awaited, int32_t, i), tail, RV_EDGE_SYNC, FALSE);
    }
    g_array_set_size(tasks, 0);
    g_array_append_vals(tasks, rebuilt->data, rebuilt->len);
    g_array_unref(rebuilt);
}

static gint compare_pairs_by_call(gconstpointer left, gconstpointer right)
{
    const rv_sync_pair *a = left, *c = right;
    return a->call < c->call ? -1 : a->call > c->call;
}

void rv_build_sync_edges(builder *b, GArray *pairs, const stream_index *streams)
{
    g_array_sort(pairs, compare_pairs_by_call);
    GHashTable *first_pair = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = pairs->len; i > 0; i--)
        g_hash_table_insert(first_pair, GINT_TO_POINTER(g_array_index(pairs, rv_sync_pair, i - 1).call),
                            GINT_TO_POINTER((gint)i));
    split_context context = { g_array_new(FALSE, FALSE, sizeof(int32_t)), typical_launch_call(b, first_pair),
                              gpu_tasks_by_end(b), streams };
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (g_array_index(b->graph->resources, rv_resource, r).kind == RV_RES_CPU_THREAD)
            split_thread(b, (int32_t)r, pairs, first_pair, &context);
    g_hash_table_destroy(first_pair);
    g_array_unref(context.awaited);
    g_array_unref(context.endings);
}

/*
 * edges.c - cross-stream, communication, inter-thread and order edges
 * (DESIGN edge rules 1, 2, 5, 6 and 7).
 *
 * Cross-stream waits are exact where the trace has cuda_sync "Stream Wait
 * Event" records.  Otherwise they are read from the order of calls on each
 * thread, because cudaStreamWaitEvent is recorded with neither its stream
 * nor its event (and cudaEventRecord often not at all):
 *   - the waiting stream is the stream of the thread's next launch after
 *     the wait (PyTorch waits on a stream just before using it);
 *   - the awaited stream is the stream current at the thread's last event
 *     record, when the trace has event-record calls (`wait_stream(other)`
 *     records an event on the current stream and waits on it at once);
 *     otherwise the stream of the thread's last launch before the wait, or,
 *     when that is the waiting stream itself, the last other stream the
 *     thread launched on (c10d makes the compute stream wait for the
 *     collective it launched last on its NCCL stream);
 *   - the awaited task is the last task launched on the awaited stream
 *     before that moment, by any thread, or, where that one ended after
 *     the waiting task started, the stream's last task that ended before
 *     (the event was recorded earlier); the waiting task is the first
 *     task launched on the waiting stream after the wait.
 * A wait whose two streams are the same has nothing to wait for and is
 * counted as unresolved.  Inter-thread waits are inferred on the CPU clock
 * alone: a thread that sat idle and resumed (its first recorded event of
 * any kind: an operator, an annotation, a call) just after another thread
 * of the same process finished something was waiting for it.
 *
 * A backward pass is handed over, not woken by time: loss.backward() makes
 * the thread that calls it (the training loop's) hand the graph to the
 * autograd engine's device thread and block until it is done.  A thread
 * that runs the engine (it records autograd node operators:
 * `autograd::engine::evaluate_function: ...` since PyTorch 1.9, the nodes
 * and `torch::autograd::AccumulateGrad` before) and is not the training
 * loop's starts a pass at its first recorded event after an idle stretch
 * (no event of any kind on it for LONG_GAP_NS; the tail of the previous
 * pass, gradient accumulation without runtime calls, counts as activity).
 * The pass's first call depends on the training loop's last call before the
 * pass began (the launch that fills the loss's gradient with ones, in every
 * version seen), however long the loop worked before calling backward():
 * the wait for the forward is the edge's, not the call's host overhead.
 */
#include "streams.h"
#include "reverie/checked.h"
#include <string.h>

/* A thread idle longer than this before a call may have been waiting. */
#define LONG_GAP_NS 50000
/* ... if it resumed within this long of another thread's call ending, or
 * within a twentieth of the gap (Python work after a long wait is longer). */
#define WAKE_WINDOW_NS 200000
#define WAKE_WINDOW_FRACTION 20

static void add_causal_edge(builder *b, int32_t from, int32_t to, rv_edge_kind kind)
{
    if (from < 0 || to < 0 || from == to) return;
    const rv_task *producer = rv_graph_task(b->graph, from), *consumer = rv_graph_task(b->graph, to);
    if (producer->resource == consumer->resource) return;
    if (task_recorded_end(producer) > consumer->recorded_start_ns + RV_CAUSAL_TOLERANCE_NS) {
        b->graph->build_stats.dropped_edges++;
        return;
    }
    rv_graph_add_edge(b->graph, from, to, kind, FALSE);
}

static gboolean name_contains(const builder *b, int32_t name, const char *needle)
{
    return strstr(rv_strings_get(b->graph->strings, name), needle) != NULL;
}

static int32_t cpu_task_of_correlation(const builder *b, int64_t correlation)
{
    gpointer found = correlation >= 0 ? g_hash_table_lookup(b->cpu_by_correlation, &correlation) : NULL;
    return found ? GPOINTER_TO_INT(found) - 1 : -1;
}

static int32_t gpu_task_of_correlation(const builder *b, int64_t correlation)
{
    gpointer found = correlation >= 0 ? g_hash_table_lookup(b->gpu_by_correlation, &correlation) : NULL;
    return found ? GPOINTER_TO_INT(found) - 1 : -1;
}

/* cuda_sync "Stream Wait Event": stream `stream` waits for the work that
 * `wait_on_stream` had been given when the event was recorded. */
static guint edges_from_sync_events(builder *b, const stream_index *index)
{
    guint used = 0;
    GArray *events = b->trace->events;
    for (guint i = 0; i < events->len; i++) {
        const rv_event *sync = &g_array_index(events, rv_event, i);
        if (sync->kind != RV_EV_CUDA_SYNC || sync->sync_kind != RV_SYNC_STREAM_WAIT_EVENT) continue;
        int32_t wait_call = cpu_task_of_correlation(b, sync->correlation);
        int32_t record_call = cpu_task_of_correlation(b, sync->wait_on_record_correlation);
        int32_t waiting = builder_find_gpu_resource(b, sync->device, sync->stream);
        int32_t producing = builder_find_gpu_resource(b, sync->device, sync->wait_on_stream);
        if (wait_call < 0 || record_call < 0 || waiting < 0 || producing < 0) continue;
        int32_t producer = stream_last_launched_before(index, b, producing,
                                                       rv_graph_task(b->graph, record_call)->recorded_start_ns);
        int32_t consumer = stream_first_launched_after(index, b, waiting,
                                                       rv_graph_task(b->graph, wait_call)->recorded_start_ns);
        add_causal_edge(b, producer, consumer, RV_EDGE_CROSS_STREAM);
        b->graph->build_stats.waits_by_cuda_sync++;
        used++;
    }
    return used;
}

typedef struct {
    int32_t last_stream;     /* the stream of the thread's last launch, or -1 */
    int32_t other_stream;    /* the stream of its last launch on another stream, or -1 */
    int32_t record_stream;   /* its last launch's stream at its last event record, or -1 */
    int64_t record_ns;       /* that record's start, or -1 */
    gboolean record_fresh;   /* no wait has used that record yet */
} wait_state;

/* A wait call, resolved when the thread's next launch names the waiting stream. */
typedef struct {
    wait_state seen;         /* the thread's state at the wait */
    int64_t at_ns;           /* the wait call's start */
} pending_wait;

/* The task a wait waited for, once the waiting stream is known, or -1.
 * Candidates in order: the stream current at a fresh event record, the
 * thread's last launch stream, the last other stream it launched on; the
 * first that is not the waiting stream wins. */
static int32_t awaited_task(const builder *b, const stream_index *index, const pending_wait *wait,
                            int32_t waiting_stream)
{
    const wait_state *seen = &wait->seen;
    if (seen->record_fresh && seen->record_stream >= 0 && seen->record_stream != waiting_stream)
        return stream_last_launched_before(index, b, seen->record_stream, seen->record_ns);
    int32_t stream = seen->last_stream != waiting_stream ? seen->last_stream : seen->other_stream;
    return stream >= 0 ? stream_last_launched_before(index, b, stream, wait->at_ns) : -1;
}

/*
 * The awaited stream's last task that ended before `consumer` started, when
 * the task the call order names ended after it: the recording says the
 * consumer did not wait for that one, so the event was recorded earlier on
 * that stream (c10d's wait on a bucket's all-reduce names the collective
 * before the one the thread launched last: on a ROCm ResNet trace the
 * bucket's copies start 15 us after that one ends, 2.2 ms before they would
 * without it).  Tasks on one stream run one after another, so their
 * recorded ends only grow: a binary search.  -1 when none ended in time.
 */
static int32_t awaited_within_recording(const builder *b, int32_t awaited, int32_t consumer)
{
    rv_graph *graph = b->graph;
    int64_t limit = rv_saturating_add(rv_graph_task(graph, consumer)->recorded_start_ns, RV_CAUSAL_TOLERANCE_NS);
    if (task_recorded_end(rv_graph_task(graph, awaited)) <= limit) return awaited;
    GArray *tasks = builder_resource_tasks(b, rv_graph_task(graph, awaited)->resource);
    guint low = 0, high = tasks->len; /* the first task ending past the limit is in [low, high] */
    while (low < high) {
        guint middle = low + (high - low) / 2;
        if (task_recorded_end(rv_graph_task(graph, g_array_index(tasks, int32_t, middle))) <= limit) low = middle + 1;
        else high = middle;
    }
    return low > 0 ? g_array_index(tasks, int32_t, low - 1) : -1;
}

static void resolve_waits(builder *b, const stream_index *index, GArray *pending, int32_t launched)
{
    int32_t waiting_stream = rv_graph_task(b->graph, launched)->resource;
    for (guint i = 0; i < pending->len; i++) {
        const pending_wait *wait = &g_array_index(pending, pending_wait, i);
        int32_t awaited = awaited_task(b, index, wait, waiting_stream);
        if (awaited < 0) {
            b->graph->build_stats.waits_unresolved++;
            continue;
        }
        int32_t consumer = stream_first_launched_after(index, b, waiting_stream, wait->at_ns);
        if (consumer < 0) consumer = launched;
        int32_t in_time = awaited_within_recording(b, awaited, consumer);
        add_causal_edge(b, in_time >= 0 ? in_time : awaited, consumer, RV_EDGE_CROSS_STREAM); /* -1: dropped, counted */
        b->graph->build_stats.waits_by_call_order++;
    }
    g_array_set_size(pending, 0);
}

static void note_launch(wait_state *state, int32_t stream)
{
    if (stream != state->last_stream) {
        state->other_stream = state->last_stream;
        state->last_stream = stream;
    }
}

static void edges_from_call_order(builder *b, const stream_index *index, int32_t resource)
{
    GArray *tasks = builder_resource_tasks(b, resource);
    GArray *pending = g_array_new(FALSE, FALSE, sizeof(pending_wait));
    wait_state state = { -1, -1, -1, -1, FALSE };
    for (guint k = 0; k < tasks->len; k++) {
        const rv_task *call = rv_graph_task(b->graph, g_array_index(tasks, int32_t, k));
        if (call->kind != RV_TASK_CPU) continue;
        if (name_contains(b, call->name, "EventRecord")) {
            state.record_stream = state.last_stream;
            state.record_ns = call->recorded_start_ns;
            state.record_fresh = TRUE;
            continue;
        }
        if (name_contains(b, call->name, "StreamWaitEvent")) {
            pending_wait wait = { state, call->recorded_start_ns };
            g_array_append_val(pending, wait);
            state.record_fresh = FALSE;
            continue;
        }
        int32_t launched = gpu_task_of_correlation(b, call->correlation);
        if (launched < 0 || g_array_index(b->task_launch, int32_t, launched) < 0) continue;
        if (pending->len) resolve_waits(b, index, pending, launched);
        note_launch(&state, rv_graph_task(b->graph, launched)->resource);
    }
    b->graph->build_stats.waits_unresolved += pending->len;
    g_array_unref(pending);
}

/* Edge rule 7 within a rank: a collective waits for the work that produced
 * its data - the last task launched on another stream of its device before
 * the collective's own launch - unless an explicit wait already says so. */
static void add_comm_edges(builder *b, const stream_index *index)
{
    int32_t count = rv_graph_task_count(b->graph);
    gboolean *waited = g_new0(gboolean, count);
    for (guint e = 0; e < b->graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(b->graph->edges, rv_edge, e);
        if (edge->kind == RV_EDGE_CROSS_STREAM) waited[edge->to] = TRUE;
    }
    for (int32_t id = 0; id < count; id++) {
        const rv_task *task = rv_graph_task(b->graph, id);
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        if (task->kind != RV_TASK_COMM || launch < 0 || waited[id]) continue;
        int64_t launched_at = rv_graph_task(b->graph, launch)->recorded_start_ns;
        const rv_resource *own = &g_array_index(b->graph->resources, rv_resource, task->resource);
        int32_t producer = -1;
        int64_t producer_launch = G_MININT64;
        for (guint r = 0; r < b->graph->resources->len; r++) {
            const rv_resource *other = &g_array_index(b->graph->resources, rv_resource, r);
            if (other->kind != RV_RES_GPU_STREAM || (int32_t)r == task->resource || other->process != own->process) continue;
            int32_t candidate = stream_last_launched_before(index, b, (int32_t)r, launched_at);
            if (candidate < 0 || rv_graph_task(b->graph, candidate)->kind == RV_TASK_COMM) continue;
            int32_t candidate_launch = g_array_index(b->task_launch, int32_t, candidate);
            int64_t at = rv_graph_task(b->graph, candidate_launch >= 0 ? candidate_launch : candidate)->recorded_start_ns;
            if (at > producer_launch) { producer_launch = at; producer = candidate; }
        }
        add_causal_edge(b, producer, id, RV_EDGE_COMM);
    }
    g_free(waited);
}

/* Work launched before the recording began has no launch call, and the
 * stream waits it was given are not in the trace either.  Where such a
 * task followed an idle stretch of its stream (GPU_WAKE_MIN_GAP_NS) and
 * started just after a task of another stream of its device ended (within
 * GPU_WAKE_WINDOW_NS), it waited for that task: read off the GPU's own
 * clock, the only evidence there is. */
#define GPU_WAKE_MIN_GAP_NS 50000
#define GPU_WAKE_WINDOW_NS 50000

static int32_t latest_other_stream_end(const builder *b, int32_t stream, int64_t after, int64_t before)
{
    int32_t best = -1;
    int64_t best_end = after;
    int64_t device = g_array_index(b->graph->resources, rv_resource, stream).process;
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *other = &g_array_index(b->graph->resources, rv_resource, r);
        if (other->kind != RV_RES_GPU_STREAM || (int32_t)r == stream || other->process != device) continue;
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        for (guint k = 0; k < tasks->len; k++) {
            int32_t id = g_array_index(tasks, int32_t, k);
            int64_t end = task_recorded_end(rv_graph_task(b->graph, id));
            if (end > best_end && end <= before) {
                best = id;
                best_end = end;
            }
        }
    }
    return best;
}

static void edges_from_gpu_wake_ups(builder *b)
{
    for (guint r = 0; r < b->graph->resources->len; r++) {
        if (g_array_index(b->graph->resources, rv_resource, r).kind != RV_RES_GPU_STREAM) continue;
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        int64_t previous_end = G_MININT64;
        for (guint k = 0; k < tasks->len; k++) {
            int32_t id = g_array_index(tasks, int32_t, k);
            const rv_task *task = rv_graph_task(b->graph, id);
            if (k > 0 && g_array_index(b->task_launch, int32_t, id) < 0 &&
                task->recorded_start_ns - previous_end > GPU_WAKE_MIN_GAP_NS) {
                int32_t waker = latest_other_stream_end(b, (int32_t)r, task->recorded_start_ns - GPU_WAKE_WINDOW_NS,
                                                        task->recorded_start_ns);
                if (waker >= 0) {
                    add_causal_edge(b, waker, id, RV_EDGE_CROSS_STREAM);
                    b->graph->build_stats.waits_by_gpu_timeline++;
                }
            }
            previous_end = MAX(previous_end, task_recorded_end(task));
        }
    }
}

void rv_build_cross_stream_edges(builder *b, const stream_index *index)
{
    if (edges_from_sync_events(b, index) == 0) {
        for (guint r = 0; r < b->graph->resources->len; r++)
            if (g_array_index(b->graph->resources, rv_resource, r).kind == RV_RES_CPU_THREAD)
                edges_from_call_order(b, index, (int32_t)r);
    }
    edges_from_gpu_wake_ups(b);
    add_comm_edges(b, index);
}

/* ---- inter-thread --------------------------------------------------- */

typedef struct { int64_t end_ns; int32_t task; int32_t resource; } ending;

static gint compare_endings(gconstpointer left, gconstpointer right)
{
    const ending *a = left, *c = right;
    return a->end_ns < c->end_ns ? -1 : a->end_ns > c->end_ns;
}

static gboolean is_work(const rv_task *task)
{
    return task->kind == RV_TASK_CPU || task->kind == RV_TASK_SYNC || task->kind == RV_TASK_DATALOAD;
}

/* How many of the endings (sorted by end) end at or before `before`. */
static guint endings_through(const GArray *endings, int64_t before)
{
    guint low = 0, high = endings->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(endings, ending, middle).end_ns <= before) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* The latest-ending work on another thread of the process, ending in (after, before]. */
static int32_t latest_other_ending(const GArray *endings, const rv_resource *resources, int32_t resource,
                                   int64_t after, int64_t before)
{
    guint low = endings_through(endings, before);
    for (guint i = low; i > 0 && low - i < 256; i--) {
        const ending *candidate = &g_array_index(endings, ending, i - 1);
        if (candidate->end_ns <= after) return -1;
        if (candidate->resource != resource &&
            resources[candidate->resource].process == resources[resource].process)
            return candidate->task;
    }
    return -1;
}

typedef struct { int64_t start_ns, end_ns; } span;

static gint compare_spans(gconstpointer left, gconstpointer right)
{
    const span *a = left, *c = right;
    return a->start_ns < c->start_ns ? -1 : a->start_ns > c->start_ns;
}

/* An operator that only the autograd engine records: a node's evaluation
 * (PyTorch 1.9 on), or gradient accumulation (every version). */
static gboolean is_autograd_node(const char *name)
{
    return g_str_has_prefix(name, "autograd::engine::evaluate_function") ||
           strcmp(name, "torch::autograd::AccumulateGrad") == 0;
}

static gboolean is_cpu_side(const rv_event *event)
{
    return event->kind == RV_EV_CPU_OP || event->kind == RV_EV_USER_ANNOTATION ||
           event->kind == RV_EV_PYTHON_FUNCTION || event->kind == RV_EV_RUNTIME;
}

static int32_t event_thread(const builder *b, const rv_event *event)
{
    char key[64];
    g_snprintf(key, sizeof key, "%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT, event->pid, event->tid);
    gpointer found = g_hash_table_lookup(b->cpu_resource, key);
    return found != NULL ? GPOINTER_TO_INT(found) - 1 : -1;
}

/* Per CPU thread, the span of every CPU-side event the trace recorded on it
 * (operators, annotations, Python frames, runtime calls), sorted by start:
 * when a thread resumed after an idle stretch is the first of these, which
 * can come well before its next runtime call (a wait ends, then Python runs
 * for milliseconds before launching anything), and a backward pass starts
 * at the first after an idle stretch.  `engine` marks the threads that
 * recorded an autograd node.  One pass over the trace's events serves both
 * rules. */
static GPtrArray *spans_by_thread(const builder *b, gboolean *engine)
{
    GPtrArray *spans = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < b->graph->resources->len; r++) g_ptr_array_add(spans, g_array_new(FALSE, FALSE, sizeof(span)));
    for (guint i = 0; i < b->trace->events->len; i++) {
        const rv_event *event = &g_array_index(b->trace->events, rv_event, i);
        if (!is_cpu_side(event)) continue;
        int32_t r = event_thread(b, event);
        if (r < 0) continue;
        span s = { event->ts_ns, event->ts_ns + MAX(0, event->dur_ns) };
        g_array_append_val(g_ptr_array_index(spans, r), s);
        if (event->kind == RV_EV_CPU_OP && is_autograd_node(rv_strings_get(b->trace->strings, event->name)))
            engine[r] = TRUE;
    }
    for (guint r = 0; r < spans->len; r++) g_array_sort(g_ptr_array_index(spans, r), compare_spans);
    return spans;
}

/* The first recorded activity on a thread after `after`, no later than `by`. */
static int64_t resumed_at(const GArray *spans, int64_t after, int64_t by)
{
    guint low = 0, high = spans->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(spans, span, middle).start_ns <= after) low = middle + 1;
        else high = middle;
    }
    return low < spans->len ? MIN(by, g_array_index(spans, span, low).start_ns) : by;
}

/* ---- backward hand-off ------------------------------------------------ */

/* The training loop's threads: those that open a step; in a process
 * without steps, its main thread (tid = pid). */
static gboolean *loop_threads(const builder *b)
{
    guint count = b->graph->resources->len;
    gboolean *loop = g_new0(gboolean, count + 1);
    gboolean *has_steps = g_new0(gboolean, count + 1); /* per resource: its process has steps */
    for (guint s = 0; s < b->graph->steps->len; s++) {
        int32_t marker = g_array_index(b->graph->steps, rv_step, s).begin_marker;
        if (marker >= 0) loop[rv_graph_task(b->graph, marker)->resource] = TRUE;
    }
    const rv_resource *resources = (const rv_resource *)b->graph->resources->data;
    for (guint r = 0; r < count; r++)
        for (guint o = 0; o < count && loop[r]; o++)
            if (resources[o].kind == RV_RES_CPU_THREAD && resources[o].process == resources[r].process) has_steps[o] = TRUE;
    for (guint r = 0; r < count; r++)
        if (resources[r].kind == RV_RES_CPU_THREAD && !has_steps[r] && resources[r].thread == resources[r].process)
            loop[r] = TRUE;
    g_free(has_steps);
    return loop;
}

/* The latest-ending work, ending in (after, before], of the thread that
 * handed a backward pass to `resource`: the training loop's thread of its
 * process, or in a process without one, any other thread that does not
 * run the engine. */
static int32_t caller_call(const GArray *endings, const rv_resource *resources, const gboolean *loop,
                           const gboolean *engine, gboolean process_has_loop, int32_t resource, int64_t after,
                           int64_t before)
{
    guint low = endings_through(endings, before);
    int32_t other = -1;
    for (guint i = low; i > 0; i--) {
        const ending *candidate = &g_array_index(endings, ending, i - 1);
        if (candidate->end_ns <= after) break;
        if (candidate->resource == resource || resources[candidate->resource].process != resources[resource].process)
            continue;
        if (loop[candidate->resource]) return candidate->task;
        if (other < 0 && !engine[candidate->resource]) other = candidate->task;
    }
    return process_has_loop ? -1 : other;
}

/* On each engine thread, each pass's first call waits for its caller's
 * last call before the pass began (see the header).  Marks those calls in
 * `handed` so the wake-up rule leaves them alone. */
static void backward_hand_offs(builder *b, const GArray *endings, const GPtrArray *spans, const gboolean *engine,
                               gboolean *handed)
{
    guint count = b->graph->resources->len;
    const rv_resource *resources = (const rv_resource *)b->graph->resources->data;
    gboolean *loop = loop_threads(b);
    for (guint r = 0; r < count; r++) {
        if (!engine[r] || loop[r] || resources[r].kind != RV_RES_CPU_THREAD) continue;
        gboolean process_has_loop = FALSE;
        for (guint o = 0; o < count; o++)
            if (loop[o] && resources[o].process == resources[r].process) process_has_loop = TRUE;
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        GArray *thread_spans = g_ptr_array_index(spans, r);
        /* The passes' starts and the idle stretches before them. */
        GArray *starts = g_array_new(FALSE, FALSE, sizeof(span)); /* {idle from, resumed} */
        int64_t busy_until = rv_build_process_start(b, resources[r].process);
        for (guint k = 0; k < thread_spans->len; k++) {
            const span *event = &g_array_index(thread_spans, span, k);
            if (event->start_ns - busy_until > LONG_GAP_NS) {
                span pass = { busy_until, event->start_ns };
                g_array_append_val(starts, pass);
            }
            busy_until = MAX(busy_until, event->end_ns);
        }
        guint next = 0; /* the thread's first task not yet in a pass */
        for (guint p = 0; p < starts->len; p++) {
            const span *pass = &g_array_index(starts, span, p);
            int64_t pass_end = p + 1 < starts->len ? g_array_index(starts, span, p + 1).end_ns : G_MAXINT64;
            while (next < tasks->len && rv_graph_task(b->graph, g_array_index(tasks, int32_t, next))->recorded_start_ns < pass->end_ns)
                next++;
            if (next >= tasks->len) break;
            int32_t first = g_array_index(tasks, int32_t, next);
            const rv_task *call = rv_graph_task(b->graph, first);
            if (call->recorded_start_ns >= pass_end || !is_work(call)) continue;
            int32_t cause = caller_call(endings, resources, loop, engine, process_has_loop, (int32_t)r,
                                        pass->start_ns, pass->end_ns);
            if (cause < 0) continue;
            rv_graph_add_edge(b->graph, cause, first, RV_EDGE_INTER_THREAD, FALSE);
            b->graph->build_stats.inter_thread_inferred++;
            handed[first] = TRUE;
        }
        g_array_unref(starts);
    }
    g_free(loop);
}

void rv_build_inter_thread_edges(builder *b)
{
    GArray *endings = g_array_new(FALSE, FALSE, sizeof(ending));
    const rv_resource *resources = (const rv_resource *)b->graph->resources->data;
    gboolean *foreground = rv_build_foreground_threads(b); /* a background thread wakes nobody (origins.c) */
    gboolean *engine = g_new0(gboolean, b->graph->resources->len + 1);
    GPtrArray *activity = spans_by_thread(b, engine);
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        const rv_task *task = rv_graph_task(b->graph, id);
        if (is_work(task) && !(task->flags & RV_TASK_FLAG_REMOVED) && foreground[task->resource] &&
            resources[task->resource].kind == RV_RES_CPU_THREAD) {
            ending e = { task_recorded_end(task), id, task->resource };
            g_array_append_val(endings, e);
        }
    }
    g_array_sort(endings, compare_endings);
    gboolean *handed = g_new0(gboolean, rv_graph_task_count(b->graph) + 1);
    backward_hand_offs(b, endings, activity, engine, handed);
    for (guint r = 0; r < b->graph->resources->len; r++) {
        if (resources[r].kind != RV_RES_CPU_THREAD) continue;
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        int64_t previous_end = rv_build_process_start(b, resources[r].process);
        for (guint k = 0; k < tasks->len; k++) {
            int32_t id = g_array_index(tasks, int32_t, k);
            const rv_task *task = rv_graph_task(b->graph, id);
            int64_t resumed = resumed_at(g_ptr_array_index(activity, r), previous_end, task->recorded_start_ns);
            if (is_work(task) && !handed[id] && resumed - previous_end > LONG_GAP_NS) {
                int32_t other = latest_other_ending(endings, resources, (int32_t)r, previous_end, resumed);
                int64_t window = MAX(WAKE_WINDOW_NS, (resumed - previous_end) / WAKE_WINDOW_FRACTION);
                if (other >= 0 && resumed - task_recorded_end(rv_graph_task(b->graph, other)) <= window) {
                    rv_graph_add_edge(b->graph, other, id, RV_EDGE_INTER_THREAD, FALSE);
                    b->graph->build_stats.inter_thread_inferred++;
                }
            }
            previous_end = MAX(previous_end, task_recorded_end(task));
        }
    }
    g_ptr_array_unref(activity);
    g_free(engine);
    g_array_unref(endings);
    g_free(handed);
    g_free(foreground);
}

/* ---- order ---------------------------------------------------------- */

void rv_build_order_edges(builder *b)
{
    for (guint r = 0; r < b->graph->resources->len; r++) {
        const rv_resource *resource = &g_array_index(b->graph->resources, rv_resource, r);
        rv_edge_kind kind = resource->kind == RV_RES_GPU_STREAM ? RV_EDGE_STREAM : RV_EDGE_THREAD;
        GArray *tasks = builder_resource_tasks(b, (int32_t)r);
        for (guint k = 1; k < tasks->len; k++)
            rv_graph_add_edge(b->graph, g_array_index(tasks, int32_t, k - 1), g_array_index(tasks, int32_t, k),
                              kind, FALSE);
    }
}

/*
 * timing.c - the typical GPU delays of a trace, its launch-queue depth, and
 * each CPU call's host overhead (the timing model is in graph.h).
 *
 * Nothing here gives a GPU task a delay of its own.  Three values per GPU
 * stream are estimated over the whole trace, after the clock correction:
 *   - launch latency: start of a GPU task minus the end of its launch call,
 *     over tasks whose stream was idle and whose other dependencies were
 *     met when the call returned (median);
 *   - idle gap: start minus the previous task's end, over tasks whose
 *     launch call had returned at least a launch latency before the stream
 *     freed and whose other dependencies were met by then, so that the
 *     stream alone held them back (median);
 *   - launch-queue depth: CUDA blocks a launch while its queue is full.  A
 *     launch call that ran at least BLOCKED_CALL_MIN_NS and ten times an
 *     unblocked launch returns when a slot frees: just after the task
 *     launched `depth` launches before it ends (tightest_depth() says how
 *     the depth is found).  It is measured from at least QUEUE_MIN_SAMPLES
 *     such calls; otherwise CUDA's 1024 is assumed (it only matters when a
 *     what-if makes the GPU fall that far behind).
 * A stream with fewer than STREAM_MIN_SAMPLES samples takes the trace-wide
 * value; a trace with none takes the defaults below.  All are clamped to
 * what hardware does (a launch latency above 200 us, or a gap above 100 us,
 * is a sign of a missed dependency, not of the hardware).
 *
 * A launch call whose recorded time includes a full-queue wait keeps only
 * its own cost: the part after the task that freed its slot ended.  The
 * simulator puts the wait back by rule, so a faster GPU blocks less.
 *
 * The host overhead of a CPU task is the recorded time between the end of
 * the previous task on its thread (or the moment an edge from elsewhere
 * released it, if later) and its start: Python and framework time that no
 * recorded call accounts for.  A thread's first task counts from the
 * trace's origin.  This is the one value taken per task from recorded
 * starts, and it belongs to the task (DESIGN "Tasks").
 */
#include "streams.h"
#include "reverie/stats.h"

#define DEFAULT_LAUNCH_LATENCY_NS 2000
#define DEFAULT_IDLE_GAP_NS 1000
#define MAX_LAUNCH_LATENCY_NS 200000
#define MAX_IDLE_GAP_NS 100000
#define STREAM_MIN_SAMPLES 30
#define DEFAULT_QUEUE_DEPTH 1024
#define QUEUE_MIN_SAMPLES 16
#define BLOCKED_CALL_MIN_NS 50000

static gboolean is_gpu_stream(const builder *b, guint resource)
{
    return g_array_index(b->graph->resources, rv_resource, resource).kind == RV_RES_GPU_STREAM;
}

static rv_resource *resource_at(builder *b, guint resource)
{
    return &g_array_index(b->graph->resources, rv_resource, resource);
}

/* The launch call of a GPU task whose recorded end is its issuing time: not
 * the head of a split call (its duration was set by the builder). */
static const rv_task *plain_launch(const builder *b, int32_t gpu)
{
    int32_t launch = g_array_index(b->task_launch, int32_t, gpu);
    if (launch < 0) return NULL;
    const rv_task *call = rv_graph_task(b->graph, launch);
    return (call->flags & RV_TASK_FLAG_BLOCKING) ? NULL : call;
}

/* ---- launch latency and idle gap ---------------------------------------- */

typedef struct {
    GArray *latency;   /* per stream: GArray of int64 samples */
    GArray *gap;
} delay_samples;

/* When each task's dependencies on other resources were met, in recorded
 * time (INT64_MIN when it has none), for the GPU tasks (leaving out launch
 * edges: a GPU task held back by another dependency says nothing about the
 * launch latency or its stream's gap) or for the CPU tasks (whose host
 * overhead starts when the later of their thread and those dependencies
 * freed them). */
static int64_t *cross_resource_readiness(const builder *b, gboolean gpu)
{
    int32_t count = rv_graph_task_count(b->graph);
    int64_t *ready = g_new(int64_t, count);
    for (int32_t id = 0; id < count; id++) ready[id] = G_MININT64;
    for (guint e = 0; e < b->graph->edges->len; e++) {
        const rv_edge *edge = &g_array_index(b->graph->edges, rv_edge, e);
        const rv_task *from = rv_graph_task(b->graph, edge->from), *to = rv_graph_task(b->graph, edge->to);
        if (from->resource == to->resource || builder_is_gpu_task(to) != gpu) continue;
        if (gpu && edge->kind == RV_EDGE_LAUNCH) continue;
        int64_t at = edge->from_start ? from->recorded_start_ns : task_recorded_end(from);
        ready[edge->to] = MAX(ready[edge->to], at);
    }
    return ready;
}

static void latency_samples(const builder *b, guint stream, const int64_t *other, GArray *out)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    int64_t previous_end = G_MININT64;
    for (guint k = 0; k < tasks->len; k++) {
        int32_t id = g_array_index(tasks, int32_t, k);
        const rv_task *task = rv_graph_task(b->graph, id);
        const rv_task *call = plain_launch(b, id);
        if (call != NULL && previous_end <= task_recorded_end(call) && other[id] <= task_recorded_end(call)) {
            int64_t sample = task->recorded_start_ns - task_recorded_end(call);
            g_array_append_val(out, sample);
        }
        previous_end = MAX(previous_end, task_recorded_end(task));
    }
}

static void gap_samples(const builder *b, guint stream, int64_t latency, const int64_t *other, GArray *out)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    for (guint k = 1; k < tasks->len; k++) {
        int32_t id = g_array_index(tasks, int32_t, k);
        const rv_task *task = rv_graph_task(b->graph, id);
        int64_t previous_end = task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, k - 1)));
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        if (launch >= 0 && task_recorded_end(rv_graph_task(b->graph, launch)) + latency > previous_end) continue;
        if (other[id] > previous_end) continue;
        int64_t sample = MAX(0, task->recorded_start_ns - previous_end);
        g_array_append_val(out, sample);
    }
}

/* The value for one stream: its own median with enough samples, else the
 * trace-wide one; clamped to what hardware does. */
static int64_t stream_value(GArray *samples, int64_t trace_wide, int64_t max_ns)
{
    int64_t value = samples->len >= STREAM_MIN_SAMPLES ? rv_median_int64(samples, trace_wide) : trace_wide;
    return CLAMP(value, 0, max_ns);
}

/* Median of every stream's samples together. */
static int64_t pooled_median(GPtrArray *per_stream, int64_t fallback, uint64_t *count)
{
    GArray *all = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint r = 0; r < per_stream->len; r++) {
        GArray *samples = g_ptr_array_index(per_stream, r);
        g_array_append_vals(all, samples->data, samples->len);
    }
    *count = all->len;
    int64_t median = rv_median_int64(all, fallback);
    g_array_unref(all);
    return median;
}

static void estimate_delays(builder *b)
{
    guint count = b->graph->resources->len;
    int64_t *other = cross_resource_readiness(b, TRUE);
    GPtrArray *latency = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    GPtrArray *gap = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < count; r++) {
        g_ptr_array_add(latency, g_array_new(FALSE, FALSE, sizeof(int64_t)));
        g_ptr_array_add(gap, g_array_new(FALSE, FALSE, sizeof(int64_t)));
        if (is_gpu_stream(b, r)) latency_samples(b, r, other, g_ptr_array_index(latency, r));
    }
    rv_timing *timing = &b->graph->timing;
    timing->launch_latency_ns = CLAMP(pooled_median(latency, DEFAULT_LAUNCH_LATENCY_NS, &timing->latency_samples),
                                      0, MAX_LAUNCH_LATENCY_NS);
    for (guint r = 0; r < count; r++) {
        if (!is_gpu_stream(b, r)) continue;
        resource_at(b, r)->launch_latency_ns =
            stream_value(g_ptr_array_index(latency, r), timing->launch_latency_ns, MAX_LAUNCH_LATENCY_NS);
        gap_samples(b, r, resource_at(b, r)->launch_latency_ns, other, g_ptr_array_index(gap, r));
    }
    timing->idle_gap_ns = CLAMP(pooled_median(gap, DEFAULT_IDLE_GAP_NS, &timing->gap_samples), 0, MAX_IDLE_GAP_NS);
    for (guint r = 0; r < count; r++)
        if (is_gpu_stream(b, r))
            resource_at(b, r)->idle_gap_ns = stream_value(g_ptr_array_index(gap, r), timing->idle_gap_ns, MAX_IDLE_GAP_NS);
    g_ptr_array_unref(latency);
    g_ptr_array_unref(gap);
    g_free(other);
}

/* ---- launch queue ------------------------------------------------------- */

/* Recorded ends of a stream's tasks, kept non-decreasing so that "how many
 * had ended by t" is a binary search (a stream runs its tasks in order). */
static GArray *stream_ends(const builder *b, guint stream)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    GArray *ends = g_array_sized_new(FALSE, FALSE, sizeof(int64_t), tasks->len);
    int64_t running = G_MININT64;
    for (guint k = 0; k < tasks->len; k++) {
        running = MAX(running, task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, k))));
        g_array_append_val(ends, running);
    }
    return ends;
}

static guint count_ended_by(const GArray *ends, guint limit, int64_t t)
{
    guint low = 0, high = limit;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(ends, int64_t, middle) <= t) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* What a launch costs when it does not block: the 10th percentile of the
 * launch calls (in a GPU-bound trace most launches block, so the median
 * would be a blocked one). */
static int64_t unblocked_launch_call(const builder *b)
{
    GArray *durations = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        const rv_task *call = builder_is_gpu_task(rv_graph_task(b->graph, id)) ? plain_launch(b, id) : NULL;
        if (call != NULL) g_array_append_val(durations, call->duration_ns);
    }
    int64_t typical = rv_quantile_int64(durations, 0.1, 5000);
    g_array_unref(durations);
    return typical;
}

/* A launch call that ran long, by its stream and its position there. */
typedef struct {
    guint stream;
    guint position;      /* the launched task's index in the stream's order */
    int64_t returned_ns; /* the call's recorded end */
} blocked_launch;

static void collect_blocked_launches(const builder *b, guint stream, int64_t long_call_ns, GArray *out)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    for (guint k = 1; k < tasks->len; k++) {
        const rv_task *call = plain_launch(b, g_array_index(tasks, int32_t, k));
        if (call == NULL || call->duration_ns < long_call_ns) continue;
        blocked_launch blocked = { stream, k, task_recorded_end(call) };
        g_array_append_val(out, blocked);
    }
}

/* The first guess of the depth: the median over the blocked calls of their
 * position minus the position of the last task that ended by their return. */
static int64_t first_guess(const GArray *blocked, GPtrArray *ends)
{
    GArray *depths = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < blocked->len; i++) {
        const blocked_launch *call = &g_array_index(blocked, blocked_launch, i);
        guint ended = count_ended_by(g_ptr_array_index(ends, call->stream), call->position, call->returned_ns);
        int64_t depth = (int64_t)call->position - ((int64_t)ended - 1);
        g_array_append_val(depths, depth);
    }
    int64_t guess = rv_median_int64(depths, 0);
    g_array_unref(depths);
    return guess;
}

/* How much "return minus the end of the task `depth` launches earlier"
 * varies over the blocked calls (interquartile range), or -1 when fewer
 * than QUEUE_MIN_SAMPLES calls have such a task. */
static int64_t release_spread(const GArray *blocked, GPtrArray *ends, int64_t depth)
{
    GArray *gaps = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint i = 0; i < blocked->len; i++) {
        const blocked_launch *call = &g_array_index(blocked, blocked_launch, i);
        if ((int64_t)call->position < depth) continue;
        GArray *stream_end = g_ptr_array_index(ends, call->stream);
        int64_t gap = call->returned_ns - g_array_index(stream_end, int64_t, call->position - (guint)depth);
        g_array_append_val(gaps, gap);
    }
    int64_t spread = -1;
    if (gaps->len >= QUEUE_MIN_SAMPLES)
        spread = rv_quantile_int64(gaps, 0.75, 0) - rv_quantile_int64(gaps, 0.25, 0);
    g_array_unref(gaps);
    return spread;
}

/*
 * A blocked call returns a moment (the same few microseconds each time)
 * after the task `depth` launches before it ends.  So with the right depth,
 * "return minus that end" barely varies over the blocked calls, while one
 * more or less puts a whole kernel's length into it.  Of the depths near
 * the first guess, the one with the tightest spread wins (ties: the nearer
 * to the guess).  A constant clock error moves every such gap alike and
 * does not change which wins.
 */
static int64_t tightest_depth(const GArray *blocked, GPtrArray *ends, int64_t guess)
{
    /* Nearest to the guess first, so that a tie (kernels all alike) keeps it. */
    static const int offsets[] = { 0, -1, 1, -2, 2 };
    int64_t best = -1, best_spread = G_MAXINT64;
    for (gsize i = 0; i < G_N_ELEMENTS(offsets); i++) {
        int64_t depth = guess + offsets[i];
        if (depth < 1) continue;
        int64_t spread = release_spread(blocked, ends, depth);
        if (spread >= 0 && spread < best_spread) {
            best = depth;
            best_spread = spread;
        }
    }
    return best;
}

static void estimate_queue_depth(builder *b)
{
    int64_t long_call_ns = MAX(BLOCKED_CALL_MIN_NS, 10 * unblocked_launch_call(b));
    GArray *blocked = g_array_new(FALSE, FALSE, sizeof(blocked_launch));
    GPtrArray *ends = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < b->graph->resources->len; r++) {
        g_ptr_array_add(ends, stream_ends(b, r));
        if (is_gpu_stream(b, r)) collect_blocked_launches(b, r, long_call_ns, blocked);
    }
    rv_timing *timing = &b->graph->timing;
    timing->queue_samples = blocked->len;
    timing->queue_depth = DEFAULT_QUEUE_DEPTH;
    timing->queue_measured = 0;
    if (blocked->len >= QUEUE_MIN_SAMPLES) {
        int64_t depth = tightest_depth(blocked, ends, first_guess(blocked, ends));
        if (depth > QUEUE_MIN_SAMPLES && depth <= G_MAXINT32) {
            timing->queue_depth = (int32_t)depth;
            timing->queue_measured = 1;
        }
    }
    g_array_unref(blocked);
    g_ptr_array_unref(ends);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (is_gpu_stream(b, r)) resource_at(b, r)->queue_depth = timing->queue_depth;
}

/* Launch calls whose recorded duration includes waiting for a queue slot
 * keep only what they took after the slot freed. */
static void trim_blocked_launches(builder *b, guint stream)
{
    int32_t depth = resource_at(b, stream)->queue_depth;
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    for (guint k = (guint)depth; depth > 0 && k < tasks->len; k++) {
        int32_t launch = g_array_index(b->task_launch, int32_t, g_array_index(tasks, int32_t, k));
        if (launch < 0 || (rv_graph_task(b->graph, launch)->flags & RV_TASK_FLAG_BLOCKING)) continue;
        rv_task *call = rv_graph_task(b->graph, launch);
        int64_t freed = task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, k - (guint)depth)));
        if (freed <= call->recorded_start_ns + RV_CAUSAL_TOLERANCE_NS) continue;
        int64_t call_end = task_recorded_end(call);
        int64_t own = call_end - CLAMP(freed, call->recorded_start_ns, call_end);
        call->recorded_start_ns = call_end - own;
        call->duration_ns = own;
        b->graph->build_stats.queue_blocked_launches++;
    }
}

/* ---- host overhead ------------------------------------------------------ */

static void host_overheads(builder *b, guint thread, const int64_t *ready)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)thread);
    int64_t free_at = b->origin_ns;
    for (guint k = 0; k < tasks->len; k++) {
        int32_t id = g_array_index(tasks, int32_t, k);
        rv_task *task = rv_graph_task(b->graph, id);
        task->host_overhead_ns = MAX(0, task->recorded_start_ns - MAX(free_at, ready[id]));
        free_at = MAX(free_at, task_recorded_end(task));
    }
}

/* Order matters: the delays are measured on untrimmed calls, and host
 * overheads are taken before trimming moves a blocked call's recorded start
 * to where its own cost begins (the queue wait is then in neither its
 * overhead nor its duration, but in the simulator's queue rule). */
void rv_build_timing(builder *b)
{
    estimate_delays(b);
    estimate_queue_depth(b);
    int64_t *ready = cross_resource_readiness(b, FALSE);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (!is_gpu_stream(b, r)) host_overheads(b, r, ready);
    g_free(ready);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (is_gpu_stream(b, r)) trim_blocked_launches(b, r);
}

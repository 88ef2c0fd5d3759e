/*
 * timing.c - the typical GPU delays of a trace, its launch-queue depth, and
 * each CPU call's host overhead (the timing model is in graph.h).
 *
 * Nothing here gives a GPU task a delay of its own.  Each value is an
 * estimate with its evidence (rv_estimate: value, samples, spread, source),
 * robust to a few odd samples and to one long idle, falling back to a
 * documented prior when the trace shows too little:
 *   - launch latency, per GPU stream: start of a GPU task minus the end of
 *     its launch call, over tasks whose stream was idle and whose other
 *     dependencies were met when the call returned (median; a sample over
 *     MAX_LAUNCH_LATENCY_NS is a wait the rules do not know, left out).  A
 *     stream with
 *     fewer than STREAM_MIN_SAMPLES takes the trace-wide median; a trace
 *     with none takes PRIOR_LAUNCH_LATENCY_NS.
 *   - idle gap, per GPU stream: start minus the previous task's end, over
 *     tasks whose launch call had returned at least a launch latency before
 *     the stream freed and whose other dependencies were met by then, so
 *     that the stream alone held them back (median).  A sample over
 *     GAP_SAMPLE_MAX_NS is not the stream's dispatch gap but a wait the
 *     rules do not know (a missed dependency; or a stretch of GPU time
 *     shifted against the host, where every task looks queued and the gaps
 *     are the host's launch pace): it is left out.  Prior:
 *     PRIOR_IDLE_GAP_NS.
 *   - launch-queue depth: CUDA blocks a launch while its queue is full.  A
 *     launch call that ran at least BLOCKED_CALL_MIN_NS and ten times an
 *     unblocked launch returns when a slot frees: just after the task
 *     launched `depth` launches before it ends.  Each such call says which
 *     depth it saw; the depth most of them agree on (tightest_depth()) is
 *     taken when at least QUEUE_MIN_AGREEING calls agree within one launch
 *     and they are at least a quarter of the long calls.  Otherwise the
 *     driver's depth is assumed: PRIOR_QUEUE_DEPTH_CUDA on CUDA; on ROCm no
 *     limit (HIP queues launches in software; the shipped MI300X trace runs
 *     thousands of launches ahead without a call blocking).  A trace that
 *     shows more launches in flight on one stream, without a call blocking,
 *     than the prior allows has no limit either (source "bound").
 * All are clamped to what hardware does (a launch latency above 200 us, or
 * a gap above 100 us, is a sign of a missed dependency, not of the
 * hardware).
 *
 * A long launch call whose recorded time includes a full-queue wait keeps
 * only its own cost: the part after the task that freed its slot ended.
 * The simulator puts the wait back by rule, so a faster GPU blocks less.
 * With an assumed depth, only calls long enough to have blocked are trimmed.
 *
 * The host overhead of a CPU task is the recorded time between the end of
 * the previous task on its thread (or the moment an edge from elsewhere
 * released it, if later) and its start: Python and framework time that no
 * recorded call accounts for.  A thread's first task has none: nothing in
 * the trace says when the thread became ready, so it starts when what it
 * waits for allows (origins.c).  This is the one value taken per task from
 * recorded starts, and it belongs to the task (DESIGN "Tasks").
 */
#include "streams.h"
#include "reverie/checked.h"
#include "reverie/stats.h"

/* Priors, used when a trace shows too little (each value's source):
 * - a blocking call's return 5 us after its work ended: the shipped traces
 *   whose clocks agree (4-9 us);
 * - launch latency 2 us and idle gap 1 us: the middle of what the shipped
 *   traces measure where they have the samples (launch latency 0.5-5 us,
 *   gap 0.75-3 us on V100, A100, H100, RTX 2080 Ti and MI300X; `info`);
 * - CUDA's launch queue of 1024 pending launches: the driver's limit as
 *   the shipped ResNet-50 V100 trace measures it (1022 from 936 blocked
 *   calls) and as NVIDIA's forums state it; ROCm: no limit (0). */
#define PRIOR_LAUNCH_LATENCY_NS 2000
#define PRIOR_IDLE_GAP_NS 1000
#define PRIOR_SYNC_RETURN_NS 5000
#define PRIOR_QUEUE_DEPTH_CUDA 1024
#define MAX_LAUNCH_LATENCY_NS 200000
#define MAX_IDLE_GAP_NS 100000
/* The shipped traces' gaps between busy kernels are 0-8 us (`info`). */
#define GAP_SAMPLE_MAX_NS 20000
#define STREAM_MIN_SAMPLES 30
/* One direct observation of a trace's launch latency or gap says more
 * about that trace than a prior from others does: the trace-wide values
 * need one sample (info prints how many); a stream's own, thirty. */
#define TRACE_MIN_SAMPLES 1
#define QUEUE_MIN_AGREEING 32
/* The typical return decides what counts as an unexplained CPU wait, so a
 * handful of calls do not set it. */
#define SYNC_RETURN_MIN_SAMPLES 8
#define BLOCKED_CALL_MIN_NS 50000
/* A blocked launch returns within this long after its slot freed (the
 * shipped V100 trace: 3-6 us). */
#define RELEASE_WINDOW_NS 10000

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
            if (sample <= MAX_LAUNCH_LATENCY_NS) g_array_append_val(out, sample);
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
        if (sample <= GAP_SAMPLE_MAX_NS) g_array_append_val(out, sample);
    }
}

/* The estimate a list of samples gives: their median and interquartile
 * range, clamped to [0, max_ns]; or `fallback` (its source kept) when
 * there are fewer than min_samples.  Sorts the list. */
static rv_estimate estimate_of(GArray *samples, guint min_samples, rv_estimate fallback, int64_t max_ns)
{
    if (samples->len < min_samples || samples->len == 0) {
        fallback.samples = samples->len;
        return fallback;
    }
    rv_estimate estimate = { 0, 0, samples->len, RV_SOURCE_MEASURED };
    estimate.value = CLAMP(rv_median_int64(samples, 0), 0, max_ns);
    estimate.spread = rv_quantile_int64(samples, 0.75, 0) - rv_quantile_int64(samples, 0.25, 0);
    return estimate;
}

static rv_estimate prior(int64_t value)
{
    rv_estimate estimate = { value, 0, 0, RV_SOURCE_PRIOR };
    return estimate;
}

/* A stream's own estimate with enough samples, else the trace-wide one. */
static rv_estimate stream_estimate(GArray *samples, const rv_estimate *trace_wide, int64_t max_ns)
{
    rv_estimate fallback = *trace_wide;
    if (fallback.source == RV_SOURCE_MEASURED) fallback.source = RV_SOURCE_TRACE_WIDE;
    return estimate_of(samples, STREAM_MIN_SAMPLES, fallback, max_ns);
}

/* Every stream's samples together. */
static GArray *pooled(GPtrArray *per_stream)
{
    GArray *all = g_array_new(FALSE, FALSE, sizeof(int64_t));
    for (guint r = 0; r < per_stream->len; r++) {
        GArray *samples = g_ptr_array_index(per_stream, r);
        g_array_append_vals(all, samples->data, samples->len);
    }
    return all;
}

static GPtrArray *sample_lists(guint count)
{
    GPtrArray *lists = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    for (guint r = 0; r < count; r++) g_ptr_array_add(lists, g_array_new(FALSE, FALSE, sizeof(int64_t)));
    return lists;
}

static void estimate_latencies(builder *b, const int64_t *other)
{
    guint count = b->graph->resources->len;
    GPtrArray *latency = sample_lists(count);
    for (guint r = 0; r < count; r++)
        if (is_gpu_stream(b, r)) latency_samples(b, r, other, g_ptr_array_index(latency, r));
    rv_timing *timing = &b->graph->timing;
    GArray *all = pooled(latency);
    timing->launch_latency = estimate_of(all, TRACE_MIN_SAMPLES, prior(PRIOR_LAUNCH_LATENCY_NS), MAX_LAUNCH_LATENCY_NS);
    g_array_unref(all);
    for (guint r = 0; r < count; r++) {
        if (!is_gpu_stream(b, r)) continue;
        rv_resource *resource = resource_at(b, r);
        resource->measured_latency = stream_estimate(g_ptr_array_index(latency, r), &timing->launch_latency,
                                                     MAX_LAUNCH_LATENCY_NS);
        resource->launch_latency_ns = resource->measured_latency.value;
    }
    g_ptr_array_unref(latency);
}

static void estimate_gaps(builder *b, const int64_t *other)
{
    guint count = b->graph->resources->len;
    GPtrArray *gap = sample_lists(count);
    for (guint r = 0; r < count; r++)
        if (is_gpu_stream(b, r)) gap_samples(b, r, resource_at(b, r)->launch_latency_ns, other, g_ptr_array_index(gap, r));
    rv_timing *timing = &b->graph->timing;
    GArray *all = pooled(gap);
    timing->idle_gap = estimate_of(all, TRACE_MIN_SAMPLES, prior(PRIOR_IDLE_GAP_NS), MAX_IDLE_GAP_NS);
    g_array_unref(all);
    for (guint r = 0; r < count; r++) {
        if (!is_gpu_stream(b, r)) continue;
        rv_resource *resource = resource_at(b, r);
        resource->measured_gap = stream_estimate(g_ptr_array_index(gap, r), &timing->idle_gap, MAX_IDLE_GAP_NS);
        resource->idle_gap_ns = resource->measured_gap.value;
    }
    g_ptr_array_unref(gap);
}

static void estimate_delays(builder *b)
{
    int64_t *other = cross_resource_readiness(b, TRUE);
    estimate_latencies(b, other);
    estimate_gaps(b, other);
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

/* A launch call, by its stream and its position there. */
typedef struct {
    guint stream;
    guint position;      /* the launched task's index in the stream's order */
    int64_t returned_ns; /* the call's recorded end */
} stream_launch;

/* What the launch calls of a trace show about its queue. */
typedef struct {
    const builder *b;
    GArray *blocked;          /* stream_launch: calls long enough to have blocked */
    GPtrArray *ends;          /* per resource: stream_ends() */
    int64_t unblocked_ns;     /* what a launch call costs when it does not block */
    int64_t long_call_ns;     /* how long a call must be to count as blocked */
    uint64_t unblocked_in_flight; /* most launches in flight at a short call's return */
} queue_evidence;

/* Launches in flight on a stream when a call returned: those before it not
 * yet ended, plus its own. */
static int64_t in_flight(const queue_evidence *evidence, const stream_launch *call)
{
    guint ended = count_ended_by(g_ptr_array_index(evidence->ends, call->stream), call->position, call->returned_ns);
    return (int64_t)call->position - (int64_t)ended + 1;
}

static void collect_launches(const builder *b, guint stream, queue_evidence *evidence)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    for (guint k = 0; k < tasks->len; k++) {
        const rv_task *call = plain_launch(b, g_array_index(tasks, int32_t, k));
        if (call == NULL) continue;
        stream_launch launch = { stream, k, task_recorded_end(call) };
        if (call->duration_ns >= evidence->long_call_ns) g_array_append_val(evidence->blocked, launch);
        else evidence->unblocked_in_flight = MAX(evidence->unblocked_in_flight, (uint64_t)MAX(0, in_flight(evidence, &launch)));
    }
}

/* How many blocked calls returned within `window` after the task `depth`
 * launches before them ended: with the right depth, nearly all of them. */
static guint agreeing(const queue_evidence *evidence, int64_t depth, int64_t window)
{
    guint count = 0;
    for (guint i = 0; i < evidence->blocked->len; i++) {
        const stream_launch *call = &g_array_index(evidence->blocked, stream_launch, i);
        if ((int64_t)call->position < depth) continue;
        GArray *ends = g_ptr_array_index(evidence->ends, call->stream);
        int64_t gap = call->returned_ns - g_array_index(ends, int64_t, call->position - (guint)depth);
        if (gap >= -RV_CAUSAL_TOLERANCE_NS && gap <= window) count++;
    }
    return count;
}

typedef struct {
    int64_t depth;
    guint seen;
} depth_candidate;

static gint more_seen_first(gconstpointer left, gconstpointer right)
{
    const depth_candidate *a = left, *b = right;
    if (a->seen != b->seen) return a->seen > b->seen ? -1 : 1;
    return a->depth < b->depth ? -1 : a->depth > b->depth;
}

/* Each blocked call's in-flight count at its return, as candidates with
 * how often each was seen, most seen first. */
static GArray *depth_candidates(const queue_evidence *evidence)
{
    GHashTable *seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint i = 0; i < evidence->blocked->len; i++) {
        int64_t depth = in_flight(evidence, &g_array_index(evidence->blocked, stream_launch, i));
        if (depth < 1) continue;
        gpointer count = g_hash_table_lookup(seen, &depth);
        if (count == NULL) g_hash_table_insert(seen, g_memdup2(&depth, sizeof depth), GUINT_TO_POINTER(1));
        else g_hash_table_insert(seen, g_memdup2(&depth, sizeof depth), GUINT_TO_POINTER(GPOINTER_TO_UINT(count) + 1));
    }
    GArray *candidates = g_array_new(FALSE, FALSE, sizeof(depth_candidate));
    GHashTableIter iter;
    gpointer key, value;
    g_hash_table_iter_init(&iter, seen);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        depth_candidate candidate = { *(int64_t *)key, GPOINTER_TO_UINT(value) };
        g_array_append_val(candidates, candidate);
    }
    g_hash_table_destroy(seen);
    g_array_sort(candidates, more_seen_first);
    return candidates;
}

/* The depth the blocked calls agree on.  A blocked call returns when the
 * task `depth` launches before it ends, so at its return it sees `depth`
 * launches in flight (its own included): each call's count is a candidate.
 * Of the most seen candidates (and their neighbours, since a call that
 * returns a moment late sees one fewer), the one the most calls agree with
 * - returned within RELEASE_WINDOW_NS of that task's end - wins (ties: the
 * smaller).  Clock errors move every release alike and do not change which
 * wins; a stretch of the trace where the GPU is shifted against the host,
 * or long calls that did not block at all, give scattered candidates that
 * few calls agree with. */
static int64_t agreed_depth(const queue_evidence *evidence, guint *agreeing_calls)
{
    GArray *candidates = depth_candidates(evidence);
    int64_t best = -1;
    guint best_count = 0;
    for (guint i = 0; i < MIN(candidates->len, 8u); i++)
        for (int64_t depth = g_array_index(candidates, depth_candidate, i).depth - 1;
             depth <= g_array_index(candidates, depth_candidate, i).depth + 1; depth++) {
            guint count = depth >= 1 ? agreeing(evidence, depth, RELEASE_WINDOW_NS) : 0;
            if (count > best_count || (count == best_count && depth < best)) {
                best = depth;
                best_count = count;
            }
        }
    g_array_unref(candidates);
    *agreeing_calls = best_count;
    return best;
}

/* Is the trace from an AMD GPU (ROCm: hip* calls)? */
static gboolean is_rocm(const builder *b)
{
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        const rv_task *task = rv_graph_task(b->graph, id);
        if (task->kind == RV_TASK_CPU && task->correlation >= 0)
            return g_str_has_prefix(rv_strings_get(b->graph->strings, task->name), "hip");
    }
    return FALSE;
}

static rv_estimate queue_estimate(const builder *b, const queue_evidence *evidence)
{
    guint count = 0;
    int64_t depth = evidence->blocked->len ? agreed_depth(evidence, &count) : -1;
    if (depth > 0 && count >= QUEUE_MIN_AGREEING && 4 * count >= evidence->blocked->len) {
        rv_estimate measured = { depth, 0, count, RV_SOURCE_MEASURED };
        return measured;
    }
    rv_estimate assumed = prior(is_rocm(b) ? 0 : PRIOR_QUEUE_DEPTH_CUDA);
    assumed.samples = evidence->blocked->len;
    if (assumed.value > 0 && evidence->unblocked_in_flight > (uint64_t)assumed.value) {
        assumed.value = 0; /* more in flight than the prior allows, and no call blocked */
        assumed.source = RV_SOURCE_BOUND;
    }
    return assumed;
}

static void queue_evidence_init(const builder *b, queue_evidence *evidence)
{
    evidence->b = b;
    evidence->blocked = g_array_new(FALSE, FALSE, sizeof(stream_launch));
    evidence->ends = g_ptr_array_new_with_free_func((GDestroyNotify)g_array_unref);
    evidence->unblocked_ns = unblocked_launch_call(b);
    evidence->long_call_ns = MAX(BLOCKED_CALL_MIN_NS, 10 * evidence->unblocked_ns);
    evidence->unblocked_in_flight = 0;
    for (guint r = 0; r < b->graph->resources->len; r++) g_ptr_array_add(evidence->ends, stream_ends(b, r));
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (is_gpu_stream(b, r)) collect_launches(b, r, evidence);
}

static void queue_evidence_clear(queue_evidence *evidence)
{
    g_array_unref(evidence->blocked);
    g_ptr_array_unref(evidence->ends);
}

static void estimate_queue_depth(builder *b)
{
    queue_evidence evidence;
    queue_evidence_init(b, &evidence);
    rv_timing *timing = &b->graph->timing;
    timing->queue_depth = queue_estimate(b, &evidence);
    timing->queue_unblocked_in_flight = evidence.unblocked_in_flight;
    b->long_launch_ns = evidence.long_call_ns;
    b->unblocked_launch_ns = evidence.unblocked_ns;
    queue_evidence_clear(&evidence);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (is_gpu_stream(b, r)) resource_at(b, r)->queue_depth = (int32_t)timing->queue_depth.value;
}

/* ---- what a full queue says about the clocks ----------------------------- */

/* A blocked launch returns at most this long after its slot freed, as a
 * bound on the clock offset: generous beside the 3-6 us the shipped V100
 * trace shows, so that a call the host scheduled a little late contradicts
 * nothing and clocks that agree stay at 0. */
#define RELEASE_RETURN_MAX_NS 50000

/* The blocked calls the depth is searched with (evenly spaced over them),
 * and the deepest queue tried (CUDA's holds 1024 launches). */
#define RELEASE_SEARCH_CALLS 64
#define RELEASE_SEARCH_DEPTH 2048

/* A blocked call's release gap on the raw clocks: the recorded end of the
 * task `depth` launches before it (GPU clock) minus the call's return (CPU
 * clock); G_MININT64 when it has no such task, or when the task after that
 * one did not start within GAP_SAMPLE_MAX_NS of its end: with the queue
 * full the next task is waiting, so the stream runs on without idling (a
 * call that returned while the stream idled did not wait for a slot). */
static int64_t release_gap(const queue_evidence *evidence, const stream_launch *call, int64_t depth)
{
    if ((int64_t)call->position < depth) return G_MININT64;
    guint released = call->position - (guint)depth;
    GArray *ends = g_ptr_array_index(evidence->ends, call->stream);
    GArray *tasks = builder_resource_tasks(evidence->b, (int32_t)call->stream);
    int64_t next_start = rv_graph_task(evidence->b->graph, g_array_index(tasks, int32_t, released + 1))->recorded_start_ns;
    int64_t freed = g_array_index(ends, int64_t, released);
    if (rv_saturating_sub(next_start, freed) > GAP_SAMPLE_MAX_NS) return G_MININT64;
    return MAX(rv_saturating_sub(freed, call->returned_ns), G_MININT64 + 1);
}

/* The most of the sorted values that lie within `window` of one another:
 * their count, and the smallest and largest of them in *first, *last. */
static guint densest_window(const GArray *sorted, int64_t window, int64_t *first, int64_t *last)
{
    guint best = 0;
    for (guint low = 0, high = 0; high < sorted->len; high++) {
        while (rv_saturating_sub(g_array_index(sorted, int64_t, high), g_array_index(sorted, int64_t, low)) > window) low++;
        if (high - low + 1 > best) {
            best = high - low + 1;
            *first = g_array_index(sorted, int64_t, low);
            *last = g_array_index(sorted, int64_t, high);
        }
    }
    return best;
}

/* Every sampled call's release gap at `depth`, sorted. */
static void sampled_gaps(const queue_evidence *evidence, guint stride, int64_t depth, GArray *gaps)
{
    g_array_set_size(gaps, 0);
    for (guint i = 0; i < evidence->blocked->len; i += stride) {
        int64_t gap = release_gap(evidence, &g_array_index(evidence->blocked, stream_launch, i), depth);
        if (gap != G_MININT64) g_array_append_val(gaps, gap);
    }
    rv_sort_int64(gaps);
}

/* The depth whose releases, read with the clock the other pairs allow,
 * contradict the fewest pairs: at each depth, the sampled calls whose gaps
 * bunch most tightly put the offset in their window, and the calls outside
 * the bunch (or with no task that far back) count against it, as do the
 * other pairs that offset contradicts (`contradicted`).  With kernels all
 * alike every depth bunches as tightly, and a shallower queue with a later
 * GPU clock fits the window as well as a deeper one: the calls without a
 * task that far back bound it from above, and among depths that fit alike
 * the one nearest the driver's (PRIOR_QUEUE_DEPTH_CUDA) wins.  -1 when no
 * call has a task to wait for. */
static int64_t release_depth(const queue_evidence *evidence, guint stride, rv_offset_cost contradicted, void *data)
{
    guint sample_size = (evidence->blocked->len + stride - 1) / stride;
    GArray *gaps = g_array_new(FALSE, FALSE, sizeof(int64_t));
    int64_t best_depth = -1, deepest = 0; /* no call has a task further back */
    guint64 best_cost = G_MAXUINT64;
    for (guint i = 0; i < evidence->blocked->len; i += stride)
        deepest = MAX(deepest, (int64_t)g_array_index(evidence->blocked, stream_launch, i).position);
    for (int64_t depth = 1; depth <= MIN(deepest, RELEASE_SEARCH_DEPTH); depth++) {
        sampled_gaps(evidence, stride, depth, gaps);
        if (gaps->len == 0) continue; /* every stream idled after these releases */
        int64_t first = 0, last = 0;
        guint bunched = densest_window(gaps, RELEASE_WINDOW_NS, &first, &last);
        /* the bunch's tightest bound: its calls returned promptly */
        guint64 cost = (guint64)(sample_size - bunched) * stride + contradicted(last, data);
        if (cost < best_cost ||
            (cost == best_cost && llabs(depth - PRIOR_QUEUE_DEPTH_CUDA) < llabs(best_depth - PRIOR_QUEUE_DEPTH_CUDA))) {
            best_cost = cost;
            best_depth = depth;
        }
    }
    g_array_unref(gaps);
    return best_depth;
}

void rv_queue_release_bounds(const builder *b, rv_offset_cost contradicted, void *data, GArray *lower, GArray *upper)
{
    queue_evidence evidence;
    queue_evidence_init(b, &evidence);
    guint stride = MAX(1u, evidence.blocked->len / RELEASE_SEARCH_CALLS);
    int64_t depth = evidence.blocked->len >= QUEUE_MIN_AGREEING ? release_depth(&evidence, stride, contradicted, data) : -1;
    if (depth > 0) {
        GArray *gaps = g_array_new(FALSE, FALSE, sizeof(int64_t));
        sampled_gaps(&evidence, 1, depth, gaps);
        int64_t first = 0, last = 0;
        guint bunched = densest_window(gaps, RELEASE_WINDOW_NS, &first, &last);
        if (bunched >= QUEUE_MIN_AGREEING && 4 * bunched >= evidence.blocked->len)
            for (guint i = 0; i < gaps->len; i++) {
                int64_t gap = g_array_index(gaps, int64_t, i);
                if (gap < first || gap > rv_saturating_add(first, RELEASE_WINDOW_NS)) continue;
                int64_t prompt = rv_saturating_add(gap, RELEASE_RETURN_MAX_NS);
                g_array_append_val(lower, gap);
                g_array_append_val(upper, prompt);
            }
        g_array_unref(gaps);
    }
    queue_evidence_clear(&evidence);
}

/* A launch call of a stream and its release gap (freed - return). */
typedef struct {
    int64_t gap;
    guint position;
} release_at;

static gint by_gap(gconstpointer left, gconstpointer right)
{
    const release_at *a = left, *b = right;
    return a->gap < b->gap ? -1 : a->gap > b->gap;
}

/* Per position on the stream: is its launch call long, its slot freed
 * before it began by the corrected clocks, and one of QUEUE_MIN_AGREEING
 * or more such calls whose gaps lie within RELEASE_WINDOW_NS of one
 * another?  Such a bunch returned a fixed time after its releases: queue
 * waits in a stretch of GPU time shifted against the host (a stall or a
 * clock jump that one offset cannot fit).  A long call that is alone in
 * that, or merely one of a few, blocked on something else (the GIL, an
 * allocation) and keeps its time.  g_free. */
static gboolean *shifted_releases(const builder *b, guint stream, int32_t depth)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    GArray *candidates = g_array_new(FALSE, FALSE, sizeof(release_at));
    for (guint k = (guint)depth; k < tasks->len; k++) {
        const rv_task *call = plain_launch(b, g_array_index(tasks, int32_t, k));
        if (call == NULL || call->duration_ns < b->long_launch_ns) continue;
        int64_t freed = task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, k - (guint)depth)));
        if (freed > rv_saturating_add(call->recorded_start_ns, RV_CAUSAL_TOLERANCE_NS)) continue;
        release_at candidate = { rv_saturating_sub(freed, task_recorded_end(call)), k };
        g_array_append_val(candidates, candidate);
    }
    g_array_sort(candidates, by_gap);
    gboolean *shifted = g_new0(gboolean, tasks->len);
    for (guint low = 0, high = 0; high < candidates->len; high++) {
        while (rv_saturating_sub(g_array_index(candidates, release_at, high).gap,
                                 g_array_index(candidates, release_at, low).gap) > RELEASE_WINDOW_NS)
            low++;
        if (high - low + 1 < QUEUE_MIN_AGREEING) continue;
        for (guint i = low; i <= high; i++) shifted[g_array_index(candidates, release_at, i).position] = TRUE;
    }
    g_array_unref(candidates);
    return shifted;
}

/* Launch calls whose recorded duration includes waiting for a queue slot
 * keep only what they took after the slot freed: any call that began
 * before its slot freed when the trace measured its depth, else only calls
 * long enough to have blocked (an assumed depth may not be the trace's).
 * Under a measured depth, the calls of a shifted stretch (shifted_releases)
 * keep the cost of a launch that did not block: the rest of their time is
 * the queue's wait, which the simulator's queue rule puts back. */
static void trim_blocked_launches(builder *b, guint stream)
{
    int32_t depth = resource_at(b, stream)->queue_depth;
    if (depth <= 0) return;
    gboolean measured = b->graph->timing.queue_depth.source == RV_SOURCE_MEASURED;
    gboolean *shifted = measured ? shifted_releases(b, stream, depth) : NULL;
    GArray *tasks = builder_resource_tasks(b, (int32_t)stream);
    for (guint k = (guint)depth; k < tasks->len; k++) {
        int32_t launch = g_array_index(b->task_launch, int32_t, g_array_index(tasks, int32_t, k));
        if (launch < 0 || (rv_graph_task(b->graph, launch)->flags & RV_TASK_FLAG_BLOCKING)) continue;
        rv_task *call = rv_graph_task(b->graph, launch);
        if (call->duration_ns < b->long_launch_ns && !measured) continue;
        int64_t freed = task_recorded_end(rv_graph_task(b->graph, g_array_index(tasks, int32_t, k - (guint)depth)));
        int64_t call_end = task_recorded_end(call);
        if (freed <= call->recorded_start_ns + RV_CAUSAL_TOLERANCE_NS) {
            if (shifted == NULL || !shifted[k]) continue;
            freed = call_end - MIN(call->duration_ns, b->unblocked_launch_ns);
        }
        int64_t own = call_end - CLAMP(freed, call->recorded_start_ns, call_end);
        call->recorded_start_ns = call_end - own;
        call->duration_ns = own;
        b->graph->build_stats.queue_blocked_launches++;
    }
    g_free(shifted);
}

/* ---- host overhead ------------------------------------------------------ */

static void host_overheads(builder *b, guint thread, const int64_t *ready)
{
    GArray *tasks = builder_resource_tasks(b, (int32_t)thread);
    int64_t free_at = rv_build_process_start(b, resource_at(b, thread)->process);
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
    /* Nothing says how soon a call returns when it did not block: a
     * pure return, the prior slack of a pair (clock.c). */
    b->graph->timing.sync_return = estimate_of(b->return_samples, SYNC_RETURN_MIN_SAMPLES, prior(PRIOR_SYNC_RETURN_NS),
                                               MAX_LAUNCH_LATENCY_NS);
    estimate_delays(b);
    estimate_queue_depth(b);
    int64_t *ready = cross_resource_readiness(b, FALSE);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (!is_gpu_stream(b, r)) host_overheads(b, r, ready);
    g_free(ready);
    for (guint r = 0; r < b->graph->resources->len; r++)
        if (is_gpu_stream(b, r)) trim_blocked_launches(b, r);
}

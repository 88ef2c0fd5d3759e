/*
 * clock.c - the offset between the CPU and GPU clocks of a trace, found and
 * corrected before any edge that compares the two is inferred.
 *
 * Kineto writes GPU times on the CPU clock after a conversion that can be
 * off.  Two facts of the CUDA API constrain the offset d = GPU clock - CPU
 * clock, one pair at a time:
 *   - a GPU task cannot start before its launch call began:
 *       d <= gpu start - launch start, for every launch;
 *   - a blocking call returns only after the GPU work it waited for ended
 *     (pairs from sync.c, found from the CPU side alone):
 *       d >= awaited end - call end, for every blocking call.
 * The offset is the one that the fewest pairs contradict; among those, the
 * nearest to 0 (the clocks are trusted as far as the evidence allows).  So
 * a handful of mismatched correlations, or a stretch of the trace whose GPU
 * events are shifted against the rest (a GPU-side stall, a clock jump), is
 * outvoted by the rest instead of moving the whole trace; a true offset of
 * every GPU event is contradicted by no pair once corrected, and found.
 *
 * One more fact decides when the pairs leave the offset free: on an idle
 * stream a kernel starts a few microseconds after its launch.  If, at the
 * chosen offset, no launch in the whole trace started within
 * MAX_IDLE_LATENCY_NS of its call's end, the GPU clock is ahead (or the GPU
 * never idled), and no explicit synchronize that blocked says the clocks
 * agree (it returns within MAX_RETURN_NS of what it waited for), the
 * offset moves up until the quickest launches take the prior latency.
 *
 * A GPU-bound trace has a third kind of pair (timing.c,
 * rv_queue_release_bounds): a launch call that waited for a full queue
 * returns just after the task that freed its slot ended, which bounds the
 * offset from both sides.  In a profiler window that opens while the GPU
 * is busy no launch finds its stream idle, and these are what pins the
 * clocks: hundreds of them, so one stalled stretch is outvoted.  A release
 * counts as an explicit synchronize that blocked does below (prompt).
 *
 * The result goes to graph->timing for `info` (value, the range of equally
 * good offsets, the pairs, how many it contradicts), and every GPU task's
 * recorded start is corrected by it.  Sync pairs it contradicts are not
 * dropped: sync.c keeps what the API says and reports the difference.
 */
#include "streams.h"
#include "reverie/stats.h"
#include <string.h>

#define MAX_IDLE_LATENCY_NS 200000
#define MAX_RETURN_NS 200000
#define PRIOR_LAUNCH_LATENCY_NS 2000
#define BLOCKED_SYNC_MIN_NS 50000
/* A launch's GPU task starts this long after the call began at the
 * quickest, and a sync returns this long after its work ended (the shipped
 * traces whose clocks agree: 4-9 us). */
#define PRIOR_PAIR_SLACK_NS 5000

/* The constraints: d <= upper[i] for launches, d >= lower[j] for syncs. */
typedef struct {
    GArray *upper;      /* int64, sorted */
    GArray *lower;      /* int64, sorted */
    guint launch_pairs; /* of upper: launches (the rest: queue releases) */
    GArray *idle_start; /* int64: gpu start - launch end, sorted */
    GArray *prompt;     /* int64: awaited end - call end of explicit synchronizes that blocked, and of
                         * launches released by a full queue */
} offset_evidence;

static void collect_launches(const builder *b, offset_evidence *evidence)
{
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        int32_t launch = g_array_index(b->task_launch, int32_t, id);
        if (launch < 0) continue;
        const rv_task *gpu = rv_graph_task(b->graph, id), *call = rv_graph_task(b->graph, launch);
        int64_t upper = gpu->recorded_start_ns - call->recorded_start_ns;
        int64_t after_return = gpu->recorded_start_ns - task_recorded_end(call);
        g_array_append_val(evidence->upper, upper);
        g_array_append_val(evidence->idle_start, after_return);
    }
}

static gboolean is_explicit_synchronize(const builder *b, const rv_task *call)
{
    return strstr(rv_strings_get(b->graph->strings, call->name), "Synchronize") != NULL;
}

static void collect_syncs(const builder *b, const GArray *pairs, offset_evidence *evidence)
{
    for (guint i = 0; i < pairs->len; i++) {
        const rv_sync_pair *pair = &g_array_index(pairs, rv_sync_pair, i);
        if (pair->rule == RV_SYNC_RULE_STAGED) continue;
        const rv_task *call = rv_graph_task(b->graph, pair->call);
        int64_t lower = task_recorded_end(rv_graph_task(b->graph, pair->awaited)) - task_recorded_end(call);
        g_array_append_val(evidence->lower, lower);
        if (is_explicit_synchronize(b, call) && call->duration_ns >= BLOCKED_SYNC_MIN_NS)
            g_array_append_val(evidence->prompt, lower);
    }
}

/* Values in a sorted array below x, and above x. */
static guint count_below(const GArray *sorted, int64_t x)
{
    guint low = 0, high = sorted->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(sorted, int64_t, middle) < x) low = middle + 1;
        else high = middle;
    }
    return low;
}

static guint count_above(const GArray *sorted, int64_t x)
{
    guint low = 0, high = sorted->len;
    while (low < high) {
        guint middle = (low + high) / 2;
        if (g_array_index(sorted, int64_t, middle) <= x) low = middle + 1;
        else high = middle;
    }
    return sorted->len - low;
}

/* Pairs that offset d contradicts. */
static guint contradicted(const offset_evidence *evidence, int64_t d)
{
    return count_below(evidence->upper, d) + count_above(evidence->lower, d);
}

static guint contradicted_by(int64_t d, void *evidence)
{
    return contradicted(evidence, d);
}

static void consider(const offset_evidence *evidence, int64_t d, int64_t *best, guint *best_count)
{
    guint count = contradicted(evidence, d);
    if (count < *best_count || (count == *best_count && llabs(d) < llabs(*best))) {
        *best = d;
        *best_count = count;
    }
}

/* The offset the fewest pairs contradict, nearest to 0 among those.  The
 * count only changes at a bound, so 0 and the bounds are the candidates. */
static int64_t least_contradicted(const offset_evidence *evidence, guint *count)
{
    int64_t best = 0;
    *count = contradicted(evidence, 0);
    const GArray *sides[] = { evidence->upper, evidence->lower };
    for (gsize s = 0; s < G_N_ELEMENTS(sides); s++)
        for (guint i = 0; i < sides[s]->len; i++) consider(evidence, g_array_index(sides[s], int64_t, i), &best, count);
    return best;
}

/* The tightest bounds around d that it satisfies. */
static void bounds_around(const offset_evidence *evidence, int64_t d, int64_t *low, int64_t *high)
{
    guint below = count_below(evidence->upper, d);
    *high = below < evidence->upper->len ? g_array_index(evidence->upper, int64_t, below) : G_MAXINT64;
    guint above = count_above(evidence->lower, d);
    guint satisfied = evidence->lower->len - above;
    *low = satisfied > 0 ? g_array_index(evidence->lower, int64_t, satisfied - 1) : G_MININT64;
}

/* Does some launch start its task within MAX_IDLE_LATENCY_NS of the call's
 * end at offset d, as on an idle stream?  (The quickest, a 0.1% quantile
 * so that one mismatched correlation does not decide.) */
static gboolean launch_found_idle_stream(const offset_evidence *evidence, int64_t d)
{
    return evidence->idle_start->len > 0 && rv_quantile_int64(evidence->idle_start, 0.001, 0) - d <= MAX_IDLE_LATENCY_NS;
}

/* Where in [low, high] the offset lies.  0 when the clocks agree (0 is in
 * range), unless a prompt pair (an explicit synchronize that blocked, or a
 * queue's release) gives the lower end and would, at 0, have returned more
 * than MAX_RETURN_NS after its work while no launch found its stream idle
 * at 0: such a call returns a few microseconds after the work it waited
 * for.  Then, and when 0 is out of range, that end plus the prior slack:
 * the launch end's slack is what the quickest launch waited, which can be tens
 * of microseconds (a CUDA graph's kernels all pair with a few graph
 * launches), or tens of milliseconds in a window of a GPU-bound run whose
 * launches all ran far ahead; a range that wide holds 0 and a clock 5 ms
 * off alike, and 0 would keep the wrong one.  Without such a synchronize,
 * both ends leave a few microseconds of slack (a kernel starts a few
 * microseconds after its call began; a sync returns a few after its work
 * ended), so the middle is nearer the truth than the end nearest 0; with
 * one side unbounded, the bound minus (plus) that slack's prior.  Each rule
 * moves with the bounds, so a shift of every GPU time moves the choice by
 * the same shift. */
static int64_t within_bounds(const offset_evidence *evidence, int64_t d, int64_t low, int64_t high)
{
    gboolean both = low > G_MININT64 && high < G_MAXINT64 && low <= high;
    int64_t prompt_low = G_MININT64;
    for (guint i = 0; i < evidence->prompt->len; i++) prompt_low = MAX(prompt_low, g_array_index(evidence->prompt, int64_t, i));
    gboolean prompt_sets_low = both && prompt_low == low;
    /* 0 would have that pair return more than MAX_RETURN_NS late, and no
     * launch that found its stream idle vouches for 0 */
    gboolean late_at_zero = prompt_sets_low && -low > MAX_RETURN_NS && !launch_found_idle_stream(evidence, 0);
    if ((d == 0 || (low <= 0 && 0 <= high)) && !late_at_zero) return d;
    if (prompt_sets_low) return MIN(low + PRIOR_PAIR_SLACK_NS, high);
    if (both) return low + (high - low) / 2;
    if (high < G_MAXINT64 && d == high) return high - PRIOR_PAIR_SLACK_NS;
    if (low > G_MININT64 && d == low) return low + PRIOR_PAIR_SLACK_NS;
    return d;
}

/* The move that gives the quickest launches the prior latency, when no
 * launch found its stream idle at offset d and no blocked synchronize
 * vouches for d; 0 otherwise. */
static int64_t idle_latency_correction(const offset_evidence *evidence, int64_t d)
{
    if (evidence->idle_start->len == 0 || launch_found_idle_stream(evidence, d)) return 0;
    int64_t quickest = rv_quantile_int64(evidence->idle_start, 0.001, 0) - d;
    for (guint i = 0; i < evidence->prompt->len; i++)
        if (d - g_array_index(evidence->prompt, int64_t, i) <= MAX_RETURN_NS) return 0;
    return quickest - PRIOR_LAUNCH_LATENCY_NS;
}

static void choose_offset(rv_timing *timing, offset_evidence *evidence)
{
    rv_sort_int64(evidence->upper);
    rv_sort_int64(evidence->lower);
    rv_sort_int64(evidence->idle_start);
    timing->offset_launch_pairs = evidence->launch_pairs;
    timing->offset_sync_pairs = evidence->lower->len;
    guint count = 0;
    int64_t d = least_contradicted(evidence, &count);
    bounds_around(evidence, d, &timing->offset_low_ns, &timing->offset_high_ns);
    d = within_bounds(evidence, d, timing->offset_low_ns, timing->offset_high_ns);
    int64_t move = idle_latency_correction(evidence, d);
    if (move > 0 && contradicted(evidence, d + move) <= count) d += move;
    timing->offset_contradicted = contradicted(evidence, d);
    bounds_around(evidence, d, &timing->offset_low_ns, &timing->offset_high_ns);
    rv_estimate offset = { d, 0, evidence->launch_pairs + evidence->lower->len, RV_SOURCE_MEASURED };
    if (timing->offset_low_ns > G_MININT64 && timing->offset_high_ns < G_MAXINT64)
        offset.spread = timing->offset_high_ns - timing->offset_low_ns;
    if (offset.samples == 0) {
        offset.source = RV_SOURCE_PRIOR;
        timing->clock_status = RV_CLOCK_NO_EVIDENCE;
    } else if (timing->offset_contradicted > 0) {
        timing->clock_status = RV_CLOCK_INCONSISTENT;
    } else {
        timing->clock_status = d == 0 ? RV_CLOCK_CONSISTENT : RV_CLOCK_CORRECTED;
    }
    timing->clock_offset = offset;
}

void rv_build_clock(builder *b, const GArray *sync_pairs)
{
    offset_evidence evidence = { g_array_new(FALSE, FALSE, sizeof(int64_t)), g_array_new(FALSE, FALSE, sizeof(int64_t)), 0,
                                 g_array_new(FALSE, FALSE, sizeof(int64_t)), g_array_new(FALSE, FALSE, sizeof(int64_t)) };
    collect_launches(b, &evidence);
    evidence.launch_pairs = evidence.upper->len;
    collect_syncs(b, sync_pairs, &evidence);
    rv_sort_int64(evidence.upper);
    rv_sort_int64(evidence.lower);
    guint before_releases = evidence.lower->len;
    rv_queue_release_bounds(b, contradicted_by, &evidence, evidence.lower, evidence.upper);
    /* a release is as prompt as a synchronize that blocked */
    for (guint i = before_releases; i < evidence.lower->len; i++)
        g_array_append_val(evidence.prompt, g_array_index(evidence.lower, int64_t, i));
    rv_timing *timing = &b->graph->timing;
    choose_offset(timing, &evidence);
    g_array_unref(evidence.upper);
    g_array_unref(evidence.lower);
    g_array_unref(evidence.idle_start);
    g_array_unref(evidence.prompt);
    int64_t d = timing->clock_offset.value;
    if (d == 0) return;
    for (int32_t id = 0; id < rv_graph_task_count(b->graph); id++) {
        rv_task *task = rv_graph_task(b->graph, id);
        /* Saturating: a forged trace's times can be anywhere in int64. */
        if (builder_is_gpu_task(task) && __builtin_sub_overflow(task->recorded_start_ns, d, &task->recorded_start_ns))
            task->recorded_start_ns = d > 0 ? G_MININT64 : G_MAXINT64;
    }
}

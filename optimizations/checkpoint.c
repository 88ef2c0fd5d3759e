/*
 * checkpoint.c - activation checkpointing (torch.utils.checkpoint,
 * checkpoint_sequential): the forward pass is cut into segments; only each
 * segment's input is kept, and the segment's forward runs again in the
 * backward pass, just before the segment's own backward, to rebuild the
 * activations it needs.
 *
 *   reverie whatif trace.json.gz --opt checkpoint:segments=4
 *
 * SEGMENTS.  Per step, the forward GPU tasks (not collectives), in
 * recorded order, are cut into `segments` runs of about equal GPU time;
 * the backward GPU tasks likewise, in reverse: the first backward run is
 * the last forward segment's backward.  As checkpoint_sequential does, the
 * last segment is not recomputed (its backward starts right after it, its
 * activations are still there), so segments=1 changes nothing.
 * RECOMPUTATION.  A copy of every GPU task of forward segment s (same
 * kind, name, stream and duration, tagged backward) is inserted on its
 * stream before the first task of s's backward run, with a launch call on
 * the thread that launches that run (the autograd thread), costed at the
 * trace's median launch and carrying the host time the forward spent to
 * reach the original launch: its host overhead and the calls between it
 * and the segment's previous launch (the segment's Python runs again).
 * MEMORY.  Every launch call of a recomputed segment but those of its
 * first operator (whose input is the segment's input, which checkpoint
 * keeps) is marked RV_MEM_EFFECT_RECOMPUTED with its segment (memory.h):
 * the memory model then keeps nothing of theirs after forward and holds a
 * segment's activations again while backward passes through it, so the
 * whatif's peak line shows what checkpointing saves.  A trace without
 * Input Dims gets the runtime; whatif says the peak is not estimated.
 * BLOCKS (cut=blocks).  torch.utils.checkpoint around each block of a
 * model (a Transformer layer, a residual block) recomputes every block,
 * the last too, and nothing outside them (embeddings, the head, the
 * loss).  A trace names no modules, so a block is found as the model's
 * repetition: the run of a step's forward GPU tasks whose kernel names
 * repeat with a period of at least MIN_BLOCK_TASKS tasks and that covers
 * the most GPU time (starting at its leftmost phase), then the same in
 * what comes before and after it (a ResNet's stages), for blocks at least
 * half as long as the first run's.  One kernel in a period may differ
 * (a first layer's attention kernel), and an instance beside a run that
 * is unlike the rest in more (a stage's first block: a downsampling
 * branch, no stochastic depth) is a block too when most of its kernels
 * are the block's and its length and GPU time are near a block's.  The
 * backward must repeat as many blocks; forward block i's copy goes before
 * the first task of its backward (the backward's blocks in reverse).
 * EARLY STOP (use_reentrant=false).  PyTorch's non-reentrant checkpoint
 * stops recomputing once every tensor the segment's backward saved is
 * back, so a segment's trailing operators whose outputs nothing in it
 * saves (a Transformer layer's last projection and residual add) are not
 * run again.  Which tensors an operator saves is ATen's (its derivative
 * formula): a matrix product, a normalization, gelu or attention save
 * their input, relu, softmax, sigmoid, tanh and dropout their output, an
 * add nothing.  Taking each operator's input as the previous GPU task's
 * output (a chain; a residual branch's input is older), a segment is
 * recomputed up to its last task whose output the next task saves or that
 * saves its own output.  use_reentrant=true (PyTorch's default when it is
 * not given) recomputes the whole segment.
 * HOOKS (use_reentrant=false).  The non-reentrant checkpoint runs each
 * segment's forward under saved-tensor hooks: a Python call for every
 * tensor an operator saves, in forward (pack), in the recomputation (pack
 * again) and in backward (unpack).  The forward's host time over a
 * segment grows by hook_cost (a fraction of it), the recomputation copies
 * that grown time, and the backward pays the forward's added time once
 * more.  hook_cost's default is measured, not derived: the forward's
 * host time over the checkpointed blocks grew by 0.87-0.95 of itself on
 * three models recorded on one H100 with and without checkpointing
 * (traces/recorded/h100_checkpoint; tests/bench/checkpoint_hooks.py),
 * 0.94-1.38 on an H200 (held out).  Not a constant of PyTorch: the
 * hooks' cost follows the operators (on RegNetY-800MF, recorded
 * afterwards, convolutions paid none and batch norms 15 us each, about
 * 0.1 of the forward's host time; Swin-T's steps varied more than it).
 * Weak: segments=N cuts by time, not by module; blocks whose kernels
 * vary with their shapes (DenseNet's growing layers, cuDNN's choices in a
 * CNN's backward) repeat too little to be found;
 * dropout's random state, and the recomputation overlapping the previous
 * segment's backward, are not modelled.
 */
#include <math.h>

#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec checkpoint_params[] = {
    { "segments", RV_PARAM_INTEGER, "1", "segments", "forward segments (checkpoint_sequential's segments; 1: none recomputed); cut=time only", NULL },
    { "cut", RV_PARAM_CHOICE, "time", NULL,
      "time: `segments` runs of equal GPU time, the last kept (checkpoint_sequential); blocks: every repeated block "
      "of the model recomputed, nothing outside them (torch.utils.checkpoint around each layer)", "time|blocks" },
    { "use_reentrant", RV_PARAM_CHOICE, "true", NULL,
      "PyTorch's use_reentrant: true recomputes whole segments (its default when not given); false stops once "
      "every tensor the backward saved is back (non-reentrant early stop)", "true|false" },
    { "hook_cost", RV_PARAM_NUMBER, "0.88", "x",
      "use_reentrant=false only: the host time a checkpointed block's forward operators spend in the checkpoint's "
      "saved-tensor hooks, as a fraction of their recorded host time, paid in forward and again in the "
      "recomputation, and as much again in backward (0.88: the median of three models recorded with and without "
      "checkpointing on one H100, 0.87-0.95; on an H200 0.94-1.38; on RegNetY-800MF about 0.1, its convolutions "
      "paying none; Swin-T's steps too noisy: tests/bench/checkpoint_hooks.py)", NULL },
    { NULL }
};

/* Cut tasks (recorded order) into n runs of about equal time: run index per position. */
static void cut_by_time(const rv_graph *graph, const GArray *tasks, int n, GArray *first_of_run)
{
    int64_t total = 0, so_far = 0;
    for (guint i = 0; i < tasks->len; i++) total += g_array_index(graph->tasks, rv_task, g_array_index(tasks, int32_t, i)).duration_ns;
    int run = -1;
    for (guint i = 0; i < tasks->len; i++) {
        int target = total > 0 ? (int)((double)so_far * n / (double)total) : (int)((guint64)i * (guint)n / tasks->len);
        target = MIN(target, n - 1);
        while (run < target) {
            run++;
            guint position = i;
            g_array_append_val(first_of_run, position);
        }
        so_far += g_array_index(graph->tasks, rv_task, g_array_index(tasks, int32_t, i)).duration_ns;
    }
    while ((int)first_of_run->len < n) g_array_append_val(first_of_run, tasks->len);
}

typedef struct {
    guint copies, other_stream;
    int64_t copied_ns;
    guint marked_calls;              /* launch calls whose activations are recomputed (memory.h) */
    guint blocks, block_tasks;       /* cut=blocks: blocks recomputed, their forward GPU tasks */
    gboolean early_stop;             /* the setting use_reentrant=false, read by every segment */
    guint not_rerun;                 /* GPU tasks early stop left out */
    int64_t host_ns;                 /* the recomputed launches' host time */
    int64_t host_overhead_ns;        /* its host overheads' share (what the hooks scaled; not the calls' run time) */
    guint irregular_blocks;          /* cut=blocks: forward first instances unlike the rest, recomputed too */
    double hook_cost;                /* use_reentrant=false: hook time over the forward's host time */
    int64_t hook_ns;                 /* host time the hooks added to the forward */
} totals;

static gboolean same_operator(const rv_task *a, const rv_task *b)
{
    return a->op == b->op && a->layer == b->layer && a->input_dims == b->input_dims;
}

/* Tell the memory model that forward[from, to) keeps nothing past forward
 * but its first operator's input: segment `segment` is rebuilt in backward. */
static void mark_recomputed(rv_graph *graph, const GArray *forward, guint from, guint to, int32_t segment, totals *sum)
{
    const rv_task first = *rv_graph_task(graph, g_array_index(forward, int32_t, from));
    guint i = from;
    while (i < to && same_operator(rv_graph_task(graph, g_array_index(forward, int32_t, i)), &first)) i++;
    GArray *rest = g_array_new(FALSE, FALSE, sizeof(int32_t));
    if (i < to) g_array_append_vals(rest, &g_array_index(forward, int32_t, i), to - i);
    sum->marked_calls += rv_memory_effect_add_for_tasks(graph, rest, RV_MEM_EFFECT_RECOMPUTED, 1.0, segment);
    g_array_unref(rest);
}

/* ---- use_reentrant=false: where recomputation stops ------------------- */

/* ATen operators whose backward saves their input, and those that save
 * their output (derivatives.yaml); any other saves nothing a segment must
 * rebuild.  Matched on the innermost operator that launched the task. */
static const char *const saves_input[] = {
    "aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
    "aten::convolution", "aten::cudnn_convolution", "aten::_convolution", "aten::native_layer_norm",
    "aten::layer_norm", "aten::native_batch_norm", "aten::cudnn_batch_norm", "aten::_batch_norm_impl_index",
    "aten::native_group_norm", "aten::gelu", "aten::silu", "aten::mul", "aten::embedding",
    "aten::_efficient_attention_forward", "aten::_flash_attention_forward",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_cudnn_attention", "aten::max_pool2d_with_indices", NULL
};
static const char *const saves_output[] = {
    "aten::relu", "aten::relu_", "aten::threshold", "aten::threshold_", "aten::sigmoid", "aten::tanh",
    "aten::_softmax", "aten::softmax", "aten::exp", "aten::native_dropout", "aten::dropout",
    "aten::_efficient_attention_forward", "aten::_flash_attention_forward",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_flash_attention", NULL
};

static gboolean op_in(const char *op, const char *const *names)
{
    for (; *names != NULL; names++)
        if (strcmp(op, *names) == 0) return TRUE;
    return FALSE;
}

/* The end of forward[from, to) that a non-reentrant checkpoint recomputes:
 * one past the last task whose output is saved (by the next task, or by
 * itself); from if none is. */
static guint early_stop_end(rv_graph *graph, const GArray *forward, guint from, guint to)
{
    guint end = from;
    for (guint i = from; i < to; i++) {
        const char *op = rv_strings_get(graph->strings, rv_graph_task(graph, g_array_index(forward, int32_t, i))->op);
        if (op == NULL) continue;
        if (op_in(op, saves_output)) end = i + 1;
        else if (op_in(op, saves_input) && i > from) end = MAX(end, i);
    }
    return end;
}

/* Where the recomputation of forward[from, to) ends under the setting. */
static guint recompute_end(rv_graph *graph, const GArray *forward, guint from, guint to, totals *sum)
{
    guint end = sum->early_stop ? early_stop_end(graph, forward, from, to) : to;
    sum->not_rerun += to - end;
    return end;
}

/* A bound on the CPU calls searched back between two launches of a
 * segment: a forward operator makes a handful; far more means the two
 * launches are not neighbours in one forward (another thread's order). */
#define MAX_CALLS_BETWEEN_LAUNCHES 4096

/* The CPU calls on `last`'s thread from `first` to `last`, collected into
 * `calls` from `last` back (both ends included): TRUE if `first` was
 * reached within max_calls calls, FALSE (calls holds what was walked) if
 * not: the two are then no neighbours in one forward. */
static gboolean thread_calls_back(rv_graph *graph, int32_t first, int32_t last, guint max_calls, GArray *calls)
{
    g_array_set_size(calls, 0);
    for (int32_t call = last; call >= 0 && calls->len < max_calls; call = rv_graph_resource_previous(graph, call)) {
        g_array_append_val(calls, call);
        if (call == first) return TRUE;
    }
    return FALSE;
}

static int64_t host_overhead_sum(rv_graph *graph, const GArray *calls)
{
    int64_t total_ns = 0;
    for (guint i = 0; i < calls->len; i++) total_ns += rv_graph_task(graph, g_array_index(calls, int32_t, i))->host_overhead_ns;
    return total_ns;
}

/* The host time the forward spent to reach `launch` since `previous` (the
 * launch of the segment's GPU task before it, or -1): the launch's own host
 * overhead, plus every CPU call on its thread in between (their host time
 * and run time: the allocator, the views, the casts, stream queries that
 * launch nothing).  Recomputation runs that Python and ATen again; carrying
 * only the launch's own overhead dropped the calls between (on a ViT-B/16
 * recording, 1.6 ms of the 13 ms a step the recomputation costs the host).
 * A blocking call's waiting part is not the host's work and is left out.
 * *overhead_ns gets the host overheads' share of the answer (the part the
 * hooks scaled). */
static int64_t forward_host_ns(rv_graph *graph, int32_t previous, int32_t launch, GArray *scratch,
                               int64_t *overhead_ns)
{
    int64_t own_ns = rv_graph_task(graph, launch)->host_overhead_ns, run_ns = 0;
    *overhead_ns = own_ns;
    if (previous < 0 || !thread_calls_back(graph, previous, launch, MAX_CALLS_BETWEEN_LAUNCHES + 2, scratch))
        return own_ns;
    for (guint i = 1; i + 1 < scratch->len; i++) { /* between the two launches */
        const rv_task *task = rv_graph_task(graph, g_array_index(scratch, int32_t, i));
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        *overhead_ns += task->host_overhead_ns;
        if (task->kind == RV_TASK_CPU && !(task->flags & RV_TASK_FLAG_BLOCKING)) run_ns += task->duration_ns;
    }
    return *overhead_ns + run_ns;
}

/* The non-reentrant checkpoint's saved-tensor hooks: every CPU call on the
 * forward thread from the launch of forward[from]'s task to that of
 * forward[to - 1]'s (the block's operators) takes hook_cost more host time;
 * the host time added, as the scaling made it.  Run before recompute(),
 * which copies the scaled host time: the recomputation runs under the
 * same hooks. */
static int64_t add_hook_cost(rv_graph *graph, const GArray *forward, guint from, guint to, totals *sum)
{
    if (!sum->early_stop || sum->hook_cost <= 0 || from >= to) return 0;
    int32_t first = rv_graph_launch_of(graph, g_array_index(forward, int32_t, from));
    int32_t last = rv_graph_launch_of(graph, g_array_index(forward, int32_t, to - 1));
    if (first < 0 || last < 0) return 0;
    GArray *calls = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int64_t added_ns = 0;
    if (thread_calls_back(graph, first, last, MAX_CALLS_BETWEEN_LAUNCHES * (to - from) + 1, calls)) {
        int64_t before_ns = host_overhead_sum(graph, calls);
        rv_transform_scale_host_overhead(graph, calls, 1.0 + sum->hook_cost);
        added_ns = host_overhead_sum(graph, calls) - before_ns;
    }
    g_array_unref(calls);
    sum->hook_ns += added_ns;
    return added_ns;
}

/* The unpack hooks: the block's backward takes back each tensor its
 * forward packed, one hook call per tensor as in forward, so the forward's
 * added hook time is paid once more on the thread that runs the backward,
 * charged to the launch of the block's first backward task (`before`). */
static void add_unpack_cost(rv_graph *graph, int32_t before, int64_t hook_ns)
{
    int32_t launch = rv_graph_launch_of(graph, before);
    if (launch >= 0 && hook_ns > 0) rv_graph_task(graph, launch)->host_overhead_ns += hook_ns;
}

/* Insert copies of forward[from, to) before `before` (a backward GPU task). */
static gboolean recompute(rv_graph *graph, const GArray *forward, guint from, guint to, int32_t before, totals *sum,
                          GError **error)
{
    int32_t launch_of_before = rv_graph_launch_of(graph, before);
    int32_t gpu_after = rv_graph_resource_previous(graph, before);
    int32_t cpu_after = launch_of_before >= 0 ? rv_graph_resource_previous(graph, launch_of_before) : -1;
    const rv_task anchor = *rv_graph_task(graph, before); /* a copy: inserting moves the task array */
    int32_t previous_launch = -1;
    GArray *scratch = g_array_new(FALSE, FALSE, sizeof(int32_t));
    gboolean ok = TRUE;
    for (guint i = from; i < to; i++) {
        int32_t original = g_array_index(forward, int32_t, i);
        rv_task copy = *rv_graph_task(graph, original);
        if (copy.resource != anchor.resource) { sum->other_stream++; continue; } /* counted in the notes */
        int32_t original_launch = rv_graph_launch_of(graph, original);
        int64_t overhead_ns = 0;
        int64_t host_ns = original_launch >= 0 ? forward_host_ns(graph, previous_launch, original_launch, scratch,
                                                                 &overhead_ns) : 0;
        if (original_launch >= 0) previous_launch = original_launch;
        copy.phase = RV_PHASE_BACKWARD;
        copy.flags = RV_TASK_FLAG_GPU;
        copy.correlation = -1;
        copy.recorded_start_ns = anchor.recorded_start_ns;
        copy.step = anchor.step;
        rv_insert_spec spec = { copy, gpu_after, cpu_after };
        int32_t id = rv_transform_insert(graph, &spec, error);
        if (id < 0) { ok = FALSE; break; }
        gpu_after = id;
        if (cpu_after >= 0) {
            cpu_after = rv_graph_launch_of(graph, id);
            if (original_launch >= 0) rv_graph_task(graph, cpu_after)->host_overhead_ns = host_ns;
            sum->host_ns += host_ns;
            sum->host_overhead_ns += overhead_ns;
        }
        sum->copies++;
        sum->copied_ns += copy.duration_ns;
    }
    g_array_unref(scratch);
    return ok;
}

/* One checkpointed segment forward[from, to), whose backward begins at
 * `before`: its activations marked for the memory model (before inserting:
 * the copies' launches are new tasks), the hooks' host time in forward,
 * its recomputation, then the unpack hooks in backward. */
static gboolean checkpoint_segment(rv_graph *graph, const GArray *forward, guint from, guint to, int32_t before,
                                   int32_t segment, totals *sum, GError **error)
{
    mark_recomputed(graph, forward, from, to, segment, sum);
    int64_t hook_ns = add_hook_cost(graph, forward, from, to, sum);
    if (!recompute(graph, forward, from, recompute_end(graph, forward, from, to, sum), before, sum, error)) return FALSE;
    add_unpack_cost(graph, before, hook_ns);
    return TRUE;
}

/* ---- cut=blocks ----------------------------------------------------------- */

/* A block is at least this many GPU tasks: a pair of kernels that repeats
 * (a copy and a cast) is no layer.  And at most this many: no layer
 * launches more, and the search costs tasks x the longest period, which
 * this keeps to seconds for a step of a million tasks. */
#define MIN_BLOCK_TASKS 3
#define MAX_BLOCK_TASKS 4096

typedef struct {
    guint start, period, count;     /* count copies of period tasks from start */
    guint irregular;                /* tasks of one more instance unlike the rest: the forward's
                                       [start - irregular, start), the backward's after the last copy;
                                       0 if none */
} repeat_run;

/* A step's GPU tasks as the repetition sees them: kernel names, and the
 * GPU time before each position (prefix[i]: tasks [0, i)). */
typedef struct {
    int32_t *names;
    int64_t *prefix;
} task_sequence;

static int64_t run_ns(const task_sequence *seq, const repeat_run *run)
{
    return seq->prefix[run->start + run->count * run->period] - seq->prefix[run->start];
}

/* A layer's first instance often runs another kernel for one of its
 * operators (the first encoder layer's attention on ViT-B/16: 27 of its
 * 28 GPU tasks match the next layer's), so one kernel in any period of
 * positions may differ, in blocks of at least MISMATCH_MIN_PERIOD tasks.
 * Only one: a tolerance that grew with the period would let a multiple of
 * the layer, tolerating more, cover more and win. */
#define MISMATCH_MIN_PERIOD 8

/* The repeated run of [from, to) that covers the most GPU time, among the
 * longest run of each period >= MIN_BLOCK_TASKS that repeats at least
 * twice (count 0 if none).  Layers are where a model's time goes; a
 * long run of tiny kernels (per-parameter copies) is not its layers.  For
 * each period, a run of m matching positions (position i and i + period
 * hold the same kernel, but for one in any period positions) counted
 * from the right means [i, i + m + period) repeats; a run starts where
 * two kernels match.
 * n x min(n / 2, MAX_BLOCK_TASKS) name comparisons. */
static repeat_run longest_repeat(const task_sequence *seq, guint from, guint to)
{
    repeat_run best = { 0, 0, 0, 0 };
    int64_t best_ns = 0;
    for (guint period = MIN_BLOCK_TASKS; period <= MAX_BLOCK_TASKS && from + 2 * period <= to; period++) {
        repeat_run longest = { 0, period, 0, 0 };
        gboolean tolerant = period >= MISMATCH_MIN_PERIOD;
        guint matches = 0, mismatch_at = G_MAXUINT; /* the tolerated mismatch within a period of i, if any */
        for (guint i = to - period; i-- > from;) {
            gboolean same = seq->names[i] == seq->names[i + period];
            if (mismatch_at != G_MAXUINT && mismatch_at >= i + period) mismatch_at = G_MAXUINT;
            if (same) matches++;
            else if (tolerant && matches > 0 && mismatch_at == G_MAXUINT) {
                mismatch_at = i;
                matches++;
            } else {
                matches = 0;
                mismatch_at = G_MAXUINT;
            }
            guint count = (matches + period) / period;
            /* of equal runs, the leftmost: a layer's first kernel is the
             * earliest that repeats (the stretch can run one kernel past
             * the last layer, into a final norm like its first) */
            if (same && count >= 2 && count >= longest.count) {
                longest.start = i;
                longest.count = count;
            }
        }
        if (longest.count >= 2 && run_ns(seq, &longest) > best_ns) {
            best = longest;
            best_ns = run_ns(seq, &longest);
        }
    }
    return best;
}

/* A layer's first instance may differ from the others in more than a
 * kernel: a stage's first block downsamples (ResNet), or skips stochastic
 * depth (ConvNeXt: three kernels fewer), so it does not repeat.  It sits
 * before the forward's run of the others, and after the backward's.  The
 * tasks of such an instance beside `run`, up to `limit` (the search's
 * bound): a stretch of 3/4 to 5/4 of a period whose kernels are, at least
 * IRREGULAR_SHARE of them, kernels of the run's block next to it and whose
 * GPU time is within half of a block's either way; of those lengths the
 * one with most of the block's kernels net of others, then the nearest a
 * period.  0 if none: the run stands alone, as before this rule. */
#define IRREGULAR_SHARE 0.8

static guint irregular_instance(const task_sequence *seq, const repeat_run *run, guint limit, gboolean before)
{
    guint period = run->period, end = run->start + run->count * run->period;
    const int32_t *block = seq->names + (before ? run->start : end - period);
    GHashTable *block_names = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (guint i = 0; i < period; i++) g_hash_table_add(block_names, GINT_TO_POINTER(block[i]));
    int64_t block_ns = run_ns(seq, run) / run->count;
    guint shortest = MAX(1, period - period / 4), longest = period + period / 4;
    guint best = 0, shared = 0;
    long best_score = 0;
    /* the stretch grows a task at a time, away from the run: O(period) */
    for (guint length = 1; length <= longest; length++) {
        if (before ? run->start < limit + length : end + length > limit) break;
        guint first = before ? run->start - length : end, added = before ? first : end + length - 1;
        shared += g_hash_table_contains(block_names, GINT_TO_POINTER(seq->names[added]));
        if (length < shortest) continue;
        int64_t stretch_ns = seq->prefix[first + length] - seq->prefix[first];
        if (stretch_ns * 2 < block_ns || stretch_ns > block_ns + block_ns / 2) continue;
        if (shared < IRREGULAR_SHARE * length) continue;
        long score = 2 * (long)shared - (long)length;
        guint distance = length > period ? length - period : period - length;
        guint best_distance = best > period ? best - period : period - best;
        if (best == 0 || score > best_score || (score == best_score && distance < best_distance)) {
            best = length;
            best_score = score;
        }
    }
    g_hash_table_destroy(block_names);
    return best;
}

/* The repeated runs of [from, to), in order: the one of most GPU time,
 * then the same in what comes before and after it (a ResNet's stages),
 * keeping runs whose blocks take at least half as long as the first
 * run's (a model's layers cost alike; a repetition of small kernels
 * beside them is no layer).  min_block_ns 0: the first run. */
static void find_runs(const task_sequence *seq, guint from, guint to, int64_t min_block_ns, gboolean forward,
                      GArray *runs)
{
    repeat_run run = longest_repeat(seq, from, to);
    if (run.count == 0) return;
    int64_t block_ns = run_ns(seq, &run) / run.count;
    if (block_ns < min_block_ns) return;
    int64_t keep_ns = min_block_ns ? min_block_ns : MAX(1, block_ns / 2);
    guint end = run.start + run.count * run.period;
    run.irregular = irregular_instance(seq, &run, forward ? from : to, forward);
    guint left_end = run.start - (forward ? run.irregular : 0), right_start = end + (forward ? 0 : run.irregular);
    find_runs(seq, from, left_end, keep_ns, forward, runs);
    g_array_append_val(runs, run);
    find_runs(seq, right_start, to, keep_ns, forward, runs);
}

static GArray *runs_of(rv_graph *graph, const GArray *tasks, gboolean forward)
{
    task_sequence seq = { g_new(int32_t, MAX(tasks->len, 1)), g_new0(int64_t, tasks->len + 1) };
    for (guint i = 0; i < tasks->len; i++) {
        const rv_task *task = rv_graph_task(graph, g_array_index(tasks, int32_t, i));
        seq.names[i] = task->name;
        seq.prefix[i + 1] = seq.prefix[i] + task->duration_ns;
    }
    GArray *runs = g_array_new(FALSE, FALSE, sizeof(repeat_run));
    find_runs(&seq, 0, tasks->len, 0, forward, runs);
    g_free(seq.names);
    g_free(seq.prefix);
    return runs;
}

/* The blocks of a run, in its own order, as [first, end) positions: the
 * regular copies, and the unlike first instance if `irregular` (the
 * forward's before them, the backward's after). */
static GArray *run_blocks(const repeat_run *run, gboolean irregular, gboolean forward)
{
    GArray *blocks = g_array_new(FALSE, FALSE, sizeof(guint) * 2);
    guint block[2];
    if (irregular && forward) {
        block[0] = run->start - run->irregular, block[1] = run->start;
        g_array_append_val(blocks, block);
    }
    for (guint copy = 0; copy < run->count; copy++) {
        block[0] = run->start + copy * run->period, block[1] = block[0] + run->period;
        g_array_append_val(blocks, block);
    }
    if (irregular && !forward) {
        block[0] = run->start + run->count * run->period, block[1] = block[0] + run->irregular;
        g_array_append_val(blocks, block);
    }
    return blocks;
}

/* Forward run f's blocks recomputed before their backward in run b (the
 * backward's blocks in reverse order), each side with its unlike first
 * instance where asked (the counts must then agree: the caller's). */
static gboolean recompute_run(rv_graph *graph, GArray *forward, GArray *backward, const repeat_run *f,
                              gboolean f_irregular, const repeat_run *b, gboolean b_irregular, totals *sum,
                              GError **error)
{
    GArray *fw_blocks = run_blocks(f, f_irregular, TRUE), *bw_blocks = run_blocks(b, b_irregular, FALSE);
    gboolean ok = fw_blocks->len == bw_blocks->len;
    for (guint block = 0; block < fw_blocks->len && ok; block++) {
        const guint *fw = &g_array_index(fw_blocks, guint, 2 * block);
        const guint *bw = &g_array_index(bw_blocks, guint, 2 * (bw_blocks->len - 1 - block));
        ok = checkpoint_segment(graph, forward, fw[0], fw[1], g_array_index(backward, int32_t, bw[0]),
                                (int32_t)sum->blocks, sum, error);
        sum->blocks++;
        sum->block_tasks += fw[1] - fw[0];
    }
    sum->irregular_blocks += ok && f_irregular;
    g_array_unref(fw_blocks);
    g_array_unref(bw_blocks);
    return ok;
}

/* How a forward run and a backward run pair: as many blocks either side,
 * each side's unlike first instance counted where it has one (the first
 * encoder layer's backward may differ where its forward did not), or else
 * as many regular copies.  FALSE if neither. */
static gboolean runs_pair(const repeat_run *f, const repeat_run *b, gboolean *f_irregular, gboolean *b_irregular)
{
    *f_irregular = f->irregular > 0;
    *b_irregular = b->irregular > 0;
    if (f->count + *f_irregular == b->count + *b_irregular) return TRUE;
    *f_irregular = *b_irregular = FALSE;
    return f->count == b->count;
}

/* Every block of the forward's runs recomputed before its own backward.
 * The backward runs in the reverse order of the forward's; a forward run
 * is paired with the next backward run of as many blocks, and runs either
 * side without a partner (a repetition that is no layer, such as a
 * gradient accumulation's few kernels) are left alone. */
static gboolean checkpoint_step_blocks(rv_graph *graph, GArray *forward, GArray *backward, int32_t step, totals *sum,
                                       GError **error)
{
    rv_tasks_sort_recorded(graph, forward);
    rv_tasks_sort_recorded(graph, backward);
    GArray *fw = runs_of(graph, forward, TRUE), *bw = runs_of(graph, backward, FALSE);
    guint paired = 0, next_bw = 0;
    gboolean ok = TRUE;
    for (guint f = fw->len; f-- > 0 && ok;) {
        const repeat_run *run = &g_array_index(fw, repeat_run, f);
        guint b = next_bw;
        gboolean f_irregular = FALSE, b_irregular = FALSE;
        while (b < bw->len && !runs_pair(run, &g_array_index(bw, repeat_run, b), &f_irregular, &b_irregular)) b++;
        if (b == bw->len) continue;
        ok = recompute_run(graph, forward, backward, run, f_irregular, &g_array_index(bw, repeat_run, b), b_irregular,
                           sum, error);
        next_bw = b + 1;
        paired++;
    }
    if (ok && paired == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "cut=blocks: step %d's forward and backward GPU tasks repeat no block of the same count (%u "
                    "repeated runs forward, %u backward): give segments=N with cut=time",
                    step, fw->len, bw->len);
        ok = FALSE;
    }
    g_array_unref(fw);
    g_array_unref(bw);
    return ok;
}

static gboolean checkpoint_step(rv_graph *graph, GArray *forward, GArray *backward, int n, totals *sum,
                                GError **error)
{
    rv_tasks_sort_recorded(graph, forward);
    rv_tasks_sort_recorded(graph, backward);
    GArray *fw_runs = g_array_new(FALSE, FALSE, sizeof(guint)), *bw_runs = g_array_new(FALSE, FALSE, sizeof(guint));
    cut_by_time(graph, forward, n, fw_runs);
    cut_by_time(graph, backward, n, bw_runs);
    gboolean ok = TRUE;
    for (int s = 0; s < n - 1 && ok; s++) { /* the last segment keeps its activations */
        guint from = g_array_index(fw_runs, guint, s), to = g_array_index(fw_runs, guint, s + 1);
        guint bw_first = g_array_index(bw_runs, guint, n - 1 - s);
        if (from >= to || bw_first >= backward->len) continue;
        ok = checkpoint_segment(graph, forward, from, to, g_array_index(backward, int32_t, bw_first), s, sum, error);
    }
    g_array_unref(fw_runs);
    g_array_unref(bw_runs);
    return ok;
}

/* A live GPU task that computes (no collective) in forward (list
 * RV_PHASE_FORWARD) or backward (RV_PHASE_BACKWARD); data counts the live
 * GPU tasks. */
G_STATIC_ASSERT(RV_PHASE_FORWARD == 0 && RV_PHASE_BACKWARD == 1);
static int computation_by_phase(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) return -1;
    (*(int32_t *)data)++;
    if (task->kind == RV_TASK_COMM || task->collective > 0 || (task->flags & RV_TASK_FLAG_RENDEZVOUS)) return -1;
    return task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD ? (int)task->phase : -1;
}

static gboolean checkpoint_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t n = rv_params_integer(params, "segments");
    gboolean by_blocks = strcmp(rv_params_string(params, "cut"), "blocks") == 0;
    if (n < 1 || n > 10000) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 1 <= segments <= 10000");
        return FALSE;
    }
    int32_t kernels_before = 0;
    rv_step_lists by_step = rv_step_lists_new(graph, 2, computation_by_phase, &kernels_before);
    totals sum = { 0 };
    sum.early_stop = strcmp(rv_params_string(params, "use_reentrant"), "false") == 0;
    sum.hook_cost = rv_params_number(params, "hook_cost");
    if (!(sum.hook_cost >= 0 && sum.hook_cost <= 100)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 <= hook_cost <= 100 (a fraction of the forward's host time)");
        rv_step_lists_free(&by_step);
        return FALSE;
    }
    guint steps = 0;
    gboolean ok = TRUE;
    for (int32_t step = -1; step < (int32_t)by_step.slots - 1 && ok; step++) {
        GArray *fw = rv_step_lists_get(&by_step, step, RV_PHASE_FORWARD);
        GArray *bw = rv_step_lists_get(&by_step, step, RV_PHASE_BACKWARD);
        if (fw->len == 0 || bw->len == 0) continue;
        steps++;
        if (by_blocks) ok = checkpoint_step_blocks(graph, fw, bw, step, &sum, error);
        else if (n > 1) ok = checkpoint_step(graph, fw, bw, (int)n, &sum, error);
    }
    rv_step_lists_free(&by_step);
    if (ok && steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no step with both forward and backward GPU work, so there is nothing to recompute");
        ok = FALSE;
    }
    if (!ok) return FALSE;
    char *copied = rv_format_duration(sum.copied_ns / (int64_t)steps);
    if (by_blocks)
        g_string_append_printf(output->notes,
                               "    cut=blocks: %.1f repeated blocks a step (%.1f of them a first instance unlike "
                               "the rest) of %.1f forward GPU tasks each, every one "
                               "recomputed before its backward; %u forward GPU tasks recomputed in %u steps (+%.1f%% "
                               "GPU tasks), %s of GPU time a step%s\n",
                               (double)sum.blocks / steps, (double)sum.irregular_blocks / steps,
                               (double)sum.block_tasks / MAX(sum.blocks, 1), sum.copies,
                               steps, 100.0 * sum.copies / MAX(kernels_before, 1), copied,
                               n != 1 ? " (segments is for cut=time: ignored)" : "");
    else
        g_string_append_printf(output->notes,
                               "    %" G_GINT64_FORMAT " segments in %u steps: %u forward GPU tasks recomputed in "
                               "backward (+%.1f%% GPU tasks), %s of GPU time a step\n",
                               n, steps, sum.copies, 100.0 * sum.copies / MAX(kernels_before, 1), copied);
    g_free(copied);
    char *host = rv_format_duration(sum.host_ns / (int64_t)steps);
    g_string_append_printf(output->notes, "    the recomputation's host time: %s a step (the forward's own, on the "
                           "backward's thread)\n", host);
    g_free(host);
    if (sum.early_stop && sum.hook_cost > 0) {
        /* every overhead the recomputation copied was scaled by 1 + hook_cost */
        int64_t recompute_hook_ns = llround((double)sum.host_overhead_ns * sum.hook_cost / (1.0 + sum.hook_cost));
        int64_t per_quarter_ns = llround((double)(2 * sum.hook_ns + recompute_hook_ns) * 0.25 / sum.hook_cost);
        char *forward_hook = rv_format_duration(sum.hook_ns / (int64_t)steps);
        char *recompute_hook = rv_format_duration(recompute_hook_ns / (int64_t)steps);
        char *quarter = rv_format_duration(per_quarter_ns / (int64_t)steps);
        g_string_append_printf(output->notes, "    saved-tensor hooks (hook_cost %.2f): +%s a step of host time in the "
                               "forward, as much in the backward's unpacking, %s in the recomputation; each 0.25 of "
                               "hook_cost is %s a step\n",
                               sum.hook_cost, forward_hook, recompute_hook, quarter);
        g_free(forward_hook);
        g_free(recompute_hook);
        g_free(quarter);
    }
    if (sum.early_stop)
        g_string_append_printf(output->notes, "    use_reentrant=false: %u forward GPU tasks of the segments not run "
                               "again (early stop: nothing in their segment saves their output)\n", sum.not_rerun);
    if (sum.other_stream)
        g_string_append_printf(output->notes, "    %u forward GPU tasks on another stream than their segment's backward not recomputed\n",
                               sum.other_stream);
    if (n == 1 && !by_blocks)
        g_string_append(output->notes, "    segments=1: nothing recomputed\n");
    else
        g_string_append_printf(output->notes, "    %u launch calls keep no activations past forward (rebuilt in backward: "
                               "the peak memory line)\n", sum.marked_calls);
    return TRUE;
}

/* The composition law (compose.h): forward segments cut by time and copied, with launches, into backward; a
 * later recomputation replaces an earlier one. */
static const rv_plugin_effects checkpoint_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST,
    .reads_time = RV_ASPECT_FORWARD,
    .scales = 0,
    .reprices = 0,
    .rewrites = RV_ASPECT_BACKWARD | RV_ASPECT_HOST | RV_ASPECT_MEMORY,
    .order = RV_ORDER(RV_STAGE_MODEL, 50),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "checkpoint",
    "activation checkpointing: forward segments recomputed before their backward (runtime up, kept activations down)",
    checkpoint_params, checkpoint_apply, &checkpoint_effects,
};

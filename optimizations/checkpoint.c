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
 * trace's median launch and carrying the original call's host overhead
 * (the segment's Python runs again).
 * MEMORY.  Every launch call of a recomputed segment but those of its
 * first operator (whose input is the segment's input, which checkpoint
 * keeps) is marked RV_MEM_EFFECT_RECOMPUTED with its segment (memory.h):
 * the memory model then keeps nothing of theirs after forward and holds a
 * segment's activations again while backward passes through it, so the
 * whatif's peak line shows what checkpointing saves.  A trace without
 * Input Dims gets the runtime; whatif says the peak is not estimated.
 * Weak: segments by time, not by module; dropout's random state, and the
 * recomputation overlapping the previous segment's backward, are not
 * modelled.
 */
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/units.h"

static const rv_param_spec checkpoint_params[] = {
    { "segments", RV_PARAM_INTEGER, "1", "segments", "forward segments (checkpoint_sequential's segments; 1: none recomputed)", NULL },
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

/* Insert copies of forward[from, to) before `before` (a backward GPU task). */
static gboolean recompute(rv_graph *graph, const GArray *forward, guint from, guint to, int32_t before, totals *sum,
                          GError **error)
{
    int32_t launch_of_before = rv_graph_launch_of(graph, before);
    int32_t gpu_after = rv_graph_resource_previous(graph, before);
    int32_t cpu_after = launch_of_before >= 0 ? rv_graph_resource_previous(graph, launch_of_before) : -1;
    const rv_task anchor = *rv_graph_task(graph, before); /* a copy: inserting moves the task array */
    for (guint i = from; i < to; i++) {
        int32_t original = g_array_index(forward, int32_t, i);
        rv_task copy = *rv_graph_task(graph, original);
        if (copy.resource != anchor.resource) { sum->other_stream++; continue; } /* counted in the notes */
        int32_t original_launch = rv_graph_launch_of(graph, original);
        copy.phase = RV_PHASE_BACKWARD;
        copy.flags = RV_TASK_FLAG_GPU;
        copy.correlation = -1;
        copy.recorded_start_ns = anchor.recorded_start_ns;
        copy.step = anchor.step;
        rv_insert_spec spec = { copy, gpu_after, cpu_after };
        int32_t id = rv_transform_insert(graph, &spec, error);
        if (id < 0) return FALSE;
        gpu_after = id;
        if (cpu_after >= 0) {
            cpu_after = rv_graph_launch_of(graph, id);
            if (original_launch >= 0) rv_graph_task(graph, cpu_after)->host_overhead_ns = rv_graph_task(graph, original_launch)->host_overhead_ns;
        }
        sum->copies++;
        sum->copied_ns += copy.duration_ns;
    }
    return TRUE;
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
        /* marked before inserting: the copies' launches are new tasks */
        mark_recomputed(graph, forward, from, to, s, sum);
        ok = recompute(graph, forward, from, to, g_array_index(backward, int32_t, bw_first), sum, error);
    }
    g_array_unref(fw_runs);
    g_array_unref(bw_runs);
    return ok;
}

static gboolean checkpoint_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t n = rv_params_integer(params, "segments");
    if (n < 1 || n > 10000) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 1 <= segments <= 10000");
        return FALSE;
    }
    GHashTable *forward = rv_tasks_by_step_new(), *backward = rv_tasks_by_step_new();
    int32_t kernels_before = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        kernels_before++;
        if (task->kind == RV_TASK_COMM || task->collective > 0 || (task->flags & RV_TASK_FLAG_RENDEZVOUS)) continue;
        if (task->phase == RV_PHASE_FORWARD) rv_tasks_by_step_add(forward, task->step, id);
        else if (task->phase == RV_PHASE_BACKWARD) rv_tasks_by_step_add(backward, task->step, id);
    }
    totals sum = { 0 };
    guint steps = 0;
    gboolean ok = TRUE;
    GList *keys = rv_tasks_by_step_keys(forward);
    for (GList *k = keys; k && ok; k = k->next) {
        GArray *bw = g_hash_table_lookup(backward, k->data);
        if (bw == NULL) continue;
        steps++;
        if (n > 1) ok = checkpoint_step(graph, g_hash_table_lookup(forward, k->data), bw, (int)n, &sum, error);
    }
    g_list_free(keys);
    g_hash_table_destroy(forward);
    g_hash_table_destroy(backward);
    if (ok && steps == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no step with both forward and backward GPU work, so there is nothing to recompute");
        ok = FALSE;
    }
    if (!ok) return FALSE;
    char *copied = rv_format_duration(sum.copied_ns / (int64_t)steps);
    g_string_append_printf(output->notes,
                           "    %" G_GINT64_FORMAT " segments in %u steps: %u forward GPU tasks recomputed in backward "
                           "(+%.1f%% GPU tasks), %s of GPU time a step\n",
                           n, steps, sum.copies, 100.0 * sum.copies / MAX(kernels_before, 1), copied);
    g_free(copied);
    if (sum.other_stream)
        g_string_append_printf(output->notes, "    %u forward GPU tasks on another stream than their segment's backward not recomputed\n",
                               sum.other_stream);
    if (n == 1)
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

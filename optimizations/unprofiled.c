/*
 * unprofiled.c - the job as it runs without the profiler: each CPU call's
 * host overhead loses what the profiler's callbacks took from it.
 *
 *   reverie whatif trace.json.gz --opt unprofiled
 *   reverie whatif trace.json.gz --opt unprofiled:op_cost=0.5us
 *
 * The PyTorch profiler runs a callback on every operator's entry and exit.
 * The builder bounds that cost per operator from the gaps between sibling
 * operators and counts the operators in each call's host overhead
 * (src/graph/profiler.c; `info` prints the bound and its evidence).  This
 * plugin takes operators x cost out of each overhead, never more than the
 * overhead.  With the trace's bound (op_cost=auto) the answer is what the
 * callbacks between operators cost; the profiler costs more (inside each
 * operator and runtime call, recording shapes and memory), which a trace
 * cannot show: measured on an H100 with PyTorch 2.11, host-bound steps ran
 * 1.26-1.99x slower profiled where this predicts 1.02-1.09x
 * (docs/pairs.md).  A lower bound on the speedup, not an upper one.
 * op_cost= takes a figure of your own instead (a microbenchmark of
 * record_function on the same PyTorch build).
 *
 * Not removed: CUPTI's cost inside each runtime call (a launch recorded
 * longer than it runs unprofiled), which the trace cannot show apart from
 * the call, and the GPU time the profiler may take (none for kernels).
 */
#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec unprofiled_params[] = {
    { "op_cost", RV_PARAM_STRING, "auto", NULL,
      "the profiler's host time per recorded operator: auto, the trace's bound on the callbacks between operators (info shows it), or a duration "
      "such as 0.8us",
      NULL },
    { NULL }
};

/* The cost per operator: the trace's bound, or the user's duration. */
static gboolean op_cost_of(const rv_graph *graph, const rv_params *params, int64_t *cost_ns, GError **error)
{
    const char *text = rv_params_string(params, "op_cost");
    if (strcmp(text, "auto") != 0) {
        GError *parse = NULL;
        if (!rv_parse_duration_ns(text, cost_ns, &parse) || *cost_ns < 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "op_cost must be auto or a duration such as 0.8us, not '%s'%s%s",
                        text, parse ? ": " : "", parse ? parse->message : "");
            g_clear_error(&parse);
            return FALSE;
        }
        return TRUE;
    }
    const rv_estimate *bound = &graph->timing.profiler_op_cost;
    if (bound->source != RV_SOURCE_BOUND) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace does not bound the profiler's cost per operator (%" G_GUINT64_FORMAT
                    " gaps between sibling operators; 30 are needed): give op_cost=DURATION",
                    bound->samples);
        return FALSE;
    }
    *cost_ns = bound->value;
    return TRUE;
}

static gboolean unprofiled_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t cost_ns = 0;
    if (!op_cost_of(graph, params, &cost_ns, error)) return FALSE;
    if (graph->timing.profiled_operators == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace records no operators before its CPU calls: nothing of the profiler's to take out");
        return FALSE;
    }
    uint64_t calls = 0, operators = 0;
    int64_t removed_ns = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        rv_task *task = rv_graph_task(graph, id);
        uint32_t count = rv_task_host_operators(graph, id);
        if (count == 0 || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        /* in double: a count times a cost cannot wrap */
        int64_t take = (int64_t)MIN((double)task->host_overhead_ns, (double)count * (double)cost_ns);
        task->host_overhead_ns -= take;
        /* taken out: the reports must not count it as the profiler's again */
        g_array_index(graph->host_operators, uint32_t, id) = 0;
        removed_ns += take;
        operators += count;
        calls++;
    }
    char *per = rv_format_duration(cost_ns), *all = rv_format_duration(removed_ns);
    g_string_append_printf(output->notes,
                           "    %s per operator (%s) x %" G_GUINT64_FORMAT " operators before %" G_GUINT64_FORMAT
                           " CPU calls: %s of host time taken out (never more than a call's own overhead)",
                           per, strcmp(rv_params_string(params, "op_cost"), "auto") == 0 ? "the callbacks between operators, as the trace bounds them" : "op_cost",
                           operators, calls, all);
    g_free(per);
    g_free(all);
    return TRUE;
}

/* The composition law (compose.h): host overheads rewritten.  First of
 * all: the recording's own cost comes out before anything is built on it,
 * so a call another plugin copies (a recomputed forward) copies the
 * unprofiled overhead. */
static const rv_plugin_effects unprofiled_effects = {
    .reads = RV_ASPECT_HOST,
    .reads_time = RV_ASPECT_HOST,
    .rewrites = RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_MODEL, 5),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "unprofiled",
    "the host without the profiler: each call's host overhead loses its recorded operators x the profiler's cost per "
    "operator (the trace's bound on the callbacks between operators, or op_cost=)",
    unprofiled_params, unprofiled_apply, &unprofiled_effects,
};

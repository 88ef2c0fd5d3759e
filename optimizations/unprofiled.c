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
 * overhead.  The bound is only what the callbacks between operators
 * cost; the profiler costs more inside each operator and runtime call
 * (recording shapes and memory), which a trace cannot show apart from the
 * work.  So op_cost=auto is the bound x whole_cost, a measured ratio: on
 * four host-bound jobs recorded with and without the profiler in one run
 * on one H100 (PyTorch 2.11, record_shapes and profile_memory), the cost
 * per operator that the unprofiled steps imply was 3.5-5.0 times the
 * trace's bound, median 4.1 (tests/bench/profiler_cost.py); the same jobs
 * on an H200 gave 3.8-5.2, and two models recorded afterwards (Swin-T,
 * RegNetY-800MF) 2.6-16: the middle of a wide range, not a constant of
 * PyTorch.  whole_cost=1 keeps the bound alone: the least
 * the job gains.  op_cost= takes a figure of your own instead (a
 * microbenchmark of record_function on the same PyTorch build).
 *
 * Not removed: CUPTI's cost inside each runtime call (a launch recorded
 * longer than it runs unprofiled), which the trace cannot show apart from
 * the call, and the GPU time the profiler may take (none for kernels).
 */
#include <math.h>

#include "reverie/plugin.h"
#include "reverie/error.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec unprofiled_params[] = {
    { "op_cost", RV_PARAM_STRING, "auto", NULL,
      "the profiler's host time per recorded operator: auto, the trace's bound on the callbacks between operators "
      "(info shows it) x whole_cost, or a duration such as 0.8us",
      NULL },
    { "whole_cost", RV_PARAM_NUMBER, RV_PROFILER_WHOLE_COST, "x",
      "op_cost=auto: the profiler's whole cost per operator over the part the trace bounds between operators (4.1: "
      "the median of four host-bound jobs recorded with and without the profiler on one H100, PyTorch 2.11 with "
      "shapes and memory, 3.5-5.0; an H200 gave 3.8-5.2, two later models 2.6-16: tests/bench/profiler_cost.py); 1: "
      "the bound alone, the least",
      NULL },
    { NULL }
};

/* The cost per operator: the trace's bound x whole_cost, or the user's
 * duration; bound_ns gets the bound (-1 with a duration given: a bound
 * of 0 ns is a bound). */
static gboolean op_cost_of(const rv_graph *graph, const rv_params *params, int64_t *cost_ns, int64_t *bound_ns,
                           GError **error)
{
    *bound_ns = -1;
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
    double whole = rv_params_number(params, "whole_cost");
    if (!(whole >= 1 && whole <= 1000)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE,
                    "whole_cost must be a number from 1 (the trace's bound alone) to 1000, not %g", whole);
        return FALSE;
    }
    *bound_ns = bound->value;
    *cost_ns = rv_profiler_op_cost_ns(graph, whole);
    return TRUE;
}

/* Host time taken out of a call's overhead for `count` operators at
 * cost_ns each: never more than the overhead (in double: a count times a
 * cost cannot wrap). */
static int64_t take_ns(const rv_task *task, uint32_t count, int64_t cost_ns)
{
    return (int64_t)MIN((double)task->host_overhead_ns, (double)count * (double)cost_ns);
}

static gboolean unprofiled_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    int64_t cost_ns = 0, bound_ns = -1;
    if (!op_cost_of(graph, params, &cost_ns, &bound_ns, error)) return FALSE;
    if (graph->timing.profiled_operators == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace records no operators before its CPU calls: nothing of the profiler's to take out");
        return FALSE;
    }
    uint64_t calls = 0, operators = 0;
    int64_t removed_ns = 0, bound_removed_ns = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        rv_task *task = rv_graph_task(graph, id);
        uint32_t count = rv_task_host_operators(graph, id);
        if (count == 0 || (task->flags & RV_TASK_FLAG_REMOVED)) continue;
        int64_t take = take_ns(task, count, cost_ns);
        if (bound_ns >= 0) bound_removed_ns += take_ns(task, count, bound_ns);
        task->host_overhead_ns -= take;
        /* taken out: the reports must not count it as the profiler's again */
        g_array_index(graph->host_operators, uint32_t, id) = 0;
        removed_ns += take;
        operators += count;
        calls++;
    }
    char *per = rv_format_duration(cost_ns), *all = rv_format_duration(removed_ns);
    if (bound_ns >= 0) {
        char *bound = rv_format_duration(bound_ns), *least = rv_format_duration(bound_removed_ns);
        g_string_append_printf(output->notes,
                               "    %s per operator (the trace's bound on the callbacks between operators, %s, x "
                               "whole_cost %.2f) x %" G_GUINT64_FORMAT " operators before %" G_GUINT64_FORMAT
                               " CPU calls: %s of host time taken out (never more than a call's own overhead); "
                               "the bound alone takes out %s, the least the profiler costs\n",
                               per, bound, rv_params_number(params, "whole_cost"), operators, calls, all, least);
        g_free(bound);
        g_free(least);
    } else
        g_string_append_printf(output->notes,
                               "    %s per operator (op_cost) x %" G_GUINT64_FORMAT " operators before %" G_GUINT64_FORMAT
                               " CPU calls: %s of host time taken out (never more than a call's own overhead)\n",
                               per, operators, calls, all);
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
    "operator (the trace's bound on the callbacks between operators x whole_cost, or op_cost=)",
    unprofiled_params, unprofiled_apply, &unprofiled_effects,
};

/*
 * whatif.c - one what-if (whatif.h): baseline replay, optimizations,
 * prediction, with GPU kernel time and peak memory on both sides.
 */
#include "reverie/whatif.h"
#include "reverie/optimize.h"
#include "reverie/range.h"
#include <string.h>

/* Replay the graph into *out and keep the replay's result in *sim, which
 * the optimizations are lent (plugin.h: before, after_replay), as are the
 * memory estimates. */
static gboolean replay_keeping(const rv_graph *graph, const rv_policy *policy, rv_replay *out, rv_sim_result *sim,
                               GError **error)
{
    if (!rv_simulate(graph, policy, sim, error)) return FALSE;
    rv_replay_read(graph, sim, out);
    return TRUE;
}

gboolean rv_whatif_run(rv_whatif *whatif, rv_graph *graph, GPtrArray *opts, GError **error)
{
    memset(whatif, 0, sizeof *whatif);
    whatif->baseline_gpu_ns = rv_gpu_kernel_ns(graph);
    rv_sim_result sim = { 0 };
    if (!replay_keeping(graph, NULL, &whatif->baseline, &sim, error)) return FALSE;
    rv_memory_peak_before(&whatif->peak, graph);
    /* the first optimization gets the graph the baseline replayed and estimated */
    const rv_memory_estimate *memory = whatif->peak.estimated ? &whatif->peak.baseline : NULL;
    gboolean ok = rv_opts_apply_before_replay(graph, opts, TRUE, &sim, memory, &whatif->policy, error);
    rv_sim_result_clear(&sim);
    const rv_policy *policy = whatif->policy.policy.priority ? &whatif->policy.policy : NULL;
    ok = ok && replay_keeping(graph, policy, &whatif->predicted, &sim, error);
    if (ok) {
        whatif->predicted_gpu_ns = rv_gpu_kernel_ns(graph);
        rv_memory_peak_after(&whatif->peak, graph);
        /* the last optimization's notes may wait for this replay and estimate */
        rv_host_replay replay = { policy, &sim, whatif->peak.estimated ? &whatif->peak.predicted : NULL };
        rv_opts_after_replay(opts, graph, &replay);
    }
    rv_sim_result_clear(&sim);
    return ok && rv_prediction_range_run(graph, policy, &whatif->range, error);
}

void rv_whatif_clear(rv_whatif *whatif)
{
    rv_replay_clear(&whatif->baseline);
    rv_replay_clear(&whatif->predicted);
    rv_memory_peak_clear(&whatif->peak);
    rv_opts_policy_clear(&whatif->policy);
    rv_prediction_range_clear(&whatif->range);
}

/*
 * The range: the predicted graph replayed twice more, every estimated task
 * at the low end of its range, then at the high end.  Both ends move every
 * estimate the same way at once, so the range is the widest the estimates
 * allow (their errors taken as fully correlated, as a GPU's efficiencies
 * are: one library, one driver).
 */
gboolean rv_prediction_range_run(const rv_graph *graph, const rv_policy *policy, rv_prediction_range *out,
                                 GError **error)
{
    memset(out, 0, sizeof *out);
    if (!rv_graph_has_duration_ranges(graph)) return TRUE;
    out->present = TRUE;
    for (int end = 0; end < 2; end++) {
        rv_graph *copy = rv_graph_copy(graph);
        rv_replay *replay = end ? &out->high : &out->low;
        gboolean ok = rv_graph_to_range_end(copy, end == 1, error) && rv_replay_run(copy, policy, replay, error);
        if (ok) {
            out->gpu_ns[end] = rv_gpu_kernel_ns(copy);
            GArray *per_step = rv_gpu_kernel_ns_by_step(copy);
            out->steady_gpu_ns[end] = rv_steady_ns(per_step);
            g_array_unref(per_step);
        }
        rv_graph_free(copy);
        if (!ok) return FALSE;
    }
    return TRUE;
}

void rv_prediction_range_clear(rv_prediction_range *range)
{
    rv_replay_clear(&range->low);
    rv_replay_clear(&range->high);
    range->present = FALSE;
}

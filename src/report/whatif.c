/*
 * whatif.c - one what-if (whatif.h): baseline replay, optimizations,
 * prediction, with GPU kernel time and peak memory on both sides.
 */
#include "reverie/whatif.h"
#include "reverie/optimize.h"
#include <string.h>

gboolean rv_whatif_run(rv_whatif *whatif, rv_graph *graph, GPtrArray *opts, GError **error)
{
    memset(whatif, 0, sizeof *whatif);
    whatif->baseline_gpu_ns = rv_gpu_kernel_ns(graph);
    if (!rv_replay_run(graph, NULL, &whatif->baseline, error)) return FALSE;
    rv_memory_peak_before(&whatif->peak, graph);
    if (!rv_opts_apply(graph, opts, TRUE, &whatif->policy, error)) return FALSE;
    const rv_policy *policy = whatif->policy.policy.priority ? &whatif->policy.policy : NULL;
    if (!rv_replay_run(graph, policy, &whatif->predicted, error)) return FALSE;
    whatif->predicted_gpu_ns = rv_gpu_kernel_ns(graph);
    rv_memory_peak_after(&whatif->peak, graph);
    return TRUE;
}

void rv_whatif_clear(rv_whatif *whatif)
{
    rv_replay_clear(&whatif->baseline);
    rv_replay_clear(&whatif->predicted);
    rv_memory_peak_clear(&whatif->peak);
    rv_opts_policy_clear(&whatif->policy);
}

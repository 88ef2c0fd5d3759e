/*
 * ranges.c - the range of a prediction (range.h): the predicted graph
 * replayed twice more, every estimated task at the low end of its range,
 * then at the high end.  whatif and validate print both ends beside the
 * prediction.
 *
 * Both ends move every estimate the same way at once, so the range is the
 * widest the estimates allow (their errors taken as fully correlated, as a
 * GPU's efficiencies are: one library, one driver).
 */
#include "cli.h"
#include "reverie/range.h"
#include <string.h>

gboolean rv_cli_range_replay(const rv_graph *graph, const rv_policy *policy, rv_cli_range *out, GError **error)
{
    memset(out, 0, sizeof *out);
    if (!rv_graph_has_duration_ranges(graph)) return TRUE;
    out->present = TRUE;
    for (int end = 0; end < 2; end++) {
        rv_graph *copy = rv_graph_copy(graph);
        rv_cli_replay *replay = end ? &out->high : &out->low;
        gboolean ok = rv_graph_to_range_end(copy, end == 1, error) && rv_cli_replay_job(copy, policy, replay, error);
        if (ok) {
            out->gpu_ns[end] = rv_cli_gpu_kernel_ns(copy);
            GArray *per_step = rv_cli_gpu_kernel_ns_by_step(copy);
            out->steady_gpu_ns[end] = rv_cli_steady(per_step);
            g_array_unref(per_step);
        }
        rv_graph_free(copy);
        if (!ok) return FALSE;
    }
    return TRUE;
}

void rv_cli_range_clear(rv_cli_range *range)
{
    rv_cli_replay_clear(&range->low);
    rv_cli_replay_clear(&range->high);
    range->present = FALSE;
}

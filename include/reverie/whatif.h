/*
 * whatif.h - one what-if as reverie reports it: the graph replayed as it
 * is (the baseline), the optimizations applied to it in order (optimize.h),
 * the result replayed (the prediction), and beside the step times the GPU
 * kernel time and the peak memory before and after (report.h, memory.h).
 * `reverie whatif` and the Python package's Graph.whatif run this.
 */
#ifndef REVERIE_WHATIF_H
#define REVERIE_WHATIF_H

#include <glib.h>
#include "reverie/graph.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/report.h"

G_BEGIN_DECLS

/* The range of a prediction (range.h): its graph replayed with every
 * estimated task at the low end ([0]) and at the high end ([1]) of its
 * range; present FALSE (nothing replayed) when no task has a range. */
typedef struct {
    gboolean present;
    rv_replay low, high;
    int64_t gpu_ns[2];         /* GPU kernel time of the whole graph at each end */
    int64_t steady_gpu_ns[2];  /* of its steady step (rv_steady_ns over the steps) */
} rv_prediction_range;

gboolean rv_prediction_range_run(const rv_graph *graph, const rv_policy *policy, rv_prediction_range *out,
                                 GError **error);
void rv_prediction_range_clear(rv_prediction_range *range);

typedef struct {
    rv_replay baseline, predicted;
    int64_t baseline_gpu_ns, predicted_gpu_ns;
    rv_memory_peak peak;
    /* The last scheduling policy the optimizations returned (priority NULL:
     * none), for replaying the prediction again; it may live in a plugin. */
    rv_plugin_output policy;
    rv_prediction_range range;
} rv_whatif;

/*
 * Replay `graph`, apply opts (rv_opt, in order, changes counted) to it in
 * place, and replay it again.  FALSE with the first error; the fields done
 * by then are set.  Clear with rv_whatif_clear either way, before the
 * opts' plugin table is destroyed.
 */
gboolean rv_whatif_run(rv_whatif *whatif, rv_graph *graph, GPtrArray *opts, GError **error);
void rv_whatif_clear(rv_whatif *whatif);

G_END_DECLS

#endif

/*
 * diff.h - what changed between a baseline replay and a prediction, and
 * where the critical path moved.
 *
 * Each figure is summed over the steps (a graph without steps: the whole
 * trace), for the baseline and the prediction:
 *   phases       wall time per phase, by breakdown.h's attribution;
 *   classes      GPU work per kernel class (kernels.h), summed durations;
 *   layers       each layer's tasks: CPU calls with their host overheads,
 *                and GPU work (a GPU task's layer is its launch call's);
 *   path_parts   the critical path's time by task kind and wait kind;
 *   path_layers  the critical path's time per layer.
 * Layers are listed largest absolute change first; the others in a fixed
 * order.
 */
#ifndef REVERIE_DIFF_H
#define REVERIE_DIFF_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

typedef struct {
    const char *name;        /* a static name or the graph's string: valid while the graph lives */
    int64_t baseline_ns, predicted_ns;
} rv_change;

typedef struct {
    int64_t baseline_ns, predicted_ns;   /* summed step times */
    GArray *phases, *classes, *layers, *path_parts, *path_layers;   /* rv_change */
} rv_diff;

rv_diff *rv_diff_compute(const rv_graph *baseline, const rv_sim_result *baseline_sim, const rv_graph *predicted,
                         const rv_sim_result *predicted_sim);
void rv_diff_free(rv_diff *diff);

G_END_DECLS

#endif

/*
 * batch.h - samples per step and throughput, for the what-ifs that change
 * how much work a step does (batch-size, grad-accumulation).
 *
 * The batch size is read from shapes: the leading extent of the first input
 * of the first forward GEMM or convolution operator (linear, addmm, conv...)
 * of the first step that records Input Dims: (B, features) or (B, C, H, W).
 * A Transformer whose linear layers see (B, S, H) gives B; one that
 * flattens tokens first, (B*S, H), gives B*S: then samples are tokens.
 */
#ifndef REVERIE_BATCH_H
#define REVERIE_BATCH_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"
#include "reverie/plugin.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

/* Samples per step from shapes (above), or 0 when no operator says. */
int64_t rv_graph_batch_size(const rv_graph *graph);

/* The mean simulated step time of the graph as it stands (no policy), or
 * -1 with error set. */
int64_t rv_graph_mean_step_ns(const rv_graph *graph, GError **error);
/* The same from a replay of the graph already run (any policy: the caller's choice). */
int64_t rv_mean_step_ns_of(const rv_graph *graph, const rv_sim_result *sim);

/* One line "    step 95.6 ms -> 172.4 ms; 32 -> 64 samples a step: 334.7 -> 371.2 samples/s\n". */
void rv_throughput_describe(GString *out, int64_t before_ns, int64_t after_ns, double samples_before,
                            double samples_after);

/* For a plugin's apply(): the mean step of the graph it was given, from
 * the host's replay where it lent one (plugin.h's `before`: that graph,
 * replayed without a policy), else replayed here (-1 with error set). */
int64_t rv_mean_step_before(const rv_graph *graph, const rv_plugin_output *output, GError **error);
/* For a plugin's apply(), after its change: the throughput line of the
 * graph as it now stands, in output->notes.  Where `output->last`, the
 * line is left to after_replay (the host's replay is the one this would
 * run when no policy is in force; under one it replays without it), so
 * apply() runs no replay; else it replays now (FALSE with error set if
 * that fails). */
gboolean rv_throughput_note(const rv_graph *graph, rv_plugin_output *output, int64_t before_ns, double samples_before,
                            double samples_after, GError **error);

G_END_DECLS

#endif

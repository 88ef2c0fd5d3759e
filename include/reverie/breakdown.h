/*
 * breakdown.h - where each step's time went, on any timeline (the
 * recording, a replay, a prediction).
 *
 * Daydream's split: at each instant of a step the CPU side is busy when a
 * CPU thread runs a call, its host overhead (the Python and framework time
 * before it, graph.h) when the call lies inside an operator, or data
 * loading (outside every operator the "overhead" is a thread asleep: a
 * watchdog polling every 100 ms); the device side is busy when a GPU
 * stream or a communication channel runs a kernel, a collective, a copy or
 * a set.  Every instant is CPU-only, GPU-only, overlap (both) or idle
 * (neither), so the four add up to the step time exactly.
 *
 * Per phase: each instant also belongs to one phase - that of the device
 * work running then, else that of the CPU work, else (idle) the phase last
 * seen; when several phases run at once the first in forward, backward,
 * optimizer, dataload, other wins.  Per phase the same four parts add up to
 * the step as well.
 *
 * Per stream or channel: compute (kernels), communication (collectives),
 * memory copies and sets, and idle, adding up to the step time.
 *
 * Exposed communication: instants when communication runs and no compute
 * kernel does anywhere - the part of the collectives the step waits for.
 *
 * In a graph of several ranks (job.h) each step is one rank's, and is
 * broken down over that rank's own threads, streams and channels: another
 * rank's CPU does not make this rank's GPU time an overlap.
 */
#ifndef REVERIE_BREAKDOWN_H
#define REVERIE_BREAKDOWN_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"
#include "reverie/sim.h"

G_BEGIN_DECLS

typedef enum { RV_SPLIT_CPU_ONLY, RV_SPLIT_GPU_ONLY, RV_SPLIT_OVERLAP, RV_SPLIT_IDLE, RV_SPLIT_COUNT } rv_split;
typedef enum { RV_USE_COMPUTE, RV_USE_COMMUNICATION, RV_USE_COPY, RV_USE_IDLE, RV_USE_COUNT } rv_stream_use;

typedef struct {
    int64_t begin_ns, end_ns;                          /* the step's window */
    int64_t split_ns[RV_SPLIT_COUNT];
    int64_t phase_split_ns[RV_PHASE_COUNT][RV_SPLIT_COUNT];
    int64_t comm_ns;                                   /* communication running at all */
    int64_t exposed_comm_ns;                           /* ... while no compute kernel runs */
    int64_t phase_exposed_comm_ns[RV_PHASE_COUNT];
    int64_t *use_ns;                                   /* [resource * RV_USE_COUNT + use]; CPU threads stay 0 */
} rv_step_breakdown;

typedef struct {
    guint resource_count;
    GArray *steps;                                     /* rv_step_breakdown, one per window */
} rv_breakdown;

/* Break each window (report.h's rv_step_windows of the same timeline)
 * down.  sim may be the recording (report.h's rv_recorded_result). */
rv_breakdown *rv_breakdown_compute(const rv_graph *graph, const rv_sim_result *sim, const GArray *windows);
void rv_breakdown_free(rv_breakdown *breakdown);

/* Is this resource a GPU stream or channel (one with a per-stream split)? */
gboolean rv_breakdown_has_uses(const rv_graph *graph, int32_t resource);

const char *rv_split_name(rv_split split);          /* "cpu_only", "gpu_only", "overlap", "idle" */
const char *rv_stream_use_name(rv_stream_use use);  /* "compute", "communication", "copy", "idle" */

G_END_DECLS

#endif

/*
 * overlap.h - how long one persistent kernel takes that computes a
 * producer's output in slices and sends each slice as soon as it is ready
 * (fine-grained overlap of a computation with the collective that consumes
 * it: fused-collective, after Punniyamurthy et al., and t3, after Pati et
 * al.).
 *
 * THE MODEL.  The producer's work C (its time alone, less one kernel's
 * fixed cost) is cut into n equal slices, each followed by `slice_overhead`
 * of bookkeeping (the completion flag, the send's issue).  The slices that
 * other GPUs need - remote_fraction of them, (p-1)/p for an all-to-all or a
 * reduce-scatter over p GPUs - are computed first; each goes to the link as
 * it is ready, and the link carries them one after another, T / (remote
 * slices) each, T being the overlappable transfer alone.  While the link
 * carries a slice and the compute units work, both run slower (contention.h):
 * compute at 1 / compute_slowdown, the link at 1 / comm_slowdown.  What can
 * only follow the whole computation (an all-reduce's all-gather: `tail`)
 * comes after, at full speed, and the kernel's start-up (its one fixed
 * cost, the final wait for the peers' flags) before:
 *
 *   fused = startup + pipeline(C, T, n, remote_fraction, contention) + tail
 *
 * With one slice nothing overlaps: startup + C + T + tail.  With many and
 * no contention the pipeline tends to max(C, T) plus one slice.  So, for
 * mild contention, max(C, T) < fused < C + T.
 */
#ifndef REVERIE_OVERLAP_H
#define REVERIE_OVERLAP_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* At most this many slices are modelled (each is two events). */
#define RV_OVERLAP_MAX_SLICES 65536

typedef struct {
    double compute_ns;        /* C: the producer's work alone */
    double transfer_ns;       /* T: the transfer that can overlap it, alone */
    double tail_ns;           /* transfer that can only follow the whole computation */
    double startup_ns;        /* once per fused kernel */
    double slice_overhead_ns; /* bookkeeping per slice, on the compute side */
    int64_t slices;           /* n >= 1 */
    double remote_fraction;   /* share of the slices that travel, in [0, 1] */
    double comm_slowdown;     /* >= 1 (contention.h) */
    double compute_slowdown;  /* >= 1 */
} rv_overlap;

/* The fused kernel's time (ns), by the model above. */
double rv_overlap_time_ns(const rv_overlap *overlap);

/* The fixed cost of a kernel on this graph's GPU, by costmodel.h's rule:
 * the 5th percentile of its non-zero kernel durations, at most 3 us. */
int64_t rv_overlap_kernel_fixed_ns(const rv_graph *graph);

G_END_DECLS

#endif

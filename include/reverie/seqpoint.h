/*
 * seqpoint.h - SeqPoint (Pati et al., the Pati thesis chapter 3): a few
 * representative iterations of a sequence model stand for a whole epoch.
 *
 * A sequence model's iteration time follows its input length (tokens per
 * iteration), and an epoch is thousands of iterations of many lengths.
 * SeqPoint bins the epoch's lengths, picks one iteration per bin, and
 * projects the epoch as the sum over bins of the bin's iteration count
 * times its representative's time.  Profiling only the representatives
 * is what makes it cheap; chosen on one configuration, the same
 * representatives project the epoch on others (another GPU, a what-if).
 *
 * HOW BINS ARE CHOSEN.  The epoch's distinct lengths, weighted by how
 * many iterations have each, are split into K contiguous bins that
 * minimise the iterations' squared distance to their bin's mean length
 * (one-dimensional k-means, solved exactly by dynamic programming).  A
 * bin's representative is the traced step whose length is nearest the
 * bin's mean length (where several steps have it: the one of median
 * recorded time; the trace's first step, which carries the warm-up, only
 * when no other step has that length).  Within a bin time is close to
 * linear in length, so the mean length's iteration times the count is
 * close to the bin's total.
 *
 * HOW MANY.  Without a count given, the smallest K (from 1) whose
 * projection of the recorded times lies within `tolerance` of the
 * reference - every epoch iteration timed by the traced steps of its
 * length (their mean; the nearest traced length where none has it), the
 * recorded total itself when the trace is the epoch - and whose own
 * noise is within it too: one iteration of a length varies (the host's
 * jitter, its neighbours' overlap), by `noise` as the steps that share a
 * length show (their pooled relative standard deviation), so K
 * representatives standing for n_b iterations each carry a standard
 * deviation of noise x sqrt(sum (n_b t_b)^2) / sum n_b t_b.  A projection
 * that meets the tolerance by luck with too few bins is thereby refused.
 * Where no two steps share a length the noise is unknown and only the
 * tolerance decides.
 *
 * A length is a positive count; lengths of steps come from the trace's
 * shapes (rv_seqpoint_lengths_from_shapes) or a file
 * (rv_seqpoint_lengths_read).
 */
#ifndef REVERIE_SEQPOINT_H
#define REVERIE_SEQPOINT_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

/* Most bins a choice may have. */
#define RV_SEQPOINT_MAX_POINTS 256

/* Each step's input length from the recorded shapes: the first operator
 * call, in the same place of every step's forward pass, whose first
 * input's extents differ between steps; its length is the product of the
 * extents that differ (tokens: a sequence length, or batch x length).
 * Fills `lengths` (int64, one per step) and says in `how` which operator
 * and axes it read.  Every step's shapes alike: all lengths 1, and `how`
 * says so.  RV_ERROR_INPUT when the graph has no steps or no shapes. */
gboolean rv_seqpoint_lengths_from_shapes(const rv_graph *graph, GArray *lengths, GString *how, GError **error);

/* Lengths from a text file: integers separated by white space, '#' to
 * the end of a line a comment.  RV_ERROR_INPUT naming the file, line and
 * text of the first entry that is not a length in [1, 2^53). */
gboolean rv_seqpoint_lengths_read(const char *path, GArray *lengths, GError **error);

typedef struct {
    int64_t low, high;      /* the bin's lengths */
    uint64_t iterations;    /* epoch iterations in it */
    double mean_length;     /* their mean length */
    int32_t step;           /* the representative: an index into the traced steps */
} rv_seqpoint_bin;

typedef struct {
    GArray *bins;            /* rv_seqpoint_bin, by length */
    guint points;            /* bins */
    gboolean chosen;         /* TRUE: the smallest count within the tolerance; FALSE: given */
    gboolean met;            /* the tolerance was met (always TRUE when the count was given) */
    uint64_t iterations;     /* of the epoch */
    guint distinct;          /* distinct lengths in the epoch */
    int64_t reference_ns;    /* the reference the count was chosen against (recorded times) */
    double noise;            /* one iteration's relative standard deviation at a length; -1: unknown */
    guint noise_lengths;     /* traced lengths of two or more steps it rests on */
    double spread;           /* the projection's relative standard deviation from that noise; -1: unknown */
} rv_seqpoints;

/*
 * Choose representatives for the epoch (int64 lengths, one per
 * iteration) among the traced steps (step_lengths, int64, and
 * step_recorded_ns, one per step): `points` bins, or with points 0 the
 * smallest count whose projection of the recorded times is within
 * `tolerance` (a fraction) of the reference.  RV_ERROR_USAGE for an
 * empty epoch, no steps, or points above RV_SEQPOINT_MAX_POINTS.
 */
gboolean rv_seqpoint_choose(const GArray *epoch, const GArray *step_lengths, const int64_t *step_recorded_ns,
                            guint points, double tolerance, rv_seqpoints *out, GError **error);
void rv_seqpoints_clear(rv_seqpoints *points);

/* The epoch's projected time: each bin's iterations times its
 * representative's time (step_ns per traced step). */
int64_t rv_seqpoint_project(const rv_seqpoints *points, const int64_t *step_ns);
/* The reference: every epoch iteration timed by the traced steps of its
 * length (their mean), or of the nearest traced length. */
int64_t rv_seqpoint_reference(const GArray *epoch, const GArray *step_lengths, const int64_t *step_ns);

G_END_DECLS

#endif

/*
 * efficiency.h - per-GPU efficiency tables: what kernels of each class and
 * size achieve on a GPU, measured on recordings of that GPU, for projecting
 * a job recorded on one GPU to another (costmodel.h, ANOTHER GPU).
 *
 * A table holds RECORDINGS.  One recording is what `reverie calibrate`
 * measured on one trace: the GPU (a catalogue id, gpus.h), a label (the
 * path given) and the SHA-256 of the file, a signature of the job (below),
 * the recording's fixed per-kernel cost (costmodel.h: the 5th percentile
 * of its kernels, at most 3 us) and the same percentile without the cap
 * (its shortest kernels), the idle gap between back-to-back kernels
 * on a busy stream (graph.h's timing, where 20 gaps or more were seen),
 * and per size bucket (costmodel.h's rv_cost_bucket) of its shaped
 * kernels: how many, their summed wave-aware roofline (datasheet peaks)
 * and summed time above the fixed cost, and the quartiles of the kernels'
 * own efficiencies.  Kernels that beat their bound (below) are left out:
 * their work is overcounted, not their GPU fast.  Recordings stay apart in the file, so a table can be
 * refined (a new recording added, one with the same SHA-256 replaced) and
 * a view can leave some out.
 *
 * A VIEW is what one GPU's recordings say, leaving out every recording of
 * the job being projected: the projection to GPU B never reads a
 * recording of the job made on B (nor on A).  A recording is of the same
 * job when the MinHash estimate of the Jaccard similarity of the two
 * graphs' sets of (operator, Input Dims) of GPU tasks is 0.5 or more (the
 * same model on two GPUs: 0.95 to 1.00 on the shipped pairs; two different
 * models: 0.00).  A bucket's efficiency is its summed roofline over its
 * summed time across the view's recordings, used from 3 kernels up (a
 * bucket with fewer takes the next decade down or up, the one with more
 * kernels); its range spans the recordings' own efficiencies and quartiles.  The fixed
 * cost is the median of the recordings' (the mean of the middle two for an
 * even count), its range their least and most (2x either way around a
 * single recording); the idle gap the median of those measured.
 *
 * The file (data/efficiency.json, installed as
 * $datadir/reverie/efficiency.json) is found like the GPU catalogue:
 * REVERIE_EFFICIENCY if set, else the build tree's data/ when running from
 * a meson build folder, else the install folder.  A file that is not such
 * a table is refused in one RV_ERROR_INPUT line naming the file and where
 * (the line and column of a syntax error; the recording, and the bucket),
 * escaped (escape.h) so that what the file holds cannot add a line or
 * reach a terminal.
 */
#ifndef REVERIE_EFFICIENCY_H
#define REVERIE_EFFICIENCY_H

#include <glib.h>
#include "reverie/costmodel.h"
#include "reverie/gpus.h"
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct rv_efficiency_table rv_efficiency_table;
typedef struct rv_gpu_efficiency rv_gpu_efficiency;

#define RV_EFFICIENCY_MIN_KERNELS 3     /* a bucket is used from this many kernels */
#define RV_EFFICIENCY_MIN_GAPS 20       /* an idle gap is kept from this many samples */
#define RV_EFFICIENCY_SAME_JOB 0.5      /* signature similarity from which two recordings are one job */
/* ... or the share of the smaller job's (operator, shapes) that the larger
 * holds, for sets of at least 20: in the shipped tables the same network
 * with another optimizer or autocast holds 0.79-1.00, different networks
 * with 20 or more members at most 0.55, the same network at another batch
 * or sequence length 0.62 (another job: other shapes). */
#define RV_EFFICIENCY_SAME_JOB_CONTAINED 0.75
#define RV_EFFICIENCY_CONTAINED_MIN_MEMBERS 20
/* A calibration sample achieves at most its roofline when its working set
 * comes from memory; from the last-level cache, at most this many times
 * it (a generous bound: the shipped recordings' in-cache buckets reach
 * 1.7).  A sample above its bound did less work than its operator's shapes
 * count, and is left out. */
#define RV_EFFICIENCY_PLAIN_MAX 1.0
#define RV_EFFICIENCY_CACHE_MAX 4.0

rv_efficiency_table *rv_efficiency_table_new(void);
/* NULL with RV_ERROR_INPUT on a file that is not a table. */
rv_efficiency_table *rv_efficiency_table_load(const char *path, GError **error);
/* The table found by the search order above. */
rv_efficiency_table *rv_efficiency_table_load_default(GError **error);
void rv_efficiency_table_free(rv_efficiency_table *table);
/* The file it was read from ("" for a new table). */
const char *rv_efficiency_table_path(const rv_efficiency_table *table);

/* Measure a recording (its cost model, on its graph and GPU) and add it
 * under `label`; one with the same sha256 is replaced (*replaced set).
 * FALSE with RV_ERROR_INPUT when the recording has no kernel to measure. */
gboolean rv_efficiency_table_add(rv_efficiency_table *table, const rv_cost_model *model, const char *label,
                                 const char *sha256, gboolean *replaced, GError **error);

/* What a recording holds, for listings. */
typedef struct {
    const char *gpu, *label, *sha256;
    guint kernels, samples, rejected, buckets; /* kernels; of them, calibration samples and samples left
                                                  out (above their bound); buckets */
    double kernel_ns, fixed_ns;
    double gap_ns;                     /* < 0: too few gaps seen */
} rv_efficiency_recording;

guint rv_efficiency_table_count(const rv_efficiency_table *table);
rv_efficiency_recording rv_efficiency_table_recording(const rv_efficiency_table *table, guint index);
/* The table as the JSON text of its file (g_free). */
char *rv_efficiency_table_to_json(const rv_efficiency_table *table);

/* One GPU's recordings (by catalogue id), without those of the job of
 * `job` (NULL: keep all); the labels left out are added to `excluded` (may
 * be NULL).  Never NULL: a view of no recordings answers FALSE below. */
rv_gpu_efficiency *rv_efficiency_for_gpu(const rv_efficiency_table *table, const char *gpu_id, const rv_graph *job,
                                         GPtrArray *excluded);
void rv_gpu_efficiency_free(rv_gpu_efficiency *view);
guint rv_gpu_efficiency_recordings(const rv_gpu_efficiency *view);
/* The labels of the recordings the view reads, ", "-separated (g_free). */
char *rv_gpu_efficiency_labels(const rv_gpu_efficiency *view);
gboolean rv_gpu_efficiency_fixed(const rv_gpu_efficiency *view, double *fixed_ns, double *low_ns, double *high_ns);
/* How much longer the shortest kernels last on the target than on the
 * source, measured on PAIRS: recordings of one job made on both GPUs (the
 * same kernels on both).  The median ratio of their uncapped 5th
 * percentiles, and the least and most (2x either way around a single
 * pair); FALSE when the two views share no job. */
gboolean rv_efficiency_fixed_ratio(const rv_gpu_efficiency *source, const rv_gpu_efficiency *target, double *ratio,
                                   double *low, double *high, guint *pairs);
gboolean rv_gpu_efficiency_gap(const rv_gpu_efficiency *view, double *gap_ns);
/* Both GPUs' efficiencies for a kernel's bucket on each (a bucket's
 * efficiency: summed roofline over summed variable time, with its range;
 * RV_EFFICIENCY_MIN_KERNELS or more in it on both sides, else the same
 * neighbouring decade on both: the one with the more kernels on the
 * scarcer side; never two sizes compared).  A ratio of two GPUs' efficiencies read off different
 * jobs measures the jobs as much as the GPUs (one GPU's GEMMs recorded on
 * a large decoder, the other's on a small encoder); so where both GPUs
 * recorded some of the same jobs (rv_efficiency_pair_views, which must
 * have been called on the two views), buckets are read off those
 * recordings alone on both sides, and a bucket the pairs lack is not
 * found; without pairs, off every recording.  FALSE when either side
 * lacks the bucket. */
typedef struct {
    double source, source_low, source_high;
    double target, target_low, target_high;
} rv_efficiency_pair;
void rv_efficiency_pair_views(rv_gpu_efficiency *source, rv_gpu_efficiency *target);
gboolean rv_efficiency_bucket_ratio(const rv_gpu_efficiency *source, const rv_gpu_efficiency *target,
                                    rv_cost_bucket on_source, rv_cost_bucket on_target, rv_efficiency_pair *pair);

/* What a projection of `graph` from `source` to `target` reads: the table
 * (`given`: "" the shipped one, a file, or "none" for no table), each
 * GPU's view without recordings of this job, and the labels left out.
 * With no table, or the same GPU on both sides, the views are NULL.
 * FALSE with the loader's error (saying how to do without a table). */
typedef struct {
    rv_efficiency_table *table;
    rv_gpu_efficiency *source, *target;
    GPtrArray *excluded;   /* char*: labels of the recordings left out */
} rv_efficiency_views;
gboolean rv_efficiency_views_open(rv_efficiency_views *views, const char *given, const rv_graph *graph,
                                  const rv_gpu *source, const rv_gpu *target, GError **error);
void rv_efficiency_views_clear(rv_efficiency_views *views);

/* The Jaccard similarity estimate of two graphs' jobs (above), in [0, 1]. */
double rv_efficiency_job_similarity(const rv_graph *a, const rv_graph *b);

G_END_DECLS

#endif

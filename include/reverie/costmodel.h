/*
 * costmodel.h - what a GPU kernel would take on another device, in another
 * dtype or at other sizes: a roofline over the catalogue's peaks (gpus.h),
 * scaled by an efficiency measured on the trace itself.
 *
 * CLASSES.  Every GPU task is put in one class, from its kernel name (the
 * cuBLAS, cuDNN, CUTLASS, hipBLASLt/Tensile, MIOpen, ATen and Triton
 * spellings) and, where the name says nothing, its operator: gemm, conv,
 * attention, elementwise, reduction (softmax, sums, losses, pooling), norm,
 * copy (device copies, memsets, layout transforms, concatenation),
 * host_copy (PCIe), comm (collectives), other (recognised memory-bound work:
 * sorts, scans, RNG, indexing) and unknown.  A GEMM kernel of a convolution
 * operator is a conv; of a batched GEMM or attention operator, attention.
 * Unknown kernels are never re-costed: every user of the model counts and
 * reports them.
 *
 * DTYPE.  The kernel name's markers (bf16, BFloat16, fp16, Half, h884,
 * tf32, s1688 tensor ops, sgemm, float, the Tensile letters of Cijk_...);
 * a name with none takes the trace's usual floating type (the dtype of most
 * of the named kernel time) and is marked assumed; integer-only names
 * (long, bool, int64) have no floating type and keep their cost under a
 * precision change.  UNIT: matrix units (Tensor Cores, Matrix Cores) for
 * gemm, conv and attention in a dtype the device has them for, where shape
 * allows (multiples of 8 before Ampere); the vector units otherwise.
 *
 * WORK.  FLOPs and bytes come from the Input Dims of the launching operator
 * (graph.h keeps the outermost operator's; the structure of the shapes says
 * which form they take: linear, addmm, mm, bmm, matmul, convolution,
 * scaled-dot-product attention, norms, anything elementwise).  Convolutions
 * are taken to keep their spatial size (stride 1), except patch
 * embeddings (kernel = stride, dividing the input).  Copies and memsets use
 * their recorded bytes.  Where none of this fits the kernel is "unshaped".
 *
 * TIME.  t = fixed + variable.  fixed is what the trace's shortest kernels
 * take (the 5th percentile of its non-zero kernel durations, at most 3 us): the cost of
 * a kernel that does almost nothing, which no device change removes.  The
 * variable part is roofline / efficiency, roofline = max(FLOPs / peak(unit,
 * dtype), bytes / memory bandwidth).  A shaped kernel's efficiency on the
 * source is measured: e = roofline_source / (t - fixed).  On the target it
 * keeps e while it stays on the same kind of unit, so its time scales by
 * the ratio of its rooflines (the same device and shapes give the recorded
 * time back exactly).  When it moves to another unit (fp32 vector math to
 * Tensor Cores), its efficiency there is bounded: on the same GPU by the
 * efficiency the trace itself shows for that class on that unit (summed
 * roofline over summed variable time, when it has 3 such kernels or more),
 * else by the target's measured matmul fraction (achievable / peak,
 * gpus.h), else by 0.8.
 * An unshaped kernel scales like the shaped kernels of its class in the
 * same trace (their summed variable time, before and after); a class with
 * none scales by the peak ratio of the units involved (memory bandwidth
 * and bytes per element for memory-bound classes), and a move from vector
 * to matrix units then gains at most 3x over the target's own vector units
 * (Daydream's measured ceiling for AMP on Volta and Turing, where the peak
 * ratio is 8x).  Host copies scale with PCIe bandwidth; collectives with
 * the intra-node link: their bandwidth part, the latency part of comm.h's
 * model (2 us a step, ring over the graph's world size) stays.
 *
 * PEAKS.  Datasheet peaks by default; with `achievable` the matrix peaks
 * are the measured maximum achievable matmul throughput where BOTH the
 * source and the target GPU have one published (gpus.h), so that a ratio
 * never mixes a measurement with a datasheet figure.
 */
#ifndef REVERIE_COSTMODEL_H
#define REVERIE_COSTMODEL_H

#include <glib.h>
#include <stdint.h>
#include "reverie/gpus.h"
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef enum {
    RV_COST_GEMM,
    RV_COST_CONV,
    RV_COST_ATTENTION,
    RV_COST_ELEMENTWISE,
    RV_COST_REDUCTION,
    RV_COST_NORM,
    RV_COST_COPY,
    RV_COST_HOST_COPY,
    RV_COST_COMM,
    RV_COST_OTHER,
    RV_COST_UNKNOWN,
    RV_COST_CLASS_COUNT
} rv_cost_class;

typedef enum { RV_UNIT_VECTOR, RV_UNIT_MATRIX } rv_unit;

/* "gemm", "conv", ...; and back (-1 if unknown). */
const char *rv_cost_class_name(rv_cost_class cls);
int rv_cost_class_from_name(const char *name);
/* gemm, conv and attention: work for matrix units. */
gboolean rv_cost_class_is_matmul(rv_cost_class cls);

/* What the model knows about one GPU task. */
typedef struct {
    uint8_t cls;            /* rv_cost_class */
    uint8_t dtype;          /* rv_dtype of its math and data; RV_DTYPE_UNKNOWN for integer-only work */
    uint8_t dtype_assumed;  /* the name says no dtype: the trace's usual one */
    uint8_t unit;           /* rv_unit it ran on */
    uint8_t aligned;        /* matmul dimensions are multiples of 8 (or unknown) */
    uint8_t autocast_fp32;  /* an operator autocast keeps in fp32 (softmax, norms, losses, sums...) */
    uint8_t shaped;         /* flops and bytes are known */
    double flops;
    double bytes;
} rv_kernel_cost;

/* The class, dtype and unit of one kernel name (and operator), without a
 * graph: for tests and for the classifier's own memo. */
rv_cost_class rv_cost_classify_name(const char *kernel_name, const char *op_name, rv_task_kind kind);
/* The dtype a kernel name says (RV_DTYPE_UNKNOWN if none); *integer set
 * when it names only integer types. */
rv_dtype rv_cost_dtype_of_name(const char *kernel_name, gboolean *integer);
/* Bytes per element of the dtype a kernel name says, or `fallback` when
 * it says none. */
int rv_cost_element_bytes_of_name(const char *kernel_name, int fallback);

/* FLOPs and bytes of a kernel of `cls`, launched by operator `op` with
 * the Input Dims text `dims`, elements of `element_bytes` bytes.  FALSE
 * when the shapes do not fit the class. */
gboolean rv_cost_work_of(rv_cost_class cls, const char *op, const char *dims, int element_bytes, double *flops,
                         double *bytes, gboolean *aligned);

typedef struct rv_cost_model rv_cost_model;

/* Classify and measure every GPU task of graph, recorded on `source`.
 * `achievable` chooses the matrix peaks (above).  The graph must outlive
 * the model and keep its tasks (the model reads their durations). */
rv_cost_model *rv_cost_model_new(const rv_graph *graph, const rv_gpu *source, gboolean achievable);
void rv_cost_model_free(rv_cost_model *model);

/* NULL for CPU tasks and removed ones. */
const rv_kernel_cost *rv_cost_model_kernel(const rv_cost_model *model, int32_t task);
const rv_gpu *rv_cost_model_source(const rv_cost_model *model);
int64_t rv_cost_model_fixed_ns(const rv_cost_model *model);
/* The trace's usual floating dtype (RV_DTYPE_UNKNOWN when no name says one). */
rv_dtype rv_cost_model_usual_dtype(const rv_cost_model *model);
/* The class's calibrated efficiency on a unit, over its shaped kernels
 * (summed roofline / summed variable time), bounded to [0.005, 1]; 0 with
 * *samples 0 when the trace has none. */
double rv_cost_model_efficiency(const rv_cost_model *model, rv_cost_class cls, rv_unit unit, guint *samples);

/* What a memory-bound kernel moving `bytes` takes on the source GPU: the
 * fixed cost plus the bytes at the memory bandwidth times the efficiency
 * this trace's elementwise kernels show (else its copies', else 0.7), for
 * kernels a plugin inserts (casts, gradient unscaling). */
double rv_cost_model_streaming_ns(const rv_cost_model *model, double bytes);

/* Roofline seconds of `flops` and `bytes` on gpu with that unit and dtype
 * (flops_scale and memory_scale multiply the peaks). */
double rv_cost_roofline_s(const rv_gpu *gpu, rv_unit unit, rv_dtype dtype, double flops, double bytes,
                          gboolean achievable, double flops_scale, double memory_scale);
/* The unit a matmul class in `dtype` runs on on gpu (shape alignment as given). */
rv_unit rv_cost_unit_on(const rv_gpu *gpu, rv_cost_class cls, rv_dtype dtype, gboolean aligned);

/* ---- re-costing ------------------------------------------------------ */

/* How one task changes.  Start from rv_cost_change_none(). */
typedef struct {
    const rv_gpu *gpu;      /* target device (the source GPU: unchanged) */
    rv_dtype dtype;         /* target dtype; RV_DTYPE_UNKNOWN: as recorded */
    double flops_factor;    /* the work grows x (model-scale) */
    double bytes_factor;
    double flops_scale;     /* the target's compute peaks x (hardware evolution) */
    double memory_scale;    /* its memory bandwidth x */
    double link_scale;      /* its communication links x */
    double comm_bytes_factor; /* collectives move x the bytes (comm.h's alpha-beta model) */
    int comm_ranks;         /* ranks of those collectives (for their latency term); 0: the graph's world size */
} rv_cost_change;

rv_cost_change rv_cost_change_none(const rv_cost_model *model);

/* Decide the change of one GPU task: FALSE leaves it as it is. */
typedef gboolean (*rv_cost_change_fn)(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost,
                                      rv_cost_change *change, gpointer data);

typedef struct {
    guint tasks, shaped, by_class_ratio, by_peak_ratio, at_floor, unit_changes;
    int64_t recorded_ns, predicted_ns;
} rv_cost_class_stats;

/* New durations for the tasks a change function picks, and how they were found. */
typedef struct {
    GArray *new_ns;        /* double per task; < 0: unchanged */
    rv_cost_class_stats classes[RV_COST_CLASS_COUNT];
    guint unknown_tasks;   /* unknown kernels the function picked: left unchanged */
    int64_t unknown_ns;
    guint assumed_dtype;   /* changed tasks whose dtype was assumed */
} rv_cost_plan;

rv_cost_plan *rv_cost_model_plan(const rv_cost_model *model, rv_cost_change_fn decide, gpointer data);
void rv_cost_plan_free(rv_cost_plan *plan);
/* Set the planned durations; FALSE with RV_ERROR_USAGE naming `cause`
 * when one falls outside the limits (validate.h), before any is set. */
gboolean rv_cost_plan_apply(rv_graph *graph, const rv_cost_plan *plan, const char *cause, GError **error);
/* Tasks the plan changes. */
guint rv_cost_plan_changed(const rv_cost_plan *plan);
/* One line per class the plan touched ("    gemm 24 kernels 43.208 -> 38.1 ms (24 by shapes)"),
 * and a line counting unknown kernels, each starting with `indent`. */
void rv_cost_plan_describe(const rv_cost_plan *plan, const char *indent, GString *out);

G_END_DECLS

#endif

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
 *
 * ANOTHER GPU.  When a change moves a shaped kernel recorded on GPU A to a
 * GPU B (hardware:gpu=), its time there is
 *     t_B = fixed_B + (t_A - fixed_A) * R_B / R_A * E_A / E_B
 * with these terms beyond the plain roofline, each for a physical reason:
 *   - fixed_A is the trace's own fixed cost (above); fixed_B is what the
 *     shortest kernels take in recordings of B (efficiency.h, the median
 *     over its recordings): launch, dispatch and teardown, which a GPU's
 *     driver and firmware set, not its peaks.  No recording of B: fixed_A.
 *   - waves (waves.c): R is the roofline whose compute term is divided by
 *     the wave utilization blocks / (waves x SMs x resident blocks per SM),
 *     occupancy from the recorded block, registers and shared memory
 *     against each GPU's per-SM limits (across vendors the source's
 *     blocks per SM carry over, within the target's thread and block
 *     limits: registers and shared memory are one vendor's compiled
 *     kernel's, and the target's kernel is not recorded).  The target runs the recorded grid
 *     where the grid comes from the problem (ATen, Triton, fused
 *     attention) or the vendor is the same; a vendor library's GEMM or
 *     convolution on another vendor's GPU picks its own tiles there, so it
 *     keeps the utilization it had (Habitat's split, Yu et al., USENIX ATC
 *     2021: wave scaling for kernels that carry over, measurements for the
 *     ones a library re-chooses).
 *   - E_A / E_B, the per-GPU efficiencies from data (efficiency.h): the
 *     achieved fraction of the roofline of kernels of the same class,
 *     unit and size bucket (a decade of FLOPs, or of bytes for
 *     memory-bound classes: achieved bandwidth as a function of bytes
 *     moved), in recordings of each GPU that are not of this job.  A
 *     memory-bound kernel whose working set fits a GPU's last-level cache
 *     (gpus.h) is looked up among that GPU's in-cache kernels, which the
 *     cache serves faster than its memory: the cache term.  Used only
 *     where both GPUs have the bucket (3 kernels or more); else the
 *     kernel keeps its own efficiency (E_A / E_B = 1).
 * Each projected time carries a range (low, high): fixed_B between the
 * least and the most that B's recordings show, the efficiency ratio
 * across the spread of the efficiencies it used (each GPU's recordings
 * and quartiles, combined in quadrature of their logarithms); where a
 * term has no evidence its factor spans 2x either way.  A kernel moving to
 * another unit keeps the rule above (its efficiency bounded), with that
 * wide range.
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
    uint8_t library;        /* a vendor library's GEMM or convolution: another GPU's library picks its own tiles */
    uint8_t fused;          /* a fused attention kernel (FlashAttention and the like), not a batched GEMM */
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
/* A vendor library's kernel (cuBLAS, cuDNN, CUTLASS, hipBLASLt, Tensile,
 * rocBLAS, MIOpen) rather than one whose grid comes from the problem
 * (ATen, Triton, fused attention). */
gboolean rv_cost_name_is_library(const char *kernel_name);
/* An operator that hands a convolution to a vendor library (cuDNN,
 * MIOpen: aten::cudnn_convolution*, aten::miopen_convolution*,
 * aten::convolution_backward), so that every kernel it launches, under
 * whatever name (cuDNN's nchwToNhwc, MIOpen's batched_transpose), is that
 * library's choice. */
gboolean rv_cost_op_is_library_convolution(const char *op);
/* cuDNN's batch-norm kernels (cudnn::bn_fw_..., cudnn::bn_bw_...). */
gboolean rv_cost_name_is_cudnn_batch_norm(const char *kernel_name);
/* A fused attention kernel (flash, fmha, attn_fwd, ...). */
gboolean rv_cost_name_is_fused_attention(const char *kernel_name);

/* FLOPs and bytes of a kernel of `cls`, launched by operator `op` with
 * the Input Dims text `dims` and the operator arguments `op_args`
 * (rv_task_op_args: a convolution's geometry; NULL where the trace has
 * none, and a convolution is then taken at stride 1), elements of
 * `element_bytes` bytes.  FALSE when the shapes do not fit the class. */
gboolean rv_cost_work_of(rv_cost_class cls, const char *op, const char *dims, const char *op_args, int element_bytes,
                         double *flops, double *bytes, gboolean *aligned);

typedef struct rv_cost_model rv_cost_model;

/* Classify and measure every GPU task of graph, recorded on `source`.
 * `achievable` chooses the matrix peaks (above).  The graph must outlive
 * the model and keep its tasks (the model reads their durations). */
rv_cost_model *rv_cost_model_new(const rv_graph *graph, const rv_gpu *source, gboolean achievable);
/* The model rv_cost_model_new would build of its graph now, where the
 * graph has only gained tasks and edges since the model was built or last
 * extended (inserted.h's kernels, rv_transform_insert; none of its earlier
 * tasks changed or removed): the new tasks' kernels counted in, the fixed
 * cost, usual dtype and calibration as of all the tasks, for about the
 * cost of the new ones. */
void rv_cost_model_extend(rv_cost_model *model);
void rv_cost_model_free(rv_cost_model *model);

/* NULL for CPU tasks and removed ones. */
const rv_kernel_cost *rv_cost_model_kernel(const rv_cost_model *model, int32_t task);
const rv_gpu *rv_cost_model_source(const rv_cost_model *model);
const rv_graph *rv_cost_model_graph(const rv_cost_model *model);
int64_t rv_cost_model_fixed_ns(const rv_cost_model *model);
/* The trace's usual floating dtype: the dtype of most named kernel time
 * (RV_DTYPE_UNKNOWN when no name says one), or half precision where the
 * GEMMs whose names say none ran faster than any 32-bit type can on the
 * GPU (rv_cost_model_unnamed_gemm_flops above TF32's datasheet peak).
 * Every kernel whose name says no dtype is taken to be in it. */
rv_dtype rv_cost_model_usual_dtype(const rv_cost_model *model);
/* The FLOP/s of the GEMMs whose names say no dtype, all together (their
 * FLOPs from shapes over their time); 0 when there are none with shapes. */
double rv_cost_model_unnamed_gemm_flops(const rv_cost_model *model);
/* The fastest any 32-bit type multiplies matrices on the GPU (FLOP/s,
 * datasheet): TF32's matrix peak where it has one. */
double rv_cost_fastest_32bit_flops(const rv_gpu *gpu);
/* The class's calibrated efficiency on a unit, over its shaped kernels
 * (summed roofline / summed variable time), bounded to [0.005, 1]; 0 with
 * *samples 0 when the trace has none. */
double rv_cost_model_efficiency(const rv_cost_model *model, rv_cost_class cls, rv_unit unit, guint *samples);

/* What a memory-bound kernel moving `bytes` takes on the source GPU: the
 * fixed cost plus the bytes at the memory bandwidth times the efficiency
 * this trace's elementwise kernels show (else its copies', else 0.7), for
 * kernels a plugin inserts (casts, gradient unscaling). */
double rv_cost_model_streaming_ns(const rv_cost_model *model, double bytes);
/* That efficiency: the share of the memory bandwidth a streaming kernel
 * of this trace reaches. */
double rv_cost_model_streaming_efficiency(const rv_cost_model *model);
/* The share of its unit's peak a matmul kernel of `cls` reaches on the
 * source GPU when its own shapes do not say: the class's calibrated
 * efficiency there (3 shaped kernels or more), else the GPU's measured
 * matmul peak over its datasheet peak (gpus.h), else 0.8. */
double rv_cost_model_matmul_efficiency(const rv_cost_model *model, rv_cost_class cls, rv_unit unit, rv_dtype dtype);

/* Roofline seconds of `flops` and `bytes` on gpu with that unit and dtype
 * (flops_scale and memory_scale multiply the peaks). */
double rv_cost_roofline_s(const rv_gpu *gpu, rv_unit unit, rv_dtype dtype, double flops, double bytes,
                          gboolean achievable, double flops_scale, double memory_scale);
/* The unit a matmul class in `dtype` runs on on gpu (shape alignment as given). */
rv_unit rv_cost_unit_on(const rv_gpu *gpu, rv_cost_class cls, rv_dtype dtype, gboolean aligned);

/* ---- launches, waves and size buckets (waves.c) ---------------------- */

/* Blocks of `launch` one SM (CU) of gpu holds at once: its resident
 * threads (whole warps), blocks, registers (when `registers`: the same
 * compiler's figure) and shared memory allow; at least 1; 0 when the GPU's
 * limits or the launch are unknown. */
int rv_cost_blocks_per_sm(const rv_gpu *gpu, const rv_launch *launch, gboolean registers);
/* The share of gpu's compute units a launch keeps busy over its waves,
 * blocks / (waves x SMs x blocks per SM), in (0, 1]; 1 when unknown. */
double rv_cost_wave_utilization(const rv_gpu *gpu, const rv_launch *launch, gboolean registers);
/* The same with `per_sm` blocks resident on an SM (CU), however the
 * GPU's limits would count them; 1 when unknown (per_sm <= 0). */
double rv_cost_wave_utilization_at(const rv_gpu *gpu, const rv_launch *launch, int per_sm);
/* The share of each of gpu's per-SM resources - threads, block slots,
 * registers, shared memory, in contention.h's RV_SHARE_* order - that
 * `launch` holds over the whole GPU while it runs: u x blocks per SM x one
 * block's use / one SM's, u being its wave utilization; u on a resource
 * that limits its blocks per SM (one more block would not fit there).
 * FALSE, shares untouched, when the GPU's limits or the launch are
 * unknown. */
gboolean rv_cost_occupancy_shares(const rv_gpu *gpu, const rv_launch *launch, double shares[4]);
/* rv_cost_roofline_s with the compute term divided by `utilization`. */
double rv_cost_wave_roofline_s(const rv_gpu *gpu, rv_unit unit, rv_dtype dtype, double flops, double bytes,
                               double utilization, gboolean achievable, double flops_scale, double memory_scale);

/* Where a kernel's efficiency is kept (efficiency.h): its class and unit,
 * the decade of its work (FLOPs for matmul classes, bytes for the rest),
 * and whether a memory-bound kernel's working set fits the GPU's
 * last-level cache, or an attention kernel is a fused one. */
enum { RV_BUCKET_PLAIN, RV_BUCKET_IN_CACHE, RV_BUCKET_FUSED, RV_BUCKET_VARIANT_COUNT };
typedef struct {
    uint8_t cls, unit, variant;
    int8_t decade;     /* floor(log10(work)), 0 for work below 10 */
} rv_cost_bucket;
rv_cost_bucket rv_cost_bucket_of(const rv_kernel_cost *cost, const rv_gpu *gpu);
/* "", "in_cache", "fused"; and back (-1 if unknown). */
const char *rv_cost_bucket_variant_name(int variant);
int rv_cost_bucket_variant_from_name(const char *name);

/* One recorded kernel as a calibration sample: its bucket on the source
 * GPU, its wave-aware roofline there (datasheet peaks) and its time above
 * the fixed cost.  FALSE for kernels that are no sample: unshaped, not
 * costed, or at the fixed cost. */
gboolean rv_cost_model_sample(const rv_cost_model *model, int32_t task, rv_cost_bucket *bucket, double *roofline_ns,
                              double *variable_ns);

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
    /* Another GPU's per-GPU efficiencies (efficiency.h), when gpu is not the
     * source: the source's and the target's, each without recordings of
     * this job; NULL where there are none (see ANOTHER GPU above). */
    const struct rv_gpu_efficiency *source_efficiency, *target_efficiency;
} rv_cost_change;

rv_cost_change rv_cost_change_none(const rv_cost_model *model);

/* PyTorch runs fp32 convolutions on TF32 Tensor Cores by default where the
 * GPU has them (torch.backends.cudnn.allow_tf32), matmuls not
 * (torch.backends.cuda.matmul.allow_tf32): a trace from a GPU without TF32
 * cannot show that, so a move to one with it applies the defaults.  TRUE
 * when `cost` runs in TF32 on target; mode "conv" (the defaults), "all"
 * (matmuls too) or "none". */
gboolean rv_cost_gains_tf32(const rv_gpu *source, const rv_gpu *target, const rv_kernel_cost *cost, const char *mode);

/* Decide the change of one GPU task: FALSE leaves it as it is. */
typedef gboolean (*rv_cost_change_fn)(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost,
                                      rv_cost_change *change, gpointer data);

/* What decided a re-costed kernel's new time (the largest term of it). */
typedef enum {
    RV_TERM_NONE,       /* not re-costed */
    RV_TERM_FIXED,      /* the target's fixed per-kernel cost */
    RV_TERM_PEAK,       /* compute-bound: the peak FLOP/s */
    RV_TERM_WAVES,      /* compute-bound, and wave quantization moved it by more than 25% */
    RV_TERM_BANDWIDTH,  /* memory-bound: the memory bandwidth and the achieved share at its size */
    RV_TERM_CACHE,      /* memory-bound with a working set inside the target's last-level cache */
    RV_TERM_CLASS,      /* unshaped: like the shaped kernels of its class */
    RV_TERM_LINK,       /* host copies and collectives: the link */
    RV_TERM_COUNT
} rv_cost_term;
/* "fixed", "peak", "waves", "bandwidth", "cache", "class", "link" ("" for none). */
const char *rv_cost_term_name(rv_cost_term term);

typedef struct {
    guint tasks, shaped, by_class_ratio, by_peak_ratio, at_floor, unit_changes;
    int64_t recorded_ns, predicted_ns;
    /* Appended for the range and the explanation (ANOTHER GPU above). */
    int64_t predicted_low_ns, predicted_high_ns;
    guint by_table;                    /* shaped kernels whose efficiency ratio came from both GPUs' tables */
    int64_t term_ns[RV_TERM_COUNT]; /* predicted time of the kernels each term decided */
} rv_cost_class_stats;

/* New durations for the tasks a change function picks, and how they were found. */
typedef struct {
    GArray *new_ns;        /* double per task; < 0: unchanged */
    GArray *low_ns, *high_ns; /* double per task: the range of new_ns (equal to it where it is exact) */
    GArray *terms;         /* uint8 per task: the rv_cost_term that decided it */
    /* The fixed cost a GPU change used on the target (for the trace's own
     * fixed cost) and its range; target_fixed_ns < 0 if none changed.
     * same_sms: the source's own (the target has the same SMs); by_pairs:
     * from the ratio `ratio` measured on `pairs` recordings of one job on
     * both GPUs; else from the target's recordings. */
    double target_fixed_ns, target_fixed_low_ns, target_fixed_high_ns;
    gboolean target_fixed_same_sms, target_fixed_by_pairs;
    guint target_fixed_pairs;
    double target_fixed_ratio;
    rv_cost_class_stats classes[RV_COST_CLASS_COUNT];
    guint unknown_tasks;   /* unknown kernels the function picked: left unchanged */
    int64_t unknown_ns;
    guint assumed_dtype;   /* changed tasks whose dtype was assumed */
    /* Shaped GEMMs moved onto fp16/bf16 with a dimension that is
     * no multiple of 8: the libraries run them with unaligned kernels the
     * tables hold no large samples of (rv_cost_plan_describe says so). */
    guint unaligned_half;
    int64_t unaligned_half_ns;  /* their recorded time */
    /* Kernels a library convolution launched under other names (layout
     * transposes, workspace setup) moved to another vendor's GPU: they
     * follow their convolutions (costed and counted as class conv), since
     * the target's library runs helpers of its own, or none. */
    guint library_helpers;
    int64_t library_helpers_ns;  /* their recorded time */
    /* cuDNN batch-norm kernels cast to bf16: PyTorch hands a batch norm to
     * cuDNN in fp32 and fp16 but runs it in bf16 with its own kernels
     * (at::native's batch_norm_collect_statistics, _transform_input and
     * _backward: a block per channel), which a trace of the other dtypes
     * does not show, so the plan costs them as cuDNN's
     * (rv_cost_plan_describe says so). */
    guint bf16_batch_norms;
    int64_t bf16_batch_norms_ns;  /* their recorded time */
} rv_cost_plan;

rv_cost_plan *rv_cost_model_plan(const rv_cost_model *model, rv_cost_change_fn decide, gpointer data);
void rv_cost_plan_free(rv_cost_plan *plan);
/* Set the planned durations, and their ranges (range.h) where they are
 * not exact; FALSE with RV_ERROR_USAGE naming `cause`
 * when one falls outside the limits (validate.h), before any is set. */
gboolean rv_cost_plan_apply(rv_graph *graph, const rv_cost_plan *plan, const char *cause, GError **error);
/* Tasks the plan changes. */
guint rv_cost_plan_changed(const rv_cost_plan *plan);
/* One line per class the plan touched ("    gemm 24 kernels 43.208 -> 38.1 ms (24 by shapes)"),
 * a line for each caveat the plan counted (unaligned half-precision GEMMs,
 * library helpers, bf16 batch norms) and one counting unknown kernels,
 * each starting with `indent`. */
void rv_cost_plan_describe(const rv_cost_plan *plan, const char *indent, GString *out);

G_END_DECLS

#endif

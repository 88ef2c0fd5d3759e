/*
 * memory.h - how much GPU memory a step holds at its peak: recorded, where
 * the trace has [memory] events (profile_memory=True), and estimated from
 * shapes otherwise (and after a what-if, on the transformed graph).
 *
 * RECORDED.  The importer keeps the caching allocator's events and the
 * builder reduces them to rv_memory_record (graph.h): per rank, device and
 * step, the highest "Total Allocated" (what tensors hold) and "Total
 * Reserved" (what the allocator took from the driver).
 *
 * ESTIMATED.  From the Input Dims of the operators that launch GPU work
 * (the outermost operator of each launch, shapes.h), in bytes of the dtype
 * their first kernel's name says (costmodel.h; else the trace's usual one):
 *  - weights: the parameter inputs of weighted operators (linear: weight
 *    and bias; conv; addmm's bias and matrix; the norms' affine weights;
 *    embedding tables), counted once per call in the step;
 *  - gradients: the same bytes again, in training (a step with a backward
 *    phase); they appear layer by layer during backward;
 *  - optimizer state: per parameter byte, 2x for the Adam family, 1x for
 *    SGD (a momentum buffer), Adagrad and RMSprop, found from the
 *    "Optimizer.step#NAME.step" annotation; none without one;
 *  - activations kept for backward (training only): each forward
 *    operator's non-parameter tensor inputs (what autograd saves for
 *    linear, conv, norms, matmul), or its result for ReLU, sigmoid, tanh,
 *    softmax and exp (whose backward reads the result), except additions,
 *    copies and concatenations, which save nothing; a tensor saved by one
 *    operator and read next by another of the same size is counted once
 *    (relu then linear, relu_ then conv).  Kept from the
 *    operator until the backward of the weighted layer they precede:
 *    the backward walks the weighted layers in reverse, adding each
 *    layer's gradient and freeing its activations;
 *  - workspace: the largest transient of one operator of the phase: its
 *    output (from the shapes: matmul, linear, addmm, bmm, conv with
 *    stride 1 or a patch embedding; none for in-place operators; the
 *    largest input otherwise); plus, in inference, its inputs, and in
 *    backward its largest input (an incoming gradient).  A forward
 *    operator's backward holds the gradients of its output and of its
 *    largest input at once: that is the backward workspace of its layer in
 *    the walk below, since backward calls rarely carry shapes of their
 *    own.  Losses output a scalar (reduction='mean').  Forward inputs in
 *    training are kept activations and optimizer inputs are parameters,
 *    gradients and states: counted already.
 * Inference (no backward phase) keeps no activations but its input (the
 * first forward operator's inputs, held by the caller): its peak is the
 * weights, the input, and the largest operator's inputs and output.
 *
 * OFFLOADING.  An inserted device-to-host copy that leads to an inserted
 * host-to-device copy (vdnn's offload and prefetch) frees its bytes in
 * between: they leave the kept activations at the end of forward and come
 * back when the backward walk reaches their layer (or the one above it:
 * vDNN prefetches one layer ahead).
 *
 * WHAT PLUGINS DID.  A plugin that changes tensors rather than time says so
 * with rv_memory_effect_add (graph->memory_effects), per launch call or for
 * every call:
 *  - KEPT_SCALE: what the call keeps for backward is stored at `factor` of
 *    its size (Gist's encodings: 1/32 for a ReLU output kept for a pool,
 *    1/2 for a half-precision copy);
 *  - RECOMPUTED: the call keeps nothing past forward; when the backward walk
 *    reaches the highest layer of its segment, every recomputed call of that
 *    segment holds its activations again until backward has passed them
 *    (activation checkpointing);
 *  - ACTIVATION_SCALE: every tensor of the call that is not a parameter
 *    (kept activations, workspace, the step's input) at `factor` of its
 *    size: a batch `factor` times larger, or a narrower activation dtype;
 *  - PARAM_SCALE: its parameters, and so their gradients and optimizer
 *    state, at `factor` of their size (the weights' dtype changed);
 *  - STAGE: the call runs on pipeline stage `segment`, a GPU of its own
 *    (pipeline).  Each stage is then estimated from its own calls (and
 *    those of no stage, such as the optimizer's) and the peak is the
 *    highest stage's; a removed call with a stage is still read, since
 *    its work moved to that stage's GPU.  The pipeline also scales a
 *    call's tensors to one micro-batch (ACTIVATION_SCALE) and its kept
 *    activations by the micro-batches in flight (KEPT_SCALE);
 *  - MOVED: the call was removed with its GPU work, but that work moved
 *    into another kernel (a fusion: metaflow's fuse and merge,
 *    batchnorm-restructure's ReLUs, fused-adam's optimizer kernels, whose
 *    Adam state the fused kernel keeps), so its tensors are still made and
 *    kept: it is still read.  A call removed without this is gone with
 *    its tensors (metaflow's remove);
 *  - SHARD (every call only): the model states are split over data-parallel
 *    ranks, each holding `factor` of those `segment` names (RV_SHARD_*
 *    bits: ZeRO's stages); sharded weights are gathered a layer at a time
 *    while it runs, so the largest layer's whole weights count as
 *    workspace, and sharded gradients are whole for the layer whose
 *    backward makes them until they are reduce-scattered;
 *  - OFFLOAD (every call only): the model states `segment` names (RV_SHARD_*
 *    bits) live in host memory or on NVMe (ZeRO-Offload, ZeRO-Infinity):
 *    the GPU holds none of them but what a layer needs while it runs, as
 *    for sharding (offloaded weights come in a layer at a time, offloaded
 *    gradients leave once their layer's backward made them); what left
 *    the GPU is offloaded_states.
 *  - RESIDENT (every call only): `factor` bytes the step holds from its
 *    start to its end besides the tensors above (a generative model's KV
 *    cache: decode), counted with the activations of every phase.
 * Scales of one kind multiply (SHARD factors too, per state); a later
 * RECOMPUTED replaces an earlier one; RESIDENT bytes add.
 * Inserted calls are not read (they copy a recorded call's shapes), so
 * the effects are the only way an optimization moves the estimate, besides
 * vdnn's copies above.
 *
 * What it does not see: the allocator's rounding and fragmentation
 * (Reserved minus Allocated), cuDNN/cuBLAS workspaces, tensors made by
 * operators that launch no kernel, buffers of data-parallel wrappers (DDP's
 * gradient buckets), and autocast's copies of the weights.
 */
#ifndef REVERIE_MEMORY_H
#define REVERIE_MEMORY_H

#include <glib.h>
#include <stdint.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef enum {
    RV_MEM_WEIGHTS,
    RV_MEM_GRADIENTS,
    RV_MEM_OPTIMIZER_STATE,
    RV_MEM_ACTIVATIONS,
    RV_MEM_WORKSPACE,
    RV_MEM_CATEGORY_COUNT
} rv_memory_category;

/* "weights", "gradients", "optimizer_state", "activations", "workspace". */
const char *rv_memory_category_name(rv_memory_category category);

/* SHARD's `segment`: which model states are sharded. */
enum { RV_SHARD_OPTIMIZER_STATE = 1, RV_SHARD_GRADIENTS = 2, RV_SHARD_WEIGHTS = 4 };

typedef enum {
    RV_MEM_EFFECT_KEPT_SCALE,
    RV_MEM_EFFECT_RECOMPUTED,
    RV_MEM_EFFECT_ACTIVATION_SCALE,
    RV_MEM_EFFECT_PARAM_SCALE,
    RV_MEM_EFFECT_STAGE,
    RV_MEM_EFFECT_MOVED,
    RV_MEM_EFFECT_SHARD,
    RV_MEM_EFFECT_OFFLOAD,
    RV_MEM_EFFECT_RESIDENT,
    RV_MEM_EFFECT_KIND_COUNT
} rv_memory_effect_kind;

/* Record an effect (above) on launch call `call` (-1: every call).
 * factor: for the _SCALE kinds, finite and >= 0 (callers check their
 * parameters; other values are ignored); segment: for RECOMPUTED and
 * STAGE, >= 0. */
void rv_memory_effect_add(rv_graph *graph, int32_t call, rv_memory_effect_kind kind, double factor, int32_t segment);
/* The same effect once on each distinct launch call of the GPU tasks
 * `gpu_tasks` (int32 ids; tasks without a launch call are skipped).
 * Returns how many calls it marked. */
guint rv_memory_effect_add_for_tasks(rv_graph *graph, const GArray *gpu_tasks, rv_memory_effect_kind kind,
                                     double factor, int32_t segment);

/* The recorded peak over the whole trace: the highest peak_allocated of
 * any record (*device and *rank_index say where; *reserved is the highest
 * reserved there).  FALSE when the graph has no [memory] events with
 * totals. */
gboolean rv_memory_recorded_peak(const rv_graph *graph, int64_t *allocated, int64_t *reserved, int32_t *device,
                                 int32_t *rank_index);

/* The estimate from shapes. */
typedef struct {
    /* What is resident at each phase's own peak (forward: its end;
     * backward: the worst moment of the walk; optimizer: weights,
     * gradients, state and its workspace). */
    int64_t bytes[RV_PHASE_COUNT][RV_MEM_CATEGORY_COUNT];
    int64_t phase_peak[RV_PHASE_COUNT];   /* sums of the rows; 0 for phases without work */
    int64_t peak;                         /* the highest phase_peak */
    int32_t peak_phase;                   /* rv_phase */
    int32_t step;                         /* the step estimated (the one with the highest peak), -1: the whole trace */
    int32_t stage, stages;                /* pipelined (STAGE effects): the peak's stage and their count; else -1, 0 */
    gboolean training;                    /* the step has a backward phase */
    int64_t offloaded;                    /* activation bytes offloaded by inserted copies (vdnn) in that step */
    int64_t recomputed;                   /* activation bytes dropped after forward and rebuilt (checkpoint, or
                                             the recording's own checkpointing, read from its backward) */
    int64_t model_states;                 /* weights, gradients and optimizer state of the whole model, unsharded */
    int64_t gathered;                     /* sharded weights gathered for one layer at a time (SHARD): its largest */
    int64_t resident;                     /* bytes held through the step (RESIDENT: a KV cache), in activations */
    guint shaped_ops, unshaped_ops;       /* operator calls with and without Input Dims */
    int element_bytes;                    /* of the trace's usual dtype */
    int optimizer_factor;                 /* state bytes per parameter byte; -1 if no optimizer was named */
    char optimizer[32];                   /* its name ("Adam"), "" if none */
    /* Appended in ABI 9: model states held off the GPU (OFFLOAD), this
     * rank's share of them. */
    int64_t offloaded_states;
} rv_memory_estimate;

/* Estimate every step's peak and keep the highest.  RV_ERROR_INPUT when no
 * operator has Input Dims (recorded without record_shapes=True). */
gboolean rv_memory_estimate_graph(const rv_graph *graph, rv_memory_estimate *estimate, GError **error);

/* Whether the estimate of `variant`, which plugins made from a copy of
 * `baseline`, is sure to be baseline's (whose estimate said
 * element_bytes): nothing the model reads changed - no effects, the
 * recorded tasks' tags, flags and order and the edges as they were, no
 * kernel or copy added (so the same usual dtype, which reads only those:
 * element_bytes is no longer compared, and stays in the signature for the
 * plugin ABI).  FALSE means "estimate it", not that it differs.  A sweep of time-only what-ifs (scale, hardware,
 * network...) thereby skips the model: O(tasks + edges), no hashing. */
gboolean rv_memory_estimate_unchanged(const rv_graph *baseline, const rv_graph *variant, int element_bytes);

/* The same question, answered from the plugins' declarations (compose.h)
 * for a sweep's many variants of one baseline: kept once per baseline
 * (whose estimate said element_bytes), then asked per variant.  TRUE only
 * when every plugin applied since the baseline declared that it changes
 * durations at most (it scales or reprices, rewrites nothing, leaves the
 * memory model's tensors alone), the task, edge and step counts are the
 * baseline's (the usual dtype is counted over kernel names, so durations
 * cannot move it).  A plugin that declared nothing (effects NULL) makes it
 * FALSE: then ask rv_memory_estimate_unchanged, or estimate.  O(plugins
 * applied); it reads no task.  Trusts the declarations: a plugin that
 * declares "scales" and moves tensors gets the baseline's peak. */
typedef struct rv_memory_durations_only rv_memory_durations_only;
rv_memory_durations_only *rv_memory_durations_only_new(const rv_graph *baseline, int element_bytes);
gboolean rv_memory_durations_only_unchanged(const rv_memory_durations_only *kept, const rv_graph *baseline,
                                            const rv_graph *variant);
void rv_memory_durations_only_free(rv_memory_durations_only *kept);

/* ---- the peak a what-if reports: peak.c ---------------------------------------- */

/* The model's peak on a graph before and after optimizations (so what
 * they insert, remove or offload moves it), and the recorded peak where
 * the trace has one. */
typedef struct {
    gboolean estimated;
    rv_memory_estimate baseline, predicted;
    char *missing;          /* why there is no estimate */
    gboolean recorded;
    int64_t recorded_bytes;
} rv_memory_peak;
/* Estimate the baseline (and read the recorded peak); `estimated` FALSE
 * with `missing` saying why where the trace's shapes give nothing. */
void rv_memory_peak_before(rv_memory_peak *peak, const rv_graph *graph);
/* Estimate the optimized graph, after rv_memory_peak_before on its baseline. */
void rv_memory_peak_after(rv_memory_peak *peak, const rv_graph *graph);
void rv_memory_peak_clear(rv_memory_peak *peak);

/* The output elements of an operator call from its name, Input Dims and
 * arguments (rv_task_op_args: a convolution's geometry, or NULL) (0 when
 * the shapes do not say): for tests and the workspace term. */
int64_t rv_memory_output_elements(const char *op, const char *input_dims, const char *op_args);

G_END_DECLS

#endif

/*
 * parallel_plan.h - how to split a job over N GPUs: the search behind
 * `reverie plan` (the MLSys memo's "fit first, then data parallel, then
 * memory optimizations, then intra/inter-operator parallelism"; Tale of
 * Two Cs' tensor-parallel degree from memory).
 *
 * A CONFIGURATION is tensor x pipeline x data = N GPUs, a ZeRO stage, a
 * number of micro-batches and whether activations are checkpointed.  Each
 * is built from the shipped optimizations, applied to a copy of the graph
 * in the canonical order (compose.h), and replayed:
 *   [hardware:gpu=GPU when it is not the trace's] [checkpoint:segments=B]
 *   [tp-allreduce:degree=T] [pipeline:stages=P,microbatches=M,schedule=1f1b]
 *   then the data-parallel split: on a trace whose own collectives are
 *   data parallel, [zero:stage=Z,world=D] world-size:world=N,parallelism=data
 *   (each re-costed for D ranks); else ddp:world=D [zero:stage=Z,world=D].
 * Extra parameters for a plugin (--with tp-allreduce:batch=8,...) join
 * its generated spec.  B is the Transformer blocks found per step
 * (blocks.h; 4 where none are found): checkpointing every block.
 *
 * SEARCH.  Tensor degrees are powers of two up to max_tensor (one node's
 * GPUs: a tensor-parallel all-reduce per layer half must stay on NVLink);
 * pipeline degrees are the divisors of N / T up to max_pipeline (by
 * default the blocks found: a stage holds at least one block), with P,
 * 2P and 4P micro-batches (at most 64); ZeRO 0-3 where D > 1.
 * Checkpointing only adds recomputation, so a configuration is tried with
 * it only where it does not fit without it.  Each configuration's peak
 * memory is estimated first; one that does not fit is not replayed.
 *
 * MEMORY per GPU.  Where the trace has shapes, the memory model
 * (memory.h) on the configuration's graph: every plugin above says what
 * it did to the tensors.  Where it has none but records [memory] events,
 * the recorded step scaled: its model states (allocated before the step,
 * split weights : gradients : optimizer state as 1 : 1 : the optimizer's
 * states per parameter, memory.h) over T x P, each sharded over D as the
 * ZeRO stage says (1: state; 2: + gradients; 3: + weights); its
 * activations (allocated above that) x (10 + 24/T) / 34 (Korthikanti et
 * al. 2022: 10 of a layer's 34 sbh bytes are replicated under tensor
 * parallelism; the attention scores' term left out) x min(P, M) / (P x M)
 * (1F1B: the first stage holds min(P, M) micro-batches of 1/M of the
 * batch through 1/P of the layers) x, checkpointed, (2/34 + 1/B) (each
 * block keeps its input, 2 of 34 sbh bytes, and one block is rebuilt at a
 * time).  Neither: the search is refused.
 *
 * A configuration that a plugin refuses (the pipeline cannot cut so many
 * stages, a trace without blocks for tensor parallelism) does not fit,
 * and its reason is the plugin's one line.
 */
#ifndef REVERIE_PARALLEL_PLAN_H
#define REVERIE_PARALLEL_PLAN_H

#include <glib.h>
#include <stdint.h>
#include "reverie/gpus.h"
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef struct {
    int gpus;                /* N */
    const rv_gpu *gpu;       /* the GPU to plan for: its memory (and, when not the trace's, hardware:gpu=) */
    const rv_gpu *trace_gpu; /* the trace's GPU */
    gboolean trace_gpu_assumed; /* the trace names no GPU the catalogue knows: trace_gpu is the user's, and every
                                   plugin with a source_gpu parameter is given it */
    int64_t memory_bytes;    /* the limit per GPU */
    int gpus_per_node;
    int max_tensor;          /* 0: gpus_per_node */
    int max_pipeline;        /* 0: the blocks found per step */
    char **with;             /* NULL-terminated "NAME:k=v,..." specs merged into the generated ones, or NULL */
    guint jobs;              /* worker threads */
    /* progress: called from the calling thread with configurations done and in all */
    void (*progress)(guint done, guint total, gpointer data);
    gpointer progress_data;
} rv_plan_request;

typedef enum { RV_PLAN_FITS, RV_PLAN_TOO_BIG, RV_PLAN_REFUSED } rv_plan_verdict;

typedef struct {
    int tensor, pipeline, data, zero, microbatches;
    gboolean checkpoint;
    uint8_t verdict;        /* rv_plan_verdict */
    int64_t predicted_ns;   /* mean step; -1 when not replayed */
    int64_t peak_bytes;     /* per GPU; -1 when unknown */
    char *why;              /* TOO_BIG and REFUSED: one line */
    char *specs;            /* the --opt list, space-separated, that builds it */
} rv_plan_config;

typedef struct {
    GArray *configs;          /* rv_plan_config: the fitting ones by predicted step, then the others */
    guint fitting;
    guint blocks;             /* Transformer blocks found per step (0: none) */
    int max_tensor, max_pipeline;
    gboolean memory_from_shapes;  /* FALSE: the recorded [memory] split */
    int64_t recorded_states, recorded_activations;  /* the recorded split, when used */
    int optimizer_states;     /* state bytes per parameter byte assumed (the recorded split) */
    gboolean data_recorded;   /* the trace's own collectives are data parallel */
    int64_t baseline_ns;      /* the graph's mean replayed step */
} rv_plan;

/* Can N GPUs be split?  FALSE with one RV_ERROR_USAGE line: N < 1, more
 * than 65536, or more than a node's GPUs but not whole nodes. */
gboolean rv_plan_check_gpus(int gpus, int gpus_per_node, GError **error);

/* Search (above).  FALSE with the error when the request is bad, the
 * graph says nothing about memory, or the baseline cannot be replayed. */
gboolean rv_plan_search(const rv_graph *graph, const rv_plan_request *request, rv_plan *out, GError **error);
void rv_plan_clear(rv_plan *plan);

G_END_DECLS

#endif

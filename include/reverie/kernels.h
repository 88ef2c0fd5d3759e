/*
 * kernels.h - what kind of work a GPU task is, from its name and operator.
 *
 * Plugins that change how fast work runs (amp) or where it runs
 * (tp-allreduce) need the same answer to "is this a GEMM / convolution,
 * or memory-bound?".  The kernel name decides when it says something
 * (gemm, cutlass, winograd ... or elementwise, reduce, norm ...); only a
 * neutral name falls back on the operator or layer it was launched from.
 */
#ifndef REVERIE_KERNELS_H
#define REVERIE_KERNELS_H

#include <glib.h>
#include "reverie/graph.h"

G_BEGIN_DECLS

typedef enum {
    RV_KERNEL_COMPUTE,    /* GEMM / convolution: Tensor-Core and FLOP bound */
    RV_KERNEL_MEMORY,     /* elementwise, reductions, norms, softmax, memsets, DtoD copies */
    RV_KERNEL_HALF,       /* already half precision (fp16 / bf16 markers in the name) */
    RV_KERNEL_HOST_COPY,  /* host <-> device copies: PCIe bound */
    RV_KERNEL_COMM        /* collectives */
} rv_kernel_class;

/* The class of a GPU task (callers skip CPU tasks). */
rv_kernel_class rv_kernel_classify(const rv_graph *graph, const rv_task *task);

/* The same classes for many tasks of one graph: each kernel, operator and
 * layer name is read once (strings.h's memo), not once per task. */
typedef struct {
    rv_string_memo names;  /* what a kernel name says */
    rv_string_memo tags;   /* does an operator or layer name a GEMM / conv? */
} rv_kernel_classifier;

void rv_kernel_classifier_init(rv_kernel_classifier *classifier, const rv_graph *graph);
rv_kernel_class rv_kernel_classifier_classify(rv_kernel_classifier *classifier, const rv_task *task);
void rv_kernel_classifier_clear(rv_kernel_classifier *classifier);

/* Does the kernel name itself say GEMM / convolution (not just its operator)?
 * An operator launches one such kernel plus epilogues, so this counts GEMMs. */
gboolean rv_kernel_name_is_compute(const char *kernel_name);
/* Does an operator or layer name ("aten::addmm", "AddmmBackward0",
 * "nn.Module: Linear_3") name a GEMM or convolution? */
gboolean rv_op_is_compute(const char *name);
/* Does it name a batched / attention GEMM (bmm, baddbmm, scaled dot-product
 * attention, flash / memory-efficient attention)? */
gboolean rv_op_is_attention(const char *name);

G_END_DECLS

#endif

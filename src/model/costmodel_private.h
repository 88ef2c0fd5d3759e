/*
 * costmodel_private.h - what the cost model's files share (not public):
 * the model's fields and its small helpers.  costmodel.c builds a model;
 * plan.c re-costs tasks with it.
 */
#ifndef REVERIE_MODEL_COSTMODEL_PRIVATE_H
#define REVERIE_MODEL_COSTMODEL_PRIVATE_H

#include "reverie/costmodel.h"

#define NOT_GPU 255            /* rv_kernel_cost.cls of tasks the model does not cost */
#define CALIBRATION_MIN_SAMPLES 3
#define MATRIX_EFFICIENCY_DEFAULT 0.8  /* a matmul's share of the peak when nothing better is known */

struct rv_cost_model {
    const rv_graph *graph;
    const rv_gpu *source;
    gboolean achievable;
    GArray *kernels;             /* rv_kernel_cost per task; cls NOT_GPU for the others */
    int64_t fixed_ns;
    rv_dtype usual;
    double calibrated_roofline[RV_COST_CLASS_COUNT][2];
    double calibrated_time[RV_COST_CLASS_COUNT][2];
    guint calibrated_samples[RV_COST_CLASS_COUNT][2];
    /* What the first pass gathered, kept for rv_cost_model_extend: the
     * named kernel time per dtype, summed in task order, and the kernel
     * durations the fixed cost is a percentile of (in no set order). */
    double named_time[RV_DTYPE_COUNT];
    GArray *durations;
    /* The GEMMs whose names give no dtype: their FLOPs (from shapes) and
     * time, summed in task order (usual_dtype's evidence of half precision). */
    double unnamed_gemm_flops, unnamed_gemm_ns;
};

static inline gboolean rv_cost_class_is_costed(rv_cost_class cls)
{
    return cls != RV_COST_COMM && cls != RV_COST_HOST_COPY && cls != RV_COST_UNKNOWN;
}

/* Achievable peaks only where both GPUs publish one: a ratio never mixes kinds. */
gboolean rv_cost_model_use_achievable(const rv_cost_model *model, const rv_gpu *target);

#endif

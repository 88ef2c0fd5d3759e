/*
 * precision.c - the model cast to another dtype (model.to(torch.bfloat16)),
 * not autocast: weights, activations and gradients all change type.
 *
 *   reverie whatif fp32.json.gz --opt precision:dtype=bf16
 *   reverie whatif bf16.json.gz --opt precision:dtype=fp32
 *
 * Every GPU kernel whose dtype (costmodel.h) is the model's dtype now
 * (from=, by default the trace's usual one; fp32 includes its TF32 kernels)
 * is re-costed by the kernel cost model in the new dtype on the same GPU:
 * GEMMs, convolutions and attention move to the matrix units the GPU has
 * for it (Tensor Cores for bf16/fp16; for fp32, PyTorch's defaults: TF32
 * for cuDNN convolutions, plain fp32 for matmuls, as tf32= says), and
 * memory-bound kernels move fewer (or more) bytes.  Collectives move the
 * gradients in the new dtype.  Integer work (indexing, masks), host copies
 * (the input batch is cast on the GPU) and kernels of other dtypes keep
 * their time; unknown kernels are counted, never scaled.  No cast kernel
 * is added: the model is cast once, before the steps.
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include <string.h>

static const rv_param_spec precision_params[] = {
    { "dtype", RV_PARAM_CHOICE, NULL, NULL, "the dtype the model is cast to", "bf16|fp16|fp32" },
    { "from", RV_PARAM_CHOICE, "auto", NULL, "the model's dtype in the trace (auto: the dtype of most named kernel time)",
      "auto|bf16|fp16|fp32" },
    { "tf32", RV_PARAM_CHOICE, "conv", NULL,
      "dtype=fp32 on GPUs with TF32: conv = cuDNN convolutions on TF32 (PyTorch's default), all = matmuls too, none",
      "conv|all|none" },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the GPU of the trace when its deviceProperties name none the catalogue knows",
      NULL },
    { "peaks", RV_PARAM_CHOICE, "achievable", NULL, "matrix peaks (see hardware)", "achievable|datasheet" },
    { NULL }
};

typedef struct {
    rv_dtype from, to;
    const char *tf32;
    guint eligible;
} cast;

/* fp32 and tf32 kernels are both the fp32 model. */
static gboolean in_model_dtype(rv_dtype dtype, rv_dtype model)
{
    return dtype == model || (model == RV_DTYPE_FP32 && dtype == RV_DTYPE_TF32);
}

/* The math dtype of a kernel of the cast model. */
static rv_dtype new_dtype(const cast *c, rv_cost_class cls, const rv_gpu *gpu)
{
    if (c->to != RV_DTYPE_FP32 || gpu->matrix_flops[RV_DTYPE_TF32] <= 0 || !rv_cost_class_is_matmul(cls)) return c->to;
    if (strcmp(c->tf32, "all") == 0 || (strcmp(c->tf32, "conv") == 0 && cls == RV_COST_CONV)) return RV_DTYPE_TF32;
    return RV_DTYPE_FP32;
}

static gboolean cast_task(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                          gpointer data)
{
    cast *c = data;
    if (cost->cls == RV_COST_HOST_COPY) return FALSE;
    if (cost->cls == RV_COST_COMM) {
        change->comm_bytes_factor = (double)rv_dtype_bytes(c->to) / rv_dtype_bytes(c->from);
        return TRUE;
    }
    if (cost->cls == RV_COST_UNKNOWN) return TRUE;  /* counted by the plan, never scaled */
    if (!in_model_dtype((rv_dtype)cost->dtype, c->from)) return FALSE;
    change->dtype = new_dtype(c, (rv_cost_class)cost->cls, change->gpu);
    c->eligible++;
    return TRUE;
}

static gboolean precision_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    gboolean ok = gpu != NULL;
    if (ok) {
        rv_cost_model *model = rv_cost_model_new(graph, gpu, strcmp(rv_params_string(params, "peaks"), "achievable") == 0);
        cast c = { rv_cost_model_usual_dtype(model), (rv_dtype)rv_dtype_from_name(rv_params_string(params, "dtype")),
                   rv_params_string(params, "tf32"), 0 };
        if (strcmp(rv_params_string(params, "from"), "auto") != 0)
            c.from = (rv_dtype)rv_dtype_from_name(rv_params_string(params, "from"));
        if (c.from == RV_DTYPE_TF32) c.from = RV_DTYPE_FP32;
        if (c.from == RV_DTYPE_UNKNOWN || c.from == c.to) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "the trace's kernels are already %s%s: nothing to cast",
                        rv_dtype_name(c.to), c.from == RV_DTYPE_UNKNOWN ? " (or name no dtype; give from=)" : "");
            ok = FALSE;
        }
        rv_cost_plan *plan = ok ? rv_cost_model_plan(model, cast_task, &c) : NULL;
        if (ok && c.eligible == 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no GPU kernel runs in %s: nothing to cast", rv_dtype_name(c.from));
            ok = FALSE;
        }
        ok = ok && rv_cost_plan_apply(graph, plan, "the precision parameters", error);
        if (ok) {
            /* every tensor, parameters included, is now in the new dtype */
            double ratio = (double)rv_dtype_bytes(c.to) / rv_dtype_bytes(c.from);
            rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_ACTIVATION_SCALE, ratio, 0);
            rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_PARAM_SCALE, ratio, 0);
            g_string_append_printf(output->notes, "    %s model cast to %s on %s: %u kernels re-costed (%u with an assumed dtype)\n",
                                   rv_dtype_name(c.from), rv_dtype_name(c.to), gpu->id, c.eligible, plan->assumed_dtype);
            rv_cost_plan_describe(plan, "      ", output->notes);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
    }
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): kernels and collectives re-priced in the new dtype, which later cost-model
 * plugins read. */
static const rv_plugin_effects precision_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .rewrites = RV_ASPECT_DEVICE,
    .order = RV_ORDER(RV_STAGE_PRECISION, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "precision",
    "the model cast to another dtype (dtype=bf16|fp16|fp32): its kernels re-costed by the kernel cost model on the same GPU",
    precision_params, precision_apply, &precision_effects,
};

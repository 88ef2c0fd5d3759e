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
 *
 *   reverie whatif h100.json.gz --opt precision:dtype=fp8
 *   reverie whatif mi300x.json.gz --opt precision:dtype=int8
 *
 * BELOW 16 BITS (fp8, int8), on GPUs whose matrix units take them (the
 * catalogue's matrix peaks: H100, H200, B200, MI300X; int8 also A100).
 * Only the matmuls change format, as Transformer Engine's fp8 recipe and
 * int8 inference (TensorRT, SmoothQuant) do: each GEMM (fp8), or GEMM and
 * convolution (int8), in a floating dtype runs on the fp8 / int8 matrix
 * units, its operands moving one byte an element; everything else keeps
 * its dtype and time.  What the formats need that the recording lacks:
 *  - a scaling kernel before each such matmul on its stream, with its
 *    launch: it reads the operands in their dtype, takes their maximum
 *    and writes them scaled to one byte (a streaming kernel over the
 *    Input Dims' elements, costmodel.h; without shapes, the trace's fixed
 *    cost alone: a lower bound).  Frameworks fuse some of these into the
 *    kernel before (a norm, an activation), which this does not;
 *  - fp8 in training (delayed scaling): per step, one kernel that updates
 *    the scales from the amax history, after the step's last such matmul.
 * Memory: fp8 keeps what a matmul saves for backward in one byte;
 * int8 stores the weights in one byte.  int8 is for inference: a trace
 * with a backward pass is refused (no framework trains in int8), as is a
 * GPU without the units.  Matrix peaks: the measured maximum only where
 * the GPU publishes one for the new dtype too; else the datasheet's for
 * both, so that the ratio never mixes a measurement with a datasheet.
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/inserted.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include <string.h>

static const rv_param_spec precision_params[] = {
    { "dtype", RV_PARAM_CHOICE, NULL, NULL,
      "the dtype the model is cast to; fp8, int8: its matmuls only, with their scaling kernels", "bf16|fp16|fp32|fp8|int8" },
    { "from", RV_PARAM_CHOICE, "auto", NULL, "the model's dtype in the trace (auto: the trace's usual dtype, as kernels prints it)",
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

/* ---- below 16 bits ------------------------------------------------------------ */

static gboolean is_floating(rv_dtype dtype)
{
    return dtype == RV_DTYPE_FP32 || dtype == RV_DTYPE_TF32 || dtype == RV_DTYPE_FP16 || dtype == RV_DTYPE_BF16;
}

typedef struct {
    rv_dtype to;
    GArray *matmuls;   /* int32: the tasks re-costed */
    guint kept;        /* matmuls already in that format or in none (integer) */
} quantize;

static gboolean quantize_task(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                              gpointer data)
{
    quantize *q = data;
    gboolean ours = cost->cls == RV_COST_GEMM || (q->to == RV_DTYPE_INT8 && cost->cls == RV_COST_CONV);
    if (!ours) return FALSE;
    if (!is_floating((rv_dtype)cost->dtype)) {
        q->kept++;
        return FALSE;
    }
    change->dtype = q->to;
    g_array_append_val(q->matmuls, task);
    return TRUE;
}

/* "H100-SXM, H200, ..." : the catalogue's GPUs with matrix units for dtype (g_free). */
static char *gpus_with_units(const rv_gpu_catalogue *catalogue, rv_dtype dtype)
{
    GString *names = g_string_new(NULL);
    for (guint i = 0; i < rv_gpu_catalogue_count(catalogue); i++) {
        const rv_gpu *gpu = rv_gpu_catalogue_get(catalogue, i);
        if (gpu->matrix_flops[dtype] > 0) g_string_append_printf(names, "%s%s", names->len ? ", " : "", gpu->id);
    }
    return g_string_free(names, FALSE);
}

static gboolean has_backward(const rv_graph *graph)
{
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++)
        if (g_array_index(graph->tasks, rv_task, t).phase == RV_PHASE_BACKWARD) return TRUE;
    return FALSE;
}

/* Can the GPU and the trace take the format?  FALSE with one line. */
static gboolean format_fits(const rv_gpu_catalogue *catalogue, const rv_gpu *gpu, const rv_graph *graph, rv_dtype to,
                            GError **error)
{
    if (gpu->matrix_flops[to] <= 0) {
        char *names = gpus_with_units(catalogue, to);
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "%s has no %s matrix units (the catalogue's GPUs with them: %s)",
                    gpu->id, rv_dtype_name(to), names);
        g_free(names);
        return FALSE;
    }
    if (to == RV_DTYPE_INT8 && has_backward(graph)) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "int8 is for inference and the trace has a backward pass (no framework trains in int8: try dtype=fp8)");
        return FALSE;
    }
    return TRUE;
}

/* Bytes a scaling kernel streams for a matmul: its tensor operands (rank 2
 * or more) read in their dtype and written in one byte; 0 without shapes. */
static double scaling_bytes(const rv_graph *graph, int32_t task, int element_bytes)
{
    rv_shapes shapes;
    if (!rv_shapes_of_task(graph, task, &shapes)) return 0;
    double elements = 0;
    for (guint i = 0; i < rv_shapes_count(&shapes); i++)
        if (rv_shapes_rank(&shapes, i) >= 2) elements += (double)rv_shapes_elements(&shapes, i);
    rv_shapes_clear(&shapes);
    return elements * (element_bytes + 1);
}

/* A scaling kernel before each matmul; fp8: a scale update after each
 * step's last one.  *unshaped counts those costed at the fixed cost. */
static gboolean insert_scaling(rv_graph *graph, const rv_cost_model *model, const quantize *q, guint *unshaped,
                               guint *updates, GError **error)
{
    rv_kernel_inserter in;
    rv_kernel_inserter_init(&in, graph, model, error);
    GHashTable *last_of_step = g_hash_table_new(g_direct_hash, g_direct_equal);
    char *name = g_strdup_printf("%s scaling: amax, scale and cast the operands", rv_dtype_name(q->to));
    gboolean ok = TRUE;
    for (guint i = 0; i < q->matmuls->len && ok; i++) {
        int32_t t = g_array_index(q->matmuls, int32_t, i);
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, t);
        double bytes = scaling_bytes(graph, t, rv_dtype_bytes((rv_dtype)cost->dtype));
        *unshaped += bytes == 0;
        ok = rv_kernel_inserter_add(&in, t, TRUE, name, bytes) != -2;
        gpointer key = GINT_TO_POINTER(rv_graph_task(graph, t)->step + 2), last = g_hash_table_lookup(last_of_step, key);
        if (last == NULL || rv_task_compare_recorded(&t, &(int32_t){ GPOINTER_TO_INT(last) - 1 }, graph) > 0)
            g_hash_table_insert(last_of_step, key, GINT_TO_POINTER(t + 1));
    }
    if (ok && q->to == RV_DTYPE_FP8 && has_backward(graph)) {
        GHashTableIter it;
        gpointer key, last;
        g_hash_table_iter_init(&it, last_of_step);
        while (ok && g_hash_table_iter_next(&it, &key, &last)) {
            int32_t id = rv_kernel_inserter_add(&in, GPOINTER_TO_INT(last) - 1, FALSE,
                                                "fp8: scale update from the amax history (delayed scaling)", 0);
            ok = id != -2;
            *updates += id >= 0;
        }
    }
    g_free(name);
    g_hash_table_destroy(last_of_step);
    return ok;
}

static gboolean apply_below_16_bits(rv_graph *graph, const rv_params *params, const rv_gpu_catalogue *catalogue,
                                    const rv_gpu *gpu, rv_dtype to, GString *notes, GError **error)
{
    if (!format_fits(catalogue, gpu, graph, to, error)) return FALSE;
    gboolean measured = strcmp(rv_params_string(params, "peaks"), "achievable") == 0 && gpu->achievable_matrix_flops[to] > 0;
    rv_cost_model *model = rv_cost_model_new(graph, gpu, measured);
    quantize q = { to, g_array_new(FALSE, FALSE, sizeof(int32_t)), 0 };
    rv_cost_plan *plan = rv_cost_model_plan(model, quantize_task, &q);
    gboolean ok = q.matmuls->len > 0;
    if (!ok)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no %s in a floating dtype to run in %s (%u already in none)",
                    to == RV_DTYPE_INT8 ? "GEMM or convolution kernel" : "GEMM kernel", rv_dtype_name(to), q.kept);
    ok = ok && rv_cost_plan_apply(graph, plan, "the precision parameters", error);
    guint unshaped = 0, updates = 0;
    if (ok) {
        g_string_append_printf(notes, "    %u matmuls on %s's %s matrix units (%s peaks)%s\n", q.matmuls->len, gpu->id,
                               rv_dtype_name(to), measured ? "measured" : "datasheet",
                               q.kept ? "; others kept their dtype" : "");
        rv_cost_plan_describe(plan, "      ", notes);
        /* the memory model: fp8 saves its operands in a byte, int8 stores its weights in one */
        double ratio = 1.0 / rv_dtype_bytes(rv_cost_model_usual_dtype(model) != RV_DTYPE_UNKNOWN
                                                ? rv_cost_model_usual_dtype(model) : RV_DTYPE_FP32);
        rv_memory_effect_add_for_tasks(graph, q.matmuls, to == RV_DTYPE_FP8 ? RV_MEM_EFFECT_KEPT_SCALE : RV_MEM_EFFECT_PARAM_SCALE,
                                       ratio, 0);
        ok = insert_scaling(graph, model, &q, &unshaped, &updates, error);
    }
    if (ok) {
        g_string_append_printf(notes, "    inserted %u scaling kernels with their launches (%u without shapes: the fixed "
                               "cost only)", q.matmuls->len, unshaped);
        if (updates) g_string_append_printf(notes, "; %u scale updates, one a step", updates);
        g_string_append(notes, "\n");
    }
    g_array_unref(q.matmuls);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    return ok;
}

static gboolean precision_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    gboolean ok = gpu != NULL;
    rv_dtype wanted = (rv_dtype)rv_dtype_from_name(rv_params_string(params, "dtype"));
    if (ok && (wanted == RV_DTYPE_FP8 || wanted == RV_DTYPE_INT8)) {
        ok = apply_below_16_bits(graph, params, catalogue, gpu, wanted, output->notes, error);
        rv_gpu_catalogue_free(catalogue);
        return ok;
    }
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
 * plugins read; below 16 bits, scaling kernels inserted with their launches. */
static const rv_plugin_effects precision_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .rewrites = RV_ASPECT_DEVICE | RV_ASPECT_GPU_WORK | RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_PRECISION, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "precision",
    "the model cast to another dtype (dtype=bf16|fp16|fp32), or its matmuls to fp8|int8 with their scaling kernels: re-costed on the same GPU",
    precision_params, precision_apply, &precision_effects,
};

/*
 * model_scale.c - the same Transformer at another size: Tale of Two Cs'
 * operator models (section 4.2.2) on the kernel cost model.
 *
 *   reverie whatif trace.json.gz --opt model-scale:hidden=2
 *   reverie whatif trace.json.gz --opt model-scale:seq=2,batch=0.5,layers=2
 *
 * Each parameter multiplies one hyperparameter of the traced model: the
 * hidden size H, the sequence length SL, the batch B, the number of blocks
 * and of attention heads.  Each GPU task's work grows by its operator
 * model, and the cost model turns the new FLOPs and bytes into time at the
 * efficiency the trace shows for that kernel (costmodel.h):
 *   - linear GEMMs: FLOPs x H^2*SL*B (equations 1 and 3), activations x H*SL*B;
 *   - attention GEMMs (bmm, baddbmm, scaled-dot-product): FLOPs x H*SL^2*B
 *     (equation 2); the score matrix they read or write x heads*SL^2*B;
 *   - memory-bound kernels (elementwise, norms, reductions, copies) x H*SL*B,
 *     or x heads*SL^2*B for those over attention scores (a rank-4 input whose
 *     last two extents are equal);
 *   - convolutions x B (they have no H or SL);
 *   - collectives through the communication model (comm.h): in the forward
 *     pass (tensor-parallel activations, equation 5) x H*SL*B, in the
 *     backward pass (data-parallel gradients, equation 8) x H^2, plus the
 *     latency that does not grow;
 *   - optimizer kernels (one pass over the parameters) x H^2; host copies
 *     (the input batch) x SL*B;
 *   - layers: every task of the forward, backward and optimizer phases, CPU
 *     and GPU, lasts x layers (with its host overhead): each block stands
 *     for that many copies of itself.  The embedding and the head count as
 *     blocks too, which overstates a shallow model.
 * Unshaped kernels scale like the shaped kernels of their class, or by the
 * factor above.  The CPU side does not change with H, SL, B or heads: the
 * same calls launch bigger kernels.
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/shapes.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec model_scale_params[] = {
    { "hidden", RV_PARAM_NUMBER, "1", "x", "hidden size H times this", NULL },
    { "seq", RV_PARAM_NUMBER, "1", "x", "sequence length SL times this", NULL },
    { "batch", RV_PARAM_NUMBER, "1", "x", "batch B times this", NULL },
    { "layers", RV_PARAM_NUMBER, "1", "x", "Transformer blocks times this", NULL },
    { "heads", RV_PARAM_NUMBER, "1", "x", "attention heads times this (at the same H)", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

typedef struct {
    double h, s, b, layers, heads;
    guint score_kernels;
    rv_string_memo scores; /* per Input Dims string: over attention scores? */
} sizes;

/* A rank-4 first input with equal last extents: attention scores (B, heads, SL, SL). */
static int shapes_over_scores(const char *input_dims)
{
    rv_shapes shapes;
    gboolean yes = rv_shapes_parse(input_dims, &shapes) && rv_shapes_rank(&shapes, 0) == 4 &&
                   rv_shapes_extent(&shapes, 0, 2) == rv_shapes_extent(&shapes, 0, 3) && rv_shapes_extent(&shapes, 0, 3) > 1;
    rv_shapes_clear(&shapes);
    return yes;
}

/* Parsed once per distinct Input Dims text: a million kernels name a few
 * hundred, and parsing each kernel's JSON was most of this plugin. */
static gboolean over_scores(const rv_graph *graph, int32_t task, sizes *z)
{
    int32_t input_dims = g_array_index(graph->tasks, rv_task, task).input_dims;
    return input_dims > 0 && rv_string_memo_get(&z->scores, input_dims) != 0; /* no shapes: not over scores */
}

static gboolean scale_task(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                           gpointer data)
{
    sizes *z = data;
    const rv_task *t = &g_array_index(graph->tasks, rv_task, task);
    double tokens = z->s * z->b, activations = z->h * tokens, scores = z->heads * z->s * z->s * z->b;
    switch ((rv_cost_class)cost->cls) {
    case RV_COST_GEMM:
        change->flops_factor = z->h * z->h * tokens;
        change->bytes_factor = activations;
        break;
    case RV_COST_ATTENTION:
        change->flops_factor = z->h * z->s * tokens;
        change->bytes_factor = over_scores(graph, task, z) || strstr(rv_strings_get(graph->strings, t->op), "bmm") ? scores
                                                                                                              : activations;
        break;
    case RV_COST_CONV: change->flops_factor = change->bytes_factor = z->b; break;
    case RV_COST_HOST_COPY: change->bytes_factor = tokens; break;
    case RV_COST_COMM: change->comm_bytes_factor = t->phase == RV_PHASE_BACKWARD ? z->h * z->h : activations; break;
    case RV_COST_UNKNOWN: return TRUE;  /* counted by the plan, never scaled */
    default:
        if (t->phase == RV_PHASE_OPTIMIZER) {
            change->flops_factor = change->bytes_factor = z->h * z->h;
        } else if (over_scores(graph, task, z)) {
            change->flops_factor = change->bytes_factor = scores;
            z->score_kernels++;
        } else {
            change->flops_factor = change->bytes_factor = activations;
        }
    }
    return TRUE;
}

/* Kernels over attention (the Transformer layers hidden, seq and heads
 * describe): a model without any has nothing of theirs to scale. */
static guint attention_kernels(const rv_graph *graph, const rv_cost_model *model)
{
    guint count = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, id);
        if (cost && cost->cls == RV_COST_ATTENTION) count++;
    }
    return count;
}

/* What the new sizes do to each forward call's tensors (memory.h), by the
 * class of the first kernel it launched: a linear layer's weights grow
 * with H^2 and its activations with H*SL*B; tensors over attention scores
 * with heads*SL^2*B; a convolution's activations with B; other operators'
 * tensors with H*SL*B and their weights (norms' affine) with H. */
static void scale_tensors(rv_graph *graph, const rv_cost_model *model, sizes *z)
{
    GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    double tokens = z->s * z->b, activations = z->h * tokens, scores = z->heads * z->s * z->s * z->b;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        const rv_kernel_cost *cost = rv_cost_model_kernel(model, id);
        if (cost == NULL || !(task->flags & RV_TASK_FLAG_GPU) || task->phase == RV_PHASE_OPTIMIZER) continue;
        int32_t call = rv_graph_launch_of(graph, id);
        if (call < 0 || !g_hash_table_add(seen, GINT_TO_POINTER(call + 1))) continue;
        double params = z->h, acts = over_scores(graph, id, z) ? scores : activations;
        if (cost->cls == RV_COST_GEMM) params = z->h * z->h;
        if (cost->cls == RV_COST_CONV) params = 1, acts = z->b;
        if (params != 1) rv_memory_effect_add(graph, call, RV_MEM_EFFECT_PARAM_SCALE, params, 0);
        if (acts != 1) rv_memory_effect_add(graph, call, RV_MEM_EFFECT_ACTIVATION_SCALE, acts, 0);
    }
    g_hash_table_destroy(seen);
}

/* Every task of the model's phases stands for `layers` copies of itself. */
static gboolean repeat_layers(rv_graph *graph, const rv_params *params, double layers, GString *notes, GError **error)
{
    if (layers == 1) return TRUE;
    GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task(graph, t);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || task->kind == RV_TASK_MARKER || task->kind == RV_TASK_DATALOAD) continue;
        if (task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD || task->phase == RV_PHASE_OPTIMIZER)
            g_array_append_val(tasks, t);
    }
    char *cause = g_strdup_printf("layers=%s", rv_params_string(params, "layers"));
    gboolean ok = rv_tasks_check_scale(graph, tasks, layers, cause, error);
    if (ok) {
        rv_transform_scale(graph, tasks, layers);
        rv_transform_scale_host_overhead(graph, tasks, layers);
        g_string_append_printf(notes, "    layers x%g: %u tasks of the forward, backward and optimizer phases (and their host "
                                      "overheads) last x%g\n", layers, tasks->len, layers);
    }
    g_free(cause);
    g_array_unref(tasks);
    return ok;
}

static gboolean read_sizes(const rv_params *params, sizes *z, GError **error)
{
    static const char *const names[] = { "hidden", "seq", "batch", "layers", "heads" };
    double *fields[] = { &z->h, &z->s, &z->b, &z->layers, &z->heads };
    for (int i = 0; i < 5; i++) {
        *fields[i] = rv_params_number(params, names[i]);
        if (!(*fields[i] > 0 && *fields[i] <= 1e4)) {
            g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s=%s: must be a factor in (0, 10000]", names[i],
                        rv_params_string(params, names[i]));
            return FALSE;
        }
    }
    return TRUE;
}

static gboolean model_scale_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    sizes z = { 0 };
    if (!read_sizes(params, &z, error)) return FALSE;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    gboolean ok = gpu != NULL;
    if (ok && (z.h != 1 || z.s != 1 || z.b != 1 || z.heads != 1)) {
        rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
        if ((z.h != 1 || z.s != 1 || z.heads != 1) && attention_kernels(graph, model) == 0) {
            g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                        "no Transformer layer in the trace (no attention kernel): hidden, seq and heads have nothing to "
                        "scale here (a CNN?); batch= and layers= apply to any model");
            rv_cost_model_free(model);
            rv_gpu_catalogue_free(catalogue);
            return FALSE;
        }
        rv_string_memo_init(&z.scores, graph->strings, shapes_over_scores);
        rv_cost_plan *plan = rv_cost_model_plan(model, scale_task, &z);
        ok = rv_cost_plan_apply(graph, plan, "the model-scale factors", error);
        if (ok) scale_tensors(graph, model, &z);
        if (ok) {
            g_string_append_printf(output->notes, "    H x%g, SL x%g, B x%g, heads x%g on %s (%u kernels over attention scores)\n",
                                   z.h, z.s, z.b, z.heads, gpu->id, z.score_kernels);
            rv_cost_plan_describe(plan, "      ", output->notes);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
        rv_string_memo_clear(&z.scores);
    }
    ok = ok && repeat_layers(graph, params, z.layers, output->notes, error);
    if (ok && z.layers != 1) { /* each block stands for `layers` of them: so do its weights and kept tensors */
        rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_PARAM_SCALE, z.layers, 0);
        rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_KEPT_SCALE, z.layers, 0);
    }
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): every GPU task and collective re-priced by its operator model at the
 * efficiency its recorded time shows; the model's parameters grow. */
static const rv_plugin_effects model_scale_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .rewrites = RV_ASPECT_WEIGHTS,
    .order = RV_ORDER(RV_STAGE_MODEL, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "model-scale",
    "the model at another size (hidden=, seq=, batch=, layers=, heads= factors): Tale of Two Cs' operator models on the kernel cost model",
    model_scale_params, model_scale_apply, &model_scale_effects,
};

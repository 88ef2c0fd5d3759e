/*
 * batchnorm_restructure.c - Restructuring Batchnorm (Jung et al.), as
 * Daydream models it (appendix A.3, Algorithm 5): each batch-norm layer is
 * split in two; the first half (the statistics) is fused into the
 * convolution before it, the second (normalize, scale and shift) with the
 * ReLU into the convolution after it.
 *
 *   reverie whatif resnet.json.gz --opt batchnorm-restructure
 *   reverie whatif resnet.json.gz --opt batchnorm-restructure:model=daydream
 *
 * BATCH NORMS are the GPU tasks whose kernel name (cuDNN's bn_fw / bn_bw,
 * ATen's batch_norm kernels) or operator names a batch norm, and that the
 * cost model does not class as a GEMM or convolution.  After the split
 * each reads its input once instead of twice, so (model=costmodel, the
 * default) its bytes are bn_bytes (0.5) times what they were, and the
 * kernel cost model (costmodel.h) gives the time at the efficiency the
 * trace shows (the fixed cost stays); model=daydream halves the recorded
 * duration, as Algorithm 5 does.
 * RELUS are the elementwise GPU tasks of a ReLU operator or layer
 * (relu, relu_, threshold_backward / ReluBackward), forward and backward:
 * fused into the convolutions, they are removed with their launch calls,
 * as Algorithm 5 removes every ReLU task.  The host time before each
 * removed launch is kept (the next call inherits it): the Python of the
 * network does not change.  relu=keep leaves them.
 * The convolutions are not made slower: Daydream assumes the fused work is
 * free in a compute-bound kernel, and so does this plugin.
 * bn_bytes=1,relu=keep changes nothing (the baseline, tested).
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec batchnorm_params[] = {
    { "model", RV_PARAM_CHOICE, "costmodel", NULL,
      "costmodel: batch norms re-costed with bn_bytes of their bytes; daydream: their recorded time x bn_bytes (Algorithm 5: /2)",
      "costmodel|daydream" },
    { "bn_bytes", RV_PARAM_NUMBER, "0.5", "x", "the bytes (or, model=daydream, the time) of each batch-norm kernel after the split", NULL },
    { "relu", RV_PARAM_CHOICE, "remove", NULL, "remove: ReLU kernels fused into the convolutions; keep", "remove|keep" },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

static gboolean names_any(const char *text, const char *const *words)
{
    if (text == NULL) return FALSE;
    char *lower = g_ascii_strdown(text, -1);
    gboolean found = FALSE;
    for (int i = 0; words[i] && !found; i++) found = strstr(lower, words[i]) != NULL;
    g_free(lower);
    return found;
}

typedef enum { OTHER_TASK, BATCH_NORM, RELU } role;

static role role_of(const rv_graph *graph, const rv_task *task)
{
    static const char *const bn_kernels[] = { "bn_fw", "bn_bw", "batch_norm", "batchnorm", NULL };
    static const char *const bn_ops[] = { "batch_norm", "batchnorm", NULL };
    static const char *const relu_ops[] = { "relu", "threshold_backward", NULL };
    if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU) || task->kind != RV_TASK_KERNEL) return OTHER_TASK;
    const char *name = rv_strings_get(graph->strings, task->name);
    const char *op = task->op > 0 ? rv_strings_get(graph->strings, task->op) : NULL;
    const char *layer = task->layer > 0 ? rv_strings_get(graph->strings, task->layer) : NULL;
    rv_cost_class cls = rv_cost_classify_name(name, op, (rv_task_kind)task->kind);
    if (rv_cost_class_is_matmul(cls)) return OTHER_TASK;
    if (names_any(name, bn_kernels) || names_any(op, bn_ops) || names_any(layer, bn_ops)) return BATCH_NORM;
    if (cls == RV_COST_ELEMENTWISE && (names_any(op, relu_ops) || names_any(layer, relu_ops))) return RELU;
    return OTHER_TASK;
}

typedef struct {
    const GHashTable *norms;
    double bytes;
} bn_change;

static gboolean halve_norm(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                           gpointer data)
{
    (void)graph;
    const bn_change *c = data;
    if (!g_hash_table_contains((GHashTable *)c->norms, GINT_TO_POINTER(task + 1))) return FALSE;
    if (cost->cls == RV_COST_UNKNOWN) return TRUE; /* counted by the plan, never scaled */
    change->bytes_factor = c->bytes;
    return TRUE;
}

static gboolean recost_norms(rv_graph *graph, const rv_params *params, GHashTable *norms, double bytes, GString *notes,
                             GError **error)
{
    if (strcmp(rv_params_string(params, "model"), "daydream") == 0) {
        GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
        GHashTableIter iter;
        gpointer key;
        g_hash_table_iter_init(&iter, norms);
        while (g_hash_table_iter_next(&iter, &key, NULL)) {
            int32_t id = GPOINTER_TO_INT(key) - 1;
            g_array_append_val(tasks, id);
        }
        gboolean ok = rv_tasks_check_scale(graph, tasks, bytes, "bn_bytes", error);
        if (ok) {
            rv_transform_scale(graph, tasks, bytes);
            g_string_append_printf(notes, "    model=daydream: %u batch-norm kernels x%g\n", tasks->len, bytes);
        }
        g_array_unref(tasks);
        return ok;
    }
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    gboolean ok = gpu != NULL;
    if (ok) {
        rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
        bn_change c = { norms, bytes };
        rv_cost_plan *plan = rv_cost_model_plan(model, halve_norm, &c);
        ok = rv_cost_plan_apply(graph, plan, "bn_bytes", error);
        if (ok) {
            g_string_append_printf(notes, "    batch-norm kernels read x%g of their bytes, re-costed on %s:\n", bytes, gpu->id);
            rv_cost_plan_describe(plan, "      ", notes);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
    }
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

static gboolean batchnorm_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double bytes = rv_params_number(params, "bn_bytes");
    if (!(bytes > 0 && bytes <= 1)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "bn_bytes=%s: must be in (0, 1]", rv_params_string(params, "bn_bytes"));
        return FALSE;
    }
    GHashTable *norms = g_hash_table_new(g_direct_hash, g_direct_equal);
    GArray *relus = g_array_new(FALSE, FALSE, sizeof(int32_t));
    int64_t relu_ns = 0;
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        role r = role_of(graph, task);
        if (r == BATCH_NORM) g_hash_table_add(norms, GINT_TO_POINTER(id + 1));
        else if (r == RELU) {
            g_array_append_val(relus, id);
            relu_ns += task->duration_ns;
        }
    }
    gboolean ok = g_hash_table_size(norms) > 0;
    if (!ok)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no batch-norm GPU kernels (cuDNN bn_fw/bn_bw, or a batch_norm operator), so there is "
                    "nothing to restructure");
    if (ok && bytes != 1) ok = recost_norms(graph, params, norms, bytes, output->notes, error);
    if (ok && strcmp(rv_params_string(params, "relu"), "remove") == 0 && relus->len > 0) {
        /* fused, not gone: the memory model still counts what they keep */
        rv_memory_effect_add_for_tasks(graph, relus, RV_MEM_EFFECT_MOVED, 1.0, 0);
        int removed = rv_transform_remove_many(graph, relus, RV_REMOVE_KEEP_OVERHEAD);
        char *time = rv_format_duration(relu_ns);
        g_string_append_printf(output->notes,
                               "    %u ReLU kernels fused into the convolutions: removed with their launches (%d tasks, %s of "
                               "GPU time)\n", relus->len, removed, time);
        g_free(time);
    }
    if (ok)
        g_string_append_printf(output->notes, "    %u batch-norm kernels restructured\n", g_hash_table_size(norms));
    g_hash_table_destroy(norms);
    g_array_unref(relus);
    return ok;
}

/* The composition law (compose.h): batch norms re-priced, ReLUs removed with their launches. */
static const rv_plugin_effects batchnorm_restructure_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .rewrites = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_MODEL, 40),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "batchnorm-restructure",
    "Restructuring Batchnorm (Daydream Algorithm 5): batch norms split and fused, reading half their bytes on the cost "
    "model; ReLUs fused into the convolutions",
    batchnorm_params, batchnorm_apply, &batchnorm_restructure_effects,
};

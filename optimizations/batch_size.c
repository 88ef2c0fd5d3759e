/*
 * batch_size.c - the same training at another batch size: per-sample work
 * grows with the batch, per-step work does not (Daydream's "what if I
 * double the batch?" on the kernel cost model).
 *
 *   reverie whatif trace.json.gz --opt batch-size:factor=2
 *   reverie whatif trace.json.gz --opt batch-size:factor=2,batch=32,source_gpu=V100
 *
 * PER SAMPLE.  Every GPU task of the forward and backward passes (kernels,
 * memsets, device and host copies, not collectives) does factor times the
 * FLOPs and bytes; the cost model (costmodel.h) turns that into time at the
 * efficiency the trace shows: a shaped kernel keeps its fixed cost and
 * scales its roofline part, an unshaped one scales like the shaped kernels
 * of its class (else by the factor).  So a small kernel, dominated by its
 * fixed cost, grows less than the factor, as on a real GPU.  Data loading
 * (one batch per step) lasts factor times as long.
 * PER STEP.  The optimizer (one pass over the parameters), the collectives
 * (gradients: their size is the model's), and every CPU call (the same
 * kernels are launched) keep their time.
 * THROUGHPUT.  The notes replay the graph before and after (no policy, and
 * before any later --opt) and give the mean step time and samples per
 * second; the batch is batch=, else the leading extent of the first
 * forward GEMM or convolution's input (batch.h).  A what-if replays those
 * graphs anyway when batch-size comes first (the baseline: plugin.h's
 * `before`) or last (the prediction, when no policy is in force: after_replay);
 * those replays are used rather than run twice.
 * Weak: the bytes of weights do not grow with the batch, so a GEMM with
 * small activations and big weights is overstated; a kernel that changes
 * its tiling (cuDNN picks another algorithm at another batch) is not
 * foreseen; the peak memory grows and is not checked here.
 */
#include "reverie/batch.h"
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <string.h>

static const rv_param_spec batch_size_params[] = {
    { "factor", RV_PARAM_NUMBER, "1", "x", "the batch times this", NULL },
    { "batch", RV_PARAM_INTEGER, "0", "samples", "the recorded batch size (0: from the shapes) for samples/s", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { NULL }
};

static gboolean per_sample(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                           gpointer data)
{
    const rv_task *t = &g_array_index(graph->tasks, rv_task, task);
    double factor = *(const double *)data;
    if (t->phase != RV_PHASE_FORWARD && t->phase != RV_PHASE_BACKWARD) return FALSE;
    if (cost->cls == RV_COST_COMM || t->kind == RV_TASK_COMM || t->collective > 0) return FALSE;
    if (cost->cls == RV_COST_UNKNOWN) return TRUE; /* counted by the plan, never scaled */
    change->flops_factor = change->bytes_factor = factor;
    return TRUE;
}

/* Data loading: one batch a step, factor times the samples. */
static gboolean scale_loading(rv_graph *graph, double factor, GString *notes, GError **error)
{
    GArray *tasks = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if (!(task->flags & RV_TASK_FLAG_REMOVED) && task->kind == RV_TASK_DATALOAD) g_array_append_val(tasks, id);
    }
    gboolean ok = rv_tasks_check_scale(graph, tasks, factor, "the batch-size factor", error);
    if (ok && tasks->len) {
        rv_transform_scale(graph, tasks, factor);
        g_string_append_printf(notes, "    %u data-loading tasks x%g\n", tasks->len, factor);
    }
    g_array_unref(tasks);
    return ok;
}

/* The line "step A -> B; samples" for factor x the samples (batch.h). */
static gboolean describe_throughput(rv_graph *graph, const rv_params *params, double factor, int64_t before,
                                    rv_plugin_output *output, GError **error)
{
    int64_t batch = rv_params_integer(params, "batch");
    if (batch == 0) batch = rv_graph_batch_size(graph);
    return rv_throughput_note(graph, output, before, (double)batch, (double)batch * factor, error);
}

static gboolean batch_size_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    double factor = rv_params_number(params, "factor");
    if (!(factor > 0 && factor <= 1e4) || rv_params_integer(params, "batch") < 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 < factor <= 10000 and batch >= 0");
        return FALSE;
    }
    gboolean has_work = FALSE;
    for (int32_t id = 0; id < rv_graph_task_count(graph) && !has_work; id++) {
        const rv_task *task = rv_graph_task(graph, id);
        has_work = !(task->flags & RV_TASK_FLAG_REMOVED) && (task->flags & RV_TASK_FLAG_GPU) && task->kind != RV_TASK_COMM &&
                   (task->phase == RV_PHASE_FORWARD || task->phase == RV_PHASE_BACKWARD);
    }
    if (!has_work) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no GPU work in a forward or backward phase, so there is no per-sample work to scale");
        return FALSE;
    }
    if (factor == 1) {
        g_string_append(output->notes, "    factor=1: the recorded batch, nothing changes\n");
        return TRUE;
    }
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", error);
    int64_t before = gpu ? rv_mean_step_before(graph, output, error) : -1;
    gboolean ok = before >= 0;
    if (ok) {
        rv_cost_model *model = rv_cost_model_new(graph, gpu, TRUE);
        rv_cost_plan *plan = rv_cost_model_plan(model, per_sample, &factor);
        ok = rv_cost_plan_apply(graph, plan, "the batch-size factor", error);
        if (ok) {
            g_string_append_printf(output->notes, "    batch x%g on %s: forward and backward GPU work re-costed; optimizer, "
                                                  "collectives and CPU calls as recorded\n", factor, gpu->id);
            rv_cost_plan_describe(plan, "      ", output->notes);
        }
        rv_cost_plan_free(plan);
        rv_cost_model_free(model);
    }
    ok = ok && scale_loading(graph, factor, output->notes, error);
    /* factor times the samples: every tensor but the parameters grows with them */
    if (ok) rv_memory_effect_add(graph, -1, RV_MEM_EFFECT_ACTIVATION_SCALE, factor, 0);
    ok = ok && describe_throughput(graph, params, factor, before, output, error);
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): forward and backward GPU work re-priced on the cost model (a fixed cost and a
 * roofline part: not a plain factor); data loading scales. */
static const rv_plugin_effects batch_size_effects = {
    .reads = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .scales = RV_ASPECT_HOST | RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_FORWARD | RV_ASPECT_BACKWARD,
    .rewrites = 0,
    .order = RV_ORDER(RV_STAGE_MODEL, 20),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "batch-size",
    "another batch size: forward and backward GPU work re-costed for factor x the samples, per-step work kept; "
    "step time and samples/s",
    batch_size_params, batch_size_apply, &batch_size_effects,
};

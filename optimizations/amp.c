/*
 * amp.c - automatic mixed precision (torch.autocast with GradScaler; after
 * Daydream appendix A.1, Algorithm 3, on the kernel cost model).
 *
 *   reverie whatif trace.json.gz --opt amp
 *   reverie whatif trace.json.gz --opt amp:dtype=bf16
 *   reverie whatif trace.json.gz --opt 'amp:compute_speedup=3,memory_speedup=2'   (Daydream's fixed factors)
 *
 * model=costmodel (the default where the catalogue knows the trace's GPU):
 *   - the kernels' dtype is read from their names (costmodel.h): work
 *     already in fp16/bf16 (or integer work) keeps its time, so a trace
 *     that already runs in half precision gains nothing;
 *   - GEMMs, convolutions and attention in fp32/tf32 move to dtype=, on
 *     the matrix units where the GPU has them for it and the shapes allow
 *     (multiples of 8 before Ampere), re-costed by the cost model;
 *   - other fp32 kernels move fewer bytes, except those of operators
 *     autocast keeps in fp32 (softmax, layer and group norm, losses, sums,
 *     exp/log/pow: torch.amp's fp32 list);
 *   - the optimizer phase stays fp32 (master weights) unless optimizer=shrink;
 *     host copies, collectives and unknown kernels keep their time (unknown
 *     ones are counted in the notes);
 *   - casts=on adds what autocast adds: per step, a cast kernel for each
 *     weighted layer's weights before its first forward kernel, and one
 *     for its gradient after its backward run, each with a launch call
 *     costed like the trace's own (the median launch and the median host
 *     time before a launch) - none where no GEMM or convolution is cast:
 *     the trace already runs under autocast, its casts recorded;
 *   - scaler (GradScaler, default for fp16) adds per step a loss-scaling
 *     kernel before the backward pass, the unscale-and-inf-check kernels
 *     over the gradients before the optimizer step that follows the
 *     backward (an optimizer fused into the backward, TorchRec's, is not
 *     GradScaler's), with the .item() that makes the host wait for them
 *     (PyTorch's GradScaler.step; none before a fused optimizer, which
 *     takes found_inf itself), and the scale update after the optimizer.
 * model=daydream: Daydream's constants, GEMM/convolution kernels /
 *   compute_speedup (3), the rest / memory_speedup (2), on any GPU and in
 *   any dtype but half precision.  Giving either speedup selects it; so
 *   does a trace whose GPU the catalogue does not know (model=auto says so
 *   in the notes).
 */
#include "reverie/costmodel.h"
#include "reverie/error.h"
#include "reverie/inserted.h"
#include "reverie/kernels.h"
#include "reverie/layers.h"
#include "reverie/memory.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec amp_params[] = {
    { "model", RV_PARAM_CHOICE, "auto", NULL,
      "costmodel: the kernel cost model on the trace's GPU; daydream: fixed speedups; auto: costmodel when the GPU is known",
      "auto|costmodel|daydream" },
    { "dtype", RV_PARAM_CHOICE, "fp16", NULL, "autocast's dtype (torch.autocast's default on CUDA: fp16)", "fp16|bf16" },
    { "scaler", RV_PARAM_CHOICE, "auto", NULL, "GradScaler's kernels and .item() sync (auto: with fp16)", "auto|on|off" },
    { "casts", RV_PARAM_CHOICE, "on", NULL, "autocast's weight and gradient cast kernels with their launches", "on|off" },
    { "source_gpu", RV_PARAM_STRING, "", NULL, "the trace's GPU when its deviceProperties name none the catalogue knows", NULL },
    { "peaks", RV_PARAM_CHOICE, "achievable", NULL, "matrix peaks (see hardware)", "achievable|datasheet" },
    { "compute_speedup", RV_PARAM_NUMBER, "3", "x", "model=daydream: speedup of GEMM/convolution kernels (Tensor Cores)", NULL },
    { "memory_speedup", RV_PARAM_NUMBER, "2", "x", "model=daydream: speedup of memory-bound kernels (half the bytes)", NULL },
    { "optimizer", RV_PARAM_CHOICE, "keep", NULL,
      "keep: optimizer kernels stay FP32 (master weights); shrink: treat them like the rest", "keep|shrink" },
    { NULL }
};

/* The tensors of the calls whose kernels now run in half precision are
 * half the size (memory.h); the fp32 master weights stay as they were. */
static void halve_activations(rv_graph *graph, const GArray *half_tasks, rv_dtype to)
{
    rv_memory_effect_add_for_tasks(graph, half_tasks, RV_MEM_EFFECT_ACTIVATION_SCALE,
                                   (double)rv_dtype_bytes(to) / rv_dtype_bytes(RV_DTYPE_FP32), 0);
}

/* ---- Daydream's fixed factors ----------------------------------------- */

typedef enum { CLASS_COMPUTE, CLASS_MEMORY, CLASS_HALF, CLASS_HOST_COPY, CLASS_COMM, CLASS_OPTIMIZER, CLASS_COUNT } amp_class;

static amp_class classify(rv_kernel_classifier *classifier, const rv_task *task, gboolean keep_optimizer)
{
    rv_kernel_class kernel = rv_kernel_classifier_classify(classifier, task);
    if (kernel == RV_KERNEL_COMM) return CLASS_COMM;
    if (kernel == RV_KERNEL_HOST_COPY) return CLASS_HOST_COPY;
    if (keep_optimizer && task->phase == RV_PHASE_OPTIMIZER) return CLASS_OPTIMIZER;
    if (kernel == RV_KERNEL_HALF) return CLASS_HALF;
    return kernel == RV_KERNEL_COMPUTE ? CLASS_COMPUTE : CLASS_MEMORY;
}

/* Scale one class by 1 / its speedup; checking after the previous class
 * was scaled makes the total exact. */
static gboolean scale_class(rv_graph *graph, const GArray *tasks, const rv_params *params, const char *name,
                            GError **error)
{
    double factor = 1.0 / rv_params_number(params, name);
    char *cause = g_strdup_printf("%s=%s", name, rv_params_string(params, name));
    gboolean ok = rv_tasks_check_scale(graph, tasks, factor, cause, error);
    g_free(cause);
    if (ok) rv_transform_scale(graph, tasks, factor);
    return ok;
}

static gboolean apply_daydream(rv_graph *graph, const rv_params *params, GString *notes, GError **error)
{
    double compute = rv_params_number(params, "compute_speedup"), memory = rv_params_number(params, "memory_speedup");
    if (!(compute > 0) || !(memory > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "speedups must be > 0 (compute_speedup=%g, memory_speedup=%g)",
                    compute, memory);
        return FALSE;
    }
    gboolean keep = strcmp(rv_params_string(params, "optimizer"), "keep") == 0;
    GArray *classes[CLASS_COUNT];
    for (int c = 0; c < CLASS_COUNT; c++) classes[c] = g_array_new(FALSE, FALSE, sizeof(int32_t));
    rv_kernel_classifier classifier;
    rv_kernel_classifier_init(&classifier, graph);
    for (int32_t id = 0; id < rv_graph_task_count(graph); id++) {
        const rv_task *task = rv_graph_task(graph, id);
        if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) continue;
        g_array_append_val(classes[classify(&classifier, task, keep)], id);
    }
    rv_kernel_classifier_clear(&classifier);
    gboolean ok = classes[CLASS_COMPUTE]->len + classes[CLASS_MEMORY]->len > 0;
    if (ok)
        ok = scale_class(graph, classes[CLASS_COMPUTE], params, "compute_speedup", error) &&
             scale_class(graph, classes[CLASS_MEMORY], params, "memory_speedup", error);
    else
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "no FP32 GPU kernel to speed up (%u half-precision, %u optimizer, %u host copies, %u collectives)",
                    classes[CLASS_HALF]->len, classes[CLASS_OPTIMIZER]->len, classes[CLASS_HOST_COPY]->len,
                    classes[CLASS_COMM]->len);
    if (ok) {
        halve_activations(graph, classes[CLASS_COMPUTE], RV_DTYPE_FP16);
        halve_activations(graph, classes[CLASS_MEMORY], RV_DTYPE_FP16);
    }
    if (ok)
        g_string_append_printf(notes,
                               "    scaled %u compute kernels by 1/%g, %u memory-bound GPU tasks by 1/%g; unchanged: "
                               "%u half-precision, %u optimizer, %u host copies, %u collectives\n",
                               classes[CLASS_COMPUTE]->len, compute, classes[CLASS_MEMORY]->len, memory,
                               classes[CLASS_HALF]->len, classes[CLASS_OPTIMIZER]->len,
                               classes[CLASS_HOST_COPY]->len, classes[CLASS_COMM]->len);
    for (int c = 0; c < CLASS_COUNT; c++) g_array_unref(classes[c]);
    return ok;
}

/* ---- the cost model ---------------------------------------------------- */

typedef struct {
    rv_dtype to;
    gboolean keep_optimizer;
    guint changed, half, optimizer, fp32_ops, kernels;
    guint weighted_cast;    /* GEMMs and convolutions (the kernels with weights) among the changed */
    GArray *changed_tasks;  /* int32: the tasks cast */
} autocast;

static gboolean is_fp32(rv_dtype dtype) { return dtype == RV_DTYPE_FP32 || dtype == RV_DTYPE_TF32; }

static gboolean autocast_task(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                              gpointer data)
{
    autocast *a = data;
    rv_cost_class cls = (rv_cost_class)cost->cls;
    if (cls == RV_COST_UNKNOWN) return TRUE;  /* the plan counts it and leaves it */
    if (cls == RV_COST_COMM || cls == RV_COST_HOST_COPY) return FALSE;
    a->kernels++;
    if (a->keep_optimizer && g_array_index(graph->tasks, rv_task, task).phase == RV_PHASE_OPTIMIZER) {
        a->optimizer++;
        return FALSE;
    }
    if (!is_fp32((rv_dtype)cost->dtype)) {
        a->half += cost->dtype != RV_DTYPE_UNKNOWN;
        return FALSE;
    }
    if (!rv_cost_class_is_matmul(cls) && cost->autocast_fp32) {
        a->fp32_ops++;
        return FALSE;
    }
    change->dtype = a->to;
    a->changed++;
    a->weighted_cast += cls == RV_COST_GEMM || cls == RV_COST_CONV;
    g_array_append_val(a->changed_tasks, task);
    return TRUE;
}

/* Per step, the forward cast of each weighted layer's weights and the
 * backward cast of its gradient. */
static gboolean insert_casts(rv_kernel_inserter *in, guint *casts)
{
    GPtrArray *layers = rv_weighted_layers_by_step(in->graph);
    GPtrArray *backward = rv_backward_gpu_tasks_by_step(in->graph);
    gboolean ok = TRUE;
    for (guint slot = 0; ok && slot < layers->len; slot++) {
        GArray *step_layers = g_ptr_array_index(layers, slot);
        double weight_bytes = 0;
        for (guint l = 0; ok && l < step_layers->len; l++) {
            const rv_weighted_layer *layer = &g_array_index(step_layers, rv_weighted_layer, l);
            weight_bytes += (double)layer->weight_bytes;
            if (layer->first_gpu < 0) continue;
            int32_t id = rv_kernel_inserter_add(in, layer->first_gpu, TRUE, "autocast: cast weights to half (aten::_to_copy)",
                                       (double)layer->weight_bytes * 1.5);
            ok = id != -2;
            *casts += id >= 0;
        }
        GArray *list = g_ptr_array_index(backward, slot);
        if (!ok || list->len == 0 || step_layers->len == 0) continue;
        GArray *runs = rv_weighted_backward_runs(in->graph, list);
        double per_gradient = weight_bytes / step_layers->len;
        for (guint r = 0; ok && r < runs->len; r++) {
            int32_t id = rv_kernel_inserter_add(in, g_array_index(runs, int32_t, r), FALSE,
                                       "autocast: cast gradient to fp32 (ToCopyBackward0)", per_gradient * 1.5);
            ok = id != -2;
            *casts += id >= 0;
        }
        g_array_unref(runs);
    }
    g_ptr_array_unref(layers);
    g_ptr_array_unref(backward);
    return ok;
}

/* Per step: the first GPU task of its backward; the last optimizer task and
 * the first of its run on its stream - the optimizer step at the end of
 * the iteration, where GradScaler.step() comes, not an optimizer fused
 * into the backward (TorchRec's embeddings); and whether that step is a
 * fused optimizer's. */
typedef struct {
    int32_t first_backward, first_optimizer, last_optimizer;
    double gradient_bytes;
    guint gradients;
    gboolean fused_optimizer;
} step_marks;

static gboolean usable_gpu_task(const rv_task *task)
{
    return (task->flags & RV_TASK_FLAG_GPU) && !(task->flags & RV_TASK_FLAG_REMOVED) && task->kind != RV_TASK_COMM;
}

/* PyTorch's fused optimizers (torch.optim.Adam/AdamW/SGD with fused=True)
 * take GradScaler's found_inf and scale themselves
 * (_step_supports_amp_scaling): their step needs no host sync.  Their
 * kernels say so by name. */
static gboolean is_fused_optimizer_kernel(const char *name)
{
    return strstr(name, "FusedAdam") || strstr(name, "_fused_adam") || strstr(name, "fused_sgd") ||
           strstr(name, "FusedSgd") || strstr(name, "FusedOptimizer");
}

/* The run of optimizer tasks that ends with `last` on its stream: walk back
 * while the previous task on the stream is an optimizer task too. */
static int32_t run_start(const rv_graph *graph, int32_t last)
{
    int32_t first = last;
    for (int32_t before = rv_graph_resource_previous(graph, first); before >= 0;
         before = rv_graph_resource_previous(graph, before)) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, before);
        if (task->flags & RV_TASK_FLAG_REMOVED) continue;
        if (task->phase != RV_PHASE_OPTIMIZER || task->step != rv_graph_task((rv_graph *)graph, last)->step) break;
        first = before;
    }
    return first;
}

static step_marks *mark_steps(const rv_graph *graph)
{
    guint slots = graph->steps->len + 1;
    step_marks *marks = g_new(step_marks, slots);
    for (guint s = 0; s < slots; s++) marks[s] = (step_marks){ -1, -1, -1, 0, 0, FALSE };
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = &g_array_index(graph->tasks, rv_task, t);
        if (!usable_gpu_task(task)) continue;
        step_marks *m = &marks[task->step + 1];
        if (task->phase == RV_PHASE_BACKWARD && m->first_backward < 0) m->first_backward = t;
        if (task->phase == RV_PHASE_OPTIMIZER &&
            (m->last_optimizer < 0 || task->recorded_start_ns > rv_graph_task((rv_graph *)graph, m->last_optimizer)->recorded_start_ns))
            m->last_optimizer = t;
    }
    for (guint s = 0; s < slots; s++) {
        step_marks *m = &marks[s];
        if (m->last_optimizer < 0) continue;
        m->first_optimizer = run_start(graph, m->last_optimizer);
        for (int32_t t = m->first_optimizer; t >= 0; t = rv_graph_resource_next(graph, t)) {
            if (is_fused_optimizer_kernel(rv_strings_get(graph->strings, rv_graph_task((rv_graph *)graph, t)->name)))
                m->fused_optimizer = TRUE;
            if (t == m->last_optimizer) break;
        }
    }
    GPtrArray *layers = rv_weighted_layers_by_step(graph);
    for (guint s = 0; s < slots && s < layers->len; s++) {
        GArray *step_layers = g_ptr_array_index(layers, s);
        for (guint l = 0; l < step_layers->len; l++)
            marks[s].gradient_bytes += (double)g_array_index(step_layers, rv_weighted_layer, l).weight_bytes;
        marks[s].gradients = step_layers->len * 2;  /* a weight and a bias each */
    }
    g_ptr_array_unref(layers);
    return marks;
}

/* The host reads found_inf (.item()) and waits for the unscale kernel. */
static gboolean insert_found_inf_sync(rv_kernel_inserter *in, int32_t unscale, int32_t optimizer_task)
{
    int32_t launch = rv_graph_launch_of(in->graph, optimizer_task);
    int32_t anchor = launch >= 0 ? rv_graph_resource_previous(in->graph, launch) : -1;
    if (anchor < 0) return TRUE;
    rv_insert_spec spec = { { 0 }, anchor, -1 };
    spec.task.kind = RV_TASK_CPU;
    spec.task.resource = rv_graph_task(in->graph, anchor)->resource;
    spec.task.name = rv_strings_intern(in->graph->strings, "GradScaler: found_inf.item() (cudaMemcpyAsync + sync)");
    spec.task.phase = RV_PHASE_OPTIMIZER;
    spec.task.step = rv_graph_task(in->graph, optimizer_task)->step;
    spec.task.input_dims = -1;
    spec.task.correlation = -1;
    spec.task.duration_ns = in->launch_call_ns;
    spec.task.host_overhead_ns = in->launch_overhead_ns;
    /* For the optimizations after this one that go by recorded order: the
     * host reads found_inf once backward has returned, just before the
     * optimizer's first launch - after every launch (on any thread) whose
     * work the unscale kernel follows on its stream.  The anchor's own time
     * would put it before the autograd thread's last launches, and
     * cuda-graphs would then capture those behind it. */
    spec.task.recorded_start_ns = MAX(rv_graph_task(in->graph, anchor)->recorded_start_ns,
                                      rv_graph_task(in->graph, launch)->recorded_start_ns - 1);
    int32_t id = rv_transform_insert(in->graph, &spec, in->error);
    if (id < 0) return FALSE;
    rv_transform_add_edge(in->graph, unscale, id);
    return TRUE;
}

/* Per step with an optimizer: scale the loss, unscale and check the gradients, update the scale. */
static gboolean insert_scaler(rv_kernel_inserter *in, guint *steps, guint *synced)
{
    step_marks *marks = mark_steps(in->graph);
    gboolean ok = TRUE;
    for (guint s = 0; ok && s <= in->graph->steps->len; s++) {
        const step_marks *m = &marks[s];
        if (m->first_optimizer < 0) continue;
        if (m->first_backward >= 0)
            ok = rv_kernel_inserter_add(in, m->first_backward, TRUE, "GradScaler: scale the loss (aten::mul)", 0) != -2;
        guint chunks = m->gradients > 110 ? (m->gradients + 109) / 110 : 1;  /* multi_tensor_apply's lists */
        int32_t unscale = -1;
        for (guint c = 0; ok && c < chunks; c++) {
            unscale = rv_kernel_inserter_add(in, m->first_optimizer, TRUE,
                                    "GradScaler: _amp_foreach_non_finite_check_and_unscale_", m->gradient_bytes * 2 / chunks);
            ok = unscale != -2;
        }
        if (ok && unscale >= 0 && !m->fused_optimizer) ok = insert_found_inf_sync(in, unscale, m->first_optimizer);
        if (ok && unscale >= 0) *synced += !m->fused_optimizer;
        if (ok) ok = rv_kernel_inserter_add(in, m->last_optimizer, FALSE, "GradScaler: _amp_update_scale_", 0) != -2;
        *steps += ok;
    }
    g_free(marks);
    return ok;
}

static gboolean wants_scaler(const rv_params *params)
{
    const char *scaler = rv_params_string(params, "scaler");
    return strcmp(scaler, "on") == 0 || (strcmp(scaler, "auto") == 0 && strcmp(rv_params_string(params, "dtype"), "fp16") == 0);
}

static gboolean insert_autocast_work(rv_graph *graph, const rv_params *params, const rv_cost_model *model,
                                     GString *notes, GError **error)
{
    rv_kernel_inserter in;
    rv_kernel_inserter_init(&in, graph, model, error);
    guint casts = 0, scaled_steps = 0, synced_steps = 0;
    gboolean ok = TRUE;
    if (strcmp(rv_params_string(params, "casts"), "on") == 0) ok = insert_casts(&in, &casts);
    if (ok && wants_scaler(params)) ok = insert_scaler(&in, &scaled_steps, &synced_steps);
    if (ok && in.kernels)
        g_string_append_printf(notes, "    inserted %u kernels with their launches: %u autocast casts, GradScaler in %u steps "
                                      "(launch %.1f us + %.1f us host time each, as the trace's median launch)\n",
                               in.kernels, casts, scaled_steps, in.launch_call_ns / 1e3, in.launch_overhead_ns / 1e3);
    if (ok && scaled_steps)
        g_string_append_printf(notes, "    GradScaler: the host reads found_inf (.item(), a sync on the unscale kernel) before "
                                      "the optimizer in %u of %u steps%s\n", synced_steps, scaled_steps,
                               synced_steps < scaled_steps ? " (a fused optimizer takes found_inf itself: no sync)" : "");
    else if (ok && wants_scaler(params))
        g_string_append(notes, "    no optimizer phase and no weighted layer found: no cast or GradScaler kernel added\n");
    return ok;
}

static gboolean apply_cost_model(rv_graph *graph, const rv_params *params, const rv_gpu *gpu, GString *notes,
                                 GError **error)
{
    rv_cost_model *model = rv_cost_model_new(graph, gpu, strcmp(rv_params_string(params, "peaks"), "achievable") == 0);
    autocast a = { (rv_dtype)rv_dtype_from_name(rv_params_string(params, "dtype")),
                   strcmp(rv_params_string(params, "optimizer"), "keep") == 0, 0, 0, 0, 0, 0, 0,
                   g_array_new(FALSE, FALSE, sizeof(int32_t)) };
    rv_cost_plan *plan = rv_cost_model_plan(model, autocast_task, &a);
    gboolean ok = a.kernels > 0;
    if (!ok)
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN, "no GPU kernel the cost model knows (%u unknown): nothing to cast",
                    plan->unknown_tasks);
    ok = ok && rv_cost_plan_apply(graph, plan, "the amp parameters", error);
    if (ok) {
        g_string_append_printf(notes, "    autocast to %s on %s: %u kernels re-costed (%u with an assumed dtype); unchanged: "
                                      "%u already in half precision, %u optimizer (fp32 master weights), %u in autocast's "
                                      "fp32 operators\n",
                               rv_dtype_name(a.to), gpu->id, a.changed, plan->assumed_dtype, a.half, a.optimizer, a.fp32_ops);
        rv_cost_plan_describe(plan, "      ", notes);
        if (a.changed == 0) g_string_append(notes, "    every kernel already runs in half precision: autocast changes nothing\n");
    }
    if (ok) halve_activations(graph, a.changed_tasks, a.to);
    /* Where no GEMM or convolution changes, the trace already runs under
     * autocast: its casts and GradScaler are recorded, and more would count
     * them twice. */
    if (ok && a.changed > 0 && a.weighted_cast == 0)
        g_string_append(notes, "    the GEMMs and convolutions already run in half precision: their casts (and any "
                               "GradScaler) are in the trace, none added\n");
    ok = ok && (a.weighted_cast == 0 || insert_autocast_work(graph, params, model, notes, error));
    g_array_unref(a.changed_tasks);
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    return ok;
}

static gboolean amp_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    const char *mode = rv_params_string(params, "model");
    gboolean speedups = rv_params_given(params, "compute_speedup") || rv_params_given(params, "memory_speedup");
    if (strcmp(mode, "daydream") == 0 || (strcmp(mode, "auto") == 0 && speedups))
        return apply_daydream(graph, params, output->notes, error);
    if (speedups) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "compute_speedup and memory_speedup belong to model=daydream");
        return FALSE;
    }
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    GError *unknown = NULL;
    const rv_gpu *gpu = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", &unknown);
    gboolean ok;
    if (gpu != NULL) {
        ok = apply_cost_model(graph, params, gpu, output->notes, error);
    } else if (strcmp(mode, "auto") == 0 && !rv_params_given(params, "source_gpu")) {
        g_string_append_printf(output->notes, "    model=auto: %s; Daydream's fixed factors instead\n", unknown->message);
        ok = apply_daydream(graph, params, output->notes, error);
    } else {
        g_propagate_error(error, unknown);
        unknown = NULL;
        ok = FALSE;
    }
    g_clear_error(&unknown);
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): kernels re-priced in half precision; cast and GradScaler kernels inserted
 * with launches. */
static const rv_plugin_effects amp_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_DEVICE | RV_ASPECT_WEIGHTS,
    .reads_time = RV_ASPECT_GPU_WORK,
    .scales = RV_ASPECT_MEMORY,
    .reprices = RV_ASPECT_GPU_WORK,
    .rewrites = RV_ASPECT_GPU_WORK | RV_ASPECT_HOST | RV_ASPECT_DEVICE,
    .order = RV_ORDER(RV_STAGE_PRECISION, 20),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "amp",
    "automatic mixed precision: fp32 kernels re-costed in fp16/bf16 on the trace's GPU (cost model), with autocast's casts and GradScaler",
    amp_params, amp_apply, &amp_effects,
};

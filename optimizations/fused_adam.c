/*
 * fused_adam.c - a fused optimizer (Daydream appendix A.2, Algorithm 4):
 * Apex FusedAdam / torch's fused=True run the whole weight update as one
 * kernel instead of a few kernels per parameter.
 *
 *   reverie whatif trace.json.gz --opt fused-adam
 *
 * For each step: every GPU task of the optimizer phase (kernels, memsets,
 * copies; not collectives) is removed together with the call that launched
 * it and the host overhead before that call (the per-parameter Python loop),
 * and replaced by one kernel (rv_transform_replace) where the removed
 * region ended: after the last removed kernel on its stream, launched by
 * one call after the last removed launch on its thread (multi_tensor_apply
 * launches once the per-parameter lists are built).  The kernel inherits
 * what the removed tasks waited for (the step's gradient all-reduces,
 * whichever plugin inserted them, before or after this one) and what
 * waited for them.  The fused kernel
 * lasts as long as the removed GPU tasks together (duration=sum, Daydream's
 * estimate: the same bytes move, only the launches and the gaps go), or
 * (duration=bytes) as long as one streaming pass over the optimizer state
 * takes at the GPU's memory bandwidth:
 *     parameters x bytes_per_param / (memory_bandwidth x efficiency)
 * where bytes_per_param = 28 is fp32 Adam's traffic (read param, grad,
 * exp_avg, exp_avg_sq; write param, exp_avg, exp_avg_sq: 7 x 4 bytes), the
 * parameter bytes are the weight shapes of the forward layers (layers.h)
 * or param_bytes, and the bandwidth is the datasheet figure of the trace's
 * GPU (table below) unless memory_bandwidth is given.
 * Optimizer CPU tasks that launch nothing stay.  Works for any optimizer
 * (SGD, Adam, ...) that runs inside an "Optimizer.step" annotation.
 */
#include "reverie/plugin.h"
#include "reverie/checked.h"
#include "reverie/validate.h"
#include "reverie/error.h"
#include "reverie/layers.h"
#include "reverie/memory.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include <string.h>

static const rv_param_spec fused_params[] = {
    { "duration", RV_PARAM_CHOICE, "sum", NULL,
      "fused kernel time: sum = the removed GPU tasks' total (Daydream); bytes = optimizer state traffic / memory bandwidth",
      "sum|bytes" },
    { "bytes_per_param", RV_PARAM_NUMBER, "28", "bytes", "duration=bytes: memory traffic per parameter (fp32 Adam: 28; SGD with momentum: 20)", NULL },
    { "param_bytes", RV_PARAM_BYTES, "0B", "bytes", "duration=bytes: fp32 parameter bytes (0: from the forward layers' weight shapes)", NULL },
    { "memory_bandwidth", RV_PARAM_BANDWIDTH, "900GB/s", "B/s",
      "duration=bytes: GPU memory bandwidth; unless given, the datasheet figure of the trace's GPU, this default (V100) if unknown", NULL },
    { "efficiency", RV_PARAM_NUMBER, "0.8", "x", "duration=bytes: achieved fraction of the memory bandwidth (STREAM-like kernels reach 80-90% of HBM peak on V100/A100)", NULL },
    { NULL }
};

/* Datasheet memory bandwidths; the first name found in the device name wins. */
static const struct {
    const char *name;
    double bandwidth_Bps;
} memory_bandwidths[] = {
    { "H200", 4.8e12 },      /* NVIDIA H200 SXM: 4.8 TB/s */
    { "H100 PCIe", 2.0e12 }, /* NVIDIA H100 PCIe: 2.0 TB/s */
    { "H100", 3.35e12 },     /* NVIDIA H100 SXM: 3.35 TB/s */
    { "80GB", 2.039e12 },    /* NVIDIA A100 80GB SXM: 2,039 GB/s */
    { "A100", 1.555e12 },    /* NVIDIA A100 40GB: 1,555 GB/s */
    { "V100", 0.9e12 },      /* NVIDIA V100 SXM2: 900 GB/s */
    { "MI250", 1.6384e12 },  /* AMD MI250: 3.2768 TB/s for two dies; one die per device */
    { "2080 Ti", 0.616e12 }, /* NVIDIA RTX 2080 Ti: 616 GB/s */
    { NULL, 0 }
};

static double device_bandwidth(const rv_graph *graph, const char **device)
{
    for (guint d = 0; graph->device_names && d < graph->device_names->len; d++) {
        const char *name = g_ptr_array_index(graph->device_names, d);
        for (int i = 0; name && memory_bandwidths[i].name; i++) {
            if (strstr(name, memory_bandwidths[i].name) == NULL) continue;
            *device = name;
            return memory_bandwidths[i].bandwidth_Bps;
        }
    }
    return 0;
}

/* fp32 parameter bytes: param_bytes, or the weight shapes of the first step with any. */
static int64_t parameter_bytes(const rv_graph *graph, const rv_params *params)
{
    int64_t given = rv_params_bytes(params, "param_bytes");
    if (given > 0) return given;
    GPtrArray *steps = rv_weighted_layers_by_step(graph);
    GArray *sizes = rv_weight_sizes_of_first_step(steps);
    int64_t total = 0;
    for (guint i = 0; i < sizes->len; i++) total = rv_saturating_add(total, g_array_index(sizes, int64_t, i));
    g_array_unref(sizes);
    g_ptr_array_unref(steps);
    return total;
}

/* The fused kernel's time under duration=bytes, or -1 with error set. */
static int64_t streaming_ns(const rv_graph *graph, const rv_params *params, GString *notes, GError **error)
{
    const char *device = "memory_bandwidth as given";
    double bandwidth = rv_params_given(params, "memory_bandwidth") ? 0 : device_bandwidth(graph, &device);
    if (bandwidth <= 0) {
        bandwidth = rv_params_bandwidth(params, "memory_bandwidth");
        if (!rv_params_given(params, "memory_bandwidth")) device = "GPU unknown: V100 default";
    }
    double efficiency = rv_params_number(params, "efficiency"), per_param = rv_params_number(params, "bytes_per_param");
    int64_t bytes = parameter_bytes(graph, params);
    if (!(efficiency > 0 && efficiency <= 1) || !(per_param > 0)) {
        g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "need 0 < efficiency <= 1 and bytes_per_param > 0");
        return -1;
    }
    if (bytes <= 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "duration=bytes: the trace has no weight shapes (record_shapes=True) to count parameters; give param_bytes=");
        return -1;
    }
    double traffic = (double)bytes / 4.0 * per_param;
    int64_t ns, moved_bytes;
    if (!rv_task_duration_from(graph, -1, traffic / (bandwidth * efficiency) * 1e9,
                               "the fused-adam parameters (bytes_per_param, memory_bandwidth, param_bytes)", &ns, error))
        return -1;
    if (!rv_checked_round(traffic, &moved_bytes)) moved_bytes = INT64_MAX;
    char *size = rv_format_bytes(bytes), *moved = rv_format_bytes(moved_bytes), *bw = rv_format_bandwidth(bandwidth);
    g_string_append_printf(notes, "    duration=bytes: %s of parameters, %s moved at %s x %.2f (%s)\n", size, moved, bw,
                           efficiency, device);
    g_free(size); g_free(moved); g_free(bw);
    return ns;
}

/* Live optimizer-phase GPU work other than collectives: list 0; data
 * counts it. */
static int optimizer_work(const rv_graph *graph, int32_t id, const rv_task *task, gpointer data)
{
    (void)graph;
    (void)id;
    if ((task->flags & RV_TASK_FLAG_REMOVED) || !(task->flags & RV_TASK_FLAG_GPU)) return -1;
    if (task->phase != RV_PHASE_OPTIMIZER || task->kind == RV_TASK_COMM) return -1;
    (*(guint *)data)++;
    return 0;
}

static gboolean fused_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    /* optimizer-phase GPU work, by step (step -1 = outside every step) */
    guint optimizer_tasks = 0;
    rv_step_lists by_step = rv_step_lists_new(graph, 1, optimizer_work, &optimizer_tasks);
    if (optimizer_tasks == 0) {
        g_set_error(error, RV_ERROR, RV_ERROR_PLUGIN,
                    "the trace has no GPU work in an optimizer phase (no \"Optimizer.step\" annotation "
                    "launching kernels), so there is nothing to fuse");
        rv_step_lists_free(&by_step);
        return FALSE;
    }
    int64_t streaming = -1;
    if (strcmp(rv_params_string(params, "duration"), "bytes") == 0 &&
        (streaming = streaming_ns(graph, params, output->notes, error)) < 0) {
        rv_step_lists_free(&by_step);
        return FALSE;
    }
    guint steps = 0, gpu_removed = 0;
    int removed_total = 0;
    int64_t fused_total = 0, cpu_before = 0, cpu_after = 0;
    gboolean ok = TRUE;
    for (int32_t step = -1; step < (int32_t)by_step.slots - 1 && ok; step++) {
        GArray *victims = rv_step_lists_get(&by_step, step, 0);
        if (victims->len == 0) continue;
        rv_tasks_sort_recorded(graph, victims);
        int64_t sum = 0;
        int32_t first = g_array_index(victims, int32_t, 0);
        for (guint i = 0; i < victims->len; i++) {
            int32_t id = g_array_index(victims, int32_t, i);
            sum += rv_graph_task(graph, id)->duration_ns;
            int32_t launch = rv_graph_launch_of(graph, id);
            if (launch >= 0)
                cpu_before += rv_graph_task(graph, launch)->duration_ns + rv_graph_task(graph, launch)->host_overhead_ns;
        }
        rv_task fused = *rv_graph_task(graph, first);
        /* their work moves into the fused kernel: the memory model still reads them */
        rv_memory_effect_add_for_tasks(graph, victims, RV_MEM_EFFECT_MOVED, 1.0, 0);
        gpu_removed += victims->len;
        fused.kind = RV_TASK_KERNEL;
        fused.name = rv_strings_intern(graph->strings, "fused optimizer kernel (multi_tensor_apply)");
        fused.duration_ns = streaming >= 0 ? streaming : sum;
        fused.host_overhead_ns = 0;
        fused.correlation = -1;
        fused.bytes = 0;
        fused.flags = RV_TASK_FLAG_GPU;
        rv_insert_spec spec = { fused, -1, -1 };
        int removed = 0;
        int32_t kernel = rv_transform_replace(graph, victims, &spec, RV_REMOVE_DROP_OVERHEAD, &removed, error);
        removed_total += removed;
        if (kernel < 0) ok = FALSE;
        else if (rv_graph_launch_of(graph, kernel) >= 0)
            cpu_after += rv_graph_task(graph, rv_graph_launch_of(graph, kernel))->duration_ns;
        fused_total += fused.duration_ns;
        steps++;
    }
    rv_step_lists_free(&by_step);
    if (!ok) return FALSE;
    char *mean = rv_format_duration(fused_total / (int64_t)steps);
    char *before = rv_format_duration(cpu_before / (int64_t)steps), *now = rv_format_duration(cpu_after / (int64_t)steps);
    g_string_append_printf(output->notes,
                           "    fused %u optimizer GPU tasks (%d tasks removed with their launches) into %u kernel%s "
                           "of %s each; launch CPU time per step %s -> %s\n",
                           gpu_removed, removed_total, steps, steps == 1 ? "" : "s", mean, before, now);
    g_free(mean); g_free(before); g_free(now);
    return TRUE;
}

/* The composition law (compose.h): each step's optimizer GPU work replaced by one kernel (what it waited for
 * carried over by the transform API), its launches removed. */
static const rv_plugin_effects fused_adam_effects = {
    .reads = RV_ASPECT_OPTIMIZER | RV_ASPECT_DEVICE | RV_ASPECT_WEIGHTS,
    .reads_time = RV_ASPECT_OPTIMIZER,
    .scales = RV_ASPECT_MEMORY,
    .reprices = 0,
    .rewrites = RV_ASPECT_OPTIMIZER | RV_ASPECT_HOST,
    .order = RV_ORDER(RV_STAGE_EXECUTION, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "fused-adam", "fused optimizer: each step's weight-update kernels become one kernel and one launch",
    fused_params, fused_apply, &fused_adam_effects,
};

/*
 * hardware.c - the same job on another GPU, or on a GPU N times faster.
 *
 *   reverie whatif h100.json.gz --opt hardware:gpu=MI300X
 *   reverie whatif trace.json.gz --opt hardware:flops_scale=4,memory_scale=4,bandwidth_scale=2
 *   reverie whatif legacy.json.gz --opt hardware:gpu=A100-80GB,source_gpu=V100
 *
 * Every GPU task is re-costed by the kernel cost model (costmodel.h) for
 * the target: kernels by the terms of its ANOTHER GPU rule - the target's
 * fixed per-kernel cost, rooflines with wave quantization, and the ratio of
 * the two GPUs' efficiencies for the kernel's class and size from the
 * efficiency tables (efficiency.h: efficiency=, by default the shipped
 * data/efficiency.json; recordings of this same job are left out) - each
 * with a range; host copies by the PCIe bandwidths; collectives by the
 * intra-node links (times bandwidth_scale).  Where the target's recordings
 * measured the idle gap between back-to-back kernels, every stream takes
 * it (ROCm's recorded kernels abut, CUDA's leave about a microsecond).
 * Transfers other plugins put on channels (ddp's network) divide by
 * bandwidth_scale.  fp32 convolutions recorded on a GPU without TF32 run
 * on TF32 Tensor Cores on a target with them, as PyTorch does by default
 * (tf32=conv; all: matmuls too; none).
 * Kernels the classifier does not know keep their recorded time and are
 * counted in the notes.  The source GPU is the trace's deviceProperties
 * name, or source_gpu=.  With no GPU named anywhere, flops_scale and
 * memory_scale may still be given when they are equal: every kernel's
 * variable time then divides by the factor whatever bounds it.
 *
 * The host side is the trace's own: its calls, host overheads and launch
 * latency, unless host_scale (the host is N times faster: CPU calls and
 * their host overheads / N) or launch_latency (every stream's launch
 * latency set to this) say otherwise.  A GPU of another vendor comes with
 * another driver and launch path, which these two knobs can express but
 * which no catalogue figure predicts.
 */
#include "reverie/costmodel.h"
#include "reverie/efficiency.h"
#include "reverie/error.h"
#include "reverie/plugin.h"
#include "reverie/transform.h"
#include "reverie/units.h"
#include "reverie/validate.h"
#include <math.h>
#include <string.h>

static const rv_param_spec hardware_params[] = {
    { "gpu", RV_PARAM_STRING, "", NULL, "the target GPU, by catalogue id or alias ('' : the source GPU)", NULL },
    { "source_gpu", RV_PARAM_STRING, "", NULL,
      "the GPU the trace was recorded on, when its deviceProperties do not name a catalogue GPU", NULL },
    { "peaks", RV_PARAM_CHOICE, "achievable", NULL,
      "matrix peaks: achievable = measured maximum matmul throughput where both GPUs have one published, "
      "else the datasheet; datasheet = always the datasheet", "achievable|datasheet" },
    { "flops_scale", RV_PARAM_NUMBER, "1", "x", "the target's compute peaks times this", NULL },
    { "memory_scale", RV_PARAM_NUMBER, "1", "x", "the target's memory bandwidth times this", NULL },
    { "bandwidth_scale", RV_PARAM_NUMBER, "1", "x", "the target's communication links (collectives) times this", NULL },
    { "host_scale", RV_PARAM_NUMBER, "1", "x", "the host is this many times faster: CPU calls and host overheads / this",
      NULL },
    { "tf32", RV_PARAM_CHOICE, "conv", NULL,
      "fp32 work recorded on a GPU without TF32, on a target with it: conv = cuDNN convolutions use TF32 "
      "(PyTorch's default), all = matmuls too, none", "conv|all|none" },
    { "launch_latency", RV_PARAM_DURATION, "0us", "us",
      "set every stream's launch latency (launch call's end to kernel start); unless given, the trace's own", NULL },
    { "efficiency", RV_PARAM_STRING, "", NULL,
      "per-GPU efficiency tables (reverie calibrate): '' = the shipped data/efficiency.json, a file, or none = "
      "keep each kernel's own efficiency and the source's fixed cost", NULL },
    { NULL }
};

typedef struct {
    const rv_gpu *source, *target;
    double flops_scale, memory_scale, link_scale;
    const char *tf32;
    guint to_tf32;
    const rv_gpu_efficiency *source_efficiency, *target_efficiency;
} retarget;

static gboolean retarget_task(const rv_graph *graph, int32_t task, const rv_kernel_cost *cost, rv_cost_change *change,
                              gpointer data)
{
    retarget *r = data;
    change->gpu = r->target;
    if (rv_cost_gains_tf32(r->source, r->target, cost, r->tf32)) {
        change->dtype = RV_DTYPE_TF32;
        r->to_tf32++;
    }
    change->flops_scale = r->flops_scale;
    change->memory_scale = r->memory_scale;
    change->link_scale = r->link_scale;
    change->source_efficiency = r->source_efficiency;
    change->target_efficiency = r->target_efficiency;
    return TRUE;
}

/* A stand-in GPU for traces that name none: with equal compute and memory
 * scales every roofline divides by the same factor, so its figures cancel. */
static rv_gpu *neutral_gpu(void)
{
    rv_gpu *gpu = g_new0(rv_gpu, 1);
    gpu->id = (char *)"unnamed GPU";
    gpu->vector_flops[RV_DTYPE_FP32] = 1e12;
    gpu->memory_Bps = 1e12;
    gpu->pcie_Bps = 1e10;
    return gpu;
}

static gboolean check_factor(const rv_params *params, const char *name, GError **error)
{
    double value = rv_params_number(params, name);
    if (value > 0 && value < 1e9) return TRUE;
    g_set_error(error, RV_ERROR, RV_ERROR_USAGE, "%s=%s: must be a number in (0, 1e9)", name,
                rv_params_string(params, name));
    return FALSE;
}

/* The source and target GPUs; *neutral when the trace names none and the scales allow it. */
static gboolean pick_gpus(const rv_graph *graph, const rv_params *params, const rv_gpu_catalogue *catalogue,
                          const rv_gpu **source, const rv_gpu **target, rv_gpu **neutral, GError **error)
{
    const char *given_target = rv_params_string(params, "gpu");
    gboolean same_scales = rv_params_number(params, "flops_scale") == rv_params_number(params, "memory_scale");
    GError *missing = NULL;
    *source = rv_gpu_of_graph(catalogue, graph, rv_params_string(params, "source_gpu"), "source_gpu", &missing);
    if (*source == NULL && (*given_target != '\0' || !same_scales || rv_params_given(params, "source_gpu"))) {
        g_propagate_error(error, missing);
        return FALSE;
    }
    g_clear_error(&missing);
    if (*source == NULL) *source = *neutral = neutral_gpu();
    *target = *given_target ? rv_gpu_find(catalogue, given_target, error) : *source;
    return *target != NULL;
}

static void note_gpus(const rv_graph *graph, const rv_params *params, const rv_gpu *source, const rv_gpu *target,
                      gboolean neutral, GString *notes)
{
    const char *device = graph->device_names && graph->device_names->len ? g_ptr_array_index(graph->device_names, 0) : NULL;
    if (neutral)
        g_string_append_printf(notes, "    no GPU named: every kernel's variable time / %g (compute and memory alike)\n",
                               rv_params_number(params, "flops_scale"));
    else
        g_string_append_printf(notes, "    %s (%s%s%s) -> %s; %s peaks\n", source->id,
                               rv_params_given(params, "source_gpu") ? "source_gpu=" : "deviceProperties \"",
                               rv_params_given(params, "source_gpu") ? source->id : (device ? device : ""),
                               rv_params_given(params, "source_gpu") ? "" : "\"", target->id,
                               rv_params_string(params, "peaks"));
    double f = rv_params_number(params, "flops_scale"), m = rv_params_number(params, "memory_scale"),
           b = rv_params_number(params, "bandwidth_scale");
    if (f != 1 || m != 1 || b != 1)
        g_string_append_printf(notes, "    scaled: compute peaks x%g, memory bandwidth x%g, links x%g\n", f, m, b);
}

static gboolean scale_host(rv_graph *graph, const rv_params *params, GString *notes, GError **error)
{
    double speed = rv_params_number(params, "host_scale");
    if (speed == 1) return TRUE;
    GArray *cpu = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task(graph, t);
        if (!(task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED)) && task->kind != RV_TASK_MARKER &&
            g_array_index(graph->resources, rv_resource, task->resource).kind == RV_RES_CPU_THREAD)
            g_array_append_val(cpu, t);
    }
    char *cause = g_strdup_printf("host_scale=%s", rv_params_string(params, "host_scale"));
    gboolean ok = rv_tasks_check_scale(graph, cpu, 1.0 / speed, cause, error);
    if (ok) {
        rv_transform_scale(graph, cpu, 1.0 / speed);
        rv_transform_scale_host_overhead(graph, cpu, 1.0 / speed);
        g_string_append_printf(notes, "    host: %u CPU calls and their host overheads / %g\n", cpu->len, speed);
    }
    g_free(cause);
    g_array_unref(cpu);
    return ok;
}

/* Transfers a plugin put on a channel (ddp's "net", p3's parameter server)
 * are not GPU kernels: the cost model leaves them, and a faster link
 * divides them whole (their latency part is not known apart). */
static gboolean scale_channel_transfers(rv_graph *graph, const rv_params *params, GString *notes, GError **error)
{
    double speed = rv_params_number(params, "bandwidth_scale");
    if (speed == 1) return TRUE;
    GArray *transfers = g_array_new(FALSE, FALSE, sizeof(int32_t));
    for (int32_t t = 0; t < rv_graph_task_count(graph); t++) {
        const rv_task *task = rv_graph_task(graph, t);
        if (task->kind == RV_TASK_COMM && !(task->flags & (RV_TASK_FLAG_GPU | RV_TASK_FLAG_REMOVED)))
            g_array_append_val(transfers, t);
    }
    char *cause = g_strdup_printf("bandwidth_scale=%s", rv_params_string(params, "bandwidth_scale"));
    gboolean ok = rv_tasks_check_scale(graph, transfers, 1.0 / speed, cause, error);
    if (ok && transfers->len) {
        rv_transform_scale(graph, transfers, 1.0 / speed);
        g_string_append_printf(notes, "    %u transfers on communication channels / %g\n", transfers->len, speed);
    }
    g_free(cause);
    g_array_unref(transfers);
    return ok;
}

static void set_launch_latency(rv_graph *graph, const rv_params *params, GString *notes)
{
    if (!rv_params_given(params, "launch_latency")) return;
    int64_t latency = rv_params_duration_ns(params, "launch_latency");
    guint streams = 0;
    for (guint r = 0; r < graph->resources->len; r++) {
        rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind != RV_RES_GPU_STREAM) continue;
        resource->launch_latency_ns = latency;
        streams++;
    }
    char *text = rv_format_duration(latency);
    g_string_append_printf(notes, "    launch latency of %u streams set to %s\n", streams, text);
    g_free(text);
}

static void note_gpu_time(const rv_cost_plan *plan, GString *notes)
{
    int64_t before = 0, after = 0, low = 0, high = 0;
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        before += plan->classes[c].recorded_ns;
        after += plan->classes[c].predicted_ns;
        low += plan->classes[c].predicted_low_ns;
        high += plan->classes[c].predicted_high_ns;
    }
    char *a = rv_format_duration(before), *b = rv_format_duration(after);
    g_string_append_printf(notes, "    GPU tasks re-costed: %s -> %s", a, b);
    if (low < after || high > after) {
        char *l = rv_format_duration(low), *h = rv_format_duration(high);
        g_string_append_printf(notes, " (range %s to %s)", l, h);
        g_free(l);
        g_free(h);
    }
    g_string_append_c(notes, '\n');
    g_free(a);
    g_free(b);
}

static void note_view(GString *notes, const char *gpu, const rv_gpu_efficiency *view)
{
    guint count = rv_gpu_efficiency_recordings(view);
    char *labels = rv_gpu_efficiency_labels(view);
    g_string_append_printf(notes, "      %s: %u recording%s%s%s%s\n", gpu, count, count == 1 ? "" : "s",
                           count ? " (" : " (none: each kernel keeps its own efficiency", count ? labels : "", ")");
    g_free(labels);
}

static void note_tables(const rv_efficiency_views *t, const rv_params *params, const rv_gpu *source, const rv_gpu *target,
                        GString *notes)
{
    if (t->table == NULL) {
        if (source != target) g_string_append(notes, "    efficiency=none: each kernel keeps its own efficiency, "
                                                     "the source's fixed cost stays\n");
        return;
    }
    const char *given = rv_params_string(params, "efficiency");
    g_string_append_printf(notes, "    efficiency tables (%s), without recordings of this job:\n",
                           *given ? given : "shipped efficiency.json");
    note_view(notes, source->id, t->source);
    note_view(notes, target->id, t->target);
    for (guint i = 0; i < t->excluded->len; i++)
        g_string_append_printf(notes, "      left out, a recording of this job: %s\n",
                               (char *)g_ptr_array_index(t->excluded, i));
}

static void note_fixed(const rv_cost_model *model, const rv_cost_plan *plan, const rv_gpu *target, GString *notes)
{
    if (plan->target_fixed_ns < 0) return;
    g_string_append_printf(notes, "    fixed per-kernel cost: %.1f us in this trace -> %.1f us on %s (%.1f to %.1f us): ",
                           rv_cost_model_fixed_ns(model) / 1e3, plan->target_fixed_ns / 1e3, target->id,
                           plan->target_fixed_low_ns / 1e3, plan->target_fixed_high_ns / 1e3);
    if (plan->target_fixed_same_sms)
        g_string_append_printf(notes, "the trace's own: %s has the same SMs and peaks\n", target->id);
    else if (plan->target_fixed_by_pairs)
        g_string_append_printf(notes, "x%.2f, the ratio of the shortest kernels in %u pair%s of recordings of one job on "
                                      "both GPUs\n", plan->target_fixed_ratio, plan->target_fixed_pairs,
                               plan->target_fixed_pairs == 1 ? "" : "s");
    else
        g_string_append_printf(notes, "the median of %s's recordings (no recording of one job on both GPUs)\n", target->id);
}

static void note_tables_used(const rv_cost_plan *plan, GString *notes)
{
    guint shaped = 0, by_table = 0;
    for (int c = 0; c < RV_COST_CLASS_COUNT; c++) {
        shaped += plan->classes[c].shaped;
        by_table += plan->classes[c].by_table;
    }
    if (shaped)
        g_string_append_printf(notes, "    %u of %u shaped kernels by both GPUs' efficiencies for their class and size; "
                                      "the rest keep their own\n", by_table, shaped);
}

/* The target's idle gap between back-to-back kernels, where its recordings measured one. */
static void set_idle_gap(rv_graph *graph, const rv_efficiency_views *t, const rv_gpu *target, GString *notes)
{
    double gap;
    if (!rv_gpu_efficiency_gap(t->target, &gap)) return;
    guint streams = 0;
    for (guint r = 0; r < graph->resources->len; r++) {
        rv_resource *resource = &g_array_index(graph->resources, rv_resource, r);
        if (resource->kind != RV_RES_GPU_STREAM) continue;
        resource->idle_gap_ns = (int64_t)llround(gap);
        streams++;
    }
    g_string_append_printf(notes, "    idle gap between back-to-back kernels of %u stream%s: %.3f us (timing: %.3f us "
                                  "in this trace), as %s's recordings measure it\n",
                           streams, streams == 1 ? "" : "s", gap / 1e3, graph->timing.idle_gap.value / 1e3, target->id);
}

static gboolean recost(rv_graph *graph, const rv_params *params, const rv_gpu *source, const rv_gpu *target,
                       gboolean neutral, rv_plugin_output *output, GError **error)
{
    rv_efficiency_views t;
    gboolean ok = rv_efficiency_views_open(&t, rv_params_string(params, "efficiency"), graph, source, target, error);
    if (!ok) {
        rv_efficiency_views_clear(&t);
        return FALSE;
    }
    gboolean achievable = strcmp(rv_params_string(params, "peaks"), "achievable") == 0;
    rv_cost_model *model = rv_cost_model_new(graph, source, achievable);
    retarget r = { source, target, rv_params_number(params, "flops_scale"), rv_params_number(params, "memory_scale"),
                   rv_params_number(params, "bandwidth_scale"), rv_params_string(params, "tf32"), 0, t.source, t.target };
    rv_cost_plan *plan = rv_cost_model_plan(model, retarget_task, &r);
    note_gpus(graph, params, source, target, neutral, output->notes);
    note_tables(&t, params, source, target, output->notes);
    /* a table's figures decide durations as much as the parameters: one
     * that makes a kernel last for years is named, so the user knows
     * which file to look at */
    char *cause = t.table ? g_strdup_printf("the hardware parameters with the efficiency table %s",
                                            rv_efficiency_table_path(t.table))
                          : g_strdup("the hardware parameters");
    ok = rv_cost_plan_apply(graph, plan, cause, error);
    g_free(cause);
    if (ok) {
        note_fixed(model, plan, target, output->notes);
        if (t.table) note_tables_used(plan, output->notes);
        note_gpu_time(plan, output->notes);
        if (r.to_tf32)
            g_string_append_printf(output->notes, "    %u fp32 kernels run on TF32 Tensor Cores there (tf32=%s, PyTorch's "
                                                  "defaults)\n", r.to_tf32, r.tf32);
        rv_cost_plan_describe(plan, "      ", output->notes);
        if (t.table) set_idle_gap(graph, &t, target, output->notes);
    }
    rv_cost_plan_free(plan);
    rv_cost_model_free(model);
    rv_efficiency_views_clear(&t);
    return ok;
}

static gboolean hardware_apply(rv_graph *graph, const rv_params *params, rv_plugin_output *output, GError **error)
{
    static const char *const factors[] = { "flops_scale", "memory_scale", "bandwidth_scale", "host_scale", NULL };
    for (const char *const *f = factors; *f; f++)
        if (!check_factor(params, *f, error)) return FALSE;
    rv_gpu_catalogue *catalogue = rv_gpu_catalogue_load_default(error);
    if (catalogue == NULL) return FALSE;
    const rv_gpu *source = NULL, *target = NULL;
    rv_gpu *neutral = NULL;
    gboolean ok = pick_gpus(graph, params, catalogue, &source, &target, &neutral, error) &&
                  recost(graph, params, source, target, neutral != NULL, output, error);
    ok = ok && scale_channel_transfers(graph, params, output->notes, error) && scale_host(graph, params, output->notes, error);
    if (ok) set_launch_latency(graph, params, output->notes);
    g_free(neutral);
    rv_gpu_catalogue_free(catalogue);
    return ok;
}

/* The composition law (compose.h): every GPU task and collective re-priced for the target GPU; host calls
 * scaled. */
static const rv_plugin_effects hardware_effects = {
    .reads = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM | RV_ASPECT_HOST | RV_ASPECT_DEVICE,
    .reads_time = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM | RV_ASPECT_HOST,
    .scales = RV_ASPECT_HOST,
    .reprices = RV_ASPECT_GPU_WORK | RV_ASPECT_COMM,
    .rewrites = RV_ASPECT_DEVICE,
    .order = RV_ORDER(RV_STAGE_DEVICE, 10),
};

G_MODULE_EXPORT const rv_plugin rv_plugin_descriptor = {
    RV_PLUGIN_ABI_VERSION, "hardware",
    "another GPU (gpu=NAME from the catalogue) or a faster one (flops_scale, memory_scale, bandwidth_scale): every GPU task re-costed by the kernel cost model",
    hardware_params, hardware_apply, &hardware_effects,
};
